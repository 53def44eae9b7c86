#!/usr/bin/env bash
# A --comm-timeout too short for the launch (1 ms: MPI itself takes longer to start) ends
# the job on every rank with a message that says the timeout may be too short, not only
# that a rank did not join. Usage: check_short_timeout.sh MPIEXEC TESSEL_GPT DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 DATA=$3
out=$(timeout --kill-after=5 60 "$MPIEXEC" --oversubscribe -np 2 "$GPT" --data "$DATA" --layers 1 --channels 32 \
      --heads 2 --seq 16 --batch 4 --steps 1 --plan dp=2 --threads 1 --sample-bytes 0 --comm-timeout 0.001 2>&1)
rc=$?
echo "$out"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited with status 0"; fail=1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: the job hung"; fail=1; }
for r in 0 1; do
  echo "$out" | grep "^tessel: rank $r: " | grep -q "the timeout may be too short" ||
    { echo "FAIL: rank $r did not say the timeout may be too short"; fail=1; }
done
[ $fail -eq 0 ] && echo PASS
exit $fail
