#!/usr/bin/env bash
# Benchmark (not a test): distributed checkpoints of a GPT big enough that saving takes
# measurable time (L=8, C=512, NH=8: 25.4 M parameters, f32 with AdamW's two moments, about
# 304 MB of state), on 2 CPU ranks under --plan fsdp=2 (each rank writes its half), side by side
# in one run with the disk's raw speed:
#   blocked   how long the training loop is blocked per save: --async-checkpoint (the snapshot
#             into host memory, plus any wait for the previous save) against a synchronous save
#             of the same state (write, fsync, the ranks' agreement and rank 0's commit). Read
#             from rank 0's "checkpoint step N durable: ... (blocked X s)" lines
#             (runtime/ckpt/Checkpoint.h Checkpointer::poll), median over the run's saves;
#   save      bytes per second of a synchronous save (shard bytes / the save's seconds, from the
#             same lines; both ranks write at once) against dd writing the same number of bytes
#             with conv=fdatasync (one stream, data on disk before dd ends, as the save's fsyncs);
#   load      bytes per second of `--resume` (the ranks' bytes read, from the "resumed from ...
#             N bytes read" line, over the load's seconds: the wall time of a run that loads and
#             stops at once, --stop-after at the checkpoint's step, minus that of the same run
#             without --resume, --stop-after 0; both compile, initialise and start the same way)
#             against dd reading a file of the same size. Both read cold: before each read the
#             files' pages are dropped from the page cache (posix_fadvise DONTNEED through dd
#             iflag=nocache; fincore confirms), so neither is served from memory;
#   run       the wall time of each whole run (9 steps, 3 saves, start-up included): the blocked
#             time is not all an asynchronous save costs where the writer thread shares the
#             ranks' cores (here 2 ranks on 2 cores), and this shows the rest.
# Medians of REPEATS runs where a run is cheap (dd, loads). Ratios are tessel/peer: blocked
# async/sync (lower is better), throughput save/dd-write and load/dd-read (higher is better).
# Prints a table and adds one row to the checkpoint section of bench/RESULTS.md.
#
# Usage: bench/checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=(--layers 8 --channels 512 --heads 8 --seq 16 --batch 4)
RANKS=2 PLAN=fsdp=2 STEPS=9 EVERY=3 REPEATS=3
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt

# Room for two checkpoint roots of one kept checkpoint each, a checkpoint being written, and dd's file.
need=$((4 * 400 * 1000 * 1000))
avail=$(df --output=avail -B1 "$tmp" | tail -1)
if [ "$avail" -lt "$need" ]; then
  echo "checkpoint.sh: $tmp's file system has $avail bytes free, the benchmark needs $need" >&2
  exit 1
fi

gpt() {  # $1: name (output in $tmp/NAME.out); then the run's own flags
  local name=$1
  shift
  if ! mpirun --oversubscribe -np "$RANKS" build/bin/tessel-gpt --data "$DATA" "${MODEL[@]}" --steps "$STEPS" \
      --eval-batches 1 --sample-bytes 0 --device cpu --threads 1 --plan "$PLAN" "$@" > "$tmp/$name.out" 2>&1; then
    grep -m 4 -i "error" "$tmp/$name.out" >&2 || tail -5 "$tmp/$name.out" >&2
    echo "checkpoint.sh: tessel-gpt $* failed (above); nothing recorded" >&2
    exit 1
  fi
}
evict() {  # drops the files' pages from the page cache, and says so if some stay
  local f resident
  for f in "$@"; do
    sync "$f"  # only clean pages can be dropped
    dd if="$f" iflag=nocache count=0 status=none
    resident=$(fincore --bytes --noheadings --output RES "$f" | tr -d ' ')
    if [ "$resident" != 0 ]; then echo "checkpoint.sh: $resident bytes of '$f' stay in the page cache" >&2; fi
  done
}
elapsed() { echo "$EPOCHREALTIME - $1" | bc -l; }  # seconds since $1 (an $EPOCHREALTIME)
times="$tmp/times"
: > "$times"

# The saves: the same state every EVERY steps, synchronous and asynchronous.
for mode in sync async; do
  t0=$EPOCHREALTIME
  gpt "$mode" --checkpoint-dir "$tmp/$mode" --checkpoint-every "$EVERY" --keep-checkpoints 1 \
    $([ "$mode" = async ] && echo --async-checkpoint)
  echo "run_$mode $(elapsed "$t0")" >> "$times"
done
# The checkpoint's size as the durable line writes it (decimal units), in whole MiB for dd.
size=$(sed -n 's/^checkpoint step .* durable: \([0-9.]*\) \(bytes\|kB\|MB\|GB\) from.*/\1 \2/p' "$tmp/sync.out" | tail -1)
case "${size#* }" in bytes) unit=1 ;; kB) unit=1000 ;; MB) unit=1000000 ;; GB) unit=1000000000 ;; esac
mib=$(echo "(${size% *} * $unit + 1048575) / 1048576" | bc)
last=$(cat "$tmp/sync/latest")

for ((i = 0; i < REPEATS; ++i)); do
  # The disk: dd writes the checkpoint's bytes and waits for them to be on disk, then reads them cold.
  rm -f "$tmp/dd.bin"
  t0=$EPOCHREALTIME
  dd if=/dev/zero of="$tmp/dd.bin" bs=1M count="$mib" conv=fdatasync status=none
  echo "dd_write $(elapsed "$t0") $((mib * 1048576))" >> "$times"
  evict "$tmp/dd.bin"
  t0=$EPOCHREALTIME
  dd if="$tmp/dd.bin" of=/dev/null bs=1M status=none
  echo "dd_read $(elapsed "$t0") $((mib * 1048576))" >> "$times"
  # The load: a run that only loads against one that only starts.
  t0=$EPOCHREALTIME
  gpt start --stop-after 0
  echo "start $(elapsed "$t0")" >> "$times"
  evict "$tmp/sync/$last"/*
  t0=$EPOCHREALTIME
  gpt "load$i" --resume "$tmp/sync" --stop-after "$STEPS"
  echo "load $(elapsed "$t0")" >> "$times"
done
rm -f "$tmp/dd.bin"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
disk=$(df --output=source,fstype "$tmp" | tail -1 | tr -s ' ')
/usr/bin/python3 bench/checkpoint_report.py "$tmp" "$REPEATS" "$cpu" "$(nproc)" "$disk" bench/RESULTS.md
