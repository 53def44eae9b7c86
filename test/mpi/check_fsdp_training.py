"""Acceptance: a plan never changes the math, for fully sharded data parallelism (ZeRO-3).
tessel-gpt (L=2, C=64, NH=4, T=32, V=256, global batch B=8, tied embeddings, AdamW with weight
decay 0.1, global-norm clipping at 0.5, which is active: the norms are 1.9 to 3.2) trains 5 steps on
one rank and under fsdp=2, fsdp=4, dp=2,fsdp=2 (HSDP: replicated over dp, sharded over
fsdp), fsdp=2 with --no-reshard-after-forward and fsdp=4 with gradient accumulation over 2
microsteps (1 row per rank per microstep), on the same global batches, with --check-replicas
and --check-schedule. Every fsdp degree divides every parameter's first dimension (64, 192,
256, 32 = T), so no padding.
Compared, as check_tp_training.py does (its run and compare are reused): the loss and the
gradient norm of every step, and every parameter after the last step through --export-params
(gathered, under the DSL names).

Tolerances (check_tp_training.py's): FSDP reorders f32 sums only where the batch is split (each
rank's gradient is the mean over its rows, then the reduce-scatter averages the ranks'
means, where one rank takes one mean over all rows; the global norm adds per-rank sums of
squares of the shards). Loss 5e-6 absolute (about 8 ulps at 5.5; the forward pass is the
one-rank computation on a rank's rows, so only the previous steps' updates can move it);
gradient norm 1e-5 relative; parameters 1e-4 absolute (AdamW divides by sqrt(v), so an
ulp-level change of a near-zero gradient can move an element by a fraction of lr = 1e-3 per
step). A wrong plan (a gradient summed instead of averaged, a shard updated twice, a norm
counted per rank) moves the loss by 1e-2 or more by the second step.

Volume: the runtime counts the payload bytes of each kind (the "communication by kind"
line: an all-gather or reduce-scatter counts its gathered, global tensor). The compiler
gathers each parameter right before its first use in the forward pass; by default
(reshard_after_forward) the gathered copy is freed after the forward pass and gathered again
right before the backward pass first reads it. Gathering is per parameter, so a parameter
whose value the backward pass does not read is not gathered again: the biases (their
gradient is a sum of the output gradient), the layer norms' betas, and the position table
wpe (an embedding's gradient needs only the ids); P_bwd = P - L (9 C + 2 C) - C - T C
parameters are. With P parameters of 4 bytes and fsdp degree F, per training step:
  all_gather      4 P (forward) + 4 P_bwd (backward; 0 with --no-reshard-after-forward)
                  + 4 F (global-norm clipping's per-rank norms, gathered over fsdp)
  reduce_scatter  4 P  (each gradient once, the transpose of its all-gather)
  all_reduce      4 P / F under HSDP (the gradient shards, averaged over dp), else 0
and the final evaluation's forward pass gathers every parameter once more (4 P). With
gradient accumulation over k microsteps each microstep gathers and reduce-scatters as above
(a reduce-scatter every microstep, FSDP2's default: the accumulated gradient is a shard), so
the gathers of parameters and the reduce-scatters are k times those; the norms' gather stays
once per step. The evaluation feeds each rank the same rows as training, one microstep at a
time, so it also gathers every parameter k times. The counts
are per step over 5 steps and 1 evaluation, in integer bytes. Required ratio: 1.00 exactly.
The ring's wire bytes per rank, (N - 1) / N of the gathers and reduce-scatters, are printed
beside them.

Mixed precision: fsdp=2 in bf16 against one rank in bf16, losses only. Each rank gathers the
bf16 casts of the f32 master shards (the same values one rank casts), computes its rows'
gradients in bf16 and the reduce-scatter sums them in f32 (the gradient is cast to f32 before
it, so nothing is rounded at every hop); one rank rounds the gradient of all rows at once
instead, so an element may move by a bf16 ulp (2^-8 relative) and the loss, a mean over B T
terms, much less. Bound 1e-4 relative, check_tp_training.py's for bf16 (measured below 2e-5).
Volume in bf16: the parameters are gathered as bf16, 2 bytes an element (the norms stay f32),
and the reduce-scatters carry f32, 4 P.

ZeRO stages 1 and 2 and the reduce-scatter modes of gradient accumulation:
check_zero_training.py. Uneven degrees such as fsdp=3, and fsdp x tp: check_fsdp_tp_training.py.

Usage: check_fsdp_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_tp_training import BF16_LOSS_REL_TOL, COMMON, compare, run  # noqa: E402

C64 = ["--channels", "64", "--heads", "4"]
PARAMS = 118528  # L=2, C=64, V=256, T=32: 2 (12 C^2 + 13 C) + V C + T C + 2 C
BACKWARD_PARAMS = PARAMS - 2 * (9 * 64 + 2 * 64) - 64 - 32 * 64  # read by the backward pass
STEPS, EVALS = 5, 1


def volume(name, out, fsdp, dp, regather, k, wide=4):
    """The counted bytes per step of each kind against the closed form (docstring); `wide`:
    bytes of a gathered parameter element (2 in bf16)."""
    kinds = dict((k, int(b)) for k, b in re.findall(r"(all_reduce|all_gather|reduce_scatter) [0-9.]+/step "
                                                   r"([0-9]+) bytes/step", out.split("communication by kind:")[-1]))
    train = {"all_gather": k * (wide * PARAMS + (wide * BACKWARD_PARAMS if regather else 0)) + 4 * fsdp,
             "reduce_scatter": k * 4 * PARAMS,
             "all_reduce": 4 * PARAMS // fsdp if dp > 1 else 0}
    evaluation = {"all_gather": k * wide * PARAMS, "reduce_scatter": 0, "all_reduce": 0}
    bad = 0
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        want = (STEPS * train[kind] + EVALS * evaluation[kind]) // STEPS
        got = kinds.get(kind, 0)
        ratio = got / want if want else (1.0 if got == 0 else float("inf"))
        wire = got * (fsdp - 1) // fsdp if kind != "all_reduce" else got * 2 * (dp - 1) // dp
        print(f"  {name}: {kind} {got} bytes/step, closed form {want} (ratio {ratio:.2f}), "
              f"ring wire bytes per rank {wire}")
        bad += got != want
    return bad


def refused(mpiexec, exe, data, ranks, extra, message):
    cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), exe, "--data", data, *COMMON, *C64, *extra]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    ok = p.returncode != 0 and message in p.stdout + p.stderr
    print(f"  {' '.join(extra)}: exit {p.returncode}, {'names' if ok else 'does NOT name'} '{message}'")
    return not ok


def main():
    mpiexec, exe, data = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one = run(mpiexec, exe, data, tmp, "one", 1, C64)
            plans = [("fsdp2", 2, 2, 1, ["--plan", "fsdp=2"]), ("fsdp4", 4, 4, 1, ["--plan", "fsdp=4"]),
                     ("dp2-fsdp2", 4, 2, 2, ["--plan", "dp=2,fsdp=2"]),
                     ("fsdp2-keep", 2, 2, 1, ["--plan", "fsdp=2", "--no-reshard-after-forward"]),
                     ("fsdp4-accum2", 4, 4, 1, ["--plan", "fsdp=4", "--grad-accumulation", "2"])]
            cases = [(name, run(mpiexec, exe, data, tmp, name, ranks, [*C64, *plan]), fsdp, dp,
                      "--no-reshard-after-forward" not in plan, 2 if "--grad-accumulation" in plan else 1)
                     for name, ranks, fsdp, dp, plan in plans]
            bf = ["--precision", "bf16"]
            one_bf16 = run(mpiexec, exe, data, tmp, "one-bf16", 1, [*C64, *bf])
            bf16 = run(mpiexec, exe, data, tmp, "fsdp2-bf16", 2, [*C64, *bf, "--plan", "fsdp=2"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not all(s["grad_norm"] > 0.5 for s in one[0]):
        print("FAIL: the clipping threshold does not clip (a norm is below it)")
        return 1
    failures = sum(compare(name, got, one) for name, got, *_ in cases)
    failures += sum(volume(name, got[2], fsdp, dp, regather, k) for name, got, fsdp, dp, regather, k in cases)
    for g, w in zip(bf16[0], one_bf16[0], strict=True):
        rel = abs(g["loss"] - w["loss"]) / abs(w["loss"])
        print(f"  fsdp2-bf16 step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (rel {rel:.2e})")
        failures += rel > BF16_LOSS_REL_TOL
    failures += volume("fsdp2-bf16", bf16[2], 2, 1, True, 1, wide=2)
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: fsdp=2, fsdp=4, dp=2,fsdp=2, fsdp=2 without resharding after forward and fsdp=4 with 2 "
          "microsteps match one rank, and fsdp=2 in bf16; replicas identical every step; volume = closed "
          "form")
    return 0


if __name__ == "__main__":
    sys.exit(main())
