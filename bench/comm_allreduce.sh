#!/usr/bin/env bash
# Benchmark (not a test): MPI all_reduce bus bandwidth through Tessel's own communicator
# (`tessel bench-comm`, runtime/comm's MPI backend: a ring reduce-scatter + all-gather on a
# progress thread), beside PyTorch's gloo all_reduce (bench/torch_allreduce.py), in the same
# run: f32 sum at 1 KiB, 1 MiB and 256 MiB on 2 and 4 ranks of this host. Both report
# nccl-tests' busbw = S / t * 2 (n - 1) / n with t the slowest rank's mean over the timed
# iterations (more iterations for small sizes, whose times are microseconds); both check
# their result before timing. 4 ranks on fewer cores oversubscribe them: both sides alike.
# The PyTorch peer is current torch from PyPI in bench/.venv, made as bench/tp_step.sh makes
# it (Debian's torch 1.13 if pip cannot install it; the row then says so).
# Prints a table and appends a row per (ranks, size) to bench/RESULTS.md.
#
# Usage: bench/comm_allreduce.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
bench_setup tessel

source bench/torch_peer.sh
torch_peer comm_allreduce.sh  # sets $py and $peer
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

iters_for() {  # timed iterations per size: enough for a stable mean, a few seconds at most
  case "$1" in 1024) echo 2000 ;; 1048576) echo 100 ;; *) echo 5 ;; esac
}

printf "%-6s %-8s %22s %22s %8s\n" ranks size "tessel busbw GB/s" "gloo busbw GB/s" ratio
for n in 2 4; do
  for size in 1024 1048576 268435456; do
    iters=$(iters_for "$size")
    warmup=$(( iters / 10 > 1 ? iters / 10 : 1 ))
    mpirun --oversubscribe -np "$n" build/bin/tessel bench-comm --ops all_reduce --min-bytes "$size" \
      --max-bytes "$size" --iters "$iters" --warmup "$warmup" --json > "$tmp/tessel.json"
    "$py" bench/torch_allreduce.py "$n" "$size" "$iters" "$warmup" > "$tmp/torch.json"
    row=$(/usr/bin/python3 - "$tmp/tessel.json" "$tmp/torch.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["results"][0]
p = json.loads(open(sys.argv[2]).read())
assert t["verified"], "tessel bench-comm: the all_reduce result was wrong"
print(f'{t["busbw_gbps"]:.3f} {t["time_s"] * 1e6:.1f} {p["busbw_gbps"]:.3f} {p["time_s"] * 1e6:.1f} '
      f'{t["busbw_gbps"] / p["busbw_gbps"]:.3f}')
PY
)
    read -r tb tt pb pt ratio <<< "$row"
    label=$(/usr/bin/python3 -c "s=$size; print(f'{s >> 20} MiB' if s >= 1 << 20 else f'{s >> 10} KiB')")
    printf "%-6s %-8s %22s %22s %8s\n" "$n" "$label" "$tb ($tt us)" "$pb ($pt us)" "$ratio"
    echo "| $(date -u +%F) | comm_allreduce (f32 all_reduce busbw, nccl-tests definition; $n ranks, $label; ratio = busbw tessel/peer, higher is better) | $n ranks on $machine | tessel bench-comm (MPI) $tb GB/s, $tt us | pytorch gloo, $peer: $pb GB/s, $pt us | $ratio |" >> bench/RESULTS.md
  done
done
