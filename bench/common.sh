# Shared by the benchmark scripts: source it from the repository root, after
# `set -euo pipefail`.

# bench_setup TARGET...: installs what the build needs (scripts/setup.sh, idempotent), builds
# the ninja TARGETs quietly, makes the scratch folder $tmp (removed on exit), lets OpenMPI run
# as root where the benchmark runs as root, and pins gloo, the PyTorch peer's CPU backend, to
# the loopback interface (without it gloo hangs or aborts on machines whose first interface
# does not route between local ranks).
bench_setup() {
  scripts/setup.sh
  scripts/build.sh "$@" >/dev/null
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  export GLOO_SOCKET_IFNAME=lo
}
