#!/usr/bin/env bash
# Bundle identity: ranks of tessel-run that load different bundles under the same command
# line (the same relative path in another working folder, as with another copy on another
# host) are refused at startup on every rank, naming the rank whose bundle differs, before
# any step: a bundle with another optimizer, and one with the same program but another
# kernels.so. Copies of one bundle train.
# Usage: check_bundle_identity.sh MPIEXEC TESSEL_GPT TESSEL_RUN DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 RUN=$3 DATA=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/a" "$TMP/b" "$TMP/c" "$TMP/d"
SMALL=(--layers 1 --channels 32 --heads 2 --seq 16 --batch 4 --plan dp=2)
"$GPT" "${SMALL[@]}" --emit-bundle "$TMP/a/bundle" > /dev/null || { echo "FAIL: emit adamw"; exit 1; }
"$GPT" "${SMALL[@]}" --optimizer sgd --emit-bundle "$TMP/b/bundle" > /dev/null || { echo "FAIL: emit sgd"; exit 1; }
cp -r "$TMP/a/bundle" "$TMP/c/bundle"
cp -r "$TMP/a/bundle" "$TMP/d/bundle"
# Another kernels.so whose bundle.json records its checksum: the same program, other kernels.
printf 'X' >> "$TMP/d/bundle/kernels.so"
python3 - "$TMP/d/bundle" <<'PY'
import json, os, sys
d = sys.argv[1]
h = 14695981039346656037
data = open(os.path.join(d, "kernels.so"), "rb").read()
for b in data:
    h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
meta = json.load(open(os.path.join(d, "bundle.json")))
meta["kernels"]["checksum"] = f"fnv1a64:{h:016x}:{len(data)}"
json.dump(meta, open(os.path.join(d, "bundle.json"), "w"), indent=1)
PY
fail=0
COMMON=(bundle --data "$DATA" --steps 2 --threads 1 --device cpu)

# expect_refusal NAME DIR_A DIR_B: rank 0 runs in DIR_A, rank 1 in DIR_B.
expect_refusal() {
  local name=$1 a=$2 b=$3 out rc ok=1
  out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np 1 -wdir "$a" "$RUN" "${COMMON[@]}" : \
        -np 1 -wdir "$b" "$RUN" "${COMMON[@]}" 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL $name: the job exited with status 0"; ok=0; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL $name: the job hung"; ok=0; }
  for r in 0 1; do
    echo "$out" | grep "the ranks loaded different bundles at 'bundle'" | grep "rank(s) 1 differ" |
      grep -qF "[rank $r of 2]" || { echo "FAIL $name: rank $r did not name rank 1's bundle"; ok=0; }
  done
  ! echo "$out" | grep -q "^step " || { echo "FAIL $name: a rank trained"; ok=0; }
  if [ $ok -eq 1 ]; then echo "ok   $name"; else echo "$out" | head -20; fail=1; fi
}

expect_refusal "adamw and sgd bundles" "$TMP/a" "$TMP/b"
expect_refusal "other kernels.so" "$TMP/a" "$TMP/d"
out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np 1 -wdir "$TMP/a" "$RUN" "${COMMON[@]}" : \
      -np 1 -wdir "$TMP/c" "$RUN" "${COMMON[@]}" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "^step     2/2"; then echo "ok   copies of one bundle train"
else echo "FAIL copies: $out" | head -20; fail=1; fi
[ $fail -eq 0 ] && echo PASS
exit $fail
