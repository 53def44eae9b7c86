"""Checks a --export-params file: the safetensors layout (8-byte little-endian header length,
a JSON header of {name: {dtype, shape, data_offsets}}, then the data, offsets ordered and
contiguous), every tensor F32 under a parameter name (no optimizer state "<param>:<slot>"),
the element counts summing to the parameter count the trainer printed (", N parameters" in
its output TRAINER_OUT), and NAME=D0xD1 shapes given on the command line. When the Python `safetensors` package is installed, it must
load the file to the same arrays. With a second file, both must hold bitwise the same tensors.

usage: check_exported_params.py FILE TRAINER_OUT [--same OTHER] [NAME=D0xD1 ...]
"""
import json
import re
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    header.pop("__metadata__", None)
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: data starts at {begin}, the previous tensor ended at {end}"
        count = 1
        for d in info["shape"]:
            count *= d
        assert info["dtype"] == "F32", f"{name}: dtype {info['dtype']}"
        assert stop - begin == 4 * count, f"{name}: {stop - begin} bytes for {count} f32"
        tensors[name] = (info["shape"], data[begin:stop])
        end = stop
    assert end == len(data), f"{len(data) - end} bytes after the last tensor"
    return tensors


def main(argv):
    path = argv[1]
    with open(argv[2]) as f:
        parameters = int(re.search(r", (\d+) parameters", f.read()).group(1))
    tensors = read(path)
    rest = argv[3:]
    if rest[:1] == ["--same"]:
        other = read(rest[1])
        assert other == tensors, "the two exports differ"
        rest = rest[2:]
    for name in tensors:
        assert ":" not in name, f"optimizer state {name} was exported"
    total = sum(len(raw) // 4 for _, raw in tensors.values())
    assert total == parameters, f"{total} elements exported, the model has {parameters} parameters"
    for pair in rest:
        name, dims = pair.split("=")
        want = [int(d) for d in dims.split("x")]
        assert tensors[name][0] == want, f"{name}: shape {tensors[name][0]}, expected {want}"
    try:
        import numpy
        from safetensors.numpy import load_file
    except ImportError:
        library = "not installed"
    else:
        loaded = load_file(path)
        assert sorted(loaded) == sorted(tensors)
        for name, (shape, raw) in tensors.items():
            assert loaded[name].dtype == numpy.float32 and list(loaded[name].shape) == shape
            assert loaded[name].tobytes() == raw, f"{name}: safetensors reads other values"
        library = "agrees"
    print(f"export ok: {len(tensors)} f32 tensors, {total} elements; safetensors library {library}")


if __name__ == "__main__":
    main(sys.argv)
