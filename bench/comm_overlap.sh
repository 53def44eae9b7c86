#!/usr/bin/env bash
# Benchmark (not a test): data parallelism on N CPU ranks (default 2), the GPT learning
# config (L=4, C=128, NH=4, T=64, global B=32, AdamW), gradient buckets of 1 MiB on both
# sides. Tessel runs under mpirun with the all-reduces overlapped with the backward pass
# and without; PyTorch runs the same model under DistributedDataParallel over gloo
# (bench/torch_ddp_step.py), side by side in this run.
#   exposed  = communication the backward pass did not hide, per step. Tessel: the time its
#              collective waits block (runtime counters). PyTorch: DDP step - no_sync step.
#   hidden   = 1 - exposed / (the same all-reduces alone). Tessel: its waits without overlap
#              are the whole all-reduces (every bucket starts at the end of backward).
# Prints a table and appends the rows to bench/RESULTS.md.
#
# Usage: bench/comm_overlap.sh [ranks]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2}"
STEPS=30
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"
source bench/common.sh
bench_setup tessel-gpt
threads=$(( $(nproc) / N )); [ "$threads" -ge 1 ] || threads=1

tessel_run() {  # $1: --overlap or --no-overlap; prints "<median step s> <exposed ms/step>"
  mpirun --oversubscribe -np "$N" build/bin/tessel-gpt --data "$DATA" --layers 4 --channels 128 \
    --heads 4 --seq 64 --batch 32 --steps "$STEPS" --schedule constant --eval-batches 1 \
    --sample-bytes 0 --threads "$threads" --plan "dp=$N" --bucket-mb 1 "$1" \
    --log-json "$tmp/tessel.json" > "$tmp/tessel.out"
  /usr/bin/python3 - "$tmp/tessel.json" "$tmp/tessel.out" <<'PY'
import json, re, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
comm = re.search(r"exposed \(waits\) ([0-9.]+) ms/step", open(sys.argv[2]).read())
print(statistics.median(s["step_seconds"] for s in steps[5:-1]), comm.group(1) if comm else "nan")
PY
}
read -r t_on e_on < <(tessel_run --overlap)
read -r t_off e_off < <(tessel_run --no-overlap)
torch_json=$(/usr/bin/python3 bench/torch_ddp_step.py --ranks "$N" --threads "$threads" \
  --steps "$STEPS" --bucket-mb 1 2>/dev/null | tail -1)

/usr/bin/python3 - "$N" "$t_on" "$e_on" "$t_off" "$e_off" "$torch_json" <<'PY' | tee "$tmp/table"
import json, sys
n = int(sys.argv[1]); t_on, e_on, t_off, e_off = map(float, sys.argv[2:6]); tj = json.loads(sys.argv[6])
ms = lambda s: 1e3 * s
hidden_t = 1 - e_on / e_off if e_off > 0 else float("nan")
exp_p = ms(tj["exposed_s"]); alone_p = ms(tj["allreduce_alone_s"])
hidden_p = 1 - exp_p / alone_p if alone_p > 0 else float("nan")
print(f"GPT L=4 C=128 T=64 B=32, dp={n} on CPU ranks, 1 MiB buckets")
print(f"{'':24} {'step ms':>9} {'exposed comm ms/step':>21} {'hidden':>7}")
print(f"{'tessel overlap on':24} {ms(t_on):9.2f} {e_on:21.3f} {hidden_t:7.1%}")
print(f"{'tessel overlap off':24} {ms(t_off):9.2f} {e_off:21.3f} {0:7.1%}")
print(f"{'pytorch DDP (gloo)':24} {ms(tj['step_s']):9.2f} {exp_p:21.3f} {hidden_p:7.1%}")
print(f"ratio tessel/pytorch step time (overlap on): {t_on / tj['step_s']:.3f}")
PY
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
/usr/bin/python3 - "$N" "$t_on" "$e_on" "$e_off" "$torch_json" "$cpu" >> bench/RESULTS.md <<'PY'
import datetime, json, sys
n, t_on, e_on, e_off = int(sys.argv[1]), *map(float, sys.argv[2:5]); tj = json.loads(sys.argv[5])
d = datetime.date.today().isoformat()
hidden = 1 - e_on / e_off if e_off > 0 else float("nan")
hp = 1 - tj["exposed_s"] / tj["allreduce_alone_s"] if tj["allreduce_alone_s"] > 0 else float("nan")
print(f"| {d} | comm_overlap (GPT L4 C128 T64 B32, dp={n}, 1 MiB buckets) | {n} ranks, {sys.argv[6]} "
      f"| tessel {1e3*t_on:.1f} ms/step, exposed comm {e_on:.2f} ms (off: {e_off:.2f} ms), hidden {hidden:.0%} "
      f"| pytorch DDP gloo {1e3*tj['step_s']:.1f} ms/step, exposed {1e3*tj['exposed_s']:.2f} ms, hidden {hp:.0%} "
      f"| {t_on / tj['step_s']:.3f} |")
PY
