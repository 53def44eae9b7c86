#!/usr/bin/env bash
# GPU check in two halves.
#
#   scripts/gpu-check.sh prepare   here (the build machine, no GPU needed): builds tessel-run
#                                  and tessel-gpt, and writes .gpu-check/ (git-ignored, at most
#                                  64 MiB): tessel-run with the shared libraries it needs that
#                                  are not part of glibc, CUDA bundles (a small GPT for the
#                                  correctness check with its CPU losses, GPT-2 124M training
#                                  steps at a few micro-batch sizes), a text corpus, and
#                                  manifest.json describing them.
#   scripts/gpu-check.sh run       on a GPU node with the NVIDIA driver and the CUDA 13 toolkit
#                                  (cuBLASLt) but no compiler: GPU losses against the stored CPU
#                                  losses, then the GPT-2 benchmark (tokens/s, MFU, peak device
#                                  memory), printed as one table, and the fused attention kernel
#                                  timed against decomposed attention on the same GPT-2 step;
#                                  exits non-zero on any failure.
#                                  With 2 GPUs, NCCL (libnccl.so.2) and mpirun, also fully
#                                  sharded data parallelism (--plan fsdp=2): the small GPT's
#                                  losses against 2 CPU ranks', and GPT-2 124M's step under
#                                  fsdp=2; without them those rows say why they were skipped.
#
# Environment: TESSEL_GPU_CHECK_DATA (prepare) is the corpus to ship (default
# ../shared/data/tinyshakespeare.txt next to the checkout, else the Debian fortunes file);
# TESSEL_GPU_CHECK_BATCHES (prepare) the GPT-2 micro-batch sizes (default "8 16"; micro-batch 8
# fits any GPU of 16 GB or more, and a third bundle, with the fsdp=2 one, would take the folder
# past its 64 MiB), and
# TESSEL_GPU_CHECK_FSDP_BATCH the micro-batch per rank of the fsdp=2 GPT-2 bundle (default 8).
# TESSEL_BUILD_DIR (prepare) the build folder (default build/, as scripts/build.sh).
# TESSEL_GPU_CHECK_DIR (both) the folder written and read (default .gpu-check).
# For the tests that run both halves on the CPU stand-ins of the CUDA libraries (test/standin;
# the defaults are what a GPU node gets):
#   TESSEL_GPU_CHECK_SMALL (prepare) the correctness GPT's shape flags (default
#     "--layers 2 --channels 64 --heads 4 --seq 64 --batch 8") and TESSEL_GPU_CHECK_STEPS its
#     steps (default 10); TESSEL_GPU_CHECK_MODEL the benchmark GPT's shape flags without
#     --batch (default GPT-2 124M's);
#   TESSEL_GPU_CHECK_STANDIN=DIR (prepare) also ships the stand-in libraries of DIR and, built
#     here, the host builds of every bundle's kernels that the stand-in driver runs, so that
#     `run` with TESSEL_CUDA_LIBRARY_PATH set (to $OUT/standin/lib) needs no compiler either.
#     Without TESSEL_CUDA_LIBRARY_PATH, `run` ignores them and uses the node's driver.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${TESSEL_GPU_CHECK_DIR:-.gpu-check}"
BUILD_DIR="${TESSEL_BUILD_DIR:-build}"
LIMIT_MIB=64

