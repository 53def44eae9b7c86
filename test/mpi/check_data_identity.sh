#!/usr/bin/env bash
# Data identity: ranks that read different data under the same command line (the same
# relative --data path in another working folder, as with another copy on another host)
# are refused at startup on every rank, naming the rank whose data differ, before any step:
# tessel-gpt, tessel-run (a dp=2 bundle) and tessel-mlp (one test label changed).
# Usage: check_data_identity.sh MPIEXEC TESSEL_GPT TESSEL_MLP TESSEL_RUN DATA_FILE
set -u
MPIEXEC=$1 GPT=$2 MLP=$3 RUN=$4 DATA=$5
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/a" "$TMP/b" "$TMP/ia" "$TMP/ib"
cp "$DATA" "$TMP/a/data.txt"
cp "$DATA" "$TMP/b/data.txt"
printf 'X' | dd of="$TMP/b/data.txt" bs=1 seek=1000 conv=notrunc status=none  # one byte differs
FM=/usr/share/datasets/fashion-mnist
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  ln -s "$FM/$f" "$TMP/ia/$f"
  [ "$f" = t10k-labels-idx1-ubyte.gz ] || ln -s "$FM/$f" "$TMP/ib/$f"
done
# The first test label (byte 8 of the idx1 file), changed to another class.
gzip -dc "$FM/t10k-labels-idx1-ubyte.gz" > "$TMP/labels"
first=$(od -An -tu1 -j8 -N1 "$TMP/labels" | tr -d ' ')
printf "\\x$(printf %02x $(( (first + 1) % 10 )))" | dd of="$TMP/labels" bs=1 seek=8 conv=notrunc status=none
gzip -c "$TMP/labels" > "$TMP/ib/t10k-labels-idx1-ubyte.gz"

SMALL=(--layers 1 --channels 32 --heads 2 --seq 16 --batch 4 --threads 1)
"$GPT" "${SMALL[@]}" --plan dp=2 --emit-bundle "$TMP/bundle" > /dev/null || { echo "FAIL: emit"; exit 1; }
fail=0

# expect_refusal NAME DIR_A DIR_B COMMAND...: rank 0 runs in DIR_A, rank 1 in DIR_B.
expect_refusal() {
  local name=$1 a=$2 b=$3
  shift 3
  local out rc ok=1
  out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np 1 -wdir "$a" "$@" : -np 1 -wdir "$b" "$@" 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL $name: the job exited with status 0"; ok=0; }
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL $name: the job hung"; ok=0; }
  for r in 0 1; do
    echo "$out" | grep "the ranks read different data" | grep "rank(s) 1 (" | grep -qF "[rank $r of 2]" ||
      { echo "FAIL $name: rank $r did not name rank 1's data"; ok=0; }
  done
  ! echo "$out" | grep -q "^step " || { echo "FAIL $name: a rank trained"; ok=0; }
  if [ $ok -eq 1 ]; then echo "ok   $name"; else echo "$out" | head -20; fail=1; fi
}

expect_refusal tessel-gpt "$TMP/a" "$TMP/b" "$GPT" "${SMALL[@]}" --plan dp=2 --data data.txt --steps 2 \
  --sample-bytes 0 --check-replicas --check-schedule
expect_refusal tessel-run "$TMP/a" "$TMP/b" "$RUN" "$TMP/bundle" --data data.txt --steps 2 --threads 1 \
  --check-replicas --check-schedule
expect_refusal tessel-mlp "$TMP/ia" "$TMP/ib" "$MLP" --batch 8 --hidden 16 --plan dp=2 --data . --steps 2 \
  --threads 1 --check-replicas
# The same data in both folders trains.
out=$(timeout --kill-after=5 120 "$MPIEXEC" --oversubscribe -np 1 -wdir "$TMP/a" "$RUN" "$TMP/bundle" --data \
      data.txt --steps 1 --threads 1 : -np 1 -wdir "$TMP/a" "$RUN" "$TMP/bundle" --data data.txt --steps 1 \
      --threads 1 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "^step     1/1"; then echo "ok   same data trains"
else echo "FAIL same data: $out"; fail=1; fi
[ $fail -eq 0 ] && echo PASS
exit $fail
