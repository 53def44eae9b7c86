// tessel-vocab-cross-entropy-export: the vocab-parallel cross-entropy of given logits, computed
// by the reference kernels over S shards of the vocabulary (test/unit/VocabShardsUtil.h; S need
// not divide V: the last shards are padded and masked), for
// test/python/test_vocab_cross_entropy_vs_torch.py.
//
// Usage: tessel-vocab-cross-entropy-export SHARDS IN OUT
//   IN:  int64 rows, int64 V, rows x V float64 logits (row-major), rows float64 targets
//   OUT: float64 loss, then rows x V float64 dlogits (the gradient of the loss, dloss = 1)
// Little-endian, no padding. Exits 1 with a one-line message on bad arguments or input.
#include "test/unit/VocabShardsUtil.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

template <typename T>
bool readAll(std::ifstream& in, T* data, size_t count) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(data), sizeof(T) * count));
}

int fail(const std::string& message) {
  std::cerr << "tessel-vocab-cross-entropy-export: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel::ref;
  if (argc != 4) return fail("usage: tessel-vocab-cross-entropy-export SHARDS IN OUT");
  int64_t shards = std::atoll(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) return fail(std::string("cannot open ") + argv[2]);
  int64_t dims[2];
  if (!readAll(in, dims, 2) || dims[0] < 1 || dims[1] < 1 || dims[0] * dims[1] > (1 << 26))
    return fail(std::string(argv[2]) + ": bad header (rows and V must be in [1, 2^26])");
  int64_t rows = dims[0], v = dims[1];
  if (shards < 1)
    return fail("SHARDS=" + std::string(argv[1]) + " must be >= 1");
  Tensor z({rows, v}), targets({rows});
  if (!readAll(in, z.data.data(), z.data.size()) ||
      !readAll(in, targets.data.data(), targets.data.size()))
    return fail(std::string(argv[2]) + ": truncated (expected rows x V logits, rows targets)");
  try {
    auto [loss, dlogits] = vocabshards::crossEntropy(z, targets, Tensor::filled({}, 1.0), shards);
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(loss.data.data()), sizeof(double));
    out.write(reinterpret_cast<const char*>(dlogits.data.data()),
              static_cast<std::streamsize>(sizeof(double) * dlogits.data.size()));
    if (!out) return fail(std::string("cannot write ") + argv[3]);
  } catch (const ShapeError& e) {
    return fail(e.what());
  }
  return 0;
}
