"""The unused-parameter exercise (examples/labs/unused.cpp): a classifier that declares a layer
"aux" and never calls it, trained with AdamW (weight decay 0.1) for 31 steps (one epoch).

- Compiling prints, at the line of examples/labs/models.h that makes the layer, a remark for
  "aux.weight" and "aux.bias" that says what happens to them.
- Under --plan dp=2 on 2 ranks nothing hangs (the run ends, --check-schedule finds the ranks'
  collective schedules equal) and the run matches the one-rank run: every step's loss and every
  exported parameter (tolerances as check_ddp_lab.py's, the same model and data with one more
  layer: measured up to 1.2e-7 on the loss and 1.7e-8 on the parameters).
- "aux.weight" and "aux.bias" after training are bitwise their initial values, under one rank,
  dp=2, fsdp=2 (ZeRO-3: parameters, gradients and state sharded), ZeRO-1 (state sharded), dp=2
  with 2 microsteps of gradient accumulation, and in bf16 mixed precision. The initial values are those of one step at --lr 1e-30: with a zero gradient AdamW's
  moments stay zero, and the decay p (1 - lr wd) rounds to p in f32 (1 - 1e-31 is 1), so even
  an optimizer that did update "aux" would leave it bitwise at its initial value in that run
  (the trainer refuses --lr 0). The used layers must have changed in the trained runs, so the
  comparison can tell. With weight decay alone (no gradient) an updated "aux.weight" would
  shrink by lr * wd = 1e-4 per step, which is visible at once.

Usage: check_unused_lab.py MPIEXEC TESSEL_LAB_UNUSED MODELS_H"""
import re
import sys
import tempfile

from labcheck import bitwise_equal, compare_params, compare_steps, train

LOSS_TOL = 2e-6
PARAM_TOL = 1e-6
UNUSED = ("aux.weight", "aux.bias")
REMARK = ("does not affect the loss; its gradient is zero, so it is not all-reduced and the optimizer leaves it "
          "as it is: no update, no weight decay, no optimizer state")


def declaration_line(models_h):
    """The line in models.h where the layer "aux" is made: `aux(this, "aux", ...)`."""
    for number, line in enumerate(open(models_h), start=1):
        if re.search(r'aux\(this, "aux"', line):
            return number
    raise RuntimeError(f"{models_h}: no declaration of the layer 'aux'")


def main():
    mpiexec, exe, models_h = sys.argv[1:4]
    steps = ["--steps", "31"]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            initial = {}
            for classes in ("5", "6"):
                _, initial[classes], _ = train(mpiexec, exe, tmp, f"initial{classes}", 1,
                                               ["--steps", "1", "--lr", "1e-30", "--classes", classes])
            one, one_params, out = train(mpiexec, exe, tmp, "one", 1, steps)
            dp2, dp2_params, _ = train(mpiexec, exe, tmp, "dp2", 2, steps)
            # (run, its parameters, the initial values of its --classes). ZeRO-1 runs with 6
            # classes: its stages 1 and 2 need fsdp to divide every first dimension (head's K).
            trained = [("one rank", one_params, "5"), ("dp2", dp2_params, "5")]
            for name, ranks, classes, extra in [("fsdp2", 2, "5", ["--plan", "fsdp=2"]),
                                                ("zero1", 2, "6", ["--plan", "fsdp=2", "--zero-stage", "1"]),
                                                ("dp2-accum2", 2, "5", ["--grad-accumulation", "2"]),
                                                ("bf16", 1, "5", ["--precision", "bf16"])]:
                _, params, _ = train(mpiexec, exe, tmp, name, ranks, [*steps, "--classes", classes, *extra])
                trained.append((name, params, classes))
        except RuntimeError as e:
            print("FAIL:", e)
            return 1
    line = declaration_line(models_h)
    for name in UNUSED:
        want = re.compile(rf"models\.h:{line}:\d+: remark: parameter '{re.escape(name)}' {re.escape(REMARK)}")
        if not want.search(out):
            print(f"FAIL: no remark for '{name}' at models.h:{line} saying what happens to it in:\n{out[:3000]}")
            failures += 1
    failures += compare_steps("dp2", dp2, one, LOSS_TOL) + compare_params("dp2", dp2_params, one_params, PARAM_TOL)
    for run, params, classes in trained:
        for name in UNUSED:
            same = bitwise_equal(params[name], initial[classes][name])
            print(f"  {run} {name}: {'bitwise its initial value' if same else 'CHANGED'}")
            failures += not same
        if bitwise_equal(params["fc.weight"], initial[classes]["fc.weight"]):
            print(f"  {run}: fc.weight did not change: the run did not train")
            failures += 1
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: the remark at the declaration; dp=2 matches one rank; 'aux' untouched under one rank, dp=2, "
          "fsdp=2, ZeRO-1, gradient accumulation and bf16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
