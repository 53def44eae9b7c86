"""Acceptance: bf16 mixed precision tracks f32 training. Runs tessel-gpt with the learning
config (L=4, C=128, NH=4, T=64, B=32, AdamW lr 1e-3, weight decay 0, no warmup, constant
schedule) on tinyshakespeare for 300 steps twice, with --precision f32 and --precision bf16,
from the same initial weights and the same batches (one seed), and requires the validation
losses after step 300 to differ by less than 0.05 nats/byte. Both runs evaluate the same 16
validation batches (drawn from the seed). The bound is the issue's; bf16 rounding of
activations (relative error 2^-9 per stored value) perturbs each step's gradient by well
under its batch-to-batch noise, so a larger gap means a precision bug (e.g. a double
rounding, or bf16 accumulation in a reduction), not bf16 itself.

Usage: check_bf16_learning.py TESSEL_GPT DATA_FILE"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

STEPS = 300
BOUND = 0.05


def final_val_loss(exe, data, precision, tmp):
    log = Path(tmp) / f"log-{precision}.json"
    cmd = [exe, "--data", data, "--layers", "4", "--channels", "128", "--heads", "4",
           "--seq", "64", "--batch", "32", "--steps", str(STEPS), "--lr", "1e-3",
           "--weight-decay", "0", "--warmup", "0", "--schedule", "constant",
           "--eval-batches", "16", "--sample-bytes", "0", "--device", "cpu",
           "--precision", precision, "--log-json", str(log)]
    print("running:", " ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    print(run.stdout[-1500:])
    if run.returncode != 0:
        raise RuntimeError(f"tessel-gpt --precision {precision} exited with {run.returncode}: "
                           f"{run.stderr}")
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    evals = [s for s in steps if "val_loss" in s]
    if not evals or evals[-1]["step"] != STEPS:
        raise RuntimeError(f"no validation loss at step {STEPS} in the {precision} log")
    return evals[-1]["val_loss"], steps[-1]["loss"]


def main():
    exe, data = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            f32, f32_train = final_val_loss(exe, data, "f32", tmp)
            bf16, bf16_train = final_val_loss(exe, data, "bf16", tmp)
        except RuntimeError as e:
            print("FAIL:", e)
            return 1
    gap = abs(bf16 - f32)
    print(f"step {STEPS}: validation loss f32 {f32:.4f}, bf16 {bf16:.4f}, |gap| {gap:.4f} "
          f"(bound {BOUND}); last train loss f32 {f32_train:.4f}, bf16 {bf16_train:.4f}")
    if not gap < BOUND:
        print(f"FAIL: bf16 is {gap:.4f} away from f32 (bound {BOUND})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
