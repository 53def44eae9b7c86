"""Acceptance: a plan never changes the math. tessel-gpt (L=2, C=64, NH=4, T=32, global batch
B=8, AdamW with weight decay 0.1, 5 steps) under `mpirun --oversubscribe -np N --plan dp=N`
gives per-step losses, gradient norms and the final validation loss that match the one-rank run on the same global
batches, with --check-replicas (every rank's parameters and optimizer state hashed and
compared after every step: replicas bitwise identical) and --check-schedule:
  dp=2 and dp=4 vs dp=1;
  gradient accumulation 4 x (B/4) vs 1 x B, and dp=2 with 2 microsteps vs dp=1;
  global-norm clipping at 0.05 (active: the norms are ~2-3) with dp=2 vs dp=1, under SGD.
Tolerances: the runs differ only in the order of the batch-mean sums (a rank's local mean,
then the average over ranks, vs one mean over B) and the GEMMs' k-sums over fewer rows; each
reordering moves an f32 result by a few ulps. Measured worst differences are ~5e-7 in the
loss (about 8 ulps at 5.5); the bounds are 5e-6 absolute on the loss and 1e-5 relative on the
gradient norm. A wrong reduction (a sum instead of the average) doubles the norm at dp=2.
The parameters themselves are compared with dp=1 by test/unit/DataParallelTest.cpp.

Usage: check_dp_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

LOSS_TOL = 5e-6
NORM_REL_TOL = 1e-5
# Clipping with SGD: AdamW is nearly invariant to the gradient's scale, so a wrong clip
# coefficient would hardly show in its losses; SGD's update is proportional to it.
CLIP = ["--optimizer", "sgd", "--lr", "0.1", "--grad-clip", "0.05"]


def run(mpiexec, exe, data, tmp, name, ranks, extra):
    log = Path(tmp) / f"{name}.json"
    cmd = [exe, "--data", data, "--layers", "2", "--channels", "64", "--heads", "4", "--seq",
           "32", "--batch", "8", "--steps", "5", "--weight-decay", "0.1", "--eval-batches", "2",
           "--sample-bytes", "0", "--device", "cpu", "--threads", "1", "--log-json", str(log),
           *extra]
    if ranks > 1:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd, "--plan", f"dp={ranks}",
               "--check-replicas", "--check-schedule"]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{name} exited with {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return [json.loads(line) for line in log.read_text().splitlines()]


def compare(name, got, want):
    bad = 0
    for g, w in zip(got, want, strict=True):
        dl = abs(g["loss"] - w["loss"])
        dn = abs(g["grad_norm"] - w["grad_norm"]) / abs(w["grad_norm"])
        print(f"  {name} step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (|d| {dl:.2e}), "
              f"norm {g['grad_norm']:.6f} vs {w['grad_norm']:.6f} (rel {dn:.2e})")
        bad += not (dl <= LOSS_TOL and dn <= NORM_REL_TOL)
        if "val_loss" in w:  # the validation loss: every microbatch of each batch, every rank
            dv = abs(g["val_loss"] - w["val_loss"])
            print(f"  {name} step {g['step']}: val {g['val_loss']:.7f} vs {w['val_loss']:.7f} (|d| {dv:.2e})")
            bad += not dv <= LOSS_TOL
    return bad


def main():
    mpiexec, exe, data = sys.argv[1:4]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            base = run(mpiexec, exe, data, tmp, "dp1", 1, [])
            clip1 = run(mpiexec, exe, data, tmp, "dp1-clip", 1, CLIP)
            cases = [
                ("dp2", run(mpiexec, exe, data, tmp, "dp2", 2, []), base),
                ("dp4", run(mpiexec, exe, data, tmp, "dp4", 4, []), base),
                ("accum4", run(mpiexec, exe, data, tmp, "accum4", 1, ["--grad-accumulation", "4"]), base),
                ("dp2-accum2",
                 run(mpiexec, exe, data, tmp, "dp2-accum2", 2, ["--grad-accumulation", "2"]), base),
                ("dp2-clip", run(mpiexec, exe, data, tmp, "dp2-clip", 2, CLIP),
                 clip1),
            ]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not all(s["grad_norm"] > 0.05 for s in clip1):
        print("FAIL: the clipping case does not clip (a norm is below the threshold)")
        return 1
    for name, got, want in cases:
        failures += compare(name, got, want)
    if failures:
        print(f"FAIL: {failures} step(s) outside the tolerances (loss {LOSS_TOL}, norm {NORM_REL_TOL})")
        return 1
    print("PASS: dp=2, dp=4, accumulation and clipping match dp=1; replicas identical every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
