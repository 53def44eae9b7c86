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

Units and prefetch: the trainer's fsdp plans gather per FSDP unit, one unit per block
("blocks.*", the default of --fsdp-unit for a transformer); the embeddings wte (tied with the
head) and wpe and the final norm ln_f are in no block and form the root unit. fsdp=4 also
runs with --fsdp-prefetch 0 (every gather synchronous at its unit's first use; the default
is 1: the next unit's gathers start while a unit computes, split into a start and a wait)
and with size-based units, --fsdp-min-unit-params 10000: visiting modules innermost first, a
module holding at least 10000 parameter elements not already in a unit becomes one: each
block's attn.qkv (64 x 192 + 192 = 12480), mlp.fc (16640) and mlp.proj (16448), and wte
(256 x 64 = 16384); attn.proj (4160), the layer norms (128 each) and then each block's
remainder (4416) and both blocks together (8832) stay below it, so they join the root unit
with wpe (2048) and ln_f (128): root 2 x 4416 + 2048 + 128 = 11008 elements. The mean
exposed communication (comm_exposed_s, the seconds blocked in collective waits per step,
steps 2 to 5) is printed for fsdp=4 with and without prefetch (measured, not asserted: 4
ranks share the machine's cores).

Volume: the runtime counts the payload bytes of each kind (the "communication by kind"
line: an all-gather or reduce-scatter counts its gathered, global tensor). The compiler
gathers each unit's parameters together right before the unit's first use in the forward
pass; by default (reshard_after_forward) the gathered copies are freed after the unit's
last forward use and the unit is gathered again, as a whole (its biases too), right before
the backward pass first reads one of its parameters. Every block's weights are read by the
backward pass (the input gradient of each block is needed down to the embeddings), so
every parameter outside the root unit is gathered again; the root unit is gathered once,
kept from the forward to the backward pass: P_bwd = P - ROOT, ROOT = V C + T C + 2 C
(11008 with the size-based units above). With P parameters of 4 bytes and fsdp degree F,
per training step:
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
Prefetch splits a gather into a start and a wait, counted once. The ring's wire bytes per
rank, (N - 1) / N of the gathers and reduce-scatters, are printed beside them.

Mixed precision: fsdp=2 in bf16 against one rank in bf16, losses only. Each rank gathers the
bf16 casts of the f32 master shards (the same values one rank casts), computes its rows'
gradients in bf16 and the reduce-scatter sums them in f32 (the gradient is cast to f32 before
it, so nothing is rounded at every hop); one rank rounds the gradient of all rows at once
instead, so an element may move by a bf16 ulp (2^-8 relative) and the loss, a mean over B T
terms, much less. Bound 1e-4 relative, check_tp_training.py's for bf16 (measured below 2e-5).
Volume in bf16: the parameters are gathered as bf16, 2 bytes an element (the norms stay f32),
and the reduce-scatters carry f32, 4 P.

Bad input: --fsdp-unit decoder.* (no such module) and --fsdp-prefetch -1 must fail with a
one-line error naming the cause, at their flag. ZeRO stages 1 and 2 and the reduce-scatter
modes of gradient accumulation: check_zero_training.py. Uneven degrees such as fsdp=3, and
fsdp x tp: check_fsdp_tp_training.py.

Usage: check_fsdp_training.py MPIEXEC TESSEL_GPT DATA_FILE"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_tp_training import BF16_LOSS_REL_TOL, COMMON, clipping_active, compare, run  # noqa: E402

C64 = ["--channels", "64", "--heads", "4"]
PARAMS = 118528  # L=2, C=64, V=256, T=32: 2 (12 C^2 + 13 C) + V C + T C + 2 C
ROOT = 256 * 64 + 32 * 64 + 2 * 64  # the root unit with blocks.* units: wte, wpe, ln_f
ROOT_MIN_UNIT = 2 * (2 * 64 + 64 * 64 + 64 + 2 * 64) + 32 * 64 + 2 * 64  # with --fsdp-min-unit-params 10000
MIN_UNIT = ["--fsdp-min-unit-params", "10000"]
STEPS, EVALS = 5, 1


def volume(name, out, fsdp, dp, regather, k, wide=4, root=ROOT):
    """The counted bytes per step of each kind against the closed form (docstring); `wide`:
    bytes of a gathered parameter element (2 in bf16); `root`: elements of the root unit."""
    kinds = dict((k, int(b)) for k, b in re.findall(r"(all_reduce|all_gather|reduce_scatter) [0-9.]+/step "
                                                   r"([0-9]+) bytes/step", out.split("communication by kind:")[-1]))
    backward = PARAMS - root
    train = {"all_gather": k * (wide * PARAMS + (wide * backward if regather else 0)) + 4 * fsdp,
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
                     ("fsdp4-accum2", 4, 4, 1, ["--plan", "fsdp=4", "--grad-accumulation", "2"]),
                     ("fsdp4-prefetch0", 4, 4, 1, ["--plan", "fsdp=4", "--fsdp-prefetch", "0"]),
                     ("fsdp4-min-unit", 4, 4, 1, ["--plan", "fsdp=4", *MIN_UNIT])]
            cases = [(name, run(mpiexec, exe, data, tmp, name, ranks, [*C64, *plan]), fsdp, dp,
                      "--no-reshard-after-forward" not in plan, 2 if "--grad-accumulation" in plan else 1,
                      ROOT_MIN_UNIT if "--fsdp-min-unit-params" in plan else ROOT)
                     for name, ranks, fsdp, dp, plan in plans]
            bf = ["--precision", "bf16"]
            one_bf16 = run(mpiexec, exe, data, tmp, "one-bf16", 1, [*C64, *bf])
            bf16 = run(mpiexec, exe, data, tmp, "fsdp2-bf16", 2, [*C64, *bf, "--plan", "fsdp=2"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if not clipping_active(one):
        return 1
    failures = sum(compare(name, got, one) for name, got, *_ in cases)
    failures += sum(volume(name, got[2], fsdp, dp, regather, k, root=root)
                    for name, got, fsdp, dp, regather, k, root in cases)
    for name, got, *_ in cases:
        if name.startswith("fsdp4"):
            exposed = [s["comm_exposed_s"] for s in got[0][1:] if "comm_exposed_s" in s]
            if exposed:
                print(f"  {name}: exposed communication {1e3 * sum(exposed) / len(exposed):.3f} ms/step "
                      f"(mean of steps 2 to {len(exposed) + 1})")
    for g, w in zip(bf16[0], one_bf16[0], strict=True):
        rel = abs(g["loss"] - w["loss"]) / abs(w["loss"])
        print(f"  fsdp2-bf16 step {g['step']}: loss {g['loss']:.7f} vs {w['loss']:.7f} (rel {rel:.2e})")
        failures += rel > BF16_LOSS_REL_TOL
    failures += volume("fsdp2-bf16", bf16[2], 2, 1, True, 1, wide=2)
    failures += refused(mpiexec, exe, data, 2, ["--plan", "fsdp=2", "--fsdp-unit", "decoder.*"],
                        "--fsdp-unit:1:1: error: fully_shard(\"fsdp\"): the unit glob 'decoder.*' matches no "
                        "module of the model that holds parameters")
    failures += refused(mpiexec, exe, data, 2, ["--plan", "fsdp=2", "--fsdp-prefetch", "-1"],
                        "--fsdp-prefetch: -1 is not an integer in [0, 2^20]")
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: fsdp=2, fsdp=4 (prefetch 1 and 0, blocks.* and size-based units), dp=2,fsdp=2, fsdp=2 "
          "without resharding after forward and fsdp=4 with 2 microsteps match one rank, and fsdp=2 in bf16; "
          "replicas identical every step; volume = closed form per unit; a unit glob matching nothing and a "
          "negative prefetch refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
