#!/usr/bin/env bash
# tessel-gpt --device cuda --plan dp=2 under mpirun on a machine without a usable GPU: every
# rank must exit 1 with the NCCL bootstrap's message naming each rank and its cause (the
# ranks agree over MPI before entering NCCL, so none waits for a peer that cannot join), and
# the job must end well within the guard (no hang). Usage:
#   gpu_dp_without_gpu_test.sh MPIEXEC TESSEL_GPT DATA
set -u
MPIEXEC=$1 GPT=$2 DATA=$3
if [ -e /dev/nvidiactl ]; then
  echo "this machine has an NVIDIA device; the test is for machines without one"
  exit 0
fi
start=$SECONDS
out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np 2 "$GPT" --device cuda --plan dp=2 \
  --data "$DATA" --layers 1 --channels 32 --heads 2 --seq 16 --batch 4 --steps 1 --sample-bytes 0 2>&1)
rc=$?
elapsed=$((SECONDS - start))
echo "$out"
echo "mpirun exit status: $rc"
fail() { echo "FAIL: $*"; exit 1; }
[ "$elapsed" -ge 120 ] && fail "the job did not finish within the 120 s guard (hang)"
[ "$rc" -eq 1 ] || fail "the job exited with status $rc, not 1"
for r in 0 1; do
  line=$(echo "$out" | grep "^tessel: rank $r: the NCCL communicator cannot start: ") ||
    fail "rank $r did not print the NCCL bootstrap failure"
  for cause in 0 1; do
    echo "$line" | grep -q "rank $cause: the CUDA driver libcuda.so.1 cannot be loaded" ||
      fail "rank $r's message does not name rank $cause's cause"
  done
done
echo "$out" | grep -q "loss" && fail "a rank trained"
echo PASS
