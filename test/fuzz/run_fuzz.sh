#!/usr/bin/env bash
# Builds the checkpoint parsers' libFuzzer targets with clang (not the main gcc build) and runs
# each for a fixed time; fails on any finding (a crash, a sanitizer report, an exception other
# than the parser's own error, a leak, a timeout).
#
# Usage: test/fuzz/run_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS_PER_TARGET]
#   WORK_DIR keeps the binaries (rebuilt only when a source they compile changes, so reruns
#   start fuzzing at once) and each target's corpus, which grows from run to run.
# The targets (clang++ -fsanitize=fuzzer,address,undefined, every UBSan finding fatal):
#   fuzz_ckpt_index          parseIndex (runtime/ckpt/Index.cpp)
#   fuzz_safetensors_header  parseSafeTensorsHeader (runtime/io/SafeTensors.cpp)
set -euo pipefail
SRC=$(cd "$1" && pwd)
WORK=$2
SECONDS_PER_TARGET=${3:-30}
CXX=${TESSEL_FUZZ_CXX:-clang++}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
command -v "$CXX" >/dev/null || { echo "run_fuzz.sh: $CXX not found (scripts/setup.sh installs clang)"; exit 1; }

FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -DFMT_HEADER_ONLY -I"$SRC")
# Everything a target compiles; a change to any of them rebuilds both.
INPUTS=("$SRC"/runtime/ckpt/Index.cpp "$SRC"/runtime/ckpt/Index.h "$SRC"/runtime/ckpt/FileNames.h
        "$SRC"/runtime/io/SafeTensors.cpp "$SRC"/runtime/io/SafeTensors.h
        "$SRC"/test/fuzz/FuzzIndex.cpp "$SRC"/test/fuzz/FuzzSafeTensorsHeader.cpp)
STAMP=$( (cat "${INPUTS[@]}"; echo "$CXX ${FLAGS[*]}"; "$CXX" --version) | sha1sum | cut -c1-40)
if [ "$(cat "$WORK/stamp" 2>/dev/null)" != "$STAMP" ]; then
  echo "run_fuzz.sh: building the fuzz targets with $CXX"
  rm -f "$WORK/stamp"
  "$CXX" "${FLAGS[@]}" -o "$WORK/fuzz_ckpt_index" "$SRC"/test/fuzz/FuzzIndex.cpp \
    "$SRC"/runtime/ckpt/Index.cpp "$SRC"/runtime/io/SafeTensors.cpp -lz
  "$CXX" "${FLAGS[@]}" -o "$WORK/fuzz_safetensors_header" "$SRC"/test/fuzz/FuzzSafeTensorsHeader.cpp \
    "$SRC"/runtime/io/SafeTensors.cpp
  echo "$STAMP" > "$WORK/stamp"
fi

python3 "$SRC"/test/fuzz/make_seeds.py "$WORK/seeds/index" "$WORK/seeds/header"
status=0
for target in fuzz_ckpt_index:index fuzz_safetensors_header:header; do
  name=${target%%:*}
  seeds=$WORK/seeds/${target##*:}
  mkdir -p "$WORK/corpus/$name" "$WORK/artifacts/$name"
  echo "run_fuzz.sh: $name for $SECONDS_PER_TARGET s"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a parser allocating 2 GB for a
  # small input is a finding too. The corpus folder comes first: new inputs are saved there.
  if ! "$WORK/$name" "$WORK/corpus/$name" "$seeds" -dict="$SRC"/test/fuzz/index.dict \
      -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$WORK/artifacts/$name/" -print_final_stats=1 2> "$WORK/$name.log"; then
    tail -n 60 "$WORK/$name.log"
    echo "run_fuzz.sh: $name found a problem; the input is in $WORK/artifacts/$name/"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$WORK/$name.log" || true
  fi
done
exit $status
