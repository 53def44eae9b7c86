"""A whole training run with every GEMM forced to OpenBLAS and to oneDNN
(TESSEL_GEMM_BACKEND, codegen/GemmTuner.h) gives the same losses within a tolerance.

The two libraries differ only in the order of the f32 k-sums (bf16: the same, then one rounding
to bf16 of an f32 value that may differ in its last bits), so the losses agree closely:
f32 within 2e-3 nats per step, 20x the 1e-4 resolution of the printed loss and far below the
step-to-step change (the first steps move the loss by ~0.1 nats); bf16 within 2e-2 nats, since
a bf16 activation that rounds the other way moves by 2^-8 relative. Usage:
check_gemm_backends.py TESSEL_GPT DATA
"""
import os
import re
import subprocess
import sys

gpt, data = sys.argv[1], sys.argv[2]
ARGS = ["--data", data, "--layers", "2", "--channels", "64", "--heads", "2", "--seq", "32", "--batch", "8",
        "--steps", "8", "--schedule", "constant", "--eval-batches", "1", "--sample-bytes", "0", "--threads", "2"]
TOLERANCE = {"f32": 2e-3, "bf16": 2e-2}


def losses(backend, precision):
    env = dict(os.environ, TESSEL_GEMM_BACKEND=backend)  # forced: the tuning cache is not touched
    out = subprocess.run([gpt, *ARGS, "--precision", precision], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{backend} {precision} failed:\n{out.stdout}\n{out.stderr}")
    found = [float(x) for x in re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+)", out.stdout, re.M)]
    if len(found) != 8:
        sys.exit(f"{backend} {precision}: expected 8 losses, got {found}\n{out.stdout}")
    return found


failed = False
for precision, tol in TOLERANCE.items():
    blas, dnnl = losses("openblas", precision), losses("onednn", precision)
    worst = max(abs(a - b) for a, b in zip(blas, dnnl))
    print(f"{precision}: openblas {blas}\n{precision}: onednn   {dnnl}\n{precision}: largest difference {worst:.2e} "
          f"(tolerance {tol})")
    failed |= worst > tol
sys.exit(1 if failed else 0)
