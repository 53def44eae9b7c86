#!/usr/bin/env python3
"""The halves of scripts/gpu-check.sh that are easier in Python (standard library only).

manifest DIR PRECISION  (prepare) writes DIR/manifest.json: per bundle its model shape, the
                        device memory it needs and its model FLOPs per token.
run DIR                 (on the GPU node) the correctness check and the benchmark; one table.
                        Bundles for 2 ranks (fsdp2-f32, gpt2-fsdp2-b*: --plan fsdp=2) run under
                        mpirun, one GPU per rank, where the node has 2 GPUs, NCCL and mpirun;
                        otherwise their rows say which is missing (not a failure).
"""
import ctypes
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

DEVICE_ALIGN = 256            # CudaExecutor aligns every persistent buffer to 256 bytes
WORKSPACE = 32 << 20          # CudaExecutorOptions::workspaceBytes (cuBLASLt)
DTYPE_BYTES = {"f32": 4, "i32": 4, "bf16": 2}

# Peak dense throughput of an H100/H200 SXM (NVIDIA H100 Tensor Core GPU datasheet; the H200
# has the same compute): bf16 tensor cores 989.4 TFLOP/s dense (1979 with sparsity); f32 on
# the CUDA cores (no tensor cores: the f32 GEMMs run with CUBLAS_COMPUTE_32F, not TF32)
# 66.9 TFLOP/s.
PEAK = {"bf16": 989.4e12, "f32": 66.9e12}

# Correctness tolerances, |loss_gpu - loss_cpu| / |loss_cpu| per step. Step 1 is the forward
# pass of identical parameters: the sides differ only in summation order (cuBLASLt vs
# OpenBLAS blocking, block trees vs loops) and FMA contraction, each within k u for a sum of
# length k; the longest sums on the path are k = 4C = 256 and V = 256 (u = 2^-24 in f32), about
# 11 of them (the SIMT test's bound, 1.7e-4); 2e-4 allows that. Later steps add the AdamW
# updates of 10 steps, which amplify differences of near-zero gradients (m / sqrt(v) can flip
# sign), so 2e-3: ten times the step-1 bound, still far below the 1e-2 and more that a wrong
# kernel, launch or argument gives at step 1. bf16 rounds every stored activation to 8
# significant bits (u = 2^-9), so the same reasoning gives 2e-2 for all steps.
TOLERANCE = {"f32": (2e-4, 2e-3), "bf16": (2e-2, 2e-2)}

STEP_TIMEOUT = 240            # seconds for one tessel-run invocation
BENCH_STEPS = 12              # timed: the median of steps 3..12 (1: capture/warm-up, 2: settle)


def load_program(bundle):
    with open(os.path.join(bundle, "program.json")) as f:
        return json.load(f)


def describe(bundle):
    p = load_program(bundle)
    with open(os.path.join(bundle, "bundle.json")) as f:
        meta = json.load(f)
    persistent = 0
    params = 0
    dtype = "f32"
    for b in p["buffers"]:
        n = 1
        for d in b["shape"]:
            n *= d
        size = n * DTYPE_BYTES[b["dtype"]]
        if b["kind"] != "temp":
            persistent += (size + DEVICE_ALIGN - 1) // DEVICE_ALIGN * DEVICE_ALIGN
        if b["kind"] == "parameter":
            params += n
        if b["dtype"] == "bf16":
            dtype = "bf16"
    arena = max(f["arenaBytes"] for f in p["functions"])
    c = meta["config"]
    L, C, T = c["layers"], c["channels"], c["seq"]
    return {
        "ranks": math.prod(a["size"] for a in meta["plan"]["mesh"]),
        "layers": L, "channels": C, "heads": c["heads"], "seq": T, "vocab": c.get("vocab", 256),
        "batch": meta["train_flags"]["batch"], "precision": dtype, "parameters": params,
        # Model FLOPs per token (PaLM appendix B, as nanoGPT's estimate_mfu): 6 N for the
        # matmuls of forward and backward with N all parameters (the tied LM head included),
        # plus 12 L C T for attention's scores and weighted sums.
        "flops_per_token": 6 * params + 12 * L * C * T,
        "device_bytes": persistent + arena + WORKSPACE,
    }


