"""Acceptance: a plan never changes the math, for fully sharded data parallelism composed with
tensor parallelism (two axes on one dimension), for fsdp degrees that do not divide some
parameter's first dimension (padded shards), and for fsdp=4 in bf16.

tessel-gpt (L=2, C=64, NH=4, T=32, V=256, tied embeddings, AdamW with weight decay 0.1,
global-norm clipping at 0.5, which is active) trains 5 steps on one rank and under each plan
on the same global batch, with --check-replicas (which also requires every padding element
to be zero on every rank after every step) and --check-schedule:
  B=8:  fsdp=2,tp=2 (4 ranks: each tensor-parallel block stored split again over fsdp, tp
        major and fsdp minor; the fused q, k, v weight per block);
  B=6:  fsdp=3 (V=256 -> 3 x 86 rows, T=32 -> 3 x 11, C=64 -> 3 x 22: padded at the end, the
        padding trimmed off by the gather and zero in the gradient's reduce-scatter), and
        dp=2,fsdp=3 (HSDP over padded shards: the dp all-reduce averages the padded shards);
  B=8:  fsdp=4 in bf16 against one rank in bf16.
Compared as check_tp_training.py does (its run and compare are reused): loss and gradient
norm of every step, and every parameter after the last step through --export-params
(gathered, under the DSL names, the padding dropped), with its tolerances and their
reasons (f32 sums reordered where the batch or a row-parallel k-sum is split).

bf16 tolerance, derived: master weights are f32 on both sides and every rank casts the same
master values to bf16, so step 1's forward pass computes each row exactly as one rank does;
the plans differ only in where gradients are rounded to bf16. One rank rounds the weight
gradient of all B T rows once (relative error 2^-9, half an ulp); fsdp=4 rounds each rank's
partial sum over B T / 4 rows (each 2^-9 of its own magnitude) and adds the four in f32, so
an element's gradient differs by at most about 2 x 2^-9 = 2^-8 relative (a sum of same-signed
partials; more only for a near-cancelling sum, whose element is near zero). Hence:
  - gradient norm: a sum of squares over all elements, each moved by at most 2^-8 relative,
    moves by at most 2^-8 = 3.9e-3 relative (the worst case, every element the same way);
  - loss: AdamW normalises each element's update (m / sqrt(v)), so a relative gradient
    change of 2^-8 moves an update by at most lr 2^-8 = 3.9e-6 per step; over the 4 updates
    that precede step 5, |d theta| <= 1.6e-5 per element (the near-zero elements whose sign
    can flip move by up to 2 lr, but their gradient, and so their effect on the loss, is
    near zero). The loss moves by about sum_i g_i d theta_i, whose terms have independent
    signs: about |g|_2 1.6e-5 = 3.2 x 1.6e-5 = 5e-5 absolute, 1e-5 relative at a loss of
    5.5; the bound is 1e-4 relative (check_tp_training.py's BF16_LOSS_REL_TOL), a factor 10
    over that estimate, while a wrong plan (a shard's gradient lost or counted twice) moves
    the loss by 1e-2 or more;
  - parameters: an element whose gradient is near zero can get updates of opposite signs in
    the two runs, each at most about lr (Adam's bias-corrected m / sqrt(v) is at most about 1
    over these steps), so 2 lr = 2e-3 per step where that happens; such flips need a
    gradient within a bf16 ulp of zero and are rare (measured: one, 1.96e-3), so the bound
    is 5 lr = 5e-3, flips at two and a half of the five steps; elsewhere the elements differ
    by the 2^-8-relative drift above (1.6e-5).
Measured (fsdp=4, bf16): loss up to 1.3e-5 relative, gradient norm up to 3.6e-4 relative,
parameters up to 1.96e-3.

Volume (the runtime's "communication by kind" counts, per step over 5 steps and 1
evaluation, in integer bytes; ratio to the closed form 1.00 exactly). Let F be the fsdp
degree and, per parameter p, c_p its tensor-parallel part (n_p / tp where tp splits it:
column-parallel qkv and fc weights and biases, the row-parallel projections' weights and the
vocabulary-parallel embedding; n_p otherwise) whose first dimension d_p (d_p / tp for a
dimension 0 split over tp) is stored as F shards of ceil(d_p / F) rows: the shard-moving
collectives carry the padded part s_p = F ceil(d_p / F) c_p / d_p (s_p = c_p when F
divides). With S = sum of s_p, S_bwd the same over the parameters gathered again in the
backward pass (the trainer's default units, one per block: every parameter of a block; the
root unit, wte, wpe and ln_f, is gathered once: check_fsdp_training.py's P - ROOT) and w the
bytes of a gathered element (4, or 2 in bf16):
  all_gather      w S (forward) + w S_bwd (backward) + 4 (F + F tp) norms when tp > 1, 4 F
                  without (global-norm clipping's per-rank norms, gathered per group of
                  split axes: [fsdp] and [fsdp, tp]), and w S for the evaluation;
  reduce_scatter  4 S (each gradient once, f32 on the wire);
  all_reduce      4 S / F under HSDP (the shards averaged over dp), plus with tp the
                  Megatron all-reduces of check_tp_training.py on each fsdp rank's rows
                  (B / F of them): ((4 L + 2) (B / F) T C + 3 (B / F) T) f32 per training
                  step and ((2 L + 1) (B / F) T C + 3 (B / F) T) f32 for the evaluation.
The ring's wire bytes per rank, (F - 1) / F of the gathers and reduce-scatters (for fsdp=2,
tp=2: 3 (F - 1) / F of the tensor-parallel parameter bytes S, as for FSDP alone), are
printed beside them.

Bad input: fsdp=3,tp=2 needs tp x fsdp = 6 to divide the vocabulary's 256 rows (a dimension
split over two axes is not padded) and must fail with a one-line error naming the cause.

Usage: check_fsdp_tp_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_fsdp_training import refused  # noqa: E402
from check_tp_training import BF16_LOSS_REL_TOL, clipping_active, compare, run  # noqa: E402

C64 = ["--channels", "64", "--heads", "4"]
L, C, T, STEPS, EVALS = 2, 64, 32, 5, 1
BF16_NORM_REL_TOL = 2.0 ** -8  # the docstring's derivation
BF16_PARAM_TOL = 5e-3          # 5 lr (docstring)
TP_SPLIT = re.compile(r"(attn\.qkv\.|mlp\.fc\.|attn\.proj\.weight|mlp\.proj\.weight|^wte\.weight)")
DIM0_OVER_TP = re.compile(r"(attn\.qkv\.|mlp\.fc\.|^wte\.weight)")  # column-parallel and the vocabulary


def shard_parts(shapes, fsdp, tp):
    """(S, S_bwd): elements of the padded tensor-parallel parts (docstring), from the exported
    parameter shapes of the one-rank run."""
    s = s_bwd = 0
    for name, shape in shapes.items():
        n = math.prod(shape)
        split = tp if tp > 1 and TP_SPLIT.search(name) else 1
        d = shape[0] // (tp if split > 1 and DIM0_OVER_TP.search(name) else 1)
        part = fsdp * -(-d // fsdp) * (n // split) // d
        s += part
        if name.startswith("blocks."):  # not in the root unit: gathered again in backward
            s_bwd += part
    return s, s_bwd


def volume(name, out, shapes, fsdp, tp=1, dp=1, batch=8, wide=4):
    kinds = dict((k, int(b)) for k, b in re.findall(r"(all_reduce|all_gather|reduce_scatter) [0-9.]+/step "
                                                   r"([0-9]+) bytes/step", out.split("communication by kind:")[-1]))
    s, s_bwd = shard_parts(shapes, fsdp, tp)
    norms = fsdp + fsdp * tp if tp > 1 else fsdp
    rows = batch // (fsdp * dp)
    tp_train = ((4 * L + 2) * rows * T * C + 3 * rows * T) * 4 if tp > 1 else 0
    tp_eval = ((2 * L + 1) * rows * T * C + 3 * rows * T) * 4 if tp > 1 else 0
    train = {"all_gather": wide * (s + s_bwd) + 4 * norms, "reduce_scatter": 4 * s,
             "all_reduce": (4 * s // fsdp if dp > 1 else 0) + tp_train}
    evaluation = {"all_gather": wide * s, "reduce_scatter": 0, "all_reduce": tp_eval}
    bad = 0
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        want = (STEPS * train[kind] + EVALS * evaluation[kind]) // STEPS
        got = kinds.get(kind, 0)
        ratio = got / want if want else (1.0 if got == 0 else float("inf"))
        wire = got * (fsdp - 1) // fsdp if kind != "all_reduce" else None
        print(f"  {name}: {kind} {got} bytes/step, closed form {want} (ratio {ratio:.2f})"
              + (f", ring wire bytes per rank {wire}" if wire is not None else ""))
        bad += got != want
    return bad


def compare_bf16(name, got, want):
    (steps, params, _), (steps1, params1, _) = got, want
    bad = 0
    for g, w in zip(steps, steps1, strict=True):
        dl = abs(g["loss"] - w["loss"]) / abs(w["loss"])
        dn = abs(g["grad_norm"] - w["grad_norm"]) / abs(w["grad_norm"])
        print(f"  {name} step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (rel {dl:.2e}), "
              f"norm rel {dn:.2e}")
        bad += not (dl <= BF16_LOSS_REL_TOL and dn <= BF16_NORM_REL_TOL)
    worst = max(max(abs(a - b) for a, b in zip(params1[k][1], params[k][1])) for k in params1)
    print(f"  {name}: {len(params)} parameters, worst |d| {worst:.2e} (bound {BF16_PARAM_TOL})")
    return bad + (worst > BF16_PARAM_TOL) + (sorted(params) != sorted(params1))


def main():
    mpiexec, exe, data = sys.argv[1:4]
    b6 = ["--batch", "6"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one = run(mpiexec, exe, data, tmp, "one", 1, C64)
            fsdp_tp = run(mpiexec, exe, data, tmp, "fsdp2-tp2", 4, [*C64, "--plan", "fsdp=2,tp=2"])
            one6 = run(mpiexec, exe, data, tmp, "one-b6", 1, [*C64, *b6])
            fsdp3 = run(mpiexec, exe, data, tmp, "fsdp3", 3, [*C64, *b6, "--plan", "fsdp=3"])
            hsdp3 = run(mpiexec, exe, data, tmp, "dp2-fsdp3", 6, [*C64, *b6, "--plan", "dp=2,fsdp=3"])
            bf = ["--precision", "bf16"]
            one_bf16 = run(mpiexec, exe, data, tmp, "one-bf16", 1, [*C64, *bf])
            fsdp4_bf16 = run(mpiexec, exe, data, tmp, "fsdp4-bf16", 4, [*C64, *bf, "--plan", "fsdp=4"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not clipping_active(one, one6):
        return 1
    shapes = {k: v[0] for k, v in one[1].items()}
    failures = compare("fsdp2-tp2", fsdp_tp, one) + compare("fsdp3", fsdp3, one6) + compare("dp2-fsdp3", hsdp3, one6)
    failures += compare_bf16("fsdp4-bf16", fsdp4_bf16, one_bf16)
    failures += volume("fsdp2-tp2", fsdp_tp[2], shapes, 2, tp=2)
    failures += volume("fsdp3", fsdp3[2], shapes, 3, batch=6)
    failures += volume("dp2-fsdp3", hsdp3[2], shapes, 3, dp=2, batch=6)
    failures += volume("fsdp4-bf16", fsdp4_bf16[2], shapes, 4, wide=2)
    failures += refused(mpiexec, exe, data, 6, ["--plan", "fsdp=3,tp=2", "--batch", "6"],
                        "as well needs 6 to divide it")
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: fsdp=2,tp=2, fsdp=3 and dp=2,fsdp=3 (padded shards) match one rank, fsdp=4 in bf16 within "
          "the derived bounds; replicas identical and padding zero every step; volume = closed form; "
          "fsdp=3,tp=2 refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
