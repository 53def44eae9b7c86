"""Bundles carry their plan, and a plan never changes the math.

Mode "bundle": a bundle compiled in one plain process with --plan dp=2 (and with gradient
accumulation, a small bucket and no overlap, so every plan field travels), and one with
--plan tp=2 (tensor parallelism: sharded parameters, forward and backward all-reduces,
vocab-parallel loss), trained by
`mpirun -np 2 tessel-run BUNDLE`, gives the same per-step loss, gradient norm and validation
loss, bit for bit (the JSON text of each value), as `mpirun -np 2 tessel-gpt --plan dp=2`
(or tp=2) with the same flags: the same program, the same rows per rank, the same
collectives. The
same for an MLP bundle against `mpirun -np 2 tessel-mlp --plan dp=2`. No tolerance: any
difference is a different program, batch or reduction. Both also print the same
communication summary (collectives and bytes per step).

Mode "fsdp": the same for fully sharded plans, whose parameters, gradients and optimizer state
are stored split over the fsdp axis (all-gathers before use, reduce-scatters of the
gradients): bundles of --plan fsdp=2 (also with 2 microsteps) and of HSDP --plan dp=2,fsdp=2
(4 ranks: the batch split over both axes) trained by `mpirun -np N tessel-run BUNDLE` give
the JIT run's losses, norms and validation losses bit for bit, the same communication
summary, and the same trained parameters (--export-params, gathered from the shards: the
files' tensors byte for byte).

Mode "mlp": tessel-mlp under `mpirun -np 2 --plan dp=2` (and with 2 microsteps) matches the
one-rank run on the same global batches, with --check-replicas and --check-schedule. The
tolerance is the one of check_dp_training.py, for the same reason: the runs differ only in
the order of the batch-mean sums (a rank's mean, then the average over ranks), which moves
an f32 loss by a few ulps (measured here: at most 2.4e-7, one ulp at a loss of 2.3, and
1.1e-7 relative on the norm); the bound is 5e-6 on the loss and 1e-5 relative on the
gradient norm.

Usage: check_bundle_training.py bundle|fsdp|mlp MPIEXEC TESSEL_GPT TESSEL_MLP TESSEL_RUN DATA_FILE"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

LOSS_TOL = 5e-6
NORM_REL_TOL = 1e-5
GPT = ["--layers", "1", "--channels", "32", "--heads", "2", "--seq", "16", "--batch", "8"]
MLP = ["--hidden", "32", "--batch", "16"]
TRAIN = ["--seed", "11", "--threads", "1", "--steps", "4", "--eval-every", "2", "--eval-batches", "2",
         "--weight-decay", "0.1"]


def read_log(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def run(cmd, log=None):
    """Runs `cmd`; returns its stdout, or the JSON log at `log` when given."""
    print("running:", " ".join(map(str, cmd)), flush=True)
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout if log is None else read_log(log)


def exact(name, got, want):
    fields = ("loss", "grad_norm", "val_loss")
    a = [[json.dumps(r.get(f)) for f in fields] for r in got]
    b = [[json.dumps(r.get(f)) for f in fields] for r in want]
    same = a == b and len(a) > 0
    print(f"{'ok  ' if same else 'FAIL'} {name}: {len(a)} steps, tessel-run {a} vs JIT {b}")
    return 0 if same else 1


def close(name, got, want):
    bad = 0
    for g, w in zip(got, want, strict=True):
        dl = abs(g["loss"] - w["loss"])
        dn = abs(g["grad_norm"] - w["grad_norm"]) / abs(w["grad_norm"])
        dv = abs(g.get("val_loss", 0) - w.get("val_loss", 0))
        print(f"  {name} step {g['step']}: loss |d| {dl:.2e}, norm rel {dn:.2e}, val |d| {dv:.2e}")
        bad += not (dl <= LOSS_TOL and dn <= NORM_REL_TOL and dv <= LOSS_TOL)
    print(f"{'ok  ' if bad == 0 else 'FAIL'} {name}")
    return bad


def communication(name, run_out, jit_out):
    """Both print the same 'communication:' line on rank 0 up to its times (which differ run
    to run): collectives and payload bytes per step, ring wire bytes, N."""
    def counts(out):
        line = next((l for l in out.splitlines() if l.startswith("communication:")), None)
        return None if line is None else line.split(", starts")[0]
    same = counts(run_out) is not None and counts(run_out) == counts(jit_out)
    print(f"{'ok  ' if same else 'FAIL'} {name} communication: tessel-run {counts(run_out)!r} vs JIT {counts(jit_out)!r}")
    return 0 if same else 1


def bundle_mode(mpiexec, gpt, mlp, tessel_run, data, tmp):
    mpi = [mpiexec, "--oversubscribe", "-np", "2"]
    bad = 0
    for name, plan, axis in [("gpt dp=2", ["--plan", "dp=2"], "dp"),
                             ("gpt dp=2 x 2 microsteps, 0.01 MiB buckets, no overlap",
                              ["--plan", "dp=2", "--grad-accumulation", "2", "--bucket-mb", "0.01",
                               "--no-overlap"], "dp"),
                             ("gpt tp=2", ["--plan", "tp=2"], "tp")]:
        b = tmp / name.split(",")[0].replace(" ", "_").replace("=", "")
        out = run([gpt, *GPT, *plan, "--seed", "11", "--emit-bundle", b])
        assert "train it with: mpirun -np 2 tessel-run" in out, out
        meta = json.loads((b / "bundle.json").read_text())["plan"]
        assert meta["mesh"] == [{"axis": axis, "size": 2}], meta
        run_out = run([*mpi, tessel_run, b, "--data", data, *TRAIN, "--check-replicas", "--log-json",
                       tmp / "run.json"])
        jit_out = run([*mpi, gpt, *GPT, *plan, "--data", data, *TRAIN, "--sample-bytes", "0", "--device", "cpu",
                       "--log-json", tmp / "jit.json"])
        bad += exact(name, read_log(tmp / "run.json"), read_log(tmp / "jit.json"))
        bad += communication(name, run_out, jit_out)
    b = tmp / "mlp"
    mlp_train = [*TRAIN, "--schedule", "constant"]
    run([mlp, *MLP, "--plan", "dp=2", "--seed", "11", "--emit-bundle", b])
    run([*mpi, tessel_run, b, *mlp_train, "--check-replicas", "--log-json", tmp / "run.json"])
    run([*mpi, mlp, *MLP, "--plan", "dp=2", *mlp_train, "--device", "cpu", "--log-json", tmp / "jit.json"])
    bad += exact("mlp dp=2", read_log(tmp / "run.json"), read_log(tmp / "jit.json"))
    return bad


def safetensors_tensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file: its header's tensors and their data."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def fsdp_mode(mpiexec, gpt, tessel_run, data, tmp):
    bad = 0
    for name, plan, ranks in [("gpt fsdp=2", ["--plan", "fsdp=2"], 2),
                              ("gpt fsdp=2 x 2 microsteps", ["--plan", "fsdp=2", "--grad-accumulation", "2"], 2),
                              ("gpt dp=2,fsdp=2", ["--plan", "dp=2,fsdp=2"], 4)]:
        b = tmp / name.replace(" ", "_").replace("=", "").replace(",", "_")
        out = run([gpt, *GPT, *plan, "--seed", "11", "--emit-bundle", b])
        assert f"train it with: mpirun -np {ranks} tessel-run" in out, out
        meta = json.loads((b / "bundle.json").read_text())["plan"]
        assert meta["fully_shard_axis"] == "fsdp", meta
        mpi = [mpiexec, "--oversubscribe", "-np", str(ranks)]
        run_out = run([*mpi, tessel_run, b, "--data", data, *TRAIN, "--check-replicas", "--log-json",
                       tmp / "run.json", "--export-params", tmp / "run.safetensors"])
        jit_out = run([*mpi, gpt, *GPT, *plan, "--data", data, *TRAIN, "--sample-bytes", "0", "--device", "cpu",
                       "--log-json", tmp / "jit.json", "--export-params", tmp / "jit.safetensors"])
        bad += exact(name, read_log(tmp / "run.json"), read_log(tmp / "jit.json"))
        bad += communication(name, run_out, jit_out)
        got, want = safetensors_tensors(tmp / "run.safetensors"), safetensors_tensors(tmp / "jit.safetensors")
        differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        print(f"{'FAIL' if differ or not want else 'ok  '} {name} parameters: {len(want)} exported, "
              f"{len(differ)} differ {differ[:5]}")
        bad += bool(differ) or not want
    return bad


def mlp_mode(mpiexec, mlp, tmp):
    one = run([mlp, *MLP, *TRAIN, "--log-json", tmp / "dp1.json"], tmp / "dp1.json")
    bad = 0
    for name, extra in [("mlp dp=2", []), ("mlp dp=2 x 2 microsteps", ["--grad-accumulation", "2"])]:
        log = tmp / "dp2.json"
        got = run([mpiexec, "--oversubscribe", "-np", "2", mlp, *MLP, *TRAIN, "--plan", "dp=2", *extra,
                   "--check-replicas", "--check-schedule", "--log-json", log], log)
        bad += close(name, got, one)
    return bad


def main():
    mode, mpiexec, gpt, mlp, tessel_run, data = sys.argv[1:7]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if mode == "bundle":
            bad = bundle_mode(mpiexec, gpt, mlp, tessel_run, data, tmp)
        elif mode == "fsdp":
            bad = fsdp_mode(mpiexec, gpt, tessel_run, data, tmp)
        else:
            bad = mlp_mode(mpiexec, mlp, tmp)
    print("PASS" if bad == 0 else f"FAIL: {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
