// Helpers for the checkpoint format tests: build a checkpoint folder by hand (shard files
// through writeSafeTensorsWithOffsets, index.json through serializeIndex) from full tensors
// and a list of boxes, with each box's bytes cut out by a plain element loop over global
// row-major indices, independent of the reader's run arithmetic.
#pragma once

#include "runtime/ckpt/Index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace tessel::ckpt::testing {

namespace fs = std::filesystem;

/// The message of the CheckpointError `f` throws, or "(no CheckpointError)".
inline std::string messageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

/// A fresh folder under the test temp dir, removed at scope end.
struct TempDir {
  explicit TempDir(const std::string& tag) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tessel_ckpt_" + std::to_string(::getpid()) + "_" + tag + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    path = fs::path(::testing::TempDir()) / name;
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
  fs::path path;
};

/// A full f32 tensor with distinct values (value i+0.5+seed at row-major index i).
struct FullTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline FullTensor makeTensor(std::vector<int64_t> shape, float seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  FullTensor t{std::move(shape), {}};
  for (int64_t i = 0; i < n; ++i) t.values.push_back(float(i) + 0.5f + seed);
  return t;
}

/// One stored box and the file it goes to.
struct BoxSpec {
  std::vector<int64_t> offsets, lengths;
  std::string file;
};

/// The elements of box (offsets, lengths) of `t`, row-major over the box, by a plain loop.
inline std::vector<float> slice(const FullTensor& t, const std::vector<int64_t>& offsets,
                                const std::vector<int64_t>& lengths) {
  const size_t rank = t.shape.size();
  int64_t n = 1;
  for (int64_t l : lengths) n *= l;
  std::vector<float> out;
  for (int64_t k = 0; k < n; ++k) {
    // Box-local multi-index of k, then its global row-major index.
    int64_t rest = k, global = 0, stride = 1;
    std::vector<int64_t> idx(rank);
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rest % lengths[d];
      rest /= lengths[d];
    }
    for (size_t d = rank; d-- > 0;) {
      global += (offsets[d] + idx[d]) * stride;
      stride *= t.shape[d];
    }
    out.push_back(t.values[size_t(global)]);
  }
  return out;
}

/// A grid split of `shape` into parts[d] near-equal pieces per dimension, files assigned
/// round-robin over `files` ("rank_00000.safetensors" ...).
inline std::vector<BoxSpec> gridBoxes(const std::vector<int64_t>& shape, const std::vector<int64_t>& parts,
                                      int files) {
  std::vector<BoxSpec> boxes;
  std::vector<int64_t> idx(shape.size(), 0);
  int next = 0;
  while (true) {
    BoxSpec b;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t lo = shape[d] * idx[d] / parts[d], hi = shape[d] * (idx[d] + 1) / parts[d];
      b.offsets.push_back(lo);
      b.lengths.push_back(hi - lo);
    }
    char name[64];
    std::snprintf(name, sizeof name, "rank_%05d.safetensors", next++ % files);
    b.file = name;
    bool empty = false;
    for (int64_t l : b.lengths) empty |= l == 0;
    if (!empty) boxes.push_back(b);
    size_t d = shape.size();
    while (d > 0 && ++idx[d - 1] == parts[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return boxes;
}

/// The key of a box in its shard file: the name, or "<name>@o0,o1,..." for a part.
inline std::string boxKey(const std::string& name, const FullTensor& t, const BoxSpec& b) {
  if (b.lengths == t.shape) return name;
  std::string key = name + "@";
  for (size_t d = 0; d < b.offsets.size(); ++d) key += (d ? "," : "") + std::to_string(b.offsets[d]);
  return key;
}

/// Writes a checkpoint of `tensors` (name -> tensor, boxes) into `dir` at `step` and returns
/// its index.
inline Index writeCheckpoint(const std::string& dir,
                             const std::vector<std::pair<std::string, std::pair<FullTensor, std::vector<BoxSpec>>>>& tensors,
                             int64_t step = 7, int64_t blockBytes = kDefaultBlockBytes) {
  std::map<std::string, SafeTensorsFile> files;
  for (const auto& [name, spec] : tensors)
    for (const BoxSpec& b : spec.second)
      files[b.file].tensors[boxKey(name, spec.first, b)] = StTensor::fromF32(b.lengths, slice(spec.first, b.offsets, b.lengths));
  std::map<std::string, StByteRanges> ranges;
  for (auto& [file, content] : files) {
    content.metadata = {{"format", "pt"}, {"tessel_checkpoint_step", std::to_string(step)}};
    ranges[file] = writeSafeTensorsWithOffsets(dir + "/" + file, content, /*durable=*/false);
  }
  Index index;
  index.step = step;
  index.trainer = {{"step", step}};
  for (const auto& [name, spec] : tensors) {
    TensorEntry& t = index.tensors[name];
    t.shape = spec.first.shape;
    for (const BoxSpec& b : spec.second) {
      ShardEntry s;
      s.offsets = b.offsets;
      s.lengths = b.lengths;
      s.file = b.file;
      s.key = boxKey(name, spec.first, b);
      std::tie(s.begin, s.end) = ranges.at(b.file).at(s.key);
      s.blockBytes = blockBytes;
      const auto& bytes = files.at(b.file).tensors.at(s.key).bytes;
      s.crc32 = blockCrcs(bytes.data(), bytes.size(), blockBytes);
      t.shards.push_back(s);
    }
  }
  std::ofstream(dir + "/index.json") << serializeIndex(index);
  return index;
}

inline std::vector<uint8_t> readFileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void writeFileBytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace tessel::ckpt::testing
