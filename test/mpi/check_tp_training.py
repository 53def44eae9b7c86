"""Acceptance: a plan never changes the math, for tensor parallelism. tessel-gpt (L=2, T=32,
global batch B=8, tied embeddings, AdamW with weight decay 0.1, global-norm clipping at 0.5,
which is active: the norms are ~1-2) trains 5 steps on one rank and under each plan, on the
same global batches, with --check-replicas (every parameter and optimizer state compared
bitwise within its replica group after every step). Compared: the loss and the gradient
norm of every step, and every parameter after the last step through --export-params (the
gathered, logical tensors under their DSL names).
  C=64, NH=4:  tp=2, tp=4, dp=2,tp=2, tp=2 with --sequence-parallel  vs one rank;
  C=48, NH=6:  tp=3 (divides the heads but not the vocabulary V=256, which is padded to 258,
               86 rows per rank, its padded logits masked to -inf) vs one rank.
Uneven widths: tessel-mlp with 7 hidden units over tp=4 (2 per rank, the last rank's second
padding: the issue's "7 rows over 4 ranks") and 64 over tp=3 (22 per rank, 2 padding), each
vs one rank: the same losses and parameters (the padding is dropped from the export; its
zeros never reach the math: --check-replicas also requires it to be zero on every rank
after every step).
Tolerances: the plans reorder f32 sums (a row-parallel product's k-sum split over ranks and
all-reduced, the loss statistics of the vocab-parallel cross-entropy combined across ranks,
the global norm from per-rank norms), each moving a result by a few ulps. Loss: 5e-6 absolute
(about 8 ulps at 5.5; measured 0 to 5e-7), gradient norm 1e-5 relative. Parameters: 1e-4
absolute, the issue's bound: AdamW divides by sqrt(v), so where a gradient is near zero an
ulp-level difference can move an element by up to a fraction of lr = 1e-3 per step (measured
worst 2e-6). A wrong plan (a missing all-reduce, a shard in the wrong place, a norm counted
twice) moves the loss by 1e-2 or more at the first step.

Mixed precision: tp=2 in bf16 against one rank in bf16, losses only. The plans round
differently: a row-parallel product's parts are rounded to bf16 on each rank and summed in
f32, where one rank rounds the whole sum once; each element may move by a bf16 ulp (2^-8
relative), and the loss averages B T of them. Measured up to 2.3e-5 relative; bound 1e-4.

Volume: the runtime counts the payload bytes of each collective kind (the "communication by
kind" line). For tp=2, tp=4 and tp=3 (whose padded vocabulary moves the same
statistics: the padding adds no row) the test derives them in closed form and requires the ratio
counted / closed form to be 1.00 (exactly, up to the integer division per step): per
training step the all-reduces carry ((4 L + 2) B T C + 3 B T) f32 (4 per block: two forward
after the row-parallel projections, two backward for the qkv and fc input gradients; the
vocab-parallel embedding's forward and the LM head's input gradient; the cross-entropy's
max, sum and sum of [B, T]), and the all-gathers tp f32 (global-norm clipping's per-rank
norms); the final evaluation's forward pass adds ((2 L + 1) B T C + 3 B T) f32 of
all-reduces.

Reports after training run on rank 0 from the gathered parameters: tessel-mlp's test
accuracy under tp=2 equals the one-rank run's (the logits differ by f32 reorderings only, so
at most a near tie's argmax can flip: 2 of the 10000 images allowed).

Usage: check_tp_training.py MPIEXEC TESSEL_GPT DATA_FILE TESSEL_MLP"""
import re
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

LOSS_TOL = 5e-6
BF16_LOSS_REL_TOL = 1e-4
NORM_REL_TOL = 1e-5
PARAM_TOL = 1e-4
GRAD_CLIP = 0.5  # global-norm clipping threshold: below the runs' norms (1.9 to 3.2), so it is active
COMMON = ["--layers", "2", "--seq", "32", "--batch", "8", "--steps", "5", "--weight-decay", "0.1",
          "--grad-clip", str(GRAD_CLIP), "--eval-batches", "1", "--sample-bytes", "0", "--device", "cpu",
          "--threads", "1"]


