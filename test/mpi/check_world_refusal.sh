#!/usr/bin/env bash
# No silent copies under a launcher: every training binary started by `mpirun -np 2` with a
# plan for another number of ranks (smaller: dp=1, larger: dp=4) exits non-zero on both
# ranks, each with one line naming the world and the plan, and trains nothing. Also:
# --emit-bundle under a launcher, and a plain run of a bundle compiled for 4 ranks. Pipeline
# plans: `mpirun -np 3` of pp=2,dp=2 (4 ranks) and of pp=2 (2 ranks) refuse on all 3 ranks
# without suggesting a dp-only plan (which would drop the pipeline).
# Usage: check_world_refusal.sh MPIEXEC TESSEL_GPT TESSEL_MLP TESSEL_RUN DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 MLP=$3 RUN=$4 DATA=$5
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SMALL=(--layers 1 --channels 32 --heads 2 --seq 16 --batch 4 --threads 1)
fail=0

# expect_refusal NAME PATTERN COMMAND...: non-zero, no hang, PATTERN on every rank (NP ranks,
# 2 unless set), no step.
expect_refusal() {
  local name=$1 pattern=$2 np=${NP:-2}
  shift 2
  local out rc
  out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np "$np" "$@" 2>&1)
  rc=$?
  local ok=1
  [ "$rc" -ne 0 ] || { echo "FAIL $name: the job exited with status 0"; ok=0; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL $name: the job hung"; ok=0; }
  for ((r = 0; r < np; ++r)); do
    echo "$out" | grep -F "$pattern" | grep -qF "[rank $r of $np]" ||
      { echo "FAIL $name: rank $r did not say '$pattern'"; ok=0; }
  done
  ! echo "$out" | grep -q "^step " || { echo "FAIL $name: a rank trained"; ok=0; }
  if [ $ok -eq 1 ]; then echo "ok   $name"; else echo "$out" | head -20; fail=1; fi
}

"$GPT" "${SMALL[@]}" --emit-bundle "$TMP/dp1" > /dev/null || { echo "FAIL: emit dp1"; exit 1; }
"$GPT" "${SMALL[@]}" --plan dp=4 --emit-bundle "$TMP/dp4" > /dev/null || { echo "FAIL: emit dp4"; exit 1; }

for plan in 1 4; do
  if [ $plan -eq 1 ]; then want="the plan is dp=1 (one rank); pass --plan dp=2 or launch one process"
  else want="the plan is dp=4 (4 ranks); pass --plan dp=2 or launch 4 processes (mpirun -np 4)"; fi
  expect_refusal "tessel-gpt dp=$plan" "launched as 2 ranks but $want" \
    "$GPT" "${SMALL[@]}" --data "$DATA" --steps 2 --sample-bytes 0 --plan dp=$plan
  expect_refusal "tessel-mlp dp=$plan" "launched as 2 ranks but $want" \
    "$MLP" --batch 8 --hidden 16 --steps 2 --threads 1 --plan dp=$plan
  expect_refusal "tessel-run dp=$plan bundle" \
    "launched as 2 ranks but ${want/pass --plan/compile the bundle with --plan}" \
    "$RUN" "$TMP/dp$plan" --data "$DATA" --steps 2 --threads 1
done
expect_refusal "tessel-gpt --emit-bundle" "launched as 2 ranks, but --emit-bundle only compiles" \
  "$GPT" "${SMALL[@]}" --plan dp=2 --emit-bundle "$TMP/launched"

NP=3 expect_refusal "tessel-gpt pp=2,dp=2 on 3 ranks" \
  "launched as 3 ranks but the plan is pp=2,dp=2 (4 ranks); launch 4 processes (mpirun -np 4), or pass a plan whose axis sizes multiply to 3" \
  "$GPT" "${SMALL[@]}" --layers 2 --data "$DATA" --steps 2 --sample-bytes 0 --plan pp=2,dp=2
NP=3 expect_refusal "tessel-gpt pp=2 on 3 ranks" \
  "launched as 3 ranks but the plan is pp=2 (2 ranks); launch 2 processes (mpirun -np 2), or pass a plan whose axis sizes multiply to 3" \
  "$GPT" "${SMALL[@]}" --layers 2 --data "$DATA" --steps 2 --sample-bytes 0 --plan pp=2

out=$("$RUN" "$TMP/dp4" --data "$DATA" --steps 2 2>&1)
if [ $? -ne 0 ] && echo "$out" | grep -qF "started as one rank but the plan is dp=4 (4 ranks); compile the bundle with --plan dp=1 or launch 4 processes (mpirun -np 4)"; then
  echo "ok   plain tessel-run of a dp=4 bundle"
else
  echo "FAIL plain tessel-run of a dp=4 bundle: $out"; fail=1
fi
[ $fail -eq 0 ] && echo PASS
exit $fail
