"""Acceptance: a plan never changes the math, for pipeline parallelism. tessel-gpt (L=4, C=64,
NH=4, T=32, V=256, global batch B=8, tied embeddings, AdamW with weight decay 0.1, global-norm
clipping at 0.5, which is active: the norms are above 1) trains 5 steps on one rank and under
each pipeline plan below, on the same global batches, with --check-replicas (every parameter
and optimizer state bitwise equal within its replica group after every step, a tied
parameter across the stages that hold it) and --check-schedule. L=4 so that pp=4 and the
interleaved schedule with 2 virtual stages on pp=2 (4 chunks) have a block per stage.
  pp=2 and pp=4, each with gpipe and 1f1b, for M in {p, 2p, 8} microbatches (pp=4: 2p = 8);
  pp=2 interleaved with --pp-virtual-stages 2; pp=2 zero-bubble (backward split into I and W);
  pp=2,dp=2; pp=2 with --grad-accumulation 2 (2 x M microbatches per optimizer step);
  pp=2,dp=2,tp=2 on 8 ranks; pp=2,fsdp=2; and pp=2 in bf16 against one rank in bf16 (losses).
B=8 is divisible by dp x M x K in every case (M=8: one row per microbatch), so one reference
run per precision serves every case.
Compared, as check_tp_training.py does (its launch, compare and clipping check are reused):
the loss and the gradient norm of every step (rank 0's, which the last stage sends it), and
every parameter after the last step through --export-params (every stage's parameters,
gathered under their DSL names). Also every rank's norm (grad_norm_by_rank) must equal rank
0's bitwise at every step (check_zero_training.py's check): clipping scales every stage's
gradients by the same coefficient only if so.

Tolerances (check_tp_training.py's, and why they hold here): the forward pass of one microbatch
is the one-rank computation on its rows, and the stages exchange activations and gradients whole
(a send copies bytes); the step's loss is the sum of the microbatches' losses, each scaled by
1/M_eff, a reordering of the one-rank mean (an ulp at step 1). The microbatch split reorders f32
sums: a weight's gradient is accumulated microbatch by microbatch (each scaled by 1/M_eff) where
one rank sums all B T rows in one product, dp and fsdp average the ranks' partial means, tp
splits a row-parallel product's k-sum, and the global norm adds the stages' squared norms. Each
moves a gradient element by a few ulps. Loss 5e-6 absolute (about 8 ulps at 5.5); gradient norm
1e-5 relative; parameters 1e-4 absolute: AdamW divides by sqrt(v), so where a gradient is near
zero an ulp-level change moves an element by up to a fraction of lr = 1e-3 per step. A wrong
pipeline is far outside these: a microbatch's gradient dropped changes the first step's norm by
about 3% and the second step's loss by about 1e-2 (measured: one rank on half the rows, norm
3.61 vs 3.74, loss 5.320 vs 5.331); a gradient not scaled by 1/M multiplies the norm by M, which
only the norm shows (the clipped AdamW update does not depend on the gradient's scale); a tied
gradient not summed between its stages, or a stage's squared norm left out of the sum, changes
the norm at step 1.
Mixed precision: bf16 against one rank in bf16, losses only, bound 1e-4 relative
(check_tp_training.py's): a microbatch's gradient is rounded to bf16 before it is accumulated
in f32, where one rank rounds the sum over all rows once; an element may move by a bf16 ulp
(2^-8 relative), and the loss, a mean over B T terms, much less.

Measured worst differences (5 steps): loss 4.8e-7 (1 ulp) in every case; norm
7.5e-7 relative (M=2); parameters 1.3e-5 (M=2) and below 1e-5 elsewhere; bf16 loss 2.3e-5
relative. The 19 runs (2 of them the one-rank references) take 16 s on two cores once the host
compiler's kernel cache holds their kernels, and about 3 minutes when it is empty (each stage's
kernels compiled once).

Usage: check_pp_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_tp_training import BF16_LOSS_REL_TOL, GRAD_CLIP, clipping_active, compare, launch  # noqa: E402
from check_zero_training import norms_on_every_rank  # noqa: E402

STEPS = 5
PP_COMMON = ["--layers", "4", "--channels", "64", "--heads", "4", "--seq", "32", "--batch", "8", "--steps", str(STEPS),
             "--weight-decay", "0.1", "--grad-clip", str(GRAD_CLIP), "--eval-batches", "1", "--sample-bytes", "0",
             "--device", "cpu", "--threads", "1"]


def schedule_cases():
    """(name, ranks, flags) of the gpipe/1f1b grid: pp in {2, 4}, M in {p, 2p, 8} (distinct)."""
    cases = []
    for pp in (2, 4):
        for schedule in ("gpipe", "1f1b"):
            for m in sorted({pp, 2 * pp, 8}):
                cases.append((f"pp{pp}-{schedule}-m{m}", pp,
                              ["--plan", f"pp={pp}", "--pp-schedule", schedule, "--microbatches", str(m)]))
    return cases


def composition_cases():
    """(name, ranks, flags) of the other schedules and the plans composed with pp (f32)."""
    return [("pp2-interleaved-v2", 2, ["--plan", "pp=2", "--pp-schedule", "interleaved", "--pp-virtual-stages", "2",
                                       "--microbatches", "4"]),
            ("pp2-zero-bubble", 2, ["--plan", "pp=2", "--pp-schedule", "zero-bubble", "--microbatches", "4"]),
            ("pp2-dp2", 4, ["--plan", "pp=2,dp=2"]),
            ("pp2-accum2", 2, ["--plan", "pp=2", "--grad-accumulation", "2"]),
            ("pp2-dp2-tp2", 8, ["--plan", "pp=2,dp=2,tp=2"]),
            ("pp2-fsdp2", 4, ["--plan", "pp=2,fsdp=2"])]


def run(mpiexec, exe, data, tmp, name, ranks, extra):
    """check_tp_training.launch with this test's model (L=4); returns (steps, parameters, stdout)."""
    return launch(mpiexec, tmp, name, ranks, [exe, "--data", data, *PP_COMMON, *extra])


def main():
    mpiexec, exe, data = sys.argv[1:4]
    plans = schedule_cases() + composition_cases()
    started = time.monotonic()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one = run(mpiexec, exe, data, tmp, "one", 1, [])
            if len(one[0]) != STEPS:
                print(f"FAIL: the one-rank run logged {len(one[0])} steps, not {STEPS}")
                return 1
            if not clipping_active(one):
                return 1
            for name, ranks, flags in plans:
                got = run(mpiexec, exe, data, tmp, name, ranks, flags)
                failures += compare(name, got, one) + norms_on_every_rank(name, got[0], ranks)
            bf = ["--precision", "bf16"]
            one_bf16 = run(mpiexec, exe, data, tmp, "one-bf16", 1, bf)
            bf16 = run(mpiexec, exe, data, tmp, "pp2-bf16", 2, [*bf, "--plan", "pp=2"])
            for g, w in zip(bf16[0], one_bf16[0], strict=True):
                rel = abs(g["loss"] - w["loss"]) / abs(w["loss"])
                print(f"  pp2-bf16 step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (rel {rel:.2e})")
                failures += rel > BF16_LOSS_REL_TOL
            failures += norms_on_every_rank("pp2-bf16", bf16[0], 2)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    print(f"  {len(plans) + 3} runs in {time.monotonic() - started:.0f} s")
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: " + ", ".join(name for name, *_ in plans) + " and pp2-bf16 match one rank; replicas identical "
          "and the norm the same on every rank at every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
