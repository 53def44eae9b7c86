"""Acceptance: a plan never changes the math, for ZeRO stages 1 and 2 over the plan's fsdp axis and
for both gradient-accumulation reduce-scatter modes.
tessel-gpt (L=2, C=64, NH=4, T=32, V=256, global batch B=8, tied embeddings, AdamW with weight
decay 0.1, global-norm clipping at 0.5, which is active: the norms are 1.9 to 3.2) trains 5 steps on
one rank and under each plan below, on the same global batches, with --check-replicas (every
parameter bitwise equal on every rank, every optimizer-state block within its replica group) and
--check-schedule:
  fsdp=4 at --zero-stage 1, 2 and 3; dp=2,fsdp=2 (HSDP) at stages 1 and 2;
  fsdp=4 with --grad-accumulation 2 (1 row per rank per microstep) at stage 3 and at stage 2, each
  with --fsdp-reduce-scatter every-microstep and last-microstep.
Every fsdp degree divides every parameter's first dimension (64, 192, 256, 32 = T).
Compared, as check_fsdp_training.py does (check_tp_training.py's run and compare): the loss and
the gradient norm of every step, and every parameter after the last step through --export-params.
Tolerances (check_tp_training.py's, and why): the plans reorder f32 sums only where the batch is
split (each rank's gradient is the mean over its rows, then averaged over the ranks; the global
norm adds per-rank sums of squares of the blocks at stages 2 and 3); stage 1's update of a block is
elementwise the update of the whole parameter. Loss 5e-6 absolute, gradient norm 1e-5 relative,
parameters 1e-4 absolute. A wrong plan (a gradient summed instead of averaged, a block updated at
the wrong rows, a norm counted per rank) moves the loss by 1e-2 or more by the second step.

Gradient norm on every rank: each step's record carries every rank's norm (grad_norm_by_rank,
all-gathered by the training loop); each must equal rank 0's bitwise (clipping scales every
rank's gradients by the same coefficient only if so), and rank 0's equals the one-rank norm
within the tolerance above, at stages 1, 2 and 3.

Volume: the runtime counts the payload bytes of each collective kind (an all-gather or
reduce-scatter counts its gathered, global tensor). With P parameters of 4 bytes (f32), fsdp
degree F, dp degree D, k microsteps, per training step:
  stage 1: all_reduce 4 P (every gradient, whole, averaged over the batch axes, once per step)
           all_gather 4 P (every parameter's updated blocks)
           reduce_scatter 0
  stage 2: reduce_scatter 4 P k (every-microstep) or 4 P (last-microstep or k = 1)
           all_gather 4 P + 4 F (the updated blocks; clipping's per-rank norms of the gradient
           blocks, gathered over fsdp)
           all_reduce 4 P / F under HSDP (the blocks, averaged over dp), else 0
  stage 3: check_fsdp_training.py's form (the trainer's default units, one per block: every
           parameter gathered in forward, and again in backward but for the root unit's R
           elements, wte, wpe and ln_f): all_gather k (4 P + 4 (P - R)) + 4 F, reduce_scatter
           4 P k (every-microstep) or 4 P (last-microstep), all_reduce 4 P / F under HSDP;
and the final evaluation's forward pass moves nothing at stages 1 and 2 (the parameters are
replicated) and gathers every parameter k times at stage 3. The counts are per step over 5 steps
and 1 evaluation, in integer bytes. Required ratio: 1.00 exactly. The ring's wire bytes per rank,
(G - 1) / G of a gather's or reduce-scatter's payload and 2 (G - 1) / G of an all-reduce's over
its group of G ranks, are printed beside them.

Memory: the static bytes of every rank (the run's memory record: parameters, and optimizer
state, which counts every state buffer) against their closed form, exactly: parameters 4 P at
stages 1 and 2 (replicated), 4 P / F at stage 3; state 8 P / F (AdamW's m and v, blocks over
fsdp at every stage; plain data parallelism holds 8 P), plus with k > 1 microsteps the
gradient accumulator: 4 P / F every-microstep (a block) or 4 P last-microstep (the whole local
gradient), the memory the reduce-scatter mode trades for communication.

Bad input: an fsdp degree that does not divide a first dimension (fsdp=3: the vocabulary's 256
rows) at stage 2 must fail with a one-line error naming the parameter's rows and the degree.

Usage: check_zero_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_fsdp_training import C64, EVALS, PARAMS, ROOT, STEPS, refused  # noqa: E402
from check_tp_training import clipping_active, compare, run  # noqa: E402


def closed_form(stage, fsdp, dp, k, last):
    """The payload bytes per training step and per evaluation of each kind (docstring)."""
    scatters = 1 if last else k
    if stage == 1:
        train = {"all_reduce": 4 * PARAMS, "all_gather": 4 * PARAMS, "reduce_scatter": 0}
        evaluation = {"all_reduce": 0, "all_gather": 0, "reduce_scatter": 0}
    elif stage == 2:
        train = {"all_reduce": 4 * PARAMS // fsdp if dp > 1 else 0, "all_gather": 4 * PARAMS + 4 * fsdp,
                 "reduce_scatter": 4 * PARAMS * scatters}
        evaluation = {"all_reduce": 0, "all_gather": 0, "reduce_scatter": 0}
    else:
        train = {"all_reduce": 4 * PARAMS // fsdp if dp > 1 else 0,
                 "all_gather": k * (4 * PARAMS + 4 * (PARAMS - ROOT)) + 4 * fsdp,
                 "reduce_scatter": 4 * PARAMS * scatters}
        evaluation = {"all_reduce": 0, "all_gather": k * 4 * PARAMS, "reduce_scatter": 0}
    return {kind: (STEPS * train[kind] + EVALS * evaluation[kind]) // STEPS for kind in train}


def volume(name, out, stage, fsdp, dp, k, last):
    """Checks the counted bytes per step of each kind against closed_form; prints the wire bytes."""
    counted = dict((kind, int(b)) for kind, b in re.findall(
        r"(all_reduce|all_gather|reduce_scatter) [0-9.]+/step ([0-9]+) bytes/step",
        out.split("communication by kind:")[-1]))
    # The all-reduce's group: every batch axis at stage 1, dp alone at stages 2 and 3.
    groups = {"all_gather": fsdp, "reduce_scatter": fsdp, "all_reduce": fsdp * dp if stage == 1 else dp}
    bad = 0
    for kind, want in closed_form(stage, fsdp, dp, k, last).items():
        got, g = counted.get(kind, 0), groups[kind]
        ratio = got / want if want else (1.0 if got == 0 else float("inf"))
        wire = got * (2 if kind == "all_reduce" else 1) * (g - 1) // g
        print(f"  {name}: {kind} {got} bytes/step, closed form {want} (ratio {ratio:.2f}), "
              f"ring wire bytes per rank {wire}")
        bad += got != want
    return bad


def static_memory(name, steps, stage, fsdp, k, last):
    """Checks every rank's parameter and state bytes against their closed form (docstring)."""
    want = {"parameters": 4 * PARAMS // fsdp if stage == 3 else 4 * PARAMS,
            "optimizer_state": 8 * PARAMS // fsdp + (0 if k == 1 else 4 * PARAMS if last else 4 * PARAMS // fsdp)}
    ranks = steps[0]["run"]["memory"]
    bad = sum(r[kind] != want[kind] for r in ranks for kind in want)
    got = {kind: sorted({r[kind] for r in ranks}) for kind in want}
    print(f"  {name}: per rank parameters {got['parameters']} bytes (closed form {want['parameters']}), "
          f"state {got['optimizer_state']} bytes (closed form {want['optimizer_state']})")
    return bad


def norms_on_every_rank(name, steps, ranks):
    """Every rank's logged norm equals rank 0's, bitwise, at every step."""
    bad = 0
    for s in steps:
        by_rank = s.get("grad_norm_by_rank")
        if not isinstance(by_rank, list) or len(by_rank) != ranks:
            print(f"  {name} step {s['step']}: no grad_norm_by_rank of {ranks} ranks in the record")
            bad += 1
            continue
        differ = [r for r, n in enumerate(by_rank) if n != s["grad_norm"]]
        if differ:
            print(f"  {name} step {s['step']}: ranks {differ} logged norms {by_rank}, rank 0 {s['grad_norm']}")
        bad += bool(differ)
    print(f"  {name}: the gradient norm is bitwise the same on all {ranks} ranks at every step"
          if not bad else f"  {name}: {bad} step(s) with differing per-rank norms")
    return bad


def main():
    mpiexec, exe, data = sys.argv[1:4]
    # name, ranks, stage, fsdp, dp, microsteps, last-microstep, flags
    plans = [("fsdp4-zero1", 4, 1, 4, 1, 1, False, ["--plan", "fsdp=4", "--zero-stage", "1"]),
             ("fsdp4-zero2", 4, 2, 4, 1, 1, False, ["--plan", "fsdp=4", "--zero-stage", "2"]),
             ("fsdp4-zero3", 4, 3, 4, 1, 1, False, ["--plan", "fsdp=4", "--zero-stage", "3"]),
             ("dp2-fsdp2-zero1", 4, 1, 2, 2, 1, False, ["--plan", "dp=2,fsdp=2", "--zero-stage", "1"]),
             ("dp2-fsdp2-zero2", 4, 2, 2, 2, 1, False, ["--plan", "dp=2,fsdp=2", "--zero-stage", "2"])]
    for stage in (3, 2):
        for mode in ("every-microstep", "last-microstep"):
            plans.append((f"fsdp4-zero{stage}-accum2-{mode}", 4, stage, 4, 1, 2, mode == "last-microstep",
                          ["--plan", "fsdp=4", "--zero-stage", str(stage), "--grad-accumulation", "2",
                           "--fsdp-reduce-scatter", mode]))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one = run(mpiexec, exe, data, tmp, "one", 1, C64)
            cases = [(name, run(mpiexec, exe, data, tmp, name, ranks, [*C64, *flags]), ranks, stage, fsdp, dp, k,
                      last) for name, ranks, stage, fsdp, dp, k, last, flags in plans]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not clipping_active(one):
        return 1
    failures = 0
    for name, got, ranks, stage, fsdp, dp, k, last in cases:
        failures += compare(name, got, one)
        failures += norms_on_every_rank(name, got[0], ranks)
        failures += volume(name, got[2], stage, fsdp, dp, k, last)
        failures += static_memory(name, got[0], stage, fsdp, k, last)
    failures += refused(mpiexec, exe, data, 3, ["--plan", "fsdp=3", "--batch", "6", "--zero-stage", "2"],
                        "dimension 0 has 256 rows, which fsdp=3 does not divide")
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: ZeRO stages 1, 2 and 3 over fsdp=4, HSDP at stages 1 and 2, and 2 microsteps at stages 2 and 3 "
          "with either reduce-scatter mode match one rank; the gradient norm is the same on every rank; volume and static memory = "
          "closed form; an uneven first dimension refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
