#!/usr/bin/python3
"""Tessel's Llama agrees with an independent PyTorch Llama: the forward pass, and AdamW training.

Promise, --mode forward: on identical weights and inputs, the logits and the loss that
Tessel's f64 reference interpreter computes for examples/llama/model.h match the Llama of
test/python/llama_reference.py (written from the architecture alone) run by PyTorch in float64
(tight tolerance) and in float32 (looser tolerance); the exported parameters are exactly the
Llama set under Tessel's names with Llama's init (RMS norm weights 1, matrices N(0, 0.02^2),
the residual projections wo and w2 N(0, (0.02/sqrt(2L))^2)); and the loss at init is within
0.1 of ln(256).

Promise, --mode train: starting from the same weights and training on the same batches with
the same hyper-parameters, Tessel's native f32 train step and PyTorch replays
(torch.nn.utils.clip_grad_norm_, torch.optim.AdamW with weight decay on the parameters of
rank >= 2: the embedding, the LM head and every projection, not the RMS norm weights) report
the same loss at every step (1e-4 relative) and gradient norm, and end with the same
parameters, judged as test_gpt_train_vs_torch.py judges the GPT's (its compare_params: Tessel's
distance to a float64 replay against PyTorch float32's own).

Usage: test_llama_vs_torch.py EXPORT_TOOL DATA_FILE --mode forward|train [--layers L
       --channels C --heads NH --kv-heads NKV --hidden H --seq T --batch B --seed S --steps N
       --lr LR --weight-decay WD --grad-clip G]
It runs EXPORT_TOOL (test/tools/tessel-llama-export) into a temporary directory, prints the
measured differences and exits non-zero on any failure. A missing torch is a failure.
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
    from gpt_reference import Checks, U32, U64, read_safetensors
    from llama_reference import LlamaConfig, expected_shapes, llama_forward
    from test_gpt_train_vs_torch import HYPER, compare_params, replay
except ImportError as e:  # fail loudly: this test exists to compare against PyTorch
    print(f"FAIL: cannot import {e.name} ({e}); install Debian's python3-torch and "
          "python3-numpy and run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)


def export(a, cfg, mode):
    """Runs the export tool; returns (tensors, metadata), or None after printing why not."""
    with tempfile.TemporaryDirectory(prefix="tessel-llama-") as tmp:
        out = Path(tmp) / f"{mode}.safetensors"
        cmd = [a.tool, "--mode", mode, "--data", a.data, "--out", str(out), "--seed", str(a.seed),
               "--layers", str(cfg.layers), "--channels", str(cfg.channels), "--heads", str(cfg.heads),
               "--kv-heads", str(cfg.kv_heads), "--hidden", str(cfg.hidden), "--seq", str(cfg.seq),
               "--batch", str(a.batch)]
        if mode == "train":
            cmd += ["--steps", str(a.steps), "--lr", repr(a.lr), "--weight-decay", repr(a.weight_decay),
                    "--grad-clip", repr(a.grad_clip)]
        print("running:", " ".join(cmd))
        run = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            print(f"FAIL: export tool exited with {run.returncode}:\n{run.stderr}", file=sys.stderr)
            return None
        return read_safetensors(out)


def check_common(meta, cfg, B, check):
    """The metadata names the requested config."""
    want = {"layers": cfg.layers, "channels": cfg.channels, "heads": cfg.heads, "kv_heads": cfg.kv_heads,
            "hidden": cfg.hidden, "seq": cfg.seq, "vocab": cfg.vocab, "batch": B}
    check(all(meta.get(k) == str(v) for k, v in want.items()), f"metadata {meta} matches the requested config")


def check_params(group, label, cfg, check):
    """`group` (name -> array) is exactly the Llama set, F32, with the PyTorch layouts."""
    shapes = expected_shapes(cfg)
    missing, extra = sorted(set(shapes) - set(group)), sorted(set(group) - set(shapes))
    check(not missing and not extra, f"{label} names (missing {missing}, unexpected {extra})")
    if missing or extra:
        return False
    bad = [n for n, s in shapes.items() if group[n].shape != s or group[n].dtype != np.float32]
    check(not bad, f"{label} shapes and F32 dtype (wrong: {bad})")
    return not bad


def check_init(params, cfg, check):
    """Llama's init: norm weights 1; matrices N(0, 0.02^2), wo and w2 N(0, (0.02/sqrt(2L))^2).
    The sample std of n >= 3600 normal draws has a standard deviation of sigma / sqrt(2n) <= 1.2% of
    sigma, so 5% is a 4-sigma band."""
    norms = [n for n in params if n.endswith("norm.weight")]
    check(all(np.all(params[n] == 1) for n in norms), f"the {len(norms)} RMS norm weights start at 1")
    residual = 0.02 / math.sqrt(2 * cfg.layers)
    for name, sigma in (("tok_embeddings.weight", 0.02), ("output.weight", 0.02),
                        ("blocks.0.attention.wq.weight", 0.02), ("blocks.0.feed_forward.w1.weight", 0.02),
                        ("blocks.0.attention.wo.weight", residual), ("blocks.0.feed_forward.w2.weight", residual)):
        std = float(params[name].std())
        check(abs(std - sigma) < 0.05 * sigma, f"{name} std {std:.5f} ~ {sigma:.5f}")


def forward_mode(a, cfg, check):
    got = export(a, cfg, "forward")
    if got is None:
        return 1
    tensors, meta = got
    B, T, V = a.batch, cfg.seq, cfg.vocab
    check_common(meta, cfg, B, check)
    params = {k: v for k, v in tensors.items() if k not in ("tokens", "targets", "logits", "loss")}
    if not check_params(params, "parameter", cfg, check):
        return check.exit_code()
    check_init(params, cfg, check)
    tokens, targets = tensors["tokens"], tensors["targets"]
    check(tokens.shape == (B, T) and np.array_equal(tokens[:, 1:], targets[:, :-1]),
          f"tokens/targets [{B}, {T}], targets shifted by one")
    ref_logits, ref_loss = tensors["logits"], float(tensors["loss"].reshape(()))
    check(ref_logits.shape == (B, T, V) and ref_logits.dtype == np.float64, f"logits are F64 [{B}, {T}, {V}]")
    if check.failed():
        return check.exit_code()

    tok = torch.from_numpy(tokens.astype(np.int64))
    tgt = torch.from_numpy(targets.astype(np.int64))
    ref = torch.from_numpy(ref_logits)
    scale = ref.abs().max().item()
    # Tolerance, argued as for the GPT (test_gpt_forward_vs_torch.py): a length-K dot product
    # has relative error <= K u (Higham's gamma_K); each RMS norm re-normalises the round-off
    # before it; so over the 2L+1 norm-separated stages the logits carry at most
    # (2L+1) * K * u * max(1, max|logit|), with K the longest dot product: the SwiGLU down
    # projection (H), a projection (C) or the attention's sum over positions (T). RoPE adds a
    # rotation by cos/sin of angles computed in float64 on both sides (a few ulps).
    kmax = max(cfg.hidden, cfg.channels, T)

    def bound(u):
        return (2 * cfg.layers + 1) * kmax * u * max(1.0, scale)

    # loss = mean(logsumexp(z) - z[target]): 2-Lipschitz in max|dz|, plus the mean's own
    # rounding of B*T terms of size ~ln(V).
    def loss_bound(u):
        return 2 * bound(u) + B * T * u * math.log(V)

    results = {}
    for dtype, u, label in ((torch.float64, U64, "float64"), (torch.float32, U32, "float32")):
        w = {k: torch.from_numpy(v).to(dtype) for k, v in params.items()}
        with torch.no_grad():
            logits, loss = llama_forward(w, tok, tgt, cfg)
        d = (logits.double() - ref).abs().max().item()
        dl = abs(loss.item() - ref_loss)
        results[label] = loss.item()
        print(f"{label}: max |logits diff| = {d:.3e}, |loss diff| = {dl:.3e} (max |logit| = {scale:.3f})")
        check(d <= bound(u), f"{label} logits within {bound(u):.2e} abs")
        check(dl <= loss_bound(u), f"{label} loss within {loss_bound(u):.2e} abs")
    # At init the logits are ~N(0, 0.02^2 C) ~ 0: softmax is near-uniform over the 256 bytes.
    print(f"loss at init: tessel {ref_loss:.6f}, torch f64 {results['float64']:.6f}, ln(256) {math.log(V):.6f}")
    check(abs(ref_loss - math.log(V)) < 0.1, "loss at init within 0.1 of ln(256)")
    return check.exit_code()


def train_mode(a, cfg, check):
    got = export(a, cfg, "train")
    if got is None:
        return 1
    tensors, meta = got
    B, T, N = a.batch, cfg.seq, a.steps
    check_common(meta, cfg, B, check)
    want = {"steps": str(N), "optimizer": "adamw", "schedule": "constant", "warmup": "0"}
    check(all(meta.get(k) == v for k, v in want.items()), f"metadata names {want}")
    try:
        hp = {k: float(meta[k]) for k in HYPER}
    except (KeyError, ValueError) as e:
        check(False, f"metadata holds every hyper-parameter {HYPER} as a number ({e})")
        return 1
    f32 = lambda x: float(np.float32(x))  # noqa: E731 (@train_step takes f32 scalars)
    clip = a.grad_clip if a.grad_clip > 0 else math.inf
    check(hp["lr"] == f32(a.lr) and hp["weight_decay"] == f32(a.weight_decay) and hp["max_grad_norm"] == f32(clip),
          f"hyper-parameters {hp} are the requested ones")
    init = {k[len("init/"):]: v for k, v in tensors.items() if k.startswith("init/")}
    final = {k[len("final/"):]: v for k, v in tensors.items() if k.startswith("final/")}
    if not (check_params(init, "init/", cfg, check) and check_params(final, "final/", cfg, check)):
        return check.exit_code()
    unchanged = [n for n in init if np.array_equal(init[n], final[n])]
    check(not unchanged, f"every parameter changed during training (unchanged: {unchanged})")
    tokens, targets, loss_t, norm_t = (tensors[k] for k in ("tokens", "targets", "loss", "grad_norm"))
    check(tokens.shape == (N, B, T) and loss_t.shape == (N,) and norm_t.shape == (N,),
          f"tokens [{N}, {B}, {T}], loss and grad_norm [{N}]")
    if check.failed():
        return check.exit_code()

    def forward(params, tok, tgt):
        return llama_forward(params, tok, tgt, cfg)
    loss32, norm32, final32, _ = replay(init, tokens, targets, hp, forward, torch.float32)
    loss64, norm64, final64, rel_grad64 = replay(init, tokens, targets, hp, forward, torch.float64)
    print(f"loss: tessel {loss_t[0]:.6f} -> {loss_t[-1]:.6f}, torch f32 {loss32[0]:.6f} -> {loss32[-1]:.6f}")
    print(f"grad norm: tessel {np.array2string(norm_t, precision=4)}, max_grad_norm {hp['max_grad_norm']}")
    # Losses: the acceptance bound, 1e-4 relative, used as is. Step 1 is one f32
    # forward on identical weights (the forward mode's float32 bound is ~1e-4 absolute on a
    # loss of 5.5 and measures far below); later steps add the parameter differences, which
    # compare_params bounds.
    rel = np.abs(loss_t - loss32) / np.abs(loss32)
    print(f"max rel loss diff: tessel vs torch f32 {rel.max():.2e}, torch f32 vs f64 "
          f"{(np.abs(loss32 - loss64) / np.abs(loss64)).max():.2e}")
    check(rel.max() <= 1e-4, "every step's loss within 1e-4 relative of torch float32")
    check(np.all(np.diff(loss_t) != 0), "the loss changes every step")
    # Gradient norms and the round-off of one gradient entry relative to its row's largest:
    # the forward bound (2L+1) * K * u32 (K the longest dot product, as in forward_mode),
    # doubled for the backward chain, as test_gpt_train_vs_torch.py argues for the GPT.
    kmax = max(cfg.hidden, cfg.channels, T)
    tau = 2 * (2 * cfg.layers + 1) * kmax * U32
    nrel = np.abs(norm_t - norm32) / norm32
    print(f"max rel grad-norm diff: tessel vs torch f32 {nrel.max():.2e}")
    check(nrel.max() <= tau, f"every step's gradient norm within {tau:.1e} relative of torch float32")
    print(f"clipping active at {int((norm_t > hp['max_grad_norm']).sum())} of {N} steps")
    compare_params(final, final32, final64, rel_grad64, hp, N, tau, check)
    return check.exit_code()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("data")
    ap.add_argument("--mode", choices=("forward", "train"), required=True)
    for flag, default in (("layers", 2), ("channels", 64), ("heads", 4), ("kv-heads", 2), ("hidden", 192),
                          ("seq", 32), ("batch", 4), ("seed", 1337), ("steps", 10)):
        ap.add_argument("--" + flag, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    a = ap.parse_args()
    cfg = LlamaConfig(layers=a.layers, channels=a.channels, heads=a.heads, kv_heads=a.kv_heads, hidden=a.hidden,
                      seq=a.seq)
    check = Checks()
    return forward_mode(a, cfg, check) if a.mode == "forward" else train_mode(a, cfg, check)


if __name__ == "__main__":
    sys.exit(main())
