"""The PyTorch peer of bench/tp_step.sh: the GPT of bench/torch_gpt_step.py (byte level, pre-LN
blocks, tanh GELU, LM head tied to the token embedding) with Megatron tensor parallelism
written by hand (Shoeybi et al. 2019, section 3), over gloo on `--ranks` local processes:

  - heads split over tp: qkv is column-parallel by heads (each rank holds the q, k and v rows
    of its NH/tp heads), the attention projection row-parallel;
  - MLP: fc column-parallel, its projection row-parallel;
  - f (CopyToTensorParallel): identity forward, all_reduce of the gradient backward, before each
    column-parallel layer; g (ReduceFromTensorParallel): all_reduce forward, identity backward,
    after each row-parallel layer, whose bias is added once, after the sum;
  - embeddings, LayerNorms and the tied LM head replicated (every rank computes the full
    logits), so their gradients come out equal on every rank and need no reduction;
  - AdamW (lr 1e-3, no weight decay) after global-norm clipping to 1.0 whose norm counts
    every element once: the squares of the sharded gradients are summed over tp (one scalar
    all_reduce), the replicated ones are counted once.

Every rank trains on the whole global batch (tp splits the model, not the batch). All
collectives are synchronous, so the time spent in them is the exposed communication; it is
timed around each all_reduce on rank 0.

Check: the tp run's initial weights are slices of a single-process GPT (torch_gpt_step.GPT,
plain nn.Linear layers, so an independent implementation), which then trains on the same
batches; the losses (step 1: the forward pass) and the gradient norms before clipping (the
backward pass) of the first --check-steps steps are compared, and the run fails (exit 1) if
they differ by more than RTOL below.

Prints one JSON line: tp step and all-reduce times (medians over the steps after the warmup),
the single-process time of the same code with tp = 1 and ranks x threads threads, and the
check. Runs with current PyTorch from PyPI (bench/tp_step.sh makes bench/.venv) or Debian's
torch 1.13 (/usr/bin/python3)."""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_step import GPT, add_model_flags  # noqa: E402

# Tolerance of the check, relative, on the loss and on the gradient norm before clipping at each
# of the first --check-steps steps. The tp run differs from the single process only in rounding:
# a row-parallel layer sums two f32 partial products where one GEMM sums them all, a few ulps
# (~1e-7 relative) per layer. Measured over 5 steps: loss <= 1.7e-7, gradient norm <= 5e-7
# (torch 2.15 and 1.13). 1e-5 leaves a factor 20 for other thread counts and BLAS builds and
# still catches a missing f: its gradient norm is then off by 2e-1, its loss by 5e-4 at step 5.
RTOL = 1e-5


class CommTimer:
    """Seconds, calls and payload bytes of this process's all_reduces since reset()."""

    def __init__(self):
        self.group = None  # None: one process, all_reduce is the identity
        self.reset()

    def reset(self):
        self.seconds, self.calls, self.bytes = 0.0, 0, 0

    def all_reduce(self, t):
        if self.group is None:
            return t
        t0 = time.perf_counter()
        dist.all_reduce(t, group=self.group)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.bytes += t.numel() * t.element_size()
        return t


COMM = CommTimer()