def manifest(out, precision):
    bundles = {}
    for name in sorted(os.listdir(os.path.join(out, "bundles"))):
        path = os.path.join(out, "bundles", name)
        if os.path.isdir(path):
            bundles[name] = describe(path)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"precision": precision, "bundles": bundles}, f, indent=1)


def losses(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def tessel_run(out, bundle, log, steps, extra=(), ranks=1):
    cmd = [os.path.join(out, "bin", "tessel-run"), os.path.join(out, "bundles", bundle), "--device", "cuda",
           "--data", os.path.join(out, "data", "corpus.txt"), "--steps", str(steps), "--eval-batches", "1",
           "--log-json", log, *extra]
    env = None
    if ranks > 1:  # one process per GPU on this node; each picks the GPU of its local rank
        cmd = [shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks)] + cmd
        env = dict(os.environ)
        if os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if not (shutil.which("ssh") or shutil.which("rsh")):
            # OpenMPI refuses to start without a remote shell even when every rank is local;
            # none is used here.
            env.setdefault("OMPI_MCA_plm_rsh_agent", "/bin/false")
    start = time.time()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=STEP_TIMEOUT,
                           env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(killed after {STEP_TIMEOUT} s)", time.time() - start
    return r.returncode, r.stdout, time.time() - start


def timed_steps(log):
    """The steps of a benchmark run's log and its median step time over steps 3.. (1: capture or
    warm-up, 2: settle), in seconds."""
    steps = losses(log)
    return steps, statistics.median(s["step_seconds"] for s in steps[2:])


def free_device_bytes():
    """Free memory of GPU 0 from nvidia-smi, or None."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=memory.free,name", "--format=csv,noheader,nounits"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
        free, name = r.stdout.splitlines()[0].split(",", 1)
        return int(free) << 20, name.strip()
    except Exception:
        return None, "?"


def cuda_library(name):
    """The CUDA library `name` as tessel-run opens it (runtime/ToolkitLibrary.h): from
    $TESSEL_CUDA_LIBRARY_PATH when set, else by the loader's search."""
    folder = os.environ.get("TESSEL_CUDA_LIBRARY_PATH")
    return os.path.join(folder, name) if folder else name


def device_count():
    """GPUs the driver sees (cuInit, cuDeviceGetCount), or 0."""
    try:
        cuda = ctypes.CDLL(cuda_library("libcuda.so.1"))
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except OSError:
        return 0


def multi_gpu_problem(ranks):
    """Why a bundle for `ranks` GPUs cannot run on this node, or None."""
    if ranks <= 1:
        return None
    if device_count() < ranks:
        return f"needs {ranks} GPUs, this node has {device_count()}"
    try:
        ctypes.CDLL(cuda_library("libnccl.so.2"))
    except OSError:
        return "needs NCCL (libnccl.so.2 cannot be loaded)"
    if shutil.which("mpirun") is None:
        return "needs mpirun on PATH (one process per GPU)"
    return None


