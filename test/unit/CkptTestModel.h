// Test fixtures of the checkpoint engine (ckpt_engine_test, ckpt_mpi_test): a small logical
// model laid out under several plans (rt::Program with Parameter and State buffers sharded over
// a mesh), an executor that keeps its buffers in host vectors, and global values that differ
// per tensor, element and save.
#pragma once

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/exec/ProgramExecutor.h"
#include "runtime/exec/Sharding.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

/// A layout of the model: its mesh, world size and each parameter's sharding by name.
struct Layout {
  std::vector<rt::MeshAxis> mesh;
  int world = 1;
  std::map<std::string, std::vector<rt::ShardDim>> sharding;
};

/// The layouts the tests save and load under: "one" (one rank), "dp4" (4 whole replicas, no
/// mesh), "fsdp4", "fsdp2tp2" (fsdp x tp with a fused qkv in 3 blocks and [tp, fsdp] on one
/// dimension), "dp2tp2", "tp2".
inline Layout layoutNamed(const std::string& name) {
  const rt::ShardDim none;
  auto over = [](std::vector<std::string> axes, int64_t blocks = 1) { return rt::ShardDim{std::move(axes), blocks, 0}; };
  if (name == "one") return {{}, 1, {}};
  if (name == "dp4") return {{}, 4, {}};
  if (name == "fsdp4")
    return {{{"fsdp", 4}}, 4,
            {{"emb.weight", {over({"fsdp"}), none}}, {"qkv.weight", {over({"fsdp"}), none}},
             {"fc.weight", {over({"fsdp"}), none}}, {"tiny.bias", {over({"fsdp"})}}}};
  if (name == "fsdp2tp2")
    return {{{"fsdp", 2}, {"tp", 2}}, 4,
            {{"emb.weight", {over({"fsdp"}), none}}, {"qkv.weight", {over({"fsdp"}), over({"tp"}, 3)}},
             {"fc.weight", {over({"tp", "fsdp"}), none}}, {"tiny.bias", {over({"fsdp"})}}}};
  if (name == "dp2tp2")
    return {{{"dp", 2}, {"tp", 2}}, 4, {{"qkv.weight", {none, over({"tp"}, 3)}}, {"fc.weight", {none, over({"tp"})}}}};
  if (name == "tp2")
    return {{{"tp", 2}}, 2,
            {{"emb.weight", {none, over({"tp"})}}, {"qkv.weight", {none, over({"tp"}, 3)}},
             {"fc.weight", {over({"tp"}), none}}, {"tiny.bias", {over({"tp"})}}}};
  throw std::logic_error("no layout " + name);
}

/// The model: a fused qkv weight, a first dimension no mesh divides (7, 10), a tensor smaller
/// than the ranks (2), an unsharded one, their optimizer state (sharded alike) and a scalar;
/// without the tensors named in `drop`, with `extra` ones.
inline rt::Program modelUnder(const Layout& layout, const std::vector<std::string>& drop = {},
                              const std::vector<TensorSpec>& extra = {}) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> params = {
      {"emb.weight", {10, 6}}, {"qkv.weight", {4, 12}}, {"fc.weight", {7, 4}}, {"tiny.bias", {2}}, {"ln.scale", {6}}};
  std::vector<TensorSpec> specs;
  for (rt::BufferKind kind : {rt::BufferKind::Parameter, rt::BufferKind::State})
    for (const auto& [name, shape] : params) {
      const std::string full = kind == rt::BufferKind::State ? name + ":exp_avg" : name;
      if (std::find(drop.begin(), drop.end(), full) != drop.end()) continue;
      const auto it = layout.sharding.find(name);
      specs.push_back({full, shape, it == layout.sharding.end() ? std::vector<rt::ShardDim>{} : it->second, kind});
    }
  specs.push_back({"optimizer.step", {}, {}, rt::BufferKind::State});
  specs.insert(specs.end(), extra.begin(), extra.end());
  return makeProgram(layout.mesh, specs);
}

/// "" when every buffer of `ex` (rank `rank`) but those in `skip` holds its shard of save
/// `salt` bit for bit (padding zero), else the first that does not.
inline std::string loadedProblem(const HostExecutor& ex, int rank, int salt, const std::vector<std::string>& skip = {}) {
  const rt::Program& p = ex.program();
  std::unique_ptr<rt::MeshLayout> mesh = p.mesh.empty() ? nullptr : std::make_unique<rt::MeshLayout>(p.mesh);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const rt::Buffer& b = p.buffers[i];
    if (std::find(skip.begin(), skip.end(), b.name) != skip.end()) continue;
    const int s = b.kind == rt::BufferKind::State ? salt + 1 : salt;
    const std::vector<float> want = expectedShard(b, mesh.get(), coordinatesOf(p, rank), s);
    if (std::memcmp(want.data(), ex.bytes(static_cast<int>(i)).data(), want.size() * sizeof(float)) != 0)
      return "rank " + std::to_string(rank) + ": buffer '" + b.name + "' differs from save " + std::to_string(salt) + "'s";
  }
  return "";
}

}  // namespace tessel::test
