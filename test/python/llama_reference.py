"""An independent PyTorch Llama, shared by the Llama comparisons.

Promise: llama_forward() is written from the Llama architecture alone (Touvron et al. 2023:
pre-norm RMSNorm blocks, rotary position embeddings in the rotate-half pairing of GPT-NeoX
and Hugging Face, grouped-query attention, a SwiGLU MLP, no biases, an untied LM head) at
byte level, not from Tessel's code. It takes the parameters by Tessel's names and PyTorch
layouts (expected_shapes()) and works in whatever dtype they have, with or without autograd.

Importing this module imports torch; callers turn an ImportError into a failure.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    layers: int
    channels: int
    heads: int
    kv_heads: int
    hidden: int
    seq: int
    vocab: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


def expected_shapes(cfg):
    """Parameter name -> shape that a Llama with Tessel's naming must export."""
    C, V, H = cfg.channels, cfg.vocab, cfg.hidden
    D = C // cfg.heads
    shapes = {"tok_embeddings.weight": (V, C), "norm.weight": (C,), "output.weight": (V, C)}
    for i in range(cfg.layers):
        p = f"blocks.{i}."
        shapes.update({
            p + "attention_norm.weight": (C,),
            p + "attention.wq.weight": (cfg.heads * D, C),
            p + "attention.wk.weight": (cfg.kv_heads * D, C),
            p + "attention.wv.weight": (cfg.kv_heads * D, C),
            p + "attention.wo.weight": (C, cfg.heads * D),
            p + "ffn_norm.weight": (C,),
            p + "feed_forward.w1.weight": (H, C),
            p + "feed_forward.w3.weight": (H, C),
            p + "feed_forward.w2.weight": (C, H),
        })
    return shapes


def rms_norm(x, weight, eps):
    """x / sqrt(mean over the last dim of x^2 + eps) * weight (Zhang & Sennrich 2019)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def rope_tables(T, D, theta, dtype):
    """cos and sin [T, D] of the angles t * theta^(-2i/D) for i < D/2, each repeated over both
    halves of the head; computed in float64 (as the angles' definition asks) then cast."""
    inv_freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)   # [D/2]
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)    # [T, D/2]
    angles = torch.cat([angles, angles], dim=-1)                             # [T, D]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):
    """x [B, heads, T, D]: each pair (x[i], x[i + D/2]) at position t turns by its angle."""
    return x * cos + rotate_half(x) * sin


def attention(q, k, v, n_head, n_kv_head):
    """q [B, NH, T, D], k and v [B, NKV, T, D]: causal attention in which query head h uses
    key/value head h // (NH / NKV) (GQA, Ainslie et al. 2023). Returns [B, NH, T, D]."""
    group = n_head // n_kv_head
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    T, D = q.shape[2], q.shape[3]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return att @ v


def llama_forward(w, tokens, targets, cfg):
    """w: name -> tensor (all one dtype). tokens, targets [B, T] int64. Returns (logits, loss)."""
    B, T = tokens.shape
    C, NH, NKV = cfg.channels, cfg.heads, cfg.kv_heads
    D = C // NH
    cos, sin = rope_tables(T, D, cfg.rope_theta, w["tok_embeddings.weight"].dtype)

    def heads(t, n):  # [B, T, n*D] -> [B, n, T, D]
        return t.view(B, T, n, D).transpose(1, 2)

    x = w["tok_embeddings.weight"][tokens]
    for i in range(cfg.layers):
        p = f"blocks.{i}."
        h = rms_norm(x, w[p + "attention_norm.weight"], cfg.norm_eps)
        q = apply_rope(heads(F.linear(h, w[p + "attention.wq.weight"]), NH), cos, sin)
        k = apply_rope(heads(F.linear(h, w[p + "attention.wk.weight"]), NKV), cos, sin)
        v = heads(F.linear(h, w[p + "attention.wv.weight"]), NKV)
        y = attention(q, k, v, NH, NKV).transpose(1, 2).reshape(B, T, NH * D)
        x = x + F.linear(y, w[p + "attention.wo.weight"])
        h = rms_norm(x, w[p + "ffn_norm.weight"], cfg.norm_eps)
        gate = F.linear(h, w[p + "feed_forward.w1.weight"])
        up = F.linear(h, w[p + "feed_forward.w3.weight"])
        x = x + F.linear(F.silu(gate) * up, w[p + "feed_forward.w2.weight"])
    logits = F.linear(rms_norm(x, w["norm.weight"], cfg.norm_eps), w["output.weight"])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return logits, loss