def run(out):
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    rows, failures = [], []
    free, gpu = free_device_bytes()
    start = time.time()

    # 1. Correctness: GPU losses against the CPU losses of the same bundle, eager and graphs.
    # fsdp2-f32 (fully sharded over 2 GPUs) has the f32 tolerances: NCCL's reduce-scatter of 2
    # ranks is one addition (and ncclAvg's factor 1/2 is exact), as MPI's on the CPU, and its
    # all-gather moves bits, so the plan adds no rounding of its own. Its functions all-gather
    # across ranks, so they always run eagerly: one row.
    for name, info in sorted(man["bundles"].items()):
        if not name.startswith(("small-", "fsdp2-")):
            continue
        cpu = [s["loss"] for s in losses(os.path.join(out, "bundles", name + ".cpu.jsonl"))]
        first_tol, tol = TOLERANCE[info["precision"]]
        ranks = info.get("ranks", 1)
        if (why := multi_gpu_problem(ranks)) is not None:
            rows.append((f"correctness {name} (fsdp={ranks}), {len(cpu)} steps", "skipped", why))
            continue
        for mode, extra in (("eager", ()), ("graphs", ("--cuda-graphs",))) if ranks == 1 else (("eager", ()),):
            log = os.path.join(out, f"{name}.{mode}.jsonl")
            rc, text, _ = tessel_run(out, name, log, len(cpu), extra + ("--seed", "5"), ranks)
            if rc != 0:
                failures.append(f"{name} {mode}: tessel-run exited {rc}:\n{text[-3000:]}")
                rows.append((f"correctness {name} ({mode})", "FAIL", f"exit {rc}"))
                continue
            gpu_losses = [s["loss"] for s in losses(log)]
            worst = max(abs(g - c) / abs(c) for g, c in zip(gpu_losses, cpu))
            bad = [i + 1 for i, (g, c) in enumerate(zip(gpu_losses, cpu))
                   if not abs(g - c) <= (first_tol if i == 0 else tol) * abs(c)]
            ok = not bad and len(gpu_losses) == len(cpu)
            if not ok:
                failures.append(f"{name} {mode}: steps {bad} outside tolerance\n  gpu {gpu_losses}\n  cpu {cpu}")
            rows.append((f"correctness {name} ({mode}), {len(cpu)} steps", "ok" if ok else "FAIL",
                         f"max rel |gpu-cpu| {worst:.2e} (tol {first_tol:g} step 1, {tol:g} after)"))

    # 2. Benchmark: the largest GPT-2 micro-batch whose planned memory fits the free memory.
    gpt2 = sorted(((info["batch"], name, info) for name, info in man["bundles"].items()
                   if name.startswith("gpt2-b")), reverse=True)
    bench = None
    for batch, name, info in gpt2:
        if free is not None and info["device_bytes"] > 0.95 * free:
            continue
        log = os.path.join(out, f"{name}.bench.jsonl")
        rc, text, wall = tessel_run(out, name, log, BENCH_STEPS, ("--cuda-graphs",))
        if rc != 0 and ("needs" in text and "free" in text):
            continue  # did not fit after all: try the next smaller micro-batch
        if rc != 0:
            failures.append(f"{name}: tessel-run exited {rc}:\n{text[-3000:]}")
            rows.append((f"benchmark {name}", "FAIL", f"exit {rc}"))
            break
        steps, seconds = timed_steps(log)
        tokens = batch * info["seq"]
        tps = tokens / seconds
        mfu = tps * info["flops_per_token"] / PEAK[info["precision"]]
        peak = next((l for l in text.splitlines() if l.startswith("device memory:")), "device memory: ?")
        graphs = "CUDA graphs" if "CUDA graphs" in text.splitlines()[0] else "eager (graph capture failed)"
        bench = (name, info, seconds, tps, mfu, peak, graphs, steps[-1]["loss"], wall)
        break
    if bench is None and not any(r[1] == "FAIL" for r in rows if r[0].startswith("benchmark")):
        failures.append("no GPT-2 bundle fits this GPU")

    # 3a. Fused attention on the GPU: attn-fused-gpt2-bN (one kernel per batch row and head,
    # nothing T x T stored) against gpt2-bN (attention decomposed into batched GEMMs and a
    # softmax, the default for CUDA bundles), both timed as the benchmark is.
    for name in sorted(n for n in man["bundles"] if n.startswith("attn-fused-")):
        base = name[len("attn-fused-"):]
        if base not in man["bundles"]:
            failures.append(f"{name}: its decomposed twin {base} is not in the manifest")
            continue
        seconds = {}
        for variant in (base, name):
            info = man["bundles"][variant]
            if free is not None and info["device_bytes"] > 0.95 * free:
                rows.append((f"attention fused vs decomposed ({base})", "skipped",
                             f"{variant} plans {info['device_bytes'] / 2**30:.2f} GiB, {free / 2**30:.2f} GiB free"))
                break
            log = os.path.join(out, f"{variant}.attention.jsonl")
            rc, text, _ = tessel_run(out, variant, log, BENCH_STEPS, ("--cuda-graphs",))
            if rc != 0:
                failures.append(f"{variant}: tessel-run exited {rc}:\n{text[-3000:]}")
                rows.append((f"attention fused vs decomposed ({base})", "FAIL", f"{variant} exit {rc}"))
                break
            seconds[variant] = timed_steps(log)[1]
        if len(seconds) == 2:
            fused, decomposed = seconds[name], seconds[base]
            rows.append((f"attention fused vs decomposed ({base})", "ok",
                         f"step {fused * 1e3:.2f} ms fused, {decomposed * 1e3:.2f} ms decomposed: "
                         f"fused / decomposed {fused / decomposed:.3f}"))

    # 3. The benchmark model fully sharded over 2 GPUs (--plan fsdp=2, a micro-batch per GPU):
    # step time, tokens/s over both GPUs, MFU against both GPUs' peak, the collectives' payload
    # per step on rank 0 (NCCL all-gathers and reduce-scatters) and rank 0's peak memory.
    fsdp_rows = []
    for name, info in sorted(man["bundles"].items()):
        if not name.startswith("gpt2-fsdp"):
            continue
        ranks = info["ranks"]
        if (why := multi_gpu_problem(ranks)) is not None:
            rows.append((f"benchmark {name} (fsdp={ranks})", "skipped", why))
            continue
        if free is not None and info["device_bytes"] > 0.95 * free:
            rows.append((f"benchmark {name} (fsdp={ranks})", "skipped",
                         f"plans {info['device_bytes'] / 2**30:.2f} GiB per GPU, {free / 2**30:.2f} GiB free"))
            continue
        log = os.path.join(out, f"{name}.bench.jsonl")
        rc, text, _ = tessel_run(out, name, log, BENCH_STEPS, (), ranks)
        if rc != 0:
            failures.append(f"{name}: mpirun -np {ranks} tessel-run exited {rc}:\n{text[-3000:]}")
            rows.append((f"benchmark {name} (fsdp={ranks})", "FAIL", f"exit {rc}"))
            continue
        steps, seconds = timed_steps(log)
        tps = info["batch"] * info["seq"] / seconds  # the global batch: every GPU's rows
        mfu = tps * info["flops_per_token"] / (ranks * PEAK[info["precision"]])
        comm = next((l for l in text.splitlines() if l.startswith("communication:")), "communication: ?")
        payload = comm.split("payload ")[-1].split(" bytes/step")[0] if "payload " in comm else "?"
        peak = next((l for l in text.splitlines() if l.startswith("device memory:")), "device memory: ?")
        fsdp_rows.append(f"| {name} (L={info['layers']} C={info['channels']}, {info['parameters'] / 1e6:.1f}M params"
                         f"), fsdp={ranks} | {info['precision']} | {ranks} x {info['batch'] // ranks} x {info['seq']} | "
                         f"{seconds * 1e3:.1f} ms | {tps:,.0f} | {100 * mfu:.2f}% of {ranks} x "
                         f"{PEAK[info['precision']] / 1e12:.1f} TFLOP/s | {payload} | "
                         f"{peak.split('peak used on the device ')[-1]} |")

    print()
    print(f"GPU check on {gpu} ({time.time() - start:.0f} s)")
    print()
    print("| check | result | detail |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    if bench:
        name, info, seconds, tps, mfu, peak, graphs, loss, wall = bench
        print()
        print("| model | precision | micro-batch x T | step time | tokens/s | model FLOPs/token | MFU | peak | launches |")
        print("|---|---|---|---|---|---|---|---|---|")
        # GPT-2 124M unless prepare was given another benchmark model (TESSEL_GPU_CHECK_MODEL).
        gpt2 = (info["layers"], info["channels"], info["heads"], info["seq"], info["vocab"]) == (12, 768, 12, 1024, 50304)
        print(f"| {'GPT-2 124M' if gpt2 else 'GPT'} (L={info['layers']} C={info['channels']} NH={info['heads']} "
              f"V={info['vocab']}, "
              f"{info['parameters'] / 1e6:.1f}M params) | {info['precision']} | {info['batch']} x {info['seq']} | "
              f"{seconds * 1e3:.1f} ms | {tps:,.0f} | {info['flops_per_token'] / 1e9:.3f} G | "
              f"{100 * mfu:.2f}% of {PEAK[info['precision']] / 1e12:.1f} TFLOP/s | "
              f"{peak.split('peak used on the device ')[-1]} | {graphs} |")
        print(f"(median step of steps 3-{BENCH_STEPS}; planned device memory "
              f"{info['device_bytes'] / 2**30:.2f} GiB; last loss {loss:.4f})")
    if fsdp_rows:
        print()
        print("| model, plan | precision | GPUs x micro-batch x T | step time | tokens/s | MFU | payload bytes/step "
              "(rank 0) | peak (rank 0) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in fsdp_rows:
            print(r)
        print(f"(median step of steps 3-{BENCH_STEPS}, eager launches: the steps all-gather across GPUs)")
    for f in failures:
        print("\nFAILURE: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "manifest":
        manifest(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2]))
    else:
        sys.exit("usage: gpu_check.py manifest DIR PRECISION | run DIR")
