#!/usr/bin/python3
"""Tessel's native AdamW training of the GPT agrees with torch.optim.AdamW, step by step.

Promise: starting from the same weights (Tessel's initialisation, exported) and training on
the same batches of tinyshakespeare bytes with the same hyper-parameters, Tessel's native f32
train step (generated kernels, examples/gpt/model.h) and a PyTorch float32 replay
(gpt_reference.gpt_forward, torch.nn.utils.clip_grad_norm_, torch.optim.AdamW with weight
decay on the parameters of rank >= 2 only) report the same loss at every step (1e-4
relative), the same gradient norm, and end with the same parameters, within the tolerances
argued at each check below.

A float64 replay of the same run is the yardstick for the parameters: two correct float32
implementations differ from each other about as much as each differs from exact arithmetic,
so Tessel's distance to the float64 run is required to be of the size of PyTorch's own.

Usage: test_gpt_train_vs_torch.py EXPORT_TOOL DATA_FILE [--layers L --channels C --heads NH
       --seq T --batch B --seed S --steps N --lr LR --weight-decay WD --grad-clip G
       --expect-clipping]
It runs EXPORT_TOOL (test/tools/tessel-gpt-train-export) into a temporary directory, replays
the run, prints the measured differences and exits non-zero on any failure. With
--expect-clipping, the gradient norm must exceed --grad-clip at every step (so the clipped
path is what is compared). A missing torch is a failure, not a skip.
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
    from gpt_reference import Checks, U32, expected_shapes, gpt_forward, read_safetensors
except ImportError as e:  # fail loudly: this test exists to compare against PyTorch
    print(f"FAIL: cannot import {e.name} ({e}); install Debian's python3-torch and "
          "python3-numpy and run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)

V = 256
HYPER = ("lr", "beta1", "beta2", "eps", "weight_decay", "max_grad_norm")


def replay(init, tokens, targets, hp, forward, dtype):
    """Trains from `init` (name -> np.float32 array) on tokens/targets [steps, B, T] with
    torch.optim.AdamW in `dtype`; forward(params, tokens, targets) -> (logits, loss) is the
    model. Returns (losses, grad norms before clipping, final params as
    np.float64, per-element min over steps of |g| / max |g| of its row)."""
    params = {n: torch.tensor(v, dtype=dtype, requires_grad=True) for n, v in init.items()}
    decay = [p for p in params.values() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in params.values() if p.dim() < 2]  # biases and LayerNorm gains
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    losses, norms = [], []
    rel_grad = {n: torch.full_like(p, math.inf) for n, p in params.items()}
    for step in range(tokens.shape[0]):
        opt.zero_grad(set_to_none=True)
        tok = torch.from_numpy(tokens[step].astype(np.int64))
        tgt = torch.from_numpy(targets[step].astype(np.int64))
        _, loss = forward(params, tok, tgt)
        loss.backward()
        # An infinite max_norm gives coefficient min(1, inf) = 1: the norm without clipping.
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), hp["max_grad_norm"])
        with torch.no_grad():
            for n, p in params.items():
                g = p.grad.abs()  # scale: the largest entry of its row (of the tensor if 1-D)
                torch.minimum(rel_grad[n], g / g.amax(dim=-1, keepdim=True), out=rel_grad[n])
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
    final = {n: p.detach().double().numpy() for n, p in params.items()}
    return (np.array(losses), np.array(norms), final,
            {n: g.double().numpy() for n, g in rel_grad.items()})


def adam_ratio_bound(beta1, beta2, steps):
    """Max over t <= steps of |m_hat_t| / sqrt(v_hat_t) for ANY gradient sequence.
    Cauchy-Schwarz on m_t = (1-b1) sum_k b1^k g_{t-k} against v_t = (1-b2) sum_k b2^k g_{t-k}^2
    gives |m_t| <= (1-b1)/sqrt(1-b2) * sqrt(sum_{k<t} (b1^2/b2)^k) * sqrt(v_t)."""
    worst = 0.0
    for t in range(1, steps + 1):
        s = sum((beta1 * beta1 / beta2) ** k for k in range(t))
        r = (1 - beta1) / (1 - beta1 ** t) * math.sqrt((1 - beta2 ** t) / (1 - beta2) * s)
        worst = max(worst, r)
    return worst


def compare_params(final, final32, final64, rel_grad64, hp, N, tau, check):
    """The final-parameter checks; see the comments. `final` is Tessel's (np.float32),
    final32/final64 the PyTorch replays', rel_grad64 the f64 replay's min |g| / max |g|, tau
    the f32 round-off bound of a gradient entry relative to its row's largest (see TAU)."""
    lr = hp["lr"]
    names = list(final64)
    # (a) Every element. AdamW moves an element by lr * m_hat / (sqrt(v_hat) + eps) per step
    # (plus the decay lr * wd * p, the same on both sides up to f32 rounding). Where |g| >> eps
    # that is scale-free, ~lr * sign(g) at step 1, so an element whose true gradient is ~0
    # (e.g. the key bias: softmax is invariant to it, so its gradient is pure round-off) moves
    # by up to ~lr in a direction that rounding decides. Two correct f32 implementations can
    # thus differ there by up to 2 * lr * R per step, R = max |m_hat| / sqrt(v_hat) over any
    # gradient sequence (adam_ratio_bound; 1.043 for 10 steps). Rigorous but loose: it only
    # catches gross errors. (b)-(d) are the real checks.
    ratio = adam_ratio_bound(hp["beta1"], hp["beta2"], N)
    hard = 2 * lr * ratio * N
    d32 = {n: np.abs(final[n].astype(np.float64) - final32[n]) for n in names}
    check(max(d.max() for d in d32.values()) <= hard,
          f"every parameter within 2 * lr * {ratio:.3f} * {N} = {hard:.2e} of torch float32 "
          f"(the sign-flip bound)")

    # (b)-(d) use the float64 replay as the yardstick: a correct f32 implementation is about
    # as far from exact arithmetic as PyTorch's f32 run is, so Tessel's distance to the f64
    # run, e_T, is compared with PyTorch f32's, e_32. Floor: both sides round every parameter
    # to f32 once per step, so N ulps of the value are allowed even where e_32 happens to be 0.
    e_t = {n: np.abs(final[n].astype(np.float64) - final64[n]) for n in names}
    e_32 = {n: np.abs(final32[n] - final64[n]) for n in names}
    ulps = {n: N * np.spacing(np.abs(final64[n]).astype(np.float32)).astype(np.float64)
            for n in names}
    # Elements whose true gradient is at some step within f32 round-off of zero can flip
    # sign (see (a)); the per-tensor max (d) skips them. The round-off of a gradient entry,
    # relative to the largest entry of its row (a weight row's entries share the output
    # gradient they are dot products with), is bounded like the forward test's logits,
    # (2L+1) * 4C * u32 (dot products of length <= 4C through 2L+1 LayerNorm-separated
    # stages), doubled for the backward pass: TAU = 1.5e-4 for L=2, C=64. That leaves out
    # ~0.5% of the elements here, mostly the key biases (exactly-zero true gradient). The
    # caller passes it as tau (for the GPT it is the gradient-norm check's tolerance too).
    TAU = tau
    resolved = {n: rel_grad64[n] > TAU for n in names}
    # K. Measured e_T / (e_32 + floor) on the three ctest cases (clip 1.0, also run on 1
    # thread instead of 2; clip 0.1; no clip, no decay): per-tensor median <= 1.0,
    # per-tensor max over resolved elements <= 2.9, pooled median <= 2.2, pooled p99 <= 1.3.
    # Deliberate AdamW mistakes, replayed in float32 in place of Tessel's run, give >= 560
    # per tensor and >= 88 pooled: lr 1% off, beta2 0.99, the clip coefficient left out of
    # the update, bias correction at step t+1, weight decay on every parameter / on none / not
    # on the embeddings, eps inside the sqrt or added before the bias correction (the loss
    # check misses four of these: their loss moves by 3e-5 to 1.6e-4 relative). Freezing the
    # last element of every tensor is caught by (d) alone (5.8e5). Dropping the 1e-6 of the
    # clip coefficient stays invisible (~1), as it should. K = 20 sits ~7x above the worst
    # measured ratio and >= 4x below the mildest mistake.
    K = 20.0
    print(f"{'tensor':28s} {'max|T-32|':>10s} {'max|T-64|':>10s} {'max|32-64|':>10s} "
          f"{'med|T-64|':>10s} {'med|32-64|':>10s} {'round-off g':>11s}")
    bad_median, bad_max = [], []
    for n in names:
        r = resolved[n]
        med_t, med_32 = np.median(e_t[n]), np.median(e_32[n])
        max_t = e_t[n][r].max(initial=0.0)
        max_32 = e_32[n][r].max(initial=0.0)
        print(f"{n:28s} {d32[n].max():10.3e} {e_t[n].max():10.3e} {e_32[n].max():10.3e} "
              f"{med_t:10.3e} {med_32:10.3e} {int((~r).sum()):5d}/{r.size:<6d}")
        if med_t > K * med_32 + np.median(ulps[n]):
            bad_median.append(f"{n}: {med_t:.2e} vs {med_32:.2e}")
        if max_t > K * max_32 + ulps[n].max():
            bad_max.append(f"{n}: {max_t:.2e} vs {max_32:.2e}")
    # (b) Per tensor, the median: catches any mistake that shifts most of one tensor, however
    # small the tensor (e.g. weight decay on the LayerNorm gains).
    check(not bad_median, f"per tensor, median e_T <= {K:g} * median e_32 + N ulp "
          f"(too far: {bad_median})")
    # (c) All elements pooled, the median and the 99th percentile.
    all_t = np.concatenate([e_t[n].ravel() for n in names])
    all_32 = np.concatenate([e_32[n].ravel() for n in names])
    all_d = np.concatenate([d32[n].ravel() for n in names])
    for p in (0.5, 0.99):
        qt, q32 = np.quantile(all_t, p), np.quantile(all_32, p)
        check(qt <= K * q32, f"quantile {p:g} of e_T over all {all_t.size} elements "
              f"{qt:.2e} <= {K:g} * e_32's {q32:.2e}")
    # (d) Per tensor, the max over elements with a resolved gradient: catches a mistake
    # confined to a few elements (a kernel's tail loop, one row).
    n_res = sum(int(r.sum()) for r in resolved.values())
    check(not bad_max, f"per tensor, max e_T over the {n_res} elements whose gradient stays "
          f"above {TAU:.1e} * its row's max <= {K:g} * e_32's + N ulp "
          f"(too far: {bad_max})")
    print(f"params, |tessel - torch f32|: max {all_d.max():.3e} ({all_d.max() / lr:.3f} lr), "
          f"p99 {np.quantile(all_d, 0.99):.3e}, median {np.median(all_d):.3e}")
    print(f"params, e_T = |tessel - f64|: max {all_t.max():.3e}, p99 "
          f"{np.quantile(all_t, 0.99):.3e}, median {np.median(all_t):.3e}; e_32 = |torch f32 "
          f"- f64|: max {all_32.max():.3e}, p99 {np.quantile(all_32, 0.99):.3e}, median "
          f"{np.median(all_32):.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("data")
    for flag, default in (("layers", 2), ("channels", 64), ("heads", 4), ("seq", 32),
                          ("batch", 4), ("seed", 1337), ("steps", 10)):
        ap.add_argument("--" + flag, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--expect-clipping", action="store_true")
    a = ap.parse_args()
    L, C, NH, T, B, N = a.layers, a.channels, a.heads, a.seq, a.batch, a.steps
    check = Checks()

    with tempfile.TemporaryDirectory(prefix="tessel-gpt-train-") as tmp:
        out = Path(tmp) / "train.safetensors"
        cmd = [a.tool, "--data", a.data, "--out", str(out), "--seed", str(a.seed),
               "--layers", str(L), "--channels", str(C), "--heads", str(NH), "--seq", str(T),
               "--batch", str(B), "--steps", str(N), "--lr", repr(a.lr),
               "--weight-decay", repr(a.weight_decay), "--grad-clip", repr(a.grad_clip)]
        print("running:", " ".join(cmd))
        run = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            print(f"FAIL: export tool exited with {run.returncode}:\n{run.stderr}", file=sys.stderr)
            return 1
        tensors, meta = read_safetensors(out)

    # ---- what the file must hold ----------------------------------------------------------
    want_meta = {"layers": L, "channels": C, "heads": NH, "seq": T, "vocab": V, "batch": B,
                 "steps": N, "optimizer": "adamw", "schedule": "constant", "warmup": 0}
    check(all(meta.get(k) == str(v) for k, v in want_meta.items()),
          f"metadata {meta} matches the requested config")
    try:
        hp = {k: float(meta[k]) for k in HYPER}
    except (KeyError, ValueError) as e:
        check(False, f"metadata holds every hyper-parameter {HYPER} as a number ({e})")
        return 1
    # Tessel feeds the hyper-parameters as f32 scalars; the file holds those values, and the
    # replays use them, so that rounding 1e-3 or 0.999 to f32 is not a difference.
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    clip = a.grad_clip if a.grad_clip > 0 else math.inf
    check(hp["lr"] == f32(a.lr) and hp["weight_decay"] == f32(a.weight_decay)
          and hp["max_grad_norm"] == f32(clip) and (hp["beta1"], hp["beta2"], hp["eps"])
          == (f32(0.9), f32(0.999), f32(1e-8)), f"hyper-parameters {hp} are the requested ones")

    shapes = expected_shapes(L, C, T, V)
    init = {k[len("init/"):]: v for k, v in tensors.items() if k.startswith("init/")}
    final = {k[len("final/"):]: v for k, v in tensors.items() if k.startswith("final/")}
    for label, group in (("init", init), ("final", final)):
        missing, extra = sorted(set(shapes) - set(group)), sorted(set(group) - set(shapes))
        check(not missing and not extra, f"{label}/ names (missing {missing}, unexpected {extra})")
    if check.failed():
        return 1
    bad = [n for n, s in shapes.items() if init[n].shape != s or final[n].shape != s
           or init[n].dtype != np.float32 or final[n].dtype != np.float32]
    check(not bad, f"init/ and final/ shapes and F32 dtype (wrong: {bad})")
    check(np.all(init["ln_f.weight"] == 1) and np.all(init["ln_f.bias"] == 0)
          and abs(float(init["wte.weight"].std()) - 0.02) < 0.002,
          "init/ is a fresh initialisation (LayerNorm 1/0, wte std ~ 0.02)")
    moved = [n for n in shapes if np.array_equal(init[n], final[n])]
    check(not moved, f"every parameter changed during training (unchanged: {moved})")

    tokens, targets = tensors["tokens"], tensors["targets"]
    loss_t, norm_t = tensors["loss"], tensors["grad_norm"]
    check(tokens.shape == (N, B, T) and targets.shape == (N, B, T) and tokens.dtype == np.int32
          and targets.dtype == np.int32, f"tokens/targets are I32 [{N}, {B}, {T}]")
    check(loss_t.shape == (N,) and norm_t.shape == (N,) and loss_t.dtype == np.float64
          and norm_t.dtype == np.float64, f"loss/grad_norm are F64 [{N}]")
    if check.failed():
        return 1
    check(np.array_equal(tokens[..., 1:], targets[..., :-1]), "targets are tokens shifted by one")
    text = Path(a.data).read_bytes()
    train_text = text[:math.floor(len(text) * (1.0 - 0.1))]  # TextDataset: first 90% trains
    windows = [bytes(tokens[s, b].astype(np.uint8)) + bytes([targets[s, b, -1]])
               for s in range(N) for b in range(B)]
    check(all(w in train_text for w in windows), "every window is a substring of the train split")
    check(len(set(windows)) > 1, "the steps train on different batches")

    # ---- replays ----------------------------------------------------------------------------
    def forward(params, tok, tgt):
        return gpt_forward(params, tok, tgt, L, NH)
    loss32, norm32, final32, _ = replay(init, tokens, targets, hp, forward, torch.float32)
    loss64, norm64, final64, rel_grad64 = replay(init, tokens, targets, hp, forward, torch.float64)
    print(f"loss: tessel {loss_t[0]:.6f} -> {loss_t[-1]:.6f}, torch f32 {loss32[0]:.6f} -> "
          f"{loss32[-1]:.6f}")
    print(f"grad norm: tessel {np.array2string(norm_t, precision=4)}, max_grad_norm "
          f"{hp['max_grad_norm']}")

    # Losses. Step 1 is one f32 forward on identical weights: the forward test measured
    # 3.5e-7 abs on the logits, i.e. ~1e-7 relative on a loss of ~5.5. Later steps add the
    # parameter differences below (measured: median 5e-9, max 0.015 lr), which move the loss
    # by far less than the 1e-4 relative; that bound is the acceptance criterion,
    # used as is. Measured: <= 2.1e-7 relative at every step of the three ctest cases. It is
    # not a sharp test of the optimizer (see compare_params): the parameter checks are.
    rel = np.abs(loss_t - loss32) / np.abs(loss32)
    print("loss rel diff per step:", np.array2string(rel, precision=2, floatmode="fixed",
                                                      formatter={"float": "{:.1e}".format}))
    rel64 = np.abs(loss32 - loss64) / np.abs(loss64)
    print(f"max rel loss diff: tessel vs torch f32 {rel.max():.2e}, torch f32 vs f64 "
          f"{rel64.max():.2e}")
    check(rel.max() <= 1e-4, "every step's loss within 1e-4 relative of torch float32")
    check(np.all(np.diff(loss_t) != 0), "the loss changes every step")

    # Gradient norms. ||g|| is dominated by the largest gradient entries. Their f32 error is
    # bounded like the forward test's logits, (2L+1) * 4C * u32 relative (dot products of
    # length <= 4C through 2L+1 LayerNorm-separated stages), doubled for the backward chain:
    # 1.5e-4 for L=2, C=64. Measured: <= 5.6e-7 at every step of the three ctest cases.
    norm_tol = 2 * (2 * L + 1) * 4 * C * U32
    nrel = np.abs(norm_t - norm32) / norm32
    print(f"max rel grad-norm diff: tessel vs torch f32 {nrel.max():.2e}, torch f32 vs f64 "
          f"{(np.abs(norm32 - norm64) / norm64).max():.2e}")
    check(nrel.max() <= norm_tol,
          f"every step's gradient norm within {norm_tol:.1e} relative of torch float32")
    clipped = norm_t > hp["max_grad_norm"]
    print(f"clipping active at {int(clipped.sum())} of {N} steps")
    if a.expect_clipping:
        check(bool(np.all(clipped)) and bool(np.all(norm32 > hp["max_grad_norm"])),
              f"the gradient norm exceeds max_grad_norm {hp['max_grad_norm']} at every step")

    # ---- final parameters ---------------------------------------------------------------------
    compare_params(final, final32, final64, rel_grad64, hp, N, 2 * (2 * L + 1) * 4 * C * U32, check)

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
