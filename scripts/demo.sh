#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, then trains tessel-gpt data-parallel on
# two ranks (mpirun -np 2, --plan dp=2: each rank computes half of every global batch, the
# gradients are averaged in buckets overlapped with the backward pass) on the default corpus
# (the Debian fortunes files) for a few hundred steps, and prints bytes sampled from it.
# Extra arguments go to tessel-gpt (e.g. --steps 1000, --data FILE, --explain).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tessel-gpt
mpi_flags=(--oversubscribe)
# OpenMPI refuses to start as root unless both variables say so (containers, CI machines).
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One OpenMP thread per rank on small machines: two ranks share the cores.
threads=$(( $(nproc) / 2 )); [ "$threads" -ge 1 ] || threads=1
# 1 MiB buckets: the default 25 MiB would hold the whole demo model in one bucket, which
# cannot start before the backward pass ends; smaller ones overlap with it.
exec mpirun "${mpi_flags[@]}" -np 2 "${TESSEL_BUILD_DIR:-build}/bin/tessel-gpt" --plan dp=2 \
  --bucket-mb 1 --threads "$threads" "$@"
