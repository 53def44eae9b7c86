# Compares the per-step "loss" values of two JSON logs (one object per line) bitwise: the
# JSON text of each loss must be identical (same double, same shortest round-trip digits).
# With a third argument RTOL, each loss within RTOL of the other's, relative, instead.
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.dumps(json.loads(line)["loss"]) for line in f if line.strip()]


a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(sys.argv) > 3:
    rtol = float(sys.argv[3])
    worst = max((abs(float(x) - float(y)) / abs(float(y)) for x, y in zip(a, b)), default=float("inf"))
    if not a or len(a) != len(b) or not worst <= rtol:
        print(f"losses differ by more than {rtol} (worst {worst}):\n  {sys.argv[1]}: {a}\n  {sys.argv[2]}: {b}")
        sys.exit(1)
    print(f"{len(a)} losses within {rtol}")
    sys.exit(0)
if not a or a != b:
    print(f"losses differ:\n  {sys.argv[1]}: {a}\n  {sys.argv[2]}: {b}")
    sys.exit(1)
print(f"{len(a)} losses bitwise equal")
