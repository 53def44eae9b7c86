#!/bin/sh
# SIGTERM sent to `tessel launch` reaches its job, and the launch ends without a restart
# (tessel-launch.test). Usage: launch-sigterm.sh TESSEL STATE FAKE-JOB
tessel=$1 state=$2 job=$3
rm -f "$state".*
"$tessel" launch --max-restarts 3 -- sh "$job" "$state" wait-for-term --checkpoint-dir "$state.ckpt" &
launcher=$!
i=0
while [ ! -e "$state.started" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM $launcher
wait $launcher
echo "launcher exit $?"
cat "$state.argv"
