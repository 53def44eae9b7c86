#!/usr/bin/env bash
# Benchmark (not a test): the pipeline bubble, measured from --trace beside the simulator's
# prediction and the closed form, for each built-in schedule (gpipe, 1f1b, interleaved with
# v = 2, zero-bubble) at pp=2 and pp=4 on CPU ranks. Model: GPT L=8 C=64 NH=2 T=64, global
# B=32, M=8 microbatches per step (interleaved needs M a multiple of p, and pp=4 x v=2 needs 8
# blocks), AdamW, one thread per rank.
# Per run (steps 3-8 traced: 2 warm-up steps), medians over the traced steps:
#   measured    the bubble fraction from the trace's pipeline action spans
#               (test/mpi/pipeline_trace.py): 1 - compute span time over ranks x the window
#               from the first action's start to the last one's end on any rank;
#   predicted   the simulator's (runtime/pipeline simulate) on the trainer's cost model of the
#               compiled stages (nominal rates, --pp-gemm-gflops etc.; the trace's predicted
#               track);
#   calibrated  the simulator on uniform costs measured in this run: the median F and B (I, W)
#               span per chunk and the median send/recv span (`tessel pipeline --json`);
#   closed      (p-1)/(m+p-1) for gpipe and 1f1b, (p-1)/(v m+p-1) interleaved,
#               (p-1)/(3m+p-1) zero-bubble (F = I = W).
# On a machine with fewer cores than ranks (pp=4 on 2 cores), or one loaded by other work, the
# ranks share cores. mpirun --oversubscribe makes a rank that waits in a send/recv yield its
# core, and the scheduler gives it back milliseconds later: a group of two 32 KiB transfers
# then takes 1-20 ms instead of the ~0.02 ms the cost model predicts, and each such wait is
# bubble. So on such a machine the measured bubble is well above the prediction (which knows
# nothing of other work), and the step times vary between runs; the row records the cores
# and the load average. With more ranks than cores at most `cores` ranks compute at a time, so
# the measured bubble is at least 1 - cores / ranks (0.5 for pp=4 on 2 cores) unless
# preemption stretches compute spans.
# Prints a table and adds one row per run to the pipeline section of bench/RESULTS.md.
#
# Usage: bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=8
MICROBATCHES=8
MODEL=(--layers 8 --channels 64 --heads 2 --seq 64 --batch 32 --sample-bytes 0 --threads 1)
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt tessel

for p in 2 4; do
  for schedule in gpipe 1f1b interleaved zero-bubble; do
    extra=()
    if [ "$schedule" = interleaved ]; then extra=(--pp-virtual-stages 2); fi
    name="pp${p}-${schedule}"
    mpirun --oversubscribe -np "$p" build/bin/tessel-gpt "${MODEL[@]}" --data "$DATA" --plan "pp=$p" \
      --microbatches "$MICROBATCHES" --pp-schedule "$schedule" "${extra[@]}" --steps "$STEPS" \
      --trace-steps "3:$STEPS" --trace "$tmp/$name.json" >"$tmp/$name.log" 2>&1 ||
      { cat "$tmp/$name.log" >&2; exit 1; }
  done
done
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
/usr/bin/python3 bench/pipeline_report.py "$tmp" build/bin/tessel "$MICROBATCHES" "$(nproc)" "$cpu" bench/RESULTS.md