class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's f: identity forward; backward sums the input gradient over tp, since every
    rank's column-parallel layer contributes a partial gradient of the replicated input."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return COMM.all_reduce(grad.contiguous())


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's g: sums the row-parallel layer's partial outputs over tp; identity backward
    (every rank needs the whole output gradient)."""

    @staticmethod
    def forward(ctx, x):
        return COMM.all_reduce(x.contiguous())

    @staticmethod
    def backward(ctx, grad):
        return grad


class TensorParallelBlock(nn.Module):
    """One pre-LN block, this rank's shard of it: NH / tp heads and 4C / tp MLP channels."""

    def __init__(self, C, NH, tp):
        super().__init__()
        self.NH = NH // tp  # this rank's heads
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C // tp)                  # column-parallel: [q_r; k_r; v_r]
        self.proj = nn.Linear(C // tp, C, bias=False)          # row-parallel
        self.proj_bias = nn.Parameter(torch.zeros(C))          # added once, after g
        self.fc = nn.Linear(C, 4 * C // tp)                    # column-parallel
        self.fc_proj = nn.Linear(4 * C // tp, C, bias=False)   # row-parallel
        self.fc_proj_bias = nn.Parameter(torch.zeros(C))

    def attn(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(CopyToTensorParallel.apply(x)).chunk(3, dim=2)
        q, k, v = (t.view(B, T, self.NH, -1).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        y = self.proj(y.transpose(1, 2).reshape(B, T, -1))
        return ReduceFromTensorParallel.apply(y) + self.proj_bias

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        h = F.gelu(self.fc(CopyToTensorParallel.apply(self.ln2(x))), approximate="tanh")
        return x + ReduceFromTensorParallel.apply(self.fc_proj(h)) + self.fc_proj_bias


class TensorParallelGPT(GPT):
    """torch_gpt_step.GPT (its forward unchanged) with its blocks tensor parallel over `tp`
    ranks; the embeddings and ln_f stay replicated."""

    def __init__(self, L, C, NH, T, tp):
        super().__init__(0, C, NH, T)
        self.blocks = nn.ModuleList(TensorParallelBlock(C, NH, tp) for _ in range(L))

    def is_sharded(self, name):
        """Whether parameter `name` is split over tp (its gradient is a shard, not a copy)."""
        return name.split(".")[-2:] in (["qkv", "weight"], ["qkv", "bias"], ["proj", "weight"],
                                        ["fc", "weight"], ["fc", "bias"], ["fc_proj", "weight"])


def reference_model(a):
    """The single-process GPT with GPT-2's init (normal 0.02 weights, zero biases, unit
    LayerNorm gains), the same on every process for the same seed."""
    torch.manual_seed(a.seed)
    model = GPT(a.layers, a.channels, a.heads, a.seq)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln_"):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.normal_(0.0, 0.02)
    return model


def shard_from(ref, model, rank, tp):
    """Copies this rank's slices of the reference GPT's weights into the tensor parallel one."""
    C = ref.ln_f.weight.numel()
    c, h = C // tp, 4 * C // tp
    rows = lambda w, n: w[rank * n:(rank + 1) * n]  # noqa: E731
    with torch.no_grad():
        for name in ("wte", "wpe", "ln_f"):
            getattr(model, name).load_state_dict(getattr(ref, name).state_dict())
        for rb, b in zip(ref.blocks, model.blocks):
            b.ln1.load_state_dict(rb.ln1.state_dict())
            b.ln2.load_state_dict(rb.ln2.state_dict())
            # q, k and v are three [C, C] row blocks of qkv; this rank's heads are rows
            # [rank c, (rank + 1) c) of each.
            for dst, src in ((b.qkv.weight, rb.qkv.weight), (b.qkv.bias, rb.qkv.bias)):
                dst.copy_(torch.cat([rows(s, c) for s in src.split(C, dim=0)]))
            b.proj.weight.copy_(rows(rb.proj.weight.t(), c).t())
            b.proj_bias.copy_(rb.proj.bias)
            b.fc.weight.copy_(rows(rb.fc.weight, h))
            b.fc.bias.copy_(rows(rb.fc.bias, h))
            b.fc_proj.weight.copy_(rows(rb.fc_proj.weight.t(), h).t())
            b.fc_proj_bias.copy_(rb.fc_proj.bias)


def clip_global_norm(model, max_norm):
    """torch.nn.utils.clip_grad_norm_ over the whole (unsharded) model: sharded gradients'
    squares summed over tp, replicated ones counted once. Returns the norm before clipping."""
    sharded = torch.zeros(1)
    replicated = torch.zeros(1)
    for name, p in model.named_parameters():
        sq = p.grad.detach().float().pow(2).sum()
        if model.is_sharded(name):
            sharded += sq
        else:
            replicated += sq
    norm = (replicated + COMM.all_reduce(sharded)).sqrt()
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for p in model.parameters():
        p.grad.detach().mul_(coef)
    return norm.item()


def batches(a):
    """The step's batch: random bytes, the same on every rank and in the reference."""
    g = torch.Generator().manual_seed(a.seed + 1)
    for _ in range(a.steps):
        yield (torch.randint(0, 256, (a.batch, a.seq), generator=g),
               torch.randint(0, 256, (a.batch, a.seq), generator=g))


def train(a, rank, tp, threads):
    """Trains the tp model on this rank; returns per step (seconds, loss, comm seconds,
    all_reduces, all_reduce bytes, gradient norm before clipping)."""
    torch.set_num_threads(threads)
    model = TensorParallelGPT(a.layers, a.channels, a.heads, a.seq, tp)
    shard_from(reference_model(a), model, rank, tp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    out = []
    for idx, tgt in batches(a):
        if tp > 1:
            dist.barrier()
        COMM.reset()
        t0 = time.perf_counter()
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = clip_global_norm(model, 1.0)
        opt.step()
        out.append((time.perf_counter() - t0, loss.item(), COMM.seconds, COMM.calls, COMM.bytes, norm))
    return out


def worker(rank, a, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    COMM.group = dist.group.WORLD
    steps = train(a, rank, a.ranks, a.threads)
    if rank == 0:
        q.put(steps)
    dist.destroy_process_group()


def reference_steps(a):
    """Losses and gradient norms (before clipping) of the first --check-steps steps of the
    single-process GPT on the same batches."""
    model = reference_model(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    out = []
    for (idx, tgt), _ in zip(batches(a), range(a.check_steps)):
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out.append((loss.item(), norm.item()))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2, help="tensor parallel degree (processes)")
    add_model_flags(p, steps=30)
    p.add_argument("--check-steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.heads % a.ranks or a.channels % a.heads:
        sys.exit(f"torch_tp_step.py: tp = {a.ranks} must divide the {a.heads} heads, which must divide C = "
                 f"{a.channels}")
    if not a.warmup_steps < a.steps or not 1 <= a.check_steps <= a.steps:
        sys.exit("torch_tp_step.py: need warmup-steps < steps and 1 <= check-steps <= steps")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo hangs on these machines without it
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(a, 29500 + os.getpid() % 1000, q), nprocs=a.ranks, join=True)
    tp = q.get()
    ref = reference_steps(a)
    single = train(a, 0, 1, a.ranks * a.threads)

    w = a.warmup_steps
    med = lambda rows, i: statistics.median(r[i] for r in rows[w:])  # noqa: E731
    rel = lambda x, y: abs(x - y) / abs(y)  # noqa: E731
    losses, norms = [r[1] for r in tp[:a.check_steps]], [r[5] for r in tp[:a.check_steps]]
    rel_loss = [rel(x, y[0]) for x, y in zip(losses, ref)]
    rel_norm = [rel(x, y[1]) for x, y in zip(norms, ref)]
    ok = max(rel_loss + rel_norm) <= RTOL
    print(f"check: step 1 loss tp={a.ranks} {losses[0]:.7f}, single process {ref[0][0]:.7f}, relative "
          f"difference {rel_loss[0]:.2e}; steps 1-{a.check_steps}: loss max {max(rel_loss):.2e}, gradient "
          f"norm max {max(rel_norm):.2e} (tolerance {RTOL:.0e}): {'ok' if ok else 'FAILED'}", file=sys.stderr)
    print(json.dumps({
        "step_s": med(tp, 0), "comm_s": med(tp, 2), "allreduces": tp[-1][3], "allreduce_bytes": tp[-1][4],
        "single_step_s": med(single, 0), "ranks": a.ranks, "threads": a.threads,
        "check": {"ok": ok, "loss_tp": losses, "loss_single_process": [r[0] for r in ref], "loss_rel_diff": rel_loss,
                  "grad_norm_rel_diff": rel_norm},
        "torch": torch.__version__, "python": sys.executable}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
