"""Acceptance: a plan never changes the math, for the Llama. tessel-llama (L=2, C=64, NH=4,
H=192, T=32, global batch B=8, untied LM head, AdamW with weight decay 0.1, global-norm clipping
at 0.5, which is active) trains 5 steps on one rank and under each plan on 2 ranks, on the same
global batches, with --check-replicas and --check-schedule. Compared, as check_tp_training.py
compares the GPT (its launch, compare and clipping check are reused): the loss and the gradient
norm of every step and every parameter after the last step through --export-params (gathered,
under the DSL names).
  NKV=2 (grouped-query attention, groups of two):
    dp=2; tp=2 (key/value heads sharded: rank r holds query heads 2r, 2r+1 and key/value
    head r; the SwiGLU MLP's w1 and w3 column-parallel, w2 row-parallel); fsdp=2 (one unit per
    block); pp=2 (one block per stage, 1f1b, 2 microbatches) -- each vs one rank with NKV=2.
  NKV=1 (multi-query attention): tp=2 with the single key/value head replicated on both ranks
    (tp > NKV; each rank's query heads use it) vs one rank with NKV=1.
Under fsdp and pp every rank's logged norm must equal rank 0's bitwise (check_zero_training.py's
check): clipping scales every shard's or stage's gradients by the same coefficient only if so.

Tolerances (check_tp_training.py's, and why they hold here): every plan computes the one-rank
math on the same rows and only reorders f32 sums (dp and fsdp average the ranks' partial
gradients, tp splits a row-parallel product's k-sum and the replicated key/value projections'
gradient sum over the ranks, pp accumulates microbatch by microbatch, the global norm adds
per-rank squares), each moving a result by a few ulps. Loss 5e-6 absolute (about 8 ulps at
5.5), gradient norm 1e-5 relative, parameters 1e-4 absolute (AdamW divides by sqrt(v), so where
a gradient is near zero an ulp-level change moves an element by up to a fraction of lr = 1e-3
per step). A wrong plan (a missing all-reduce, a head given to the wrong rank, a gradient of a
replicated key/value head not summed over tp) moves the loss by 1e-2 or more by the second step
or the norm at the first.

Usage: check_llama_plans.py MPIEXEC TESSEL_LLAMA DATA_FILE"""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_tp_training import COMMON, LOSS_TOL, NORM_REL_TOL, PARAM_TOL, clipping_active, compare, launch  # noqa: E402
from check_zero_training import norms_on_every_rank  # noqa: E402

LLAMA = ["--channels", "64", "--heads", "4", "--hidden", "192"]


def main():
    mpiexec, exe, data = sys.argv[1:4]
    gqa, mqa = [*LLAMA, "--kv-heads", "2"], [*LLAMA, "--kv-heads", "1"]
    # name, ranks, model flags, plan flags, whether every rank logs the norm (fsdp, pp)
    cases = [("dp2", gqa, ["--plan", "dp=2"], False),
             ("tp2-kv-sharded", gqa, ["--plan", "tp=2"], False),
             ("fsdp2", gqa, ["--plan", "fsdp=2"], True),
             ("pp2", gqa, ["--plan", "pp=2", "--microbatches", "2"], True),
             ("tp2-kv-replicated", mqa, ["--plan", "tp=2"], False)]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            def run(name, ranks, flags):
                return launch(mpiexec, tmp, name, ranks, [exe, "--data", data, *COMMON, *flags])
            one = {"gqa": run("one-gqa", 1, gqa), "mqa": run("one-mqa", 1, mqa)}
            results = [(name, run(name, 2, [*model, *plan]), one["gqa" if model is gqa else "mqa"], by_rank)
                       for name, model, plan, by_rank in cases]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not clipping_active(one["gqa"], one["mqa"]):
        return 1
    failures = 0
    for name, got, want, by_rank in results:
        failures += compare(name, got, want)
        if by_rank:
            failures += norms_on_every_rank(name, got[0], 2)
    if failures:
        print(f"FAIL: {failures} check(s) outside the tolerances (loss {LOSS_TOL}, norm {NORM_REL_TOL}, "
              f"parameters {PARAM_TOL})")
        return 1
    print("PASS: tessel-llama under dp=2, tp=2 (key/value heads sharded), fsdp=2, pp=2 and tp=2 with the one "
          "key/value head replicated matches one rank; replicas identical every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
