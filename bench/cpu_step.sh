#!/usr/bin/env bash
# Benchmark (not a test): one AdamW training step of the GPT learning config
# (L=4, C=128, NH=4, T=64, B=32) in Tessel (generated C++ kernels + OpenBLAS) and in PyTorch
# (Debian python3-torch, CPU), same threads, side by side in one run. Each side runs twice,
# interleaved, and keeps its better median, so a noisy neighbour hurts both alike.
# Prints the step times and the ratio Tessel/PyTorch, and appends a row to bench/RESULTS.md.
# Target: ratio <= 1.0. Goal: <= 0.5.
#
# Usage: bench/cpu_step.sh [threads]   (default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${1:-$(nproc)}"
STEPS=40
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt

tessel_step() {
  build/bin/tessel-gpt --data "$DATA" --layers 4 --channels 128 --heads 4 --seq 64 --batch 32 \
    --steps "$STEPS" --schedule constant --eval-batches 1 --sample-bytes 0 --threads "$THREADS" \
    --log-json "$tmp/tessel.json" >/dev/null
  /usr/bin/python3 - "$tmp/tessel.json" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
print(statistics.median(s["step_seconds"] for s in steps[5:-1]))  # skip warmup and the eval step
PY
}
torch_step() {
  /usr/bin/python3 bench/torch_gpt_step.py --threads "$THREADS" --steps "$STEPS" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])'
}

t1=$(tessel_step); p1=$(torch_step); t2=$(tessel_step); p2=$(torch_step)
best() { /usr/bin/python3 -c "print(min($1, $2))"; }
tessel=$(best "$t1" "$t2"); torch=$(best "$p1" "$p2")
ratio=$(/usr/bin/python3 -c "print(f'{$tessel / $torch:.3f}')")
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
echo "GPT L=4 C=128 NH=4 T=64 B=32, AdamW step, $THREADS threads on $cpu"
printf 'tessel  %.4f s/step\npytorch %.4f s/step\nratio tessel/pytorch = %s\n' "$tessel" "$torch" "$ratio"
printf '| %s | cpu_step (GPT L4 C128 T64 B32, AdamW) | %s threads, %s | tessel %.4f s | pytorch %.4f s | %s |\n' \
  "$(date -u +%F)" "$THREADS" "$cpu" "$tessel" "$torch" "$ratio" >> bench/RESULTS.md
