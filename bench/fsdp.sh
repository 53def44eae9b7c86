#!/usr/bin/env bash
# Benchmark (not a test): fully sharded data parallelism (ZeRO-3), fsdp=N for N = 1, 2, 4 on CPU
# ranks, the GPT learning config (L=4, C=128, NH=4, T=64, global B=32, AdamW, clipping), side by
# side in one run:
#   - Tessel, `--plan fsdp=N` under mpirun (each parameter, its gradient and its AdamW state
#     split on dimension 0; all-gathers before use, reduce-scatters of the gradients), with and
#     without prefetch (--fsdp-prefetch 1, the default, and 0), and `--plan dp=N` for the
#     data-parallel wire bytes;
#   - PyTorch FSDP2 (`fully_shard` per block and on the root) over gloo, N processes
#     (bench/torch_fsdp_step.py), without prefetch, with FSDP2's default (implicit backward
#     prefetch) and with explicit prefetch one block ahead.
# A rank gets nproc/N threads (at least 1: fsdp=4 on 2 cores is oversubscribed, which inflates
# its times and exposed communication alike on both sides).
# Reported, per rank and step (medians of steps 6-19: 5 warm-up steps, and the last step also
# validates):
#   payload   bytes of every collective a rank issues (all_gather: its output, reduce_scatter:
#             its input, all_reduce: its buffer; runtime/comm/Communicator.h), against the
#             closed form of ZeRO-3 with FSDP2's root unit: every parameter all-gathered in
#             forward and again in backward, except the root unit (embeddings and final
#             LayerNorm: not resharded after forward, so gathered once), and every gradient
#             reduce-scattered once: 3 P - R bytes (P all parameter bytes, R the root's);
#   wire      bytes a rank sends in ring collectives: (N-1)/N of each all_gather and
#             reduce_scatter payload, 2 (N-1)/N of each all_reduce; beside DDP's (Tessel's
#             dp=N run, counted; and its closed form 2 (N-1)/N P). FSDP's closed form is
#             3 (N-1)/N P, 1.5 times DDP's;
#   exposed   seconds a rank is blocked in collective waits per step (Tessel: its collective
#             counters; PyTorch: time inside all_gather_single / reduce_scatter_single and
#             their Work.wait(), which FSDP2 calls);
#   memory    per rank: Tessel's parameters + optimizer state of each rank (--log-json
#             run.memory; its gradients live in the activation arena) and rank 0's
#             peak_memory_bytes (those plus the arena's high-water mark); PyTorch's local
#             parameter, gradient and AdamW-state shards, and its peak resident set (which
#             includes the Python and torch runtime).
# Checked before anything is recorded: step 1's loss and gradient norm under fsdp=N against
# fsdp=1, Tessel to 1e-4 relative (the tolerance of bench/tp_step.sh), PyTorch to 1e-5
# (bench/torch_tp_step.py's: the ranks differ from one process only in the order of the
# batch-mean sums, a few ulps).
# The PyTorch peer is current torch from PyPI (bench/torch_peer.sh, bench/.venv; the table
# names its version). If the trainer does not know --fsdp-prefetch yet, the prefetch-off rows
# are skipped with a message.
# Prints a table and appends one row per N to bench/RESULTS.md.
#
# Usage: bench/fsdp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=20
MODEL=(--layers 4 --channels 128 --heads 4 --seq 64 --batch 32)
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt

source bench/torch_peer.sh
torch_peer fsdp.sh  # sets $py and $peer

prefetch_flag=1
help=$(build/bin/tessel-gpt --help)  # captured: grep -q on a pipe would SIGPIPE the writer under pipefail
if [[ "$help" != *--fsdp-prefetch* ]]; then
  prefetch_flag=0
  echo "fsdp.sh: tessel-gpt does not know --fsdp-prefetch yet; the Tessel rows without prefetch are skipped" >&2
fi

tessel_run() {  # $1: name, $2: ranks, then the plan flags; writes $tmp/$1.json
  local name=$1 n=$2 launch=() threads
  shift 2
  threads=$(( $(nproc) / n )); [ "$threads" -ge 1 ] || threads=1
  if [ "$n" -gt 1 ]; then launch=(mpirun --oversubscribe -np "$n"); fi
  if ! "${launch[@]}" build/bin/tessel-gpt --data "$DATA" "${MODEL[@]}" --steps "$STEPS" --schedule constant \
      --eval-batches 1 --sample-bytes 0 --threads "$threads" "$@" --log-json "$tmp/$name.json" \
      > "$tmp/$name.out" 2>&1; then
    grep -m 4 -i "error" "$tmp/$name.out" >&2 || tail -5 "$tmp/$name.out" >&2
    echo "fsdp.sh: tessel-gpt $* failed (above); nothing recorded" >&2
    exit 1
  fi
}

for n in 1 2 4; do
  tessel_run "fsdp$n" "$n" --plan "fsdp=$n"
  if [ "$n" -gt 1 ]; then
    tessel_run "dp$n" "$n" --plan "dp=$n"
    if [ "$prefetch_flag" = 1 ]; then tessel_run "fsdp$n-noprefetch" "$n" --plan "fsdp=$n" --fsdp-prefetch 0; fi
  fi
done

for n in 1 2 4; do
  threads=$(( $(nproc) / n )); [ "$threads" -ge 1 ] || threads=1
  variants=none,default,1; [ "$n" -gt 1 ] || variants=default
  # A bound on the peer's time: gloo's rendezvous has been seen to hang on these machines.
  if ! timeout 1200 "$py" bench/torch_fsdp_step.py --ranks "$n" --threads "$threads" --steps "$STEPS" \
      --layers 4 --channels 128 --heads 4 --seq 64 --batch 32 --variants "$variants" \
      > "$tmp/torch$n.json" 2> "$tmp/torch$n.err"; then
    grep -v -i "warn" "$tmp/torch$n.err" | tail -5 >&2
    echo "fsdp.sh: bench/torch_fsdp_step.py --ranks $n failed or ran past 20 minutes (above); nothing recorded" >&2
    exit 1
  fi
done

# The machine is shared: the load average at the end says how much the times can be trusted.
cpu="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), load average $(cut -d' ' -f1 /proc/loadavg)"
/usr/bin/python3 bench/fsdp_report.py "$tmp" "$STEPS" "$peer" "$cpu" "$(nproc)" "$prefetch_flag" bench/RESULTS.md
