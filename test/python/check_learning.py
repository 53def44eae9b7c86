"""Acceptance: the GPT learns real text. Runs tessel-gpt with the learning config
(L=4, C=128, NH=4, T=64, B=32, AdamW lr 1e-3, weight decay 0, no warmup, constant schedule)
on tinyshakespeare for 500 steps and requires a validation loss below 2.5 nats/byte at some
evaluation within those steps. For reference, the same config and hyper-parameters in PyTorch
give 2.71 at step 250 and 2.38 at step 500.

Usage: check_learning.py TESSEL_GPT DATA_FILE"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

THRESHOLD = 2.5


def main():
    exe, data = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.json"
        cmd = [exe, "--data", data, "--layers", "4", "--channels", "128", "--heads", "4",
               "--seq", "64", "--batch", "32", "--steps", "500", "--lr", "1e-3",
               "--weight-decay", "0", "--warmup", "0", "--schedule", "constant",
               "--eval-every", "50", "--eval-batches", "16", "--sample-bytes", "200",
               "--log-json", str(log)]
        print("running:", " ".join(cmd), flush=True)
        run = subprocess.run(cmd, capture_output=True, text=True)
        print(run.stdout[-3000:])
        if run.returncode != 0:
            print("FAIL: tessel-gpt exited with", run.returncode, run.stderr)
            return 1
        steps = [json.loads(line) for line in log.read_text().splitlines()]
    evals = [(s["step"], s["val_loss"]) for s in steps if "val_loss" in s]
    print("validation loss by step:", ", ".join(f"{k}: {v:.3f}" for k, v in evals))
    best = min(v for _, v in evals)
    if best >= THRESHOLD:
        print(f"FAIL: best validation loss {best:.3f} is not below {THRESHOLD}")
        return 1
    print(f"PASS: validation loss {best:.3f} < {THRESHOLD} within 500 steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
