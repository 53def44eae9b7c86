#!/usr/bin/python3
"""The GPT forward pass of Tessel agrees with an independent PyTorch implementation.

Promise: on identical weights and inputs, the logits and the loss that Tessel's f64 reference
interpreter computes for examples/gpt/model.h match a GPT-2 written from the architecture
alone (test/python/gpt_reference.py), run by PyTorch in float64 (tight tolerance) and in
float32 (looser tolerance); and the loss of the freshly initialised model (weights
N(0, 0.02^2), vocab 256) on a validation batch of real text is within 0.1 of
ln(256) = 5.545 nats.

Usage: test_gpt_forward_vs_torch.py EXPORT_TOOL DATA_FILE [--layers L --channels C
       --heads NH --seq T --batch B --seed S]
It runs EXPORT_TOOL (test/tools/tessel-gpt-forward-export) into a temporary directory,
reads the safetensors file it writes, prints the max differences and exits non-zero on any
failure. A missing torch is a failure, not a skip.
"""
import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import torch
    from gpt_reference import Checks, U32, U64, expected_shapes, gpt_forward, read_safetensors
except ImportError as e:  # fail loudly: this test exists to compare against PyTorch
    print(f"FAIL: cannot import {e.name} ({e}); install Debian's python3-torch and "
          "python3-numpy and run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)


# ---- the test -------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("data")
    for flag, default in (("layers", 2), ("channels", 64), ("heads", 4), ("seq", 32),
                          ("batch", 4), ("seed", 1337)):
        ap.add_argument("--" + flag, type=int, default=default)
    a = ap.parse_args()
    L, C, NH, T, B, V = a.layers, a.channels, a.heads, a.seq, a.batch, 256
    check = Checks()

    with tempfile.TemporaryDirectory(prefix="tessel-gpt-fwd-") as tmp:
        out = Path(tmp) / "forward.safetensors"
        cmd = [a.tool, "--data", a.data, "--out", str(out), "--seed", str(a.seed),
               "--layers", str(L), "--channels", str(C), "--heads", str(NH), "--seq", str(T),
               "--batch", str(B)]
        print("running:", " ".join(cmd))
        run = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            print(f"FAIL: export tool exited with {run.returncode}:\n{run.stderr}", file=sys.stderr)
            return 1
        tensors, meta = read_safetensors(out)

    want_meta = {"layers": L, "channels": C, "heads": NH, "seq": T, "vocab": V, "batch": B}
    check(all(meta.get(k) == str(v) for k, v in want_meta.items()),
          f"metadata {meta} matches the requested config")

    # Parameters: exactly the GPT-2 set, with the PyTorch layouts, stored as F32.
    shapes = expected_shapes(L, C, T, V)
    params = {k: v for k, v in tensors.items() if k not in ("tokens", "targets", "logits", "loss")}
    missing, extra = sorted(set(shapes) - set(params)), sorted(set(params) - set(shapes))
    check(not missing and not extra, f"parameter names (missing {missing}, unexpected {extra})")
    if check.failed():
        return 1
    bad = [n for n, s in shapes.items() if params[n].shape != s or params[n].dtype != np.float32]
    check(not bad, f"parameter shapes and F32 dtype (wrong: {bad})")
    for name in ("ln_f", "blocks.0.ln1"):  # init sanity: LayerNorm starts as identity
        check(np.all(params[name + ".weight"] == 1) and np.all(params[name + ".bias"] == 0),
              f"{name} initialised to weight 1, bias 0")
    std = float(params["wte.weight"].std())
    check(abs(std - 0.02) < 0.002, f"wte.weight std {std:.5f} ~ 0.02")

    # Inputs: a validation batch of the real text, with targets shifted by one byte.
    tokens, targets = tensors["tokens"], tensors["targets"]
    check(tokens.shape == (B, T) and targets.shape == (B, T) and tokens.dtype == np.int32,
          f"tokens/targets are I32 [{B}, {T}]")
    check(np.array_equal(tokens[:, 1:], targets[:, :-1]), "targets are tokens shifted by one")
    text = Path(a.data).read_bytes()
    val = text[math.floor(len(text) * (1.0 - 0.1)):]  # TextDataset: last 10% is validation
    windows = [bytes(tokens[b].astype(np.uint8)) + bytes([targets[b, -1]]) for b in range(B)]
    check(all(w in val for w in windows), "every window is a substring of the validation split")

    ref_logits, ref_loss = tensors["logits"], float(tensors["loss"].reshape(()))
    check(ref_logits.shape == (B, T, V) and ref_logits.dtype == np.float64,
          f"logits are F64 [{B}, {T}, {V}]")
    if check.failed():
        return 1

    tok = torch.from_numpy(tokens.astype(np.int64))
    tgt = torch.from_numpy(targets.astype(np.int64))
    ref = torch.from_numpy(ref_logits)
    scale = ref.abs().max().item()
    kmax = 4 * C  # the longest dot product (mlp.proj)
    stages = 2 * L + 1  # LayerNorm-renormalised stages between embedding and logits

    # Tolerance. A length-K dot product of unit roundoff u has relative error <= K*u
    # (Higham's gamma_K, worst case; typically sqrt(K)*u). Round-off is re-normalised (not
    # amplified) by each LayerNorm, exp/tanh/sqrt in libm add <= 1 ulp, so over the 2L+1
    # LayerNorm-separated stages the logits carry at most (2L+1) * 4C * u * max(1, max|logit|).
    def bound(u):
        return stages * kmax * u * max(1.0, scale)

    # float64. Both sides are f64 on identical (f32-representable) inputs and implement the
    # same formulas; they differ only in summation order (BLAS vs plain loops) and libm.
    # L=2, C=64: bound 1.5e-13, measured 5.6e-16. An f32 rounding slipped into either side
    # shows up at ~1e-7 (the float32 run below). Deliberate mistakes in this file, measured
    # on L=2, C=64: erf instead of tanh GELU 1.3e-5; eps 1e-6 4.7e-3; interleaved heads
    # 6.3e-3; qkv order [k|q|v] 7.6e-3; no causal mask 0.32. This check is the one that
    # catches them; the float32 one below checks precision only (its bound is above 1.3e-5).
    TOL64 = bound(U64)
    w64 = {k: torch.from_numpy(v.astype(np.float64)) for k, v in params.items()}
    with torch.no_grad():
        logits64, loss64 = gpt_forward(w64, tok, tgt, L, NH)
    d64 = (logits64 - ref).abs().max().item()
    dl64 = abs(loss64.item() - ref_loss)
    print(f"float64: max |logits diff| = {d64:.3e}, |loss diff| = {dl64:.3e} "
          f"(max |logit| = {scale:.3f})")
    check(d64 <= TOL64, f"float64 logits within {TOL64:.2e} abs")
    # loss = mean(logsumexp(z) - z[target]): each term is 2-Lipschitz in max|dz|, and the
    # mean of B*T terms of size ~ln(V) adds B*T*u*ln(V).
    TOL64_LOSS = 2 * TOL64 + B * T * U64 * math.log(V)
    check(dl64 <= TOL64_LOSS, f"float64 loss within {TOL64_LOSS:.2e} abs")

    # float32: the same bound with u32 = 6e-8; for L=2, C=64 that is 8.1e-5 on the logits.
    # Measured: 3.5e-7, typical of sqrt(K)*u32 round-off.
    TOL32 = bound(U32)
    TOL32_LOSS = 2 * TOL32 + B * T * U32 * math.log(V)
    w32 = {k: torch.from_numpy(v) for k, v in params.items()}
    with torch.no_grad():
        logits32, loss32 = gpt_forward(w32, tok, tgt, L, NH)
    d32 = (logits32.double() - ref).abs().max().item()
    dl32 = abs(loss32.item() - ref_loss)
    print(f"float32: max |logits diff| = {d32:.3e}, |loss diff| = {dl32:.3e}")
    check(d32 <= TOL32, f"float32 logits within {TOL32:.2e} abs")
    check(dl32 <= TOL32_LOSS, f"float32 loss within {TOL32_LOSS:.2e} abs")

    # At init the logits are ~N(0, 0.02^2 * C) ~ 0, so softmax is near-uniform over 256 bytes.
    print(f"loss at init: tessel {ref_loss:.6f}, torch f64 {loss64.item():.6f}, "
          f"ln(256) = {math.log(V):.6f}")
    check(abs(ref_loss - math.log(V)) < 0.1, "loss at init within 0.1 of ln(256)")

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
