"""The PyTorch peer of bench/cpu_step.sh: the same GPT-2 (byte level, tied LM head, pre-LN,
tanh GELU) and the same AdamW step, written the idiomatic nanoGPT way with nn.Modules, timed
per step on random byte batches. Prints one JSON line: {"median_step_s": ..., ...}.

--compile runs the model's forward through torch.compile (the default inductor backend, which
builds C++ kernels with the system compiler); its first steps compile and are not timed
(--warmup-steps). --bf16 runs the forward and loss under torch.autocast("cpu", bfloat16), the
parameters and optimizer staying f32 (PyTorch's mixed precision on the CPU). If torch.compile
fails, the JSON line carries "error" instead of times and the exit status is 0, so that a
benchmark can report the failure in its row.

Runs with bench/.venv's current PyTorch (bench/torch_peer.sh) or Debian's python3-torch."""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, T, V=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe.weight[: idx.size(1)]
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def add_model_flags(p, steps):
    """The GPT config flags the PyTorch peers share (defaults: the benchmarks' learning config,
    L=4 C=128 NH=4 T=64 B=32) and the timed steps, the first --warmup-steps not counted."""
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup-steps", type=int, default=5)


def main():
    p = argparse.ArgumentParser()
    add_model_flags(p, steps=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--bf16", action="store_true", help="forward and loss under CPU autocast(bfloat16)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.channels, a.heads, a.seq)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    run = torch.compile(model) if a.compile else model
    times = []
    for step in range(a.steps):
        idx = torch.randint(0, 256, (a.batch, a.seq))
        tgt = torch.randint(0, 256, (a.batch, a.seq))
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = run(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    steady = times[a.warmup_steps:]
    print(json.dumps({"median_step_s": statistics.median(steady), "min_step_s": min(steady),
                      "first_step_s": times[0], "steps": len(steady), "threads": a.threads,
                      "compile": a.compile, "bf16": a.bf16, "torch": torch.__version__}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # torch.compile's failures (no compiler, an inductor bug): reported, not fatal
        if "--compile" not in __import__("sys").argv:
            raise
        print(json.dumps({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}))
