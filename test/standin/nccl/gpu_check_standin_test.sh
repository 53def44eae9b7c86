#!/usr/bin/env bash
# scripts/gpu-check.sh end to end on the stand-in CUDA driver, cuBLASLt and NCCL (test/standin),
# with small models (the script's TESSEL_GPU_CHECK_* knobs): `prepare` with
# TESSEL_GPU_CHECK_STANDIN ships the stand-ins and the host builds of the kernels, then `run`
# with TESSEL_CUDA_LIBRARY_PATH and no compiler on PATH (as on a GPU node) must pass its four
# correctness checks (f32, bf16, f32 with fused attention; eager, CUDA graphs), time fused against decomposed attention and print the benchmark table; with two
# stand-in devices and mpirun it also passes the fsdp=2 correctness check and prints the fsdp=2
# benchmark row, and with one device it skips both, saying why. Without
# TESSEL_CUDA_LIBRARY_PATH, `run` on this machine still refuses: no CUDA driver.
# Usage: gpu_check_standin_test.sh SOURCE_DIR BUILD_DIR STANDIN_LIB_DIR DATA
set -u
SRC=$1 BUILD=$2 LIB=$3 DATA=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

export TESSEL_BUILD_DIR=$BUILD TESSEL_GPU_CHECK_DIR=$tmp/gpu-check TESSEL_CACHE_DIR=$tmp/cache \
  TESSEL_GPU_CHECK_DATA=$DATA TESSEL_GPU_CHECK_STEPS=3 TESSEL_GPU_CHECK_BATCHES=2 TESSEL_GPU_CHECK_FSDP_BATCH=1 \
  TESSEL_GPU_CHECK_SMALL="--layers 1 --channels 32 --heads 2 --seq 16 --batch 4" \
  TESSEL_GPU_CHECK_MODEL="--layers 1 --channels 32 --heads 2 --seq 32"
TESSEL_GPU_CHECK_STANDIN=$LIB "$SRC/scripts/gpu-check.sh" prepare || fail "prepare exited $?"

# The GPU node's view: no compiler (only bash, python3 and dirname on PATH), nothing cached
# but what prepare shipped.
mkdir -p "$tmp/bin"
ln -s "$(command -v bash)" "$tmp/bin/bash"
ln -s /usr/bin/python3 "$tmp/bin/python3"
ln -s "$(command -v dirname)" "$tmp/bin/dirname"
node=(env -i PATH="$tmp/bin" HOME="$tmp/home" TESSEL_GPU_CHECK_DIR="$tmp/gpu-check")
# One stand-in device, no mpirun: the fsdp=2 rows are skipped with the reason.
out=$("${node[@]}" TESSEL_CUDA_LIBRARY_PATH="$tmp/gpu-check/standin/lib" bash "$SRC/scripts/gpu-check.sh" run 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "run exited $rc"
[ "$(echo "$out" | grep -c '^| correctness small-.* | ok |')" -eq 6 ] || fail "not six correctness rows that are ok"
echo "$out" | grep -q '^| correctness small-f32-fused-attention (graphs), 3 steps | ok |' ||
  fail "no ok correctness row for the fused attention bundle"
echo "$out" | grep -q '^| attention fused vs decomposed (gpt2-b2) | ok | step .* ms fused, .* ms decomposed: fused / decomposed [0-9.]* |$' ||
  fail "no row timing fused against decomposed attention"
echo "$out" | grep -q '^| GPT (L=1 C=32 NH=2 V=256.* | CUDA graphs |$' || fail "no benchmark row with CUDA graphs"
echo "$out" | grep -q '^| correctness fsdp2-f32 (fsdp=2), 3 steps | skipped | needs 2 GPUs, this node has 1 |$' ||
  fail "the fsdp=2 correctness row was not skipped for want of a second GPU"
echo "$out" | grep -q '^| benchmark gpt2-fsdp2-b1 (fsdp=2) | skipped | needs 2 GPUs' ||
  fail "the fsdp=2 benchmark row was not skipped for want of a second GPU"

# Two stand-in devices and mpirun (one process per device): fsdp=2 trains on NCCL's stand-in.
ln -s "$(command -v mpirun)" "$tmp/bin/mpirun"
out=$("${node[@]}" TESSEL_CUDA_LIBRARY_PATH="$tmp/gpu-check/standin/lib" TESSEL_STANDIN_DEVICES=2 \
      bash "$SRC/scripts/gpu-check.sh" run 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "run with two devices exited $rc"
echo "$out" | grep -q '^| correctness fsdp2-f32 (eager), 3 steps | ok |' || fail "no fsdp=2 correctness row that is ok"
echo "$out" | grep -q '^| gpt2-fsdp2-b1 (L=1 C=32, .*), fsdp=2 | bf16 | 2 x 1 x 32 | .* ms | ' ||
  fail "no fsdp=2 benchmark row"

out=$("${node[@]}" bash "$SRC/scripts/gpu-check.sh" run 2>&1)
rc=$?
echo "$out"
if [ ! -e /dev/nvidiactl ]; then
  [ "$rc" -eq 1 ] && echo "$out" | grep -q "no CUDA driver (libcuda.so.1 cannot be loaded)" ||
    fail "without TESSEL_CUDA_LIBRARY_PATH, run did not refuse for want of a driver (exit $rc)"
fi
echo PASS