prepare() {
  scripts/build.sh tessel-run tessel-gpt
  local tmp="$OUT.tmp.$$"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/bundles" "$tmp/data"
  cp "$BUILD_DIR/bin/tessel-run" "$tmp/bin/"

  local data="${TESSEL_GPU_CHECK_DATA:-../shared/data/tinyshakespeare.txt}"
  [ -f "$data" ] || data=/usr/share/games/fortunes/fortunes
  [ -f "$data" ] || { echo "gpu-check prepare: no corpus (set TESSEL_GPU_CHECK_DATA to a text file)" >&2; exit 1; }
  cp "$data" "$tmp/data/corpus.txt"

  local gpt="$BUILD_DIR/bin/tessel-gpt" precision=bf16

  # Correctness: a small GPT in f32 and in bf16 mixed precision, 10 CPU steps each.
  local small
  read -r -a small <<< "${TESSEL_GPU_CHECK_SMALL:---layers 2 --channels 64 --heads 4 --seq 64 --batch 8}"
  small+=(--seed 5)
  # (The writers' "train it with" hints name this temporary folder; the bundles end up in
  # $OUT/bundles, which `scripts/gpu-check.sh run` trains.)
  "$gpt" "${small[@]}" --device cuda --emit-bundle "$tmp/bundles/small-f32" --precision f32 > /dev/null
  "$gpt" "${small[@]}" --device cuda --emit-bundle "$tmp/bundles/small-bf16" --precision bf16 > /dev/null
  # CUDA bundles decompose attention by default until the fused kernel (one per batch row and
  # head) has been timed on a GPU: this one runs it, for the same correctness check.
  "$gpt" "${small[@]}" --device cuda --attention fused --emit-bundle "$tmp/bundles/small-f32-fused-attention" \
    --precision f32 > /dev/null
  for b in "$tmp"/bundles/small-*; do
    "$BUILD_DIR/bin/tessel-run" "$b" --device cpu --data "$tmp/data/corpus.txt" --seed 5 \
      --steps "${TESSEL_GPU_CHECK_STEPS:-10}" \
      --eval-batches 1 --log-json "$b.cpu.jsonl" > /dev/null
  done
  # Fully sharded data parallelism over 2 GPUs: the same small GPT under --plan fsdp=2 (each
  # parameter, its gradient and its AdamW state split in two; NCCL all-gathers before use and
  # reduce-scatters of the gradients), with the losses of its 2 CPU ranks (MPI).
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  "$gpt" "${small[@]}" --device cuda --plan fsdp=2 --emit-bundle "$tmp/bundles/fsdp2-f32" --precision f32 > /dev/null
  mpirun --oversubscribe -np 2 "$BUILD_DIR/bin/tessel-run" "$tmp/bundles/fsdp2-f32" --device cpu \
    --data "$tmp/data/corpus.txt" --seed 5 --steps "${TESSEL_GPU_CHECK_STEPS:-10}" --eval-batches 1 \
    --log-json "$tmp/bundles/fsdp2-f32.cpu.jsonl" > /dev/null

  # The benchmark: GPT-2 124M (L=12, C=768, NH=12, T=1024, V=50304: the 256 bytes padded to a
  # multiple of 128, as GPT-2 small's 50257 is padded to 50304), one bundle per micro-batch.
  local model
  read -r -a model <<< "${TESSEL_GPU_CHECK_MODEL:---layers 12 --channels 768 --heads 12 --seq 1024 --vocab 50304}"
  local label="${TESSEL_GPU_CHECK_MODEL:-GPT-2 124M}"
  for mb in ${TESSEL_GPU_CHECK_BATCHES:-8 16}; do
    "$gpt" "${model[@]}" --batch "$mb" \
      --device cuda --precision "$precision" --emit-bundle "$tmp/bundles/gpt2-b$mb" > /dev/null
    echo "gpu-check: bundle gpt2-b$mb ($label, micro-batch $mb, $precision)"
  done
  # The fused attention kernel timed against the decomposed one: the smallest benchmark
  # micro-batch again, attention fused (`run` times both bundles the same way).
  local batches=(${TESSEL_GPU_CHECK_BATCHES:-8 16})
  "$gpt" "${model[@]}" --batch "${batches[0]}" --attention fused \
    --device cuda --precision "$precision" --emit-bundle "$tmp/bundles/attn-fused-gpt2-b${batches[0]}" > /dev/null
  echo "gpu-check: bundle attn-fused-gpt2-b${batches[0]} (as gpt2-b${batches[0]}, attention fused)"
  local fsdp_mb="${TESSEL_GPU_CHECK_FSDP_BATCH:-8}"
  "$gpt" "${model[@]}" --batch $((2 * fsdp_mb)) --plan fsdp=2 \
    --device cuda --precision "$precision" --emit-bundle "$tmp/bundles/gpt2-fsdp2-b$fsdp_mb" > /dev/null
  echo "gpu-check: bundle gpt2-fsdp2-b$fsdp_mb ($label, fsdp=2, micro-batch $fsdp_mb per GPU, $precision)"

  if [ -n "${TESSEL_GPU_CHECK_STANDIN:-}" ]; then ship_standin "$tmp"; fi

  # The shared libraries tessel-run and the bundles' kernels.so load, except glibc's own
  # (libc, libm, libpthread, libdl, librt, the loader): those must come from the node.
  for f in "$BUILD_DIR/bin/tessel-run" "$tmp"/bundles/*/kernels.so $(find "$tmp/standin" -name '*.so*' 2> /dev/null); do
    ldd "$f"
  done |
    awk '/=> \// {print $3}' | sort -u | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        *) cp -L "$lib" "$tmp/lib/" ;;
      esac
    done
  python3 scripts/gpu_check.py manifest "$tmp" "$precision"
  # The libraries travel gzip'd (OpenBLAS and oneDNN alone are 76 MiB, 25 MiB packed); run
  # unpacks them.
  tar -C "$tmp" -czf "$tmp/lib.tar.gz" lib
  rm -rf "$tmp/lib"

  local kib
  kib=$(du -sk "$tmp" | cut -f1)
  if [ "$kib" -gt $((LIMIT_MIB * 1024)) ]; then
    du -sk "$tmp"/* "$tmp"/bundles/* >&2
    echo "gpu-check prepare: $OUT would be $((kib / 1024)) MiB, over the $LIMIT_MIB MiB limit" >&2
    exit 1
  fi
  rm -rf "$OUT"
  mv "$tmp" "$OUT"
  trap - EXIT
  du -sh "$OUT"/bin "$OUT"/lib.tar.gz "$OUT"/data "$OUT"/bundles/* 2>/dev/null | grep -v jsonl
  echo "gpu-check prepare: wrote $OUT ($(awk "BEGIN {printf \"%.1f\", $kib / 1024}") MiB of $LIMIT_MIB MiB)"
}

# TESSEL_GPU_CHECK_STANDIN=DIR: the stand-in libraries into $1/standin/lib, and into
# $1/standin/cache the host builds of every bundle's kernels that the stand-in driver makes
# when it loads a cubin (one training step of each bundle on the stand-ins builds them).
ship_standin() {
  local tmp=$1 dir=$TESSEL_GPU_CHECK_STANDIN
  mkdir -p "$tmp/standin/lib"
  for lib in libcuda.so.1 libcublasLt.so.13 libnccl.so.2; do
    [ -f "$dir/$lib" ] || { echo "gpu-check prepare: $dir/$lib missing (TESSEL_GPU_CHECK_STANDIN)" >&2; exit 1; }
    cp -L "$dir/$lib" "$tmp/standin/lib/"
  done
  for b in "$tmp"/bundles/*/; do
    # A bundle for several ranks (fsdp=2) runs under mpirun, one stand-in device per rank.
    local ranks launch=()
    ranks=$(python3 -c 'import json, math, sys; print(math.prod(a["size"] for a in json.load(open(sys.argv[1]))["plan"]["mesh"]))' "$b/bundle.json")
    if [ "$ranks" -gt 1 ]; then launch=(mpirun --oversubscribe -np "$ranks"); fi
    TESSEL_CUDA_LIBRARY_PATH="$tmp/standin/lib" TESSEL_CACHE_DIR="$tmp/standin/cache" TESSEL_STANDIN_SOURCES="$b" \
      TESSEL_STANDIN_DEVICES="$ranks" "${launch[@]}" \
      "$BUILD_DIR/bin/tessel-run" "$b" --device cuda --data "$tmp/data/corpus.txt" --steps 1 --eval-batches 1 > /dev/null
  done
  echo "gpu-check: stand-in libraries and host builds of the kernels for them"
}

