#!/usr/bin/env python3
"""GPU data parallelism on the stand-in CUDA driver, cuBLASLt and NCCL (test/standin).

match [bf16] [graphs] [tp-sp|fsdp|hsdp]: `mpirun -np 2 tessel-gpt --device cuda --plan dp=2
       --check-replicas` trains the small GPT 5 AdamW steps through runtime/comm/NcclCommunicator
       on the stand-ins (in f32, or bf16 mixed precision; eagerly, or with --cuda-graphs; with
       tp-sp the plan is tp=2 --sequence-parallel instead of dp=2; with fsdp it is fsdp=2,
       parameters, gradients and optimizer state stored split, all-gathered before use and
       reduce-scattered in backward on NCCL's stream; with hsdp it is dp=2,fsdp=2 on 4 ranks
       and 4 stand-in devices, whose gradient shards are then all-reduced over dp on another
       NCCL communicator), and every
       step's loss and gradient norm and the validation loss match `--device cpu --plan dp=2`
       (MPI) and the one-rank CPU run within the SIMT tolerance (below).
fault KIND [fsdp]: the same GPU run (dp=2, or fsdp=2) with the stand-in NCCL's planted fault
       KIND (TESSEL_STANDIN_NCCL_FAULT: no-compute-wait, no-done-wait;
       test/standin/nccl/StreamOps.h) must be caught: the job fails (--check-replicas finds
       the replicas apart) or a step leaves the tolerance. Passing means the missing event
       wait was detected.

peer-exits: in the GPU dp=2 run, rank 1 ends its process as its second NCCL operation starts
       (the stand-in's planted fault peer-exits); rank 0 must fail within --comm-timeout with
       its own report naming the bucket's all_reduce and NCCL's ncclRemoteError (the NCCL
       communicator's watchdog, through ncclCommGetAsyncError), not hang and not blame a later
       collective.
bundle: `tessel-run BUNDLE --device cuda` runs CUDA bundles on the stand-ins (one rank, and a dp=2
       and an fsdp=2 bundle under mpirun -np 2 through the NCCL communicator, with
       --check-replicas) and matches `tessel-run BUNDLE --device cpu` of the same bundle
       within the same tolerance.

Usage: check_gpu_dp.py match [bf16] [graphs] [tp-sp|fsdp|hsdp]|fault KIND [fsdp]|peer-exits|bundle MPIEXEC TESSEL_GPT DATA STANDIN_LIB_DIR
(TESSEL_RUN, for bundle, is tessel-run beside TESSEL_GPT.)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# The SIMT tolerance of the GPT's loss (test/unit/SimtExecutorTest.cpp, and the stand-in GPT
# test): the CUDA and C++ kernels differ only in the order of their row reductions, each
# within n u of its sum of magnitudes; the loss passes through about 4L + 3 = 11 of them of
# length <= V = 256 (L = 2), so 11 * 256 u = 1.7e-4 relative, carried over the AdamW steps
# (continuous in the gradients). The stand-in's GEMMs are OpenBLAS sgemm, as the CPU's, and
# the stand-in NCCL's all-reduce of two ranks is one addition, as MPI's. In bf16 mixed
# precision plus 2^-7 (test/unit/CudaKernelsTestUtil.h relativeTolerance for a bf16 result,
# as the stand-in GPT test): where the two f32 values differ they may round to neighbouring
# bf16 values, one bf16 ulp apart. Under fsdp=2 the stand-in NCCL's reduce-scatter (avg) of
# two ranks is one addition times 1/2, exact like MPI's division by 2, and its all-gather
# moves bits, so the same bound holds; so does HSDP's all-reduce of two dp ranks.
TOLERANCE = 11 * 256 * 2.0 ** -24
MODEL = ["--layers", "2", "--channels", "64", "--heads", "4", "--seq", "32", "--batch", "4", "--steps", "5",
         "--sample-bytes", "0", "--eval-batches", "1", "--seed", "5"]
TIMEOUT = 600
text = ""  # the output of the last run


def run(cmd, env, log):
    r = subprocess.run(cmd + ["--log-json", log], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT)
    print("$ " + " ".join(cmd))
    print(r.stdout[-4000:])
    global text
    text = r.stdout
    steps = []
    if os.path.exists(log):
        with open(log) as f:
            steps = [json.loads(line) for line in f if line.strip()]
    return r.returncode, steps


def values(steps):
    """(name, value) of every step's loss and norm and the last validation loss."""
    out = []
    for s in steps:
        out.append((f"step {s['step']} loss", s["loss"]))
        out.append((f"step {s['step']} norm", s["grad_norm"]))
        if "val_loss" in s:
            out.append((f"step {s['step']} val", s["val_loss"]))
    return out


