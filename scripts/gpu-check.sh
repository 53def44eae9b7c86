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
#                                  memory), printed as one table; exits non-zero on any failure.
#
# Environment: TESSEL_GPU_CHECK_DATA (prepare) is the corpus to ship (default
# ../shared/data/tinyshakespeare.txt next to the checkout, else the Debian fortunes file);
# TESSEL_GPU_CHECK_BATCHES (prepare) the GPT-2 micro-batch sizes (default "4 8 16").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpu-check
LIMIT_MIB=64

prepare() {
  scripts/build.sh tessel-run tessel-gpt
  local tmp="$OUT.tmp.$$"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/bundles" "$tmp/data"
  cp build/bin/tessel-run "$tmp/bin/"

  local data="${TESSEL_GPU_CHECK_DATA:-../shared/data/tinyshakespeare.txt}"
  [ -f "$data" ] || data=/usr/share/games/fortunes/fortunes
  [ -f "$data" ] || { echo "gpu-check prepare: no corpus (set TESSEL_GPU_CHECK_DATA to a text file)" >&2; exit 1; }
  cp "$data" "$tmp/data/corpus.txt"

  local gpt=build/bin/tessel-gpt precision=bf16

  # Correctness: a small GPT in f32 and in bf16 mixed precision, 10 CPU steps each.
  local small=(--layers 2 --channels 64 --heads 4 --seq 64 --batch 8 --seed 5)
  # (The writers' "train it with" hints name this temporary folder; the bundles end up in
  # $OUT/bundles, which `scripts/gpu-check.sh run` trains.)
  "$gpt" "${small[@]}" --device cuda --emit-bundle "$tmp/bundles/small-f32" --precision f32 > /dev/null
  "$gpt" "${small[@]}" --device cuda --emit-bundle "$tmp/bundles/small-bf16" --precision bf16 > /dev/null
  for b in "$tmp"/bundles/small-*; do
    build/bin/tessel-run "$b" --device cpu --data "$tmp/data/corpus.txt" --seed 5 --steps 10 \
      --eval-batches 1 --log-json "$b.cpu.jsonl" > /dev/null
  done

  # The benchmark: GPT-2 124M (L=12, C=768, NH=12, T=1024, V=50304: the 256 bytes padded to a
  # multiple of 128, as GPT-2 small's 50257 is padded to 50304), one bundle per micro-batch.
  for mb in ${TESSEL_GPU_CHECK_BATCHES:-4 8 16}; do
    "$gpt" --layers 12 --channels 768 --heads 12 --seq 1024 --vocab 50304 --batch "$mb" \
      --device cuda --precision "$precision" --emit-bundle "$tmp/bundles/gpt2-b$mb" > /dev/null
    echo "gpu-check: bundle gpt2-b$mb (GPT-2 124M, micro-batch $mb, $precision)"
  done

  # The shared libraries tessel-run and the bundles' kernels.so load, except glibc's own
  # (libc, libm, libpthread, libdl, librt, the loader): those must come from the node.
  for f in build/bin/tessel-run "$tmp"/bundles/*/kernels.so; do ldd "$f"; done |
    awk '/=> \// {print $3}' | sort -u | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        *) cp -L "$lib" "$tmp/lib/" ;;
      esac
    done
  python3 scripts/gpu_check.py manifest "$tmp" "$precision"

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
  du -sh "$OUT"/bin "$OUT"/lib "$OUT"/data "$OUT"/bundles/* 2>/dev/null | grep -v jsonl
  echo "gpu-check prepare: wrote $OUT ($(awk "BEGIN {printf \"%.1f\", $kib / 1024}") MiB of $LIMIT_MIB MiB)"
}

run() {
  [ -f "$OUT/manifest.json" ] || { echo "gpu-check run: no $OUT/manifest.json; run 'scripts/gpu-check.sh prepare' first" >&2; exit 1; }
  export LD_LIBRARY_PATH="$PWD/$OUT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ! python3 -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2> /dev/null; then
    echo "gpu-check run: no CUDA driver (libcuda.so.1 cannot be loaded); run this on a GPU node" >&2
    exit 1
  fi
  exec python3 scripts/gpu_check.py run "$OUT"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh prepare|run" >&2; exit 2 ;;
esac
