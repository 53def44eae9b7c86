#!/bin/sh
# A stand-in for a training job under `tessel launch` (tessel-launch.test): records each
# attempt's arguments and fails the way MODE says.
# Usage: launch-fake-job.sh STATE MODE ARGS...
#   STATE.count   the attempts so far; STATE.argv   one line of ARGS per attempt
#   MODE crash-after-save  attempt 1 commits a fake checkpoint (DIR/latest, DIR from
#                          --checkpoint-dir) and dies by SIGKILL; later attempts succeed
#        crash             attempt 1 dies by SIGKILL without a checkpoint; later ones succeed
#        fail              every attempt exits 3
#        lose-node         attempt 1 rewrites the hostfile (--hostfile FILE) to slots=2, as if a
#                          node had been lost, and exits 1; later ones succeed
#        wait-for-term     records, then waits for SIGTERM and exits 143 saying it got it
state=$1 mode=$2
shift 2
n=$(( $(cat "$state.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$state.count"
echo "$*" >> "$state.argv"
dir= hostfile= prev=
for a in "$@"; do
  case "$prev" in
    --checkpoint-dir) dir=$a ;;
    --hostfile) hostfile=$a ;;
  esac
  prev=$a
done
case "$mode" in
  crash-after-save)
    if [ "$n" = 1 ]; then
      mkdir -p "$dir/step_00000004"
      echo step_00000004 > "$dir/latest"
      kill -KILL $$
    fi ;;
  crash) if [ "$n" = 1 ]; then kill -KILL $$; fi ;;
  fail) exit 3 ;;
  lose-node)
    if [ "$n" = 1 ]; then
      echo "localhost slots=2  # one node of two was lost" > "$hostfile"
      exit 1
    fi ;;
  wait-for-term)
    trap 'echo "attempt $n got SIGTERM" >> "$state.argv"; exit 143' TERM
    touch "$state.started"
    while :; do sleep 0.1; done ;;
esac
exit 0