def load_safetensors(path):
    """name -> (shape, list of floats), read by hand (the format: u64 header size, JSON header,
    little-endian data), so the check depends on no Python package."""
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise RuntimeError(f"{path}: {name} is {t['dtype']}, not F32")
        begin, end = t["data_offsets"]
        data = raw[8 + n + begin:8 + n + end]
        out[name] = (t["shape"], struct.unpack(f"<{len(data) // 4}f", data))
    return out


def launch(mpiexec, tmp, name, ranks, cmd):
    """Runs `cmd` (a trainer's command line) on `ranks` ranks with --log-json and --export-params;
    returns the steps' JSON objects, the exported parameters and stdout."""
    log, params = Path(tmp) / f"{name}.json", Path(tmp) / f"{name}.safetensors"
    cmd = [*cmd, "--log-json", str(log), "--export-params", str(params)]
    if ranks > 1:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd, "--check-replicas", "--check-schedule"]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{name} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return [json.loads(line) for line in log.read_text().splitlines()], load_safetensors(params), p.stdout


def run(mpiexec, exe, data, tmp, name, ranks, extra):
    return launch(mpiexec, tmp, name, ranks, [exe, "--data", data, *COMMON, *extra])


def volume(name, out, tp, layers=2, batch=8, seq=32, channels=64, steps=5, evals=1):
    """Checks the counted bytes per step of each kind against the closed form (docstring)."""
    m = re.search(r"communication by kind: all_reduce [0-9.]+/step ([0-9]+) bytes/step, "
                  r"all_gather [0-9.]+/step ([0-9]+) bytes/step", out)
    if not m:
        print(f"  {name}: no 'communication by kind' line with all_reduce and all_gather")
        return 1
    btc, bt = batch * seq * channels, batch * seq
    train = ((4 * layers + 2) * btc + 3 * bt) * 4
    forward = ((2 * layers + 1) * btc + 3 * bt) * 4
    want_ar = (steps * train + evals * forward) // steps
    want_ag = tp * 4
    got_ar, got_ag = int(m.group(1)), int(m.group(2))
    print(f"  {name}: all_reduce {got_ar} bytes/step, closed form {want_ar} (ratio {got_ar / want_ar:.2f}); "
          f"all_gather {got_ag}, closed form {want_ag} (ratio {got_ag / want_ag:.2f})")
    return (got_ar != want_ar) + (got_ag != want_ag)


def run_mlp(mpiexec, mlp, tmp, name, ranks, extra):
    return launch(mpiexec, tmp, name, ranks, [mlp, "--batch", "16", "--steps", "5", "--threads", "1", "--eval-batches",
                                              "1", "--weight-decay", "0.1", "--grad-clip", str(GRAD_CLIP), *extra])