def differences(got, want):
    """Names whose relative difference exceeds the tolerance, and the largest difference."""
    bad, worst = [], 0.0
    tolerance = TOLERANCE + (2.0 ** -7 if "--precision" in MODEL else 0.0)
    if len(got) != len(want):
        return [f"{len(got)} values against {len(want)}"], float("inf")
    for (name, g), (_, w) in zip(got, want):
        rel = abs(g - w) / max(abs(w), 1e-30)
        worst = max(worst, rel)
        if not rel <= tolerance:
            bad.append(f"{name}: {g} vs {w} (rel {rel:.2e})")
    return bad, worst


def compare(gpu, references):
    """Failures of `gpu` against each (label, steps) reference, printing the largest differences."""
    failures = []
    for label, ref in references:
        if not ref:
            failures.append(f"the {label} run wrote no steps")
            continue
        bad, worst = differences(values(gpu), values(ref))
        tolerance = TOLERANCE + (2.0 ** -7 if "--precision" in MODEL else 0.0)
        print(f"stand-in GPU run vs {label}: largest relative difference {worst:.2e} (tolerance {tolerance:.2e})")
        failures += [f"vs {label}: {b}" for b in bad]
    return failures


def check_bundles(mpi, gpt, model, env, gpu_env, tmp):
    """tessel-run of a one-rank and of a dp=2 CUDA bundle on the stand-ins against --device cpu."""
    tessel_run = os.path.join(os.path.dirname(gpt), "tessel-run")
    one, two = os.path.join(tmp, "bundle-one"), os.path.join(tmp, "bundle-dp2")
    fsdp = os.path.join(tmp, "bundle-fsdp2")
    for bundle, plan in ((one, []), (two, ["--plan", "dp=2"]), (fsdp, ["--plan", "fsdp=2"])):
        subprocess.run([gpt, "--device", "cuda", "--emit-bundle", bundle] + plan + model, env=env, check=True,
                       stdout=subprocess.DEVNULL, timeout=TIMEOUT)
    run_flags = ["--steps", "5", "--eval-batches", "1", "--seed", "5", "--data", model[model.index("--data") + 1]]
    failures = []
    for label, launcher, bundle, extra in (("one rank", [], one, []),
                                           ("dp=2", mpi, two, ["--check-replicas"]),
                                           ("fsdp=2", mpi, fsdp, ["--check-replicas"])):
        rc, gpu = run(launcher + [tessel_run, bundle, "--device", "cuda"] + extra + run_flags, gpu_env,
                      os.path.join(tmp, f"run-{label}-gpu.jsonl"))
        if rc != 0:
            failures.append(f"tessel-run of the {label} CUDA bundle on the stand-ins exited {rc}")
            continue
        _, cpu = run(launcher + [tessel_run, bundle, "--device", "cpu"] + run_flags, env,
                     os.path.join(tmp, f"run-{label}-cpu.jsonl"))
        failures += [f"{label} bundle: {f}" for f in compare(gpu, [(f"tessel-run --device cpu ({label})", cpu)])]
    return failures


def check_peer_exit(mpi, gpt, model, gpu_env, tmp):
    """Rank 1 ends mid-training; rank 0's report names the NCCL collective and the remote error."""
    comm_timeout = 120
    env = dict(gpu_env, TESSEL_STANDIN_NCCL_FAULT="peer-exits")
    # mpirun would end rank 0 with SIGTERM as soon as rank 1 exits non-zero; keeping it alive
    # shows what rank 0 itself does.
    launcher = mpi[:1] + ["--mca", "orte_abort_on_non_zero_status", "0", "-x", "TESSEL_STANDIN_NCCL_FAULT"] + mpi[1:]
    start = time.time()
    rc, _ = run(launcher + [gpt, "--device", "cuda", "--plan", "dp=2", "--comm-timeout", str(comm_timeout)] + model, env,
                os.path.join(tmp, "peer-exits.jsonl"))
    elapsed = time.time() - start
    report = [l for l in text.splitlines() if l.startswith("tessel: rank 0: ")]
    failures = []
    if not report:
        failures.append(f"rank 0 printed no report (mpirun exit {rc})")
    elif not re.search(r"all_reduce 'bucket [^']*' \(collective #\d+, \d+ bytes, step \d+\) failed on rank 0 of 2: "
                       r"NCCL ncclRemoteError", report[0]):
        failures.append("rank 0's report does not name the bucket's all_reduce and ncclRemoteError: " + report[0])
    if elapsed >= comm_timeout:
        failures.append(f"the job took {elapsed:.0f} s, not less than --comm-timeout {comm_timeout} s")
    print(f"rank 1 ended; the job ended after {elapsed:.1f} s (--comm-timeout {comm_timeout} s)")
    return failures


