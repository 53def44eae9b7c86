#!/usr/bin/env bash
# A rank that fails before a collective (here: rank 1 cannot open its --data, the same
# relative path in another working folder) ends the job with its own error, and the other
# ranks say that rank 1 has ended: no rank reports it as a collective mismatch (rank 0 used
# to add "all_gather 'data_fingerprint' ... does not match rank 1, which issued barrier
# 'finalize'"). Usage: check_rank_failing_early.sh MPIEXEC TESSEL_GPT DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 DATA=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/a" "$TMP/b"
cp "$DATA" "$TMP/a/data.txt"  # rank 1's folder has no data.txt
A=(--data data.txt --layers 1 --channels 32 --heads 2 --seq 16 --batch 4 --steps 2 --plan dp=2 --threads 1
   --sample-bytes 0 --comm-timeout 30)
out=$(timeout --kill-after=5 90 "$MPIEXEC" --oversubscribe -np 1 -wdir "$TMP/a" "$GPT" "${A[@]}" : \
      -np 1 -wdir "$TMP/b" "$GPT" "${A[@]}" 2>&1)
rc=$?
echo "$out"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited with status 0"; fail=1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: the job hung"; fail=1; }
echo "$out" | grep "cannot open data file 'data.txt'" | grep -qF "[rank 1 of 2]" ||
  { echo "FAIL: rank 1 did not report its own error"; fail=1; }
! echo "$out" | grep -q "does not match" || { echo "FAIL: a rank reported a collective mismatch"; fail=1; }
[ $fail -eq 0 ] && echo PASS
exit $fail
