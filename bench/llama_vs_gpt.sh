#!/usr/bin/env bash
# Benchmark (not a test): does the Llama learn at least as well as the GPT? tessel-gpt and
# tessel-llama train on tinyshakespeare with the same seed, learning rate, schedule, batch, T
# and number of steps, and sizes within 10% of each other's parameter count: L=4, C=128, NH=4,
# T=64, B=32, 500 AdamW steps at a constant lr 1e-3 (no warmup, no weight decay: the GPT
# learning test's config, test/python/check_learning.py); the Llama with NKV=2 and the SwiGLU
# width H=384 (its defaults at C=128). Prints both parameter counts as the programs report them
# and both validation losses (nats/byte, mean over the first 32 validation batches, after the
# last step), and adds a row to bench/RESULTS.md's "Llama vs GPT" section.
#
# Usage: bench/llama_vs_gpt.sh [threads]   (default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${1:-$(nproc)}"
STEPS=500
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt tessel-llama

COMMON=(--data "$DATA" --seed 1337 --layers 4 --channels 128 --heads 4 --seq 64 --batch 32
        --steps "$STEPS" --lr 1e-3 --warmup 0 --schedule constant --weight-decay 0
        --eval-every 100 --eval-batches 32 --sample-bytes 0 --threads "$THREADS")

# train NAME BINARY [FLAGS...]: runs one model; its stdout goes to $tmp/NAME.out, its log to
# $tmp/NAME.json.
train() {
  local name="$1" exe="$2"
  shift 2
  echo "running: $exe ${COMMON[*]} $*"
  "$exe" "${COMMON[@]}" "$@" --log-json "$tmp/$name.json" >"$tmp/$name.out"
}
start=$SECONDS
train gpt build/bin/tessel-gpt
gpt_s=$((SECONDS - start)) gpt_load=$(cut -d' ' -f1 /proc/loadavg)
start=$SECONDS
train llama build/bin/tessel-llama --kv-heads 2 --hidden 384
llama_s=$((SECONDS - start)) llama_load=$(cut -d' ' -f1 /proc/loadavg)

/usr/bin/python3 - "$tmp" "$gpt_s s, load average $gpt_load" "$llama_s s, load average $llama_load" "$THREADS" <<'PY'
import datetime, json, re, subprocess, sys
sys.path.insert(0, "bench")
from results_md import add_section_rows

# The wall times with the machine's load average after each run: a shared machine slows a run
# by its load, so they say what a run cost, not which model is faster.
tmp, gpt_s, llama_s, threads = sys.argv[1:5]


def result(name):
    """(parameter count as the program reports it, describe, validation losses by step)."""
    out = open(f"{tmp}/{name}.out").read()
    m = re.search(rf"tessel-{name}: (.*?), ([0-9]+) parameters,", out)
    if not m:
        sys.exit(f"no parameter count in tessel-{name}'s output:\n{out[-2000:]}")
    steps = [json.loads(line) for line in open(f"{tmp}/{name}.json")]
    evals = [(s["step"], s["val_loss"]) for s in steps if "val_loss" in s]
    return int(m.group(2)), m.group(1), evals


(gpt_p, gpt_d, gpt_v), (llama_p, llama_d, llama_v) = result("gpt"), result("llama")
for name, p, d, v, s in (("tessel-gpt", gpt_p, gpt_d, gpt_v, gpt_s), ("tessel-llama", llama_p, llama_d, llama_v, llama_s)):
    print(f"{name:13s} {d}: {p} parameters, {s}; validation loss by step: "
          + ", ".join(f"{k}: {x:.4f}" for k, x in v))
ratio = llama_p / gpt_p
print(f"parameters llama/gpt = {ratio:.4f}; final validation loss gpt {gpt_v[-1][1]:.4f}, "
      f"llama {llama_v[-1][1]:.4f} ({'at or below' if llama_v[-1][1] <= gpt_v[-1][1] else 'ABOVE'} the GPT's)")
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
cpu = re.search(r"^Model name:\s*(.*)$", cpu, re.M).group(1)
intro = """The Llama (bench/llama_vs_gpt.sh; docs/llama.md) against the GPT on tinyshakespeare: the same seed
(1337), lr (1e-3, constant, no warmup, no weight decay), batch (32), T (64) and 500 steps, L=4, C=128,
NH=4; the Llama with NKV=2 and H=384, an untied head and no position table. Validation loss in
nats/byte over the first 32 validation batches after the last step; parameter counts as the
programs report them; wall time and load average of each run (the machine is shared: the times
say what a run cost under that load, not which model is faster).

| date | machine | gpt: parameters, val loss | llama: parameters, val loss | parameters llama/gpt | val loss llama - gpt |
|---|---|---|---|---|---|"""
row = (f"| {datetime.date.today()} | {threads} threads, {cpu} | {gpt_p}, {gpt_v[-1][1]:.4f} ({gpt_s}) | "
       f"{llama_p}, {llama_v[-1][1]:.4f} ({llama_s}) | {ratio:.4f} | {llama_v[-1][1] - gpt_v[-1][1]:+.4f} |")
add_section_rows("bench/RESULTS.md", "## Llama vs GPT (bench/llama_vs_gpt.sh)", intro, [row])
PY
