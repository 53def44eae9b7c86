// Test fixtures of the checkpoint engine: a small logical model laid out under several plans
// (rt::Program with Parameter and State buffers sharded over a mesh), an executor that keeps
// its buffers in host vectors, global values that differ per tensor, element and save, and
// ranks as threads (ThreadCommunicator.h).
#pragma once

#include "ThreadCommunicator.h"

#include <gtest/gtest.h>

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/exec/Sharding.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace tessel::test {

/// Runs a Program's buffers in host memory: readBuffer/writeBuffer only (what checkpoints use).
class HostExecutor final : public rt::ProgramExecutor {
 public:
  explicit HostExecutor(rt::Program p) : program_(std::move(p)) {
    for (const rt::Buffer& b : program_.buffers) buffers_.emplace_back(static_cast<size_t>(b.bytes()), 0);
  }
  const rt::Program& program() const override { return program_; }
  void initParameters(uint64_t) override {}
  void setInput(const std::string&, size_t, const void*, size_t) override { unsupported(); }
  void run(const std::string&) override { unsupported(); }
  std::vector<rt::OutputView> outputs(const std::string&) const override { unsupported(); }
  void readBuffer(int buffer, void* out) const override {
    const auto& b = buffers_.at(static_cast<size_t>(buffer));
    std::memcpy(out, b.data(), b.size());
  }
  void writeBuffer(int buffer, const void* in) override {
    auto& b = buffers_.at(static_cast<size_t>(buffer));
    std::memcpy(b.data(), in, b.size());
  }
  int64_t arenaBytes() const override { return 0; }
  int64_t highWaterBytes() const override { return 0; }
  std::string deviceName() const override { return "host"; }
  const std::vector<uint8_t>& bytes(int buffer) const { return buffers_.at(static_cast<size_t>(buffer)); }

 private:
  [[noreturn]] static void unsupported() { throw std::logic_error("HostExecutor: buffers only"); }
  rt::Program program_;
  std::vector<std::vector<uint8_t>> buffers_;
};

/// One tensor of the model: its global shape and how it is split (one ShardDim per dimension,
/// padding computed by makeProgram; empty: unsharded).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<rt::ShardDim> sharding;
  rt::BufferKind kind = rt::BufferKind::Parameter;
};

/// A program holding `tensors` on `mesh` (empty: no mesh): each local dimension is the global
/// one divided by the product of its axes' sizes, rounded up, the remainder padded.
inline rt::Program makeProgram(const std::vector<rt::MeshAxis>& mesh, const std::vector<TensorSpec>& tensors) {
  rt::Program p;
  p.mesh = mesh;
  for (const TensorSpec& t : tensors) {
    rt::Buffer b;
    b.name = t.name;
    b.kind = t.kind;
    b.dtype = rt::DType::F32;
    b.shape = t.shape;
    if (!t.sharding.empty()) {
      b.globalShape = t.shape;
      b.sharding = t.sharding;
      for (size_t d = 0; d < t.shape.size(); ++d) {
        int64_t parts = 1;
        for (const std::string& a : t.sharding[d].axes)
          for (const rt::MeshAxis& m : mesh)
            if (m.name == a) parts *= m.size;
        const int64_t local = (t.shape[d] + parts - 1) / parts;
        b.shape[d] = local;
        b.sharding[d].padding = local * parts - t.shape[d];
      }
    }
    p.buffers.push_back(std::move(b));
  }
  return p;
}

/// The value of global element `flat` of tensor `name` in save number `salt`: distinct per
/// tensor, element and salt, exactly representable (so any misplaced element is caught).
inline float globalValue(const std::string& name, int64_t flat, int salt) {
  return static_cast<float>(std::hash<std::string>{}(name) % 97) * 1024.0f + static_cast<float>(flat) +
         0.25f * static_cast<float>(salt);
}

/// The local contents of buffer `b` on the rank at `coordinates` of `mesh` when the global
/// tensors hold globalValue(.., salt): padding is zero.
inline std::vector<float> expectedShard(const rt::Buffer& b, const rt::MeshLayout* mesh,
                                        const std::vector<int>& coordinates, int salt) {
  std::vector<float> out(static_cast<size_t>(b.numel()), 0.0f);
  if (!b.sharded()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = globalValue(b.name, static_cast<int64_t>(i), salt);
    return out;
  }
  const std::vector<int64_t> index = rt::globalIndices(b, *mesh, coordinates);
  for (size_t i = 0; i < out.size(); ++i)
    if (index[i] >= 0) out[i] = globalValue(b.name, index[i], salt);
  return out;
}

/// The rank's mesh coordinates (empty without a mesh).
inline std::vector<int> coordinatesOf(const rt::Program& p, int rank) {
  return p.mesh.empty() ? std::vector<int>{} : rt::meshLayoutOf(p).coordinates(rank);
}

/// Fills every Parameter and State buffer of `ex` (rank `rank`) with its shard of the global
/// values of save `salt` (State buffers: salt + 1, so they differ from their parameter's).
inline void fillBuffers(HostExecutor& ex, int rank, int salt) {
  const rt::Program& p = ex.program();
  std::unique_ptr<rt::MeshLayout> mesh = p.mesh.empty() ? nullptr : std::make_unique<rt::MeshLayout>(p.mesh);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const rt::Buffer& b = p.buffers[i];
    const int s = b.kind == rt::BufferKind::State ? salt + 1 : salt;
    ex.writeBuffer(static_cast<int>(i), expectedShard(b, mesh.get(), coordinatesOf(p, rank), s).data());
  }
}

/// Runs fn(rank, world) on `n` threads (world: a ThreadCommunicator; null when `n` is 1 and
/// `nullWorld`); returns each rank's error text ("" when it returned normally).
inline std::vector<std::string> runRanks(int n, const std::function<void(int, rt::Communicator*)>& fn,
                                         bool nullWorld = false) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  ThreadGroup group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        fn(r, n == 1 && nullWorld ? nullptr : &comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

/// The folder of this process's test checkpoints, removed after the last test.
inline std::filesystem::path testFolder() {
  return std::filesystem::temp_directory_path() / ("tessel_ckpt_test_" + std::to_string(::getpid()));
}

/// Removes testFolder() when the tests end (kept on failure, to look at).
class RemoveTestFolder : public testing::Environment {
 public:
  void TearDown() override {
    if (!testing::UnitTest::GetInstance()->Failed()) std::filesystem::remove_all(testFolder());
  }
};
inline testing::Environment* const kRemoveTestFolder = testing::AddGlobalTestEnvironment(new RemoveTestFolder);

/// A fresh empty folder under testFolder().
inline std::string freshFolder(const std::string& name) {
  const std::filesystem::path dir = testFolder() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace tessel::test
