#!/usr/bin/env bash
# Ranks started with different arguments (mpirun's MPMD syntax: a different --batch on one
# rank) are refused at startup on every rank, naming the differing rank, instead of training
# on different batches. Usage: check_mismatched_ranks.sh MPIEXEC TESSEL_GPT DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 DATA=$3
A=(--data "$DATA" --layers 1 --channels 32 --heads 2 --seq 16 --steps 2 --plan dp=2 --threads 1
   --sample-bytes 0 --comm-timeout 30)
out=$(timeout --kill-after=5 60 "$MPIEXEC" --oversubscribe -np 1 "$GPT" "${A[@]}" --batch 4 : \
      -np 1 "$GPT" "${A[@]}" --batch 8 2>&1)
rc=$?
echo "$out"
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited with status 0"; exit 1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: the job hung"; exit 1; }
echo "$out" | grep -q "rank(s) 1 were started with other arguments than rank 0" ||
  { echo "FAIL: no rank named the mismatch"; exit 1; }
echo PASS
