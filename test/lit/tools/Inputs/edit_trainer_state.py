"""Copies checkpoint folder SRC to DST and edits the trainer state of DST's index.json.

Usage: edit_trainer_state.py SRC DST STATEMENT
STATEMENT is Python run with `t` bound to the index's "trainer" object, e.g.
"del t['sampler']" or "t['world_size'] = 0". The lit tests use it to make the incomplete and
ill-typed trainer states a resumed run must refuse.
"""
import json
import shutil
import sys

src, dst, statement = sys.argv[1:4]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
with open(f"{dst}/index.json") as f:
    index = json.load(f)
t = index["trainer"]
exec(statement, {}, {"t": t})
with open(f"{dst}/index.json", "w") as f:
    json.dump(index, f)