def main():
    mode = sys.argv[1]
    fault = sys.argv[2] if mode == "fault" else None
    mpiexec, gpt, data, lib = sys.argv[-4:]
    options = sys.argv[2:-4] if mode == "match" else sys.argv[3:-4] if mode == "fault" else []
    if "bf16" in options:
        MODEL.extend(["--precision", "bf16"])
    tmp = tempfile.mkdtemp(prefix="tessel-gpu-dp-")
    env = dict(os.environ, TESSEL_CACHE_DIR=os.path.join(tmp, "cache"))
    model = MODEL + ["--data", data]
    ranks = "4" if "hsdp" in options else "2"
    mpi = [mpiexec, "--oversubscribe", "-np", ranks]

    gpu_env = dict(env, TESSEL_CUDA_LIBRARY_PATH=lib, TESSEL_STANDIN_DEVICES=ranks)
    if mode in ("bundle", "peer-exits"):
        failures = (check_bundles(mpi, gpt, model, env, gpu_env, tmp) if mode == "bundle"
                    else check_peer_exit(mpi, gpt, model, gpu_env, tmp))
        print("FAIL:\n  " + "\n  ".join(failures) if failures else "PASS")
        return 1 if failures else 0
    if fault:
        gpu_env["TESSEL_STANDIN_NCCL_FAULT"] = fault
    graphs = ["--cuda-graphs"] if "graphs" in options else []
    # tp-sp: tensor and sequence parallelism (NCCL all_gather and reduce_scatter) instead of dp.
    # fsdp: fully sharded data parallelism (NCCL all_gather and reduce_scatter over fsdp).
    plan = (["--plan", "tp=2", "--sequence-parallel"] if "tp-sp" in options
            else ["--plan", "fsdp=2"] if "fsdp" in options
            else ["--plan", "dp=2,fsdp=2"] if "hsdp" in options else ["--plan", "dp=2"])
    rc, gpu = run(mpi + [gpt, "--device", "cuda", "--check-replicas"] + plan + graphs + model, gpu_env,
                  os.path.join(tmp, "gpu.jsonl"))
    if fault and rc != 0:
        # Only the replica check, a loss made NaN by reading a buffer before the collective
        # wrote it (the stand-in's unwritten device memory reads as NaN), or the stand-in
        # naming a collective that ran on memory already freed (the compute stream finished
        # and the buffers were released while the collective was still queued) counts: a
        # crash or another error would not show the fault.
        if "differs across its replica group" in text:
            print(f"PASS: the planted fault {fault} made the replicas differ (--check-replicas, exit {rc})")
            return 0
        if "the training loss became NaN" in text:
            print(f"PASS: the planted fault {fault} made the loss NaN (exit {rc})")
            return 0
        if re.search(r"tessel stand-in: nccl\w+ \w+: 0x[0-9a-f]+ is in the allocation .* that was freed", text):
            print(f"PASS: the planted fault {fault} let a collective run after its memory was freed (exit {rc})")
            return 0
        print(f"FAIL: the run with the planted fault {fault} failed otherwise (exit {rc})")
        return 1
    if rc != 0:
        print(f"FAIL: the GPU dp=2 run exited {rc}")
        return 1
    _, cpu_dp = run(mpi + [gpt, "--device", "cpu"] + plan + model, env, os.path.join(tmp, "cpu_dp.jsonl"))
    _, cpu_one = run([gpt, "--device", "cpu"] + model, env, os.path.join(tmp, "cpu_one.jsonl"))
    failures = compare(gpu, [("cpu " + " ".join(plan[1:]), cpu_dp), ("cpu one rank", cpu_one)])
    if fault:
        if failures:
            print(f"PASS: the planted fault {fault} was caught:\n  " + "\n  ".join(failures))
            return 0
        print(f"FAIL: the planted fault {fault} went unnoticed (every value within the tolerance)")
        return 1
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
