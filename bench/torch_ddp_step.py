"""The PyTorch peer of bench/comm_overlap.sh: the GPT of bench/torch_gpt_step.py trained with
DistributedDataParallel over gloo on N local processes (torch.multiprocessing), each on its
B/N rows of the global batch, AdamW + clipping as in the Tessel run. Per rank and step it
times: the DDP step (backward overlapped with DDP's bucketed all-reduces), the same step
under model.no_sync() (no communication at all), and, separately, all-reduces of the same
bucket sizes alone. exposed = step - no_sync step (the communication the backward did not
hide); hidden fraction = 1 - exposed / all-reduces alone. Prints one JSON line (rank 0).

Run with /usr/bin/python3 (Debian's python3-torch)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_step import GPT, add_model_flags  # noqa: E402


def worker(rank, a, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = DDP(GPT(a.layers, a.channels, a.heads, a.seq), bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    local = a.batch // a.ranks

    def step(sync):
        idx = torch.randint(0, 256, (local, a.seq))
        tgt = torch.randint(0, 256, (local, a.seq))
        dist.barrier()
        t0 = time.perf_counter()
        if sync:
            loss = model(idx, tgt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
        else:
            with model.no_sync():
                loss = model(idx, tgt)
                opt.zero_grad(set_to_none=True)
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return time.perf_counter() - t0

    synced, unsynced = [], []
    for i in range(a.steps):  # interleaved, so both see the same machine state
        synced.append(step(True))
        unsynced.append(step(False))
    # The all-reduces alone: DDP's buckets are about bucket_mb each, over all gradients.
    numel = sum(p.numel() for p in model.parameters())
    per_bucket = max(1, int(a.bucket_mb * 2**20 / 4))
    sizes = [min(per_bucket, numel - s) for s in range(0, numel, per_bucket)]
    bufs = [torch.ones(n) for n in sizes]
    alone = []
    for i in range(a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        works = [dist.all_reduce(b, async_op=True) for b in bufs]
        for w in works:
            w.wait()
        alone.append(time.perf_counter() - t0)
    w = a.warmup_steps
    if rank == 0:
        s, u, c = (statistics.median(x[w:]) for x in (synced, unsynced, alone))
        out.put({"step_s": s, "no_sync_step_s": u, "allreduce_alone_s": c,
                 "exposed_s": max(0.0, s - u), "buckets": len(sizes), "grad_bytes": 4 * numel,
                 "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    add_model_flags(p, steps=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(a, port, out), nprocs=a.ranks, join=True)
    print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
