#!/usr/bin/python3
"""The vocab-parallel cross-entropy of Tessel agrees with PyTorch's cross-entropy.

Promise: for logits with the vocabulary split over 1, 2, 3, 4, 5 and 7 shards (those that do
not divide V pad it at its end and mask the padding with tessel.mask_vocab_padding), the loss and the
logits gradient that Tessel's reference kernels compute from the shards' row statistics
(tessel.row_max, sum_exp, target_logit combined as the all-reduces combine them, then
tessel.cross_entropy_from_stats and the ops' VJPs) equal
torch.nn.functional.cross_entropy of the full logits and its autograd gradient, in float64.

Usage: test_vocab_cross_entropy_vs_torch.py EXPORT_TOOL
EXPORT_TOOL is test/tools/tessel-vocab-cross-entropy-export. Prints the max differences and
exits non-zero on any failure. A missing torch is a failure, not a skip.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import torch
except ImportError as e:  # fail loudly: this test exists to compare against PyTorch
    print(f"FAIL: cannot import {e.name} ({e}); install Debian's python3-torch and "
          "python3-numpy and run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)

# Both sides compute in float64 and group the row sums differently (V <= 48 terms of relative
# error 2^-53 each): ~V eps = 5e-15 of the values. 1e-12 still fails any misplaced term.
TOL = 1e-12


def run(tool, logits, targets, shards, tmp):
    rows, v = logits.shape
    src, dst = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
    with open(src, "wb") as f:
        f.write(np.array([rows, v], dtype="<i8").tobytes())
        f.write(logits.astype("<f8").tobytes())
        f.write(targets.astype("<f8").tobytes())
    subprocess.run([tool, str(shards), str(src), str(dst)], check=True)
    out = np.fromfile(dst, dtype="<f8")
    return out[0], out[1:].reshape(rows, v)


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(20261201)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="tessel-vocab-ce-") as tmp:
        # A spread of 40 puts each row's maximum far from the others, in one shard only.
        for rows, v, spread in ((6, 48, 40.0), (17, 12, 3.0), (1, 24, 80.0)):
            logits = rng.uniform(-spread, spread, size=(rows, v))
            targets = rng.integers(0, v, size=rows)
            z = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
            loss = torch.nn.functional.cross_entropy(z, torch.tensor(targets))
            loss.backward()
            want_loss, want_grad = loss.item(), z.grad.numpy()
            for shards in (1, 2, 3, 4, 5, 7):
                got_loss, got_grad = run(tool, logits, targets, shards, tmp)
                dl = abs(got_loss - want_loss) / max(1.0, abs(want_loss))
                dg = np.max(np.abs(got_grad - want_grad)) / np.max(np.abs(want_grad))
                ok = dl <= TOL and dg <= TOL
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} rows {rows:2d} V {v:2d} shards {shards}: "
                      f"loss {got_loss:.6f} (torch {want_loss:.6f}, rel diff {dl:.1e}), "
                      f"dlogits rel diff {dg:.1e}")
    if failures:
        print(f"FAIL: {failures} comparisons outside {TOL}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
