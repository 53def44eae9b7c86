# Sourced by the benchmarks that run a PyTorch peer (bench/tp_step.sh, bench/comm_allreduce.sh):
# torch_peer NAME sets $py, the peer's interpreter, and $peer, what it is ("torch 2.15.0 (PyPI)").
# The peer is current torch from PyPI, installed on first use in bench/.venv (delete it to
# update). PyPI serves torch for Linux x86-64 only as its CUDA build (the CPU-only wheels live
# on download.pytorch.org), so that wheel is installed (about 4 GiB) and runs on the CPU. If
# pip cannot install it, Debian's torch 1.13 (/usr/bin/python3) runs instead and $peer says so.
# NAME (the calling script's) prefixes the messages. Run from the repository root.
torch_peer() {
  local venv=bench/.venv
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    py="$venv/bin/python"; peer="PyPI"
  else
    rm -rf "$venv"
    echo "$1: installing the PyTorch peer from PyPI into $venv (first use)" >&2
    if /usr/bin/python3 -m venv "$venv" && "$venv/bin/python" -m pip install --quiet torch numpy >&2; then
      py="$venv/bin/python"; peer="PyPI"
    else
      rm -rf "$venv"  # so the next run tries again
      echo "$1: pip could not install torch from PyPI; the PyTorch peer falls back to Debian's torch" \
           "(/usr/bin/python3), which is older" >&2
      py=/usr/bin/python3; peer="Debian fallback, pip unreachable"
    fi
  fi
  peer="torch $("$py" -c 'import torch; print(torch.__version__)') ($peer)"
}
