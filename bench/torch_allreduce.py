#!/usr/bin/env python3
"""The PyTorch peer of bench/comm_allreduce.sh: torch.distributed all_reduce (sum, f32) over
gloo, timed as `tessel bench-comm` times it (runtime/tools/tessel/CommBench.h).

Usage: torch_allreduce.py WORLD BYTES ITERS WARMUP

WORLD processes on this host (torch.multiprocessing, gloo over TCP on 127.0.0.1; set
GLOO_SOCKET_IFNAME=lo). Each all-reduces a tensor of BYTES / 4 f32 elements: WARMUP untimed
runs, a barrier, then ITERS timed runs; t is the slowest rank's mean. The result is checked
once (every rank fills rank + 1, so the sum is WORLD (WORLD + 1) / 2 everywhere). Prints one
JSON line: {"bytes", "time_s", "algbw_gbps", "busbw_gbps", "torch"} with nccl-tests'
definitions (algbw = S / t, busbw = algbw * 2 (n - 1) / n).
"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, count, iters, warmup, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.full((count,), float(rank + 1))
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    ok = torch.tensor([1.0 if bool((t == want).all()) else 0.0])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    t.zero_()
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    mine = torch.tensor([(time.perf_counter() - start) / iters])
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put((float(mine.item()), bool(ok.item() == 1.0)))
    dist.destroy_process_group()


def main(argv):
    world, nbytes, iters, warmup = (int(a) for a in argv[1:5])
    count = max(nbytes // 4, 1)
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, port, count, iters, warmup, out), nprocs=world, start_method="spawn")
    seconds, ok = out.get()
    if not ok:
        print("torch_allreduce.py: gloo all_reduce gave a wrong sum", file=sys.stderr)
        return 1
    algbw = count * 4 / seconds / 1e9
    print(json.dumps({"bytes": count * 4, "time_s": seconds, "algbw_gbps": algbw,
                      "busbw_gbps": algbw * 2 * (world - 1) / world, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
