"""What the labs' checks share: running a lab trainer on one rank or under mpirun with its log
and exported parameters, read with safetensors (the format's reference reader, in the test venv
that scripts/setup.sh makes: TESSEL_TEST_PYTHON), and comparing runs."""
import json
import subprocess
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file


def train(mpiexec, exe, tmp, name, ranks, extra):
    """Runs the lab trainer `exe` (on the CPU, one thread per rank) with `extra` flags, on `ranks`
    ranks under `mpiexec` with the replica and schedule checks when ranks > 1 (and --plan dp=<ranks>
    unless `extra` has a --plan).
    Returns (the steps' JSON log records, the exported parameters, stdout + stderr)."""
    log, params = Path(tmp) / f"{name}.json", Path(tmp) / f"{name}.safetensors"
    cmd = [exe, "--device", "cpu", "--threads", "1", "--log-json", str(log), "--export-params", str(params), *extra]
    if ranks > 1:
        plan = [] if "--plan" in extra else ["--plan", f"dp={ranks}"]
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd, *plan, "--check-replicas", "--check-schedule"]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{name} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in records if "loss" in r], load_file(str(params)), p.stdout + p.stderr


def compare_steps(name, got, want, loss_tol):
    """Counts the steps whose loss differs by more than `loss_tol`, printing each."""
    if len(got) != len(want):
        print(f"  {name}: {len(got)} steps vs {len(want)}")
        return 1
    bad = 0
    for g, w in zip(got, want):
        d = abs(g["loss"] - w["loss"])
        print(f"  {name} step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (|d| {d:.2e})")
        bad += not d <= loss_tol
    return bad


def compare_params(name, got, want, tol):
    """Counts the parameters whose largest elementwise difference exceeds `tol` (or whose names or
    shapes differ), printing each one's worst difference."""
    if sorted(got) != sorted(want):
        print(f"  {name}: parameters {sorted(got)} vs {sorted(want)}")
        return 1
    bad = 0
    for key in sorted(want):
        if got[key].shape != want[key].shape:
            print(f"  {name} {key}: shape {got[key].shape} vs {want[key].shape}")
            bad += 1
            continue
        worst = float(np.max(np.abs(got[key].astype(np.float64) - want[key].astype(np.float64))))
        print(f"  {name} {key}: worst |d| {worst:.2e}")
        bad += not worst <= tol
    return bad


def bitwise_equal(a, b):
    """Whether two arrays hold the same bytes (shape and dtype included)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
