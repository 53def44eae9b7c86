"""The DDP lab (examples/labs/ddp.cpp) on 2 ranks: `mpirun -np 2 tessel-lab-ddp --plan dp=2`
trains the one-rank run. The same global batches (the distributed sampler, 1000 samples in
batches of 32, reshuffled every epoch) for all 93 steps of three epochs, AdamW lr 1e-3 with
weight decay 0.01: every step's loss and every exported parameter match the one-rank run, and
--check-replicas finds both ranks' parameters and optimizer state bitwise equal after every step.

Tolerances: the two runs differ only in the order of float sums (each rank's batch mean over 16
rows and the average of the two, against one mean over 32; the GEMMs' sums over the batch), a
few ulps per step. Measured on this lab (2 ranks, 1 thread each): loss differences up to 1.2e-7
(at losses 0.03-1.6) and parameter differences up to 4.6e-8 after 93 steps. The bounds, 2e-6 on
the loss and 1e-6 on each parameter element, are ~20x those; a step trained on other rows than
the one-rank run's moves the loss by ~1e-2 (the spread of consecutive steps' losses).

Usage: check_ddp_lab.py MPIEXEC TESSEL_LAB_DDP"""
import sys
import tempfile

from labcheck import compare_params, compare_steps, train

LOSS_TOL = 2e-6
PARAM_TOL = 1e-6


def main():
    mpiexec, exe = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            one, one_params, _ = train(mpiexec, exe, tmp, "one", 1, [])
            dp2, dp2_params, out = train(mpiexec, exe, tmp, "dp2", 2, [])
        except RuntimeError as e:
            print("FAIL:", e)
            return 1
    if len(one) != 93:
        print(f"FAIL: the lab ran {len(one)} steps, not three epochs of 31")
        return 1
    if not one[-1]["loss"] < 0.5 * one[0]["loss"]:
        print(f"FAIL: the classifier did not learn: loss {one[0]['loss']} -> {one[-1]['loss']}")
        return 1
    failures = compare_steps("dp2", dp2, one, LOSS_TOL) + compare_params("dp2", dp2_params, one_params, PARAM_TOL)
    if failures:
        print(f"FAIL: {failures} check(s) outside the tolerances (loss {LOSS_TOL}, parameters {PARAM_TOL})")
        return 1
    print(f"PASS: dp=2 trains the one-rank run: 93 steps (loss {one[0]['loss']:.4f} -> {one[-1]['loss']:.4f}), "
          "every exported parameter; replicas identical every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
