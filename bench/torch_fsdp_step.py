"""The PyTorch peer of bench/fsdp.sh: the GPT of bench/torch_gpt_step.py (byte level, pre-LN,
tanh GELU, LM head tied to the token embedding) under PyTorch's FSDP2 (`fully_shard`, one FSDP
unit per transformer block plus the root: the embeddings and the final LayerNorm) over gloo on
`--ranks` local processes, each training on its B/N rows of one global batch; AdamW (lr 1e-3,
no weight decay) after global-norm clipping to 1.0, as in the Tessel run.

Prefetch variants, each trained from the same initial weights in the same processes:
  none     no prefetch: FSDP2's implicit backward prefetch turned off (the param group's
           `_backward_prefetch`, a private method, replaced by a no-op), so every all-gather
           is issued when its unit is reached;
  default  FSDP2 as it comes: implicit backward prefetch of the next unit;
  1        explicit prefetch one unit ahead, forward and backward
           (set_modules_to_forward_prefetch / set_modules_to_backward_prefetch).
On the CPU gloo runs each collective in its own background thread, so a prefetched all-gather
overlaps compute here as it would on a GPU's communication stream.

Measured on every rank, per step (medians over the steps after --warmup-steps):
  - step time;
  - payload: the bytes of every all-gather's output and every reduce-scatter's input (the rule
    of Tessel's runtime/comm/Communicator.h), counted by wrapping torch.distributed's
    all_gather_single and reduce_scatter_single, which FSDP2 calls;
  - exposed communication: seconds this rank is blocked in those calls and in their Work.wait();
  - memory: the bytes of this rank's parameter shards, gradient shards and AdamW state (local
    tensors), and the process's peak resident set (ru_maxrss, which includes the Python and
    torch runtime).
Check: step 1's loss (averaged over the ranks) and gradient norm before clipping against the
same code on one process with the whole batch (--ranks 1 gives the reference; bench/fsdp.sh
compares them with RTOL below).

Prints one JSON line. Runs with current PyTorch from PyPI (bench/fsdp.sh makes bench/.venv)."""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_step import GPT, add_model_flags  # noqa: E402


class Counter:
    """Payload bytes and blocked seconds of the FSDP collectives since reset()."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.bytes, self.seconds = 0, 0.0


COUNT = Counter()


def timed_work(work):
    if work is None:
        return None
    wait = work.wait

    def timed_wait(*a, **k):
        t0 = time.perf_counter()
        try:
            return wait(*a, **k)
        finally:
            COUNT.seconds += time.perf_counter() - t0

    work.wait = timed_wait
    return work


def wrap(name, payload):
    """Replaces torch.distributed.<name> (what FSDP2 calls) by a counting, timing wrapper."""
    original = getattr(dist, name)

    def counted(*a, **k):
        COUNT.bytes += payload(*a, **k)
        t0 = time.perf_counter()
        try:
            work = original(*a, **k)
        finally:
            COUNT.seconds += time.perf_counter() - t0
        return timed_work(work)

    setattr(dist, name, counted)


def nbytes(t):
    return t.numel() * t.element_size()


# all_gather_single(output, input, ...): payload the output; reduce_scatter_single(output,
# input, ...): payload the input.
wrap("all_gather_single", lambda *a, **k: nbytes(a[0] if a else k["output_tensor"]))
wrap("reduce_scatter_single", lambda *a, **k: nbytes(a[1] if len(a) > 1 else k["input"]))


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def train(a, rank, variant):
    torch.manual_seed(0)  # the same initial weights on every rank and for every variant
    model = GPT(a.layers, a.channels, a.heads, a.seq)
    if a.ranks > 1:
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)  # the root unit: wte, wpe, ln_f (FSDP2 keeps it gathered after forward)
        blocks = list(model.blocks)
        if variant == "1":
            for i, b in enumerate(blocks):
                b.set_modules_to_forward_prefetch(blocks[i + 1:i + 2])
                b.set_modules_to_backward_prefetch(blocks[i - 1:i] if i > 0 else [])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    rows = a.batch // a.ranks
    gen = torch.Generator().manual_seed(1)
    times, payload, blocked, first = [], [], [], None
    for step in range(a.steps):
        idx = torch.randint(0, 256, (a.batch, a.seq), generator=gen)  # the global batch
        tgt = torch.randint(0, 256, (a.batch, a.seq), generator=gen)
        idx, tgt = idx[rank * rows:(rank + 1) * rows], tgt[rank * rows:(rank + 1) * rows]
        if a.ranks > 1:
            dist.barrier()
        COUNT.reset()
        t0 = time.perf_counter()
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        payload.append(COUNT.bytes)
        blocked.append(COUNT.seconds)
        if step == 0:
            mean = loss.detach().clone()
            if a.ranks > 1:
                dist.all_reduce(mean)
                mean /= a.ranks
            first = {"loss": mean.item(), "grad_norm": float(local(norm) if not hasattr(norm, "full_tensor")
                                                            else norm.full_tensor())}
    static = sum(nbytes(local(p)) for p in model.parameters())
    static_grads = sum(nbytes(local(p.grad)) for p in model.parameters() if p.grad is not None)
    state = sum(nbytes(local(v)) for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    w = a.warmup_steps
    return {"step_s": statistics.median(times[w:]), "payload_bytes": statistics.median(payload[w:]),
            "exposed_s": statistics.median(blocked[w:]), "parameter_bytes": static, "gradient_bytes": static_grads,
            "optimizer_bytes": state, "first": first}


def worker(rank, a, port, out):
    if a.ranks > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(a.threads)
    results = {}
    implicit = FSDPParamGroup._backward_prefetch
    for variant in a.variants.split(","):
        FSDPParamGroup._backward_prefetch = (lambda self: None) if variant == "none" else implicit
        results[variant] = train(a, rank, variant)
    FSDPParamGroup._backward_prefetch = implicit
    results["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.put((rank, results))
    if a.ranks > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    add_model_flags(p, steps=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", default="none,default,1", help="prefetch variants, comma-separated")
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(a, port, out), nprocs=a.ranks, join=True)
    ranks = dict(out.get() for _ in range(a.ranks))
    print(json.dumps({"torch": torch.__version__, "ranks": a.ranks, "by_rank": [ranks[r] for r in range(a.ranks)]}))


if __name__ == "__main__":
    main()
