#!/usr/bin/env bash
# Acceptance: SIGKILL one rank of a data-parallel tessel-gpt run mid-training; every other
# rank must exit non-zero within --comm-timeout + 10 s, naming the collective it waited for
# (its name and bytes), the step, and the rank that did not arrive (rank 1) or, if rank 1
# died during the exchange, the rank whose data it waits for (rank 1 for its neighbour).
# A survivor reports either from its own CommError ("tessel: rank R: ... did not arrive: 1")
# or, when mpirun terminates the job first (OpenMPI's default when a rank dies), from its
# SIGTERM report ("tessel: rank R of N: terminated by SIGTERM while waiting for ...").
# Usage: check_kill_rank.sh MPIEXEC TESSEL_GPT DATA_FILE NP
set -u
MPIEXEC=$1 GPT=$2 DATA=$3 NP=$4
TIMEOUT=5 GUARD=60
out=$(mktemp); trap 'rm -f "$out"' EXIT
start=$SECONDS
# A marker in the ranks' environment tells this job's processes from other tests' ranks.
export TESSEL_KILL_TEST_JOB="$$"
timeout --kill-after=5 "$GUARD" "$MPIEXEC" --oversubscribe -x TESSEL_KILL_TEST_JOB -np "$NP" "$GPT" --data "$DATA" \
  --layers 2 --channels 64 --heads 4 --seq 32 --batch 12 --steps 1000000 --eval-batches 1 \
  --sample-bytes 0 --device cpu --threads 1 --plan "dp=$NP" --comm-timeout "$TIMEOUT" \
  > "$out" 2>&1 &
job=$!
fail() { cat "$out"; echo "FAIL ($NP ranks): $*"; kill -9 "$job" 2>/dev/null; exit 1; }
# Wait until training runs (rank 0 printed step 3), then kill rank 1.
for _ in $(seq 200); do grep -q "^step .* 3/" "$out" && break; sleep 0.1; done
grep -q "^step .* 3/" "$out" || fail "training did not start"
victim=""
for pid in $(pgrep -f "$(basename "$GPT") --data"); do
  env_of=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null)
  if echo "$env_of" | grep -qx "OMPI_COMM_WORLD_RANK=1" &&
     echo "$env_of" | grep -qx "TESSEL_KILL_TEST_JOB=$$"; then victim=$pid; fi
done
[ -n "$victim" ] || fail "rank 1's process was not found"
killed_at=$SECONDS
kill -9 "$victim"
wait "$job"; rc=$?
elapsed=$((SECONDS - killed_at))
cat "$out"
echo "mpirun exit status $rc, $elapsed s after the kill"
[ "$rc" -ne 0 ] || fail "the job exited with status 0"
[ "$elapsed" -le $((TIMEOUT + 10)) ] || fail "survivors took $elapsed s (> timeout $TIMEOUT + 10 s)"
# Each survivor names the collective, its bytes and the step. Rank 1 either never arrived at
# it (every survivor then names rank 1 as missing), or died during the data exchange: then
# each survivor names the peer whose data it waits for, and rank 1's ring neighbour names it.
named=0
for ((r = 0; r < NP; ++r)); do
  [ "$r" -eq 1 ] && continue
  line=$(grep -E "^tessel: rank $r( of $NP)?: " "$out" | head -1)
  echo "$line" | grep -Eq "all_reduce '[^']+' .*[0-9]+ bytes, step [0-9]+" ||
    fail "rank $r did not report the collective, its bytes and the step"
  echo "$line" | grep -Eq "(did not arrive: |waiting for data from rank\(s\) )[0-9, ]+$" ||
    fail "rank $r named neither a missing rank nor the rank it waits for"
  echo "$line" | grep -Eq "(did not arrive: |waiting for data from rank\(s\) )([0-9]+, )*1(, [0-9]+)*$" &&
    named=$((named + 1))
done
[ "$named" -ge 1 ] || fail "no survivor named rank 1"
echo "PASS ($NP ranks)"
