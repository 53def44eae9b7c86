"""An independent PyTorch GPT-2 and a safetensors reader, shared by the PyTorch comparisons.

Promise: gpt_forward() is written from the GPT-2 architecture alone (Radford et al. 2019, at
byte level, LM head tied to the token embedding), not from Tessel's code; it takes the
parameters by Tessel's names and PyTorch layouts (expected_shapes()) and works in whatever
dtype they have, with or without autograd. read_safetensors() needs only json + numpy (no
safetensors package) and bounds-checks the offsets it uses.

Importing this module imports torch and numpy; callers turn an ImportError into a failure.
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

LN_EPS = 1e-5  # GPT-2 / PyTorch LayerNorm default; Tessel's LayerNorm default too.
U64 = 2.0 ** -53  # unit roundoff of float64
U32 = 2.0 ** -24  # unit roundoff of float32 (eps/2 = 6e-8)


# ---- safetensors ---------------------------------------------------------------------------
_NP_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path):
    """Returns ({name: np.ndarray}, {metadata str: str}). Checks the offsets it relies on."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(raw)}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = np.dtype(_NP_DTYPES[info["dtype"]])
        count = math.prod(info["shape"])
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{path}: tensor '{name}' has bad offsets [{begin}, {end})")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"]).copy()
    return tensors, metadata


# ---- the model, written from the GPT-2 architecture ------------------------------------------
def expected_shapes(L, C, T, V):
    """Parameter name -> shape that a GPT-2 with Tessel's naming must export."""
    shapes = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(L):
        p = f"blocks.{i}."
        shapes.update({
            p + "ln1.weight": (C,), p + "ln1.bias": (C,),
            p + "attn.qkv.weight": (3 * C, C), p + "attn.qkv.bias": (3 * C,),
            p + "attn.proj.weight": (C, C), p + "attn.proj.bias": (C,),
            p + "ln2.weight": (C,), p + "ln2.bias": (C,),
            p + "mlp.fc.weight": (4 * C, C), p + "mlp.fc.bias": (4 * C,),
            p + "mlp.proj.weight": (C, 4 * C), p + "mlp.proj.bias": (C,),
        })
    return shapes


def causal_self_attention(qkv, n_head):
    """qkv [B, T, 3C] laid out [q | k | v]; head h uses channels [h*HS, (h+1)*HS) of each."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, hs).transpose(1, 2) for t in (q, k, v))  # [B, NH, T, HS]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)                          # [B, NH, T, T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def gpt_forward(w, tokens, targets, L, n_head):
    """w: name -> tensor (all one dtype). tokens, targets [B, T] int64. Returns (logits, loss)."""
    C = w["wte.weight"].shape[1]
    T = tokens.shape[1]

    def ln(x, name):
        return F.layer_norm(x, (C,), w[name + ".weight"], w[name + ".bias"], LN_EPS)

    def linear(x, name):  # PyTorch layout: weight [out, in]
        return F.linear(x, w[name + ".weight"], w[name + ".bias"])

    x = w["wte.weight"][tokens] + w["wpe.weight"][torch.arange(T)]
    for i in range(L):
        p = f"blocks.{i}."
        x = x + linear(causal_self_attention(linear(ln(x, p + "ln1"), p + "attn.qkv"), n_head),
                       p + "attn.proj")
        x = x + linear(F.gelu(linear(ln(x, p + "ln2"), p + "mlp.fc"), approximate="tanh"),
                       p + "mlp.proj")
    logits = ln(x, "ln_f") @ w["wte.weight"].T  # LM head tied to the token embedding
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return logits, loss


# ---- test bookkeeping -------------------------------------------------------------------------
class Checks:
    """Collects named pass/fail checks, printing each; failed() says whether any failed."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)

    def failed(self):
        return bool(self.failures)

    def exit_code(self):
        """Prints the summary; 1 if any check failed, else 0."""
        if self.failures:
            print(f"{len(self.failures)} check(s) failed", file=sys.stderr)
            return 1
        print("all checks passed")
        return 0