def mlp_accuracy(mpiexec, mlp, ranks, extra):
    cmd = [mlp, "--hidden", "64", "--batch", "16", "--steps", "20", "--threads", "1", "--eval-batches", "1",
           *extra]
    if ranks > 1:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = re.search(r"test accuracy: [0-9.]+% \(([0-9]+) of ([0-9]+) images\)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"tessel-mlp {extra} exited with {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return int(m.group(1))


def clipping_active(*references):
    """True when every step of the one-rank `references` (run()'s results) has a gradient norm
    above GRAD_CLIP, so that the comparisons exercise clipping; else prints why and is False."""
    if all(s["grad_norm"] > GRAD_CLIP for steps, *_ in references for s in steps):
        return True
    print("FAIL: the clipping threshold does not clip (a norm is below it)")
    return False


def compare(name, got, want):
    (steps, params, _), (steps1, params1, _) = got, want
    bad = 0
    for g, w in zip(steps, steps1, strict=True):
        dl = abs(g["loss"] - w["loss"])
        dn = abs(g["grad_norm"] - w["grad_norm"]) / abs(w["grad_norm"])
        print(f"  {name} step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (|d| {dl:.2e}), "
              f"norm {g['grad_norm']:.6f} vs {w['grad_norm']:.6f} (rel {dn:.2e})")
        bad += not (dl <= LOSS_TOL and dn <= NORM_REL_TOL)
    if sorted(params) != sorted(params1):
        print(f"  {name}: exported names differ: {sorted(set(params) ^ set(params1))}")
        return bad + 1
    worst, where = 0.0, ""
    for key, (shape, values) in params1.items():
        shape2, values2 = params[key]
        if shape2 != shape:
            print(f"  {name}: {key} has shape {shape2}, one rank {shape}")
            bad += 1
            continue
        d = max(abs(a - b) for a, b in zip(values, values2))
        if d > worst:
            worst, where = d, key
    print(f"  {name}: {len(params)} parameters, worst |d| {worst:.2e} ({where})")
    return bad + (worst > PARAM_TOL)


def main():
    mpiexec, exe, data, mlp = sys.argv[1:5]
    c64 = ["--channels", "64", "--heads", "4"]
    c48 = ["--channels", "48", "--heads", "6"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one64 = run(mpiexec, exe, data, tmp, "one-c64", 1, c64)
            one48 = run(mpiexec, exe, data, tmp, "one-c48", 1, c48)
            cases = [
                ("tp2", run(mpiexec, exe, data, tmp, "tp2", 2, [*c64, "--plan", "tp=2"]), one64),
                ("tp4", run(mpiexec, exe, data, tmp, "tp4", 4, [*c64, "--plan", "tp=4"]), one64),
                ("dp2-tp2", run(mpiexec, exe, data, tmp, "dp2tp2", 4, [*c64, "--plan", "dp=2,tp=2"]), one64),
                ("tp2-sp", run(mpiexec, exe, data, tmp, "tp2sp", 2,
                               [*c64, "--plan", "tp=2", "--sequence-parallel"]), one64),
                ("tp3", run(mpiexec, exe, data, tmp, "tp3", 3, [*c48, "--plan", "tp=3"]), one48),
            ]
            bf = ["--precision", "bf16"]
            one_bf16 = run(mpiexec, exe, data, tmp, "one-bf16", 1, [*c64, *bf])
            bf16 = run(mpiexec, exe, data, tmp, "tp2-bf16", 2, [*c64, *bf, "--plan", "tp=2"])
            for hidden, tp in ((7, 4), (64, 3)):
                h = ["--hidden", str(hidden)]
                cases.append((f"mlp{hidden}-tp{tp}", run_mlp(mpiexec, mlp, tmp, f"mlp{hidden}tp{tp}", tp,
                                                             [*h, "--plan", f"tp={tp}"]),
                              run_mlp(mpiexec, mlp, tmp, f"mlp{hidden}", 1, h)))
            mlp1 = mlp_accuracy(mpiexec, mlp, 1, [])
            mlp2 = mlp_accuracy(mpiexec, mlp, 2, ["--plan", "tp=2"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not clipping_active(one64):
        return 1
    failures = sum(compare(name, got, want) for name, got, want in cases)
    for g, w in zip(bf16[0], one_bf16[0], strict=True):
        rel = abs(g["loss"] - w["loss"]) / abs(w["loss"])
        print(f"  tp2-bf16 step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (rel {rel:.2e})")
        failures += rel > BF16_LOSS_REL_TOL
    failures += volume("tp2", cases[0][1][2], 2) + volume("tp4", cases[1][1][2], 4)
    failures += volume("tp3", cases[4][1][2], 3, channels=48)
    print(f"  mlp tp2: {mlp2} correct test images, one rank {mlp1}")
    failures += abs(mlp2 - mlp1) > 2
    if failures:
        print(f"FAIL: {failures} check(s) outside the tolerances (loss {LOSS_TOL}, norm {NORM_REL_TOL}, "
              f"parameters {PARAM_TOL})")
        return 1
    print("PASS: tp=2, tp=4, dp=2,tp=2, tp=2 with sequence parallelism, tp=3 (padded vocabulary), MLP widths "
          "7 over tp=4 and 64 over tp=3 (padded), and tp=2 in bf16 match one rank; replicas identical every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