run() {
  [ -f "$OUT/manifest.json" ] || { echo "gpu-check run: no $OUT/manifest.json; run 'scripts/gpu-check.sh prepare' first" >&2; exit 1; }
  local out
  out=$(cd "$OUT" && pwd)
  # Unpacked with python3 (a node may have no tar) into $OUT/lib, replacing an older copy.
  python3 -c 'import shutil, sys, tarfile
shutil.rmtree(sys.argv[2] + "/lib", ignore_errors=True)
tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$out/lib.tar.gz" "$out" ||
    { echo "gpu-check run: cannot unpack $out/lib.tar.gz" >&2; exit 1; }
  export LD_LIBRARY_PATH="$out/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The driver tessel-run will open: the node's, or the stand-in's of $TESSEL_CUDA_LIBRARY_PATH
  # (runtime/ToolkitLibrary.h), which then finds the host builds prepare shipped.
  local driver=libcuda.so.1
  if [ -n "${TESSEL_CUDA_LIBRARY_PATH:-}" ]; then
    driver="$TESSEL_CUDA_LIBRARY_PATH/libcuda.so.1"
    if [ -d "$out/standin/cache" ]; then
      export TESSEL_CACHE_DIR="${TESSEL_CACHE_DIR:-$out/standin/cache}"
      TESSEL_STANDIN_SOURCES="$(printf '%s:' "$out"/bundles/*/)"
      export TESSEL_STANDIN_SOURCES
    fi
  fi
  if ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$driver" 2> /dev/null; then
    echo "gpu-check run: no CUDA driver ($driver cannot be loaded); run this on a GPU node" >&2
    exit 1
  fi
  exec python3 scripts/gpu_check.py run "$out"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh prepare|run" >&2; exit 2 ;;
esac
