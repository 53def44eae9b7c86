// `tessel ckpt export` and `tessel ckpt import` (see CkptCommands.h): between a distributed
// checkpoint and one plain safetensors file of whole tensors.
//
// import writes the same layout a one-rank save would (Checkpoint.h): one shard file holding
// every tensor whole, an index with optimizer_state false, committed by the same steps: the
// folder is built as DIR/step_00000000.tmp, its files and the folder fsynced, renamed to
// DIR/step_00000000, DIR fsynced, then `latest` written to latest.tmp, fsynced and renamed. A
// crash at any point leaves either no checkpoint or a complete one.
#include "runtime/ckpt/DurableFiles.h"
#include "runtime/ckpt/FileNames.h"
#include "runtime/ckpt/Index.h"
#include "runtime/tools/tessel/CkptCommands.h"
#include "runtime/tools/tessel/Table.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace tessel::cli {

namespace {

namespace fs = std::filesystem;
using ckpt::CheckpointError;

/// The folder name of the imported checkpoint (Checkpoint.h's stepFolderName(0)).
constexpr const char* kStepZero = "step_00000000";

/// Whether canonical path `inner` is `outer` or lies inside it.
bool isWithin(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return true;
}

/// `path` made absolute with every existing part's symbolic links resolved, or `path` itself.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path) : p;
}

/// Throws when writing `out` (and its ".tmp") would change the checkpoint folder `dir` being
/// exported or, when `dir` lies in a checkpoint root, another committed or in-progress save of
/// that root or the root's `latest`.
void refuseOutputInsideCheckpoint(const std::string& dir, const std::string& out) {
  const fs::path folder = resolved(dir), root = folder.parent_path();
  for (const fs::path& target : {resolved(out), resolved(out + ".tmp")}) {
    auto refuse = [&](const std::string& where) {
      throw CheckpointError(fmt::format("OUT '{}' {}: writing it would damage the checkpoint; write it elsewhere", out,
                                        where));
    };
    if (isWithin(target, folder)) refuse(fmt::format("lies inside the checkpoint folder '{}' being read", dir));
    std::error_code ec;
    // The folder's parent is a checkpoint root only when it has `latest`.
    if (!isWithin(target, root) || target == root || !fs::exists(root / "latest", ec)) continue;
    const fs::path child = root / *std::next(target.begin(), std::distance(root.begin(), root.end()));
    const std::string name = child.filename().string();
    if (name == "latest" || name == "latest.tmp")
      refuse(fmt::format("is the checkpoint root's '{}'", (root / name).string()));
    if (child != target && fs::is_directory(child, ec) &&
        (fs::exists(child / "index.json", ec) || (name.size() > 4 && name.ends_with(".tmp"))))
      refuse(fmt::format("lies inside '{}', a save of the same checkpoint root", child.string()));
  }
}

/// Throws unless every tensor of `in` can become a checkpoint entry: a non-empty name without
/// control characters (an index entry and a one-line message need them printable), at most
/// kMaxTensorRank dimensions. Checked before anything is created, naming the input file.
void checkImportable(const std::string& model, const SafeTensorsFile& in) {
  for (const auto& [name, t] : in.tensors) {
    if (name.empty()) throw CheckpointError(fmt::format("safetensors file '{}': a tensor has an empty name", model));
    for (size_t i = 0; i < name.size(); ++i) {
      const auto c = static_cast<unsigned char>(name[i]);
      if (c < 0x20 || c == 0x7f)
        throw CheckpointError(fmt::format("safetensors file '{}': tensor {} has a control character (byte {} is "
                                          "0x{:02x}) in its name",
                                          model, ckpt::quoteName(name), i, c));
    }
    if (t.shape.size() > ckpt::kMaxTensorRank)
      throw CheckpointError(fmt::format("safetensors file '{}': tensor {} has {} dimensions, more than the {} a "
                                        "checkpoint holds",
                                        model, ckpt::quoteName(name), t.shape.size(), ckpt::kMaxTensorRank));
  }
}

/// Throws at the first NaN or infinity of F32 tensor `t`, naming it and its index: training
/// from such weights would silently produce garbage.
void refuseNonFinite(const std::string& model, const std::string& name, const StTensor& t) {
  const auto* values = reinterpret_cast<const float*>(t.bytes.data());
  const size_t n = t.bytes.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(values[i])) continue;
    std::vector<int64_t> at(t.shape.size());
    for (size_t d = t.shape.size(), rest = i; d-- > 0;) {
      at[d] = static_cast<int64_t>(rest % static_cast<size_t>(t.shape[d]));
      rest /= static_cast<size_t>(t.shape[d]);
    }
    throw CheckpointError(fmt::format("safetensors file '{}': tensor {} holds {} at [{}] (element {}): weights must be "
                                      "finite (--allow-non-finite imports them as they are)",
                                      model, ckpt::quoteName(name), values[i], fmt::join(at, ", "), i));
  }
}

/// `t` as F32: F32 as is; F64, BF16 and F16 converted (a finite value beyond F32's range is
/// refused rather than turned into infinity); integer tensors refused.
StTensor toF32(const std::string& model, const std::string& name, const StTensor& t) {
  if (t.dtype == StDType::F32) return t;
  if (t.dtype == StDType::I32 || t.dtype == StDType::I64)
    throw CheckpointError(fmt::format("safetensors file '{}': tensor {} is {}: only floating-point tensors (F32, F64, "
                                      "BF16, F16) can become parameters",
                                      model, ckpt::quoteName(name), dtypeName(t.dtype)));
  std::vector<float> values;
  values.reserve(static_cast<size_t>(t.numel()));
  for (double v : t.toF64()) {
    if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max())
      throw CheckpointError(fmt::format("safetensors file '{}': tensor {} holds {}, beyond the F32 range", model,
                                        ckpt::quoteName(name), v));
    values.push_back(static_cast<float>(v));
  }
  return StTensor::fromF32(t.shape, values);
}

}  // namespace

int exportCheckpoint(const std::string& path, const std::string& out, bool optimizerState) {
  const std::string dir = resolveCheckpointNoting(path);
  const ckpt::Index index = ckpt::readIndex(dir);
  if (optimizerState && !index.optimizerState)
    throw CheckpointError(fmt::format("checkpoint '{}' holds weights only (\"optimizer_state\": false): there is no "
                                      "optimizer state for --optimizer-state to export",
                                      dir));
  refuseOutputInsideCheckpoint(dir, out);
  SafeTensorsFile file;
  file.metadata["format"] = "pt";  // as --export-params writes (runtime/exec/ExportParams.cpp)
  int64_t bytes = 0;
  for (const auto& [name, t] : index.tensors) {
    if (t.kind != "parameter" && !(optimizerState && t.kind == "optimizer_state")) continue;
    if (name == "__metadata__")
      throw CheckpointError(fmt::format("checkpoint '{}': a tensor named '__metadata__' cannot be written to a "
                                        "safetensors file",
                                        dir));
    StTensor st;
    st.dtype = t.dtype;
    st.shape = t.shape;
    st.bytes.resize(static_cast<size_t>(ckpt::elementCount(t.shape, name)) * dtypeSize(t.dtype));
    ckpt::readRegion(dir, index, name, std::vector<int64_t>(t.shape.size(), 0), t.shape, st.bytes.data());
    bytes += static_cast<int64_t>(st.bytes.size());
    file.tensors.emplace(name, std::move(st));
  }
  writeSafeTensors(out, file);
  fmt::print("exported {} tensors ({}) of step {} from '{}' to '{}'\n", file.tensors.size(), humanBytes(bytes),
             index.step, dir, out);
  return 0;
}

int importSafeTensors(const std::string& model, const std::string& root, bool allowNonFinite) {
  const SafeTensorsFile in = readSafeTensors(model);
  if (in.tensors.empty()) throw CheckpointError(fmt::format("safetensors file '{}' holds no tensors", model));
  checkImportable(model, in);
  // Every tensor converted (or refused) before anything is written. Tensors without elements
  // go into the index only (a shard is never empty).
  SafeTensorsFile shard;
  shard.metadata = {{"format", "pt"}, {"tessel_checkpoint_step", "0"}};
  for (const auto& [name, t] : in.tensors) {
    StTensor f32 = toF32(model, name, t);
    if (!allowNonFinite) refuseNonFinite(model, name, f32);
    if (f32.numel() > 0) shard.tensors.emplace(name, std::move(f32));
  }
  const fs::path dir = fs::path(root) / kStepZero, tmp = fs::path(root) / (std::string(kStepZero) + ".tmp");
  std::error_code ec;
  if (fs::exists(fs::path(root) / "latest", ec) || fs::exists(dir, ec))
    throw CheckpointError(fmt::format("checkpoint root '{}' already holds a checkpoint ('latest' or '{}'); import "
                                      "into a new folder",
                                      root, kStepZero));
  // The import replaces these paths: the model file must not be one of them or inside them.
  for (const fs::path& made : {dir, tmp, fs::path(root) / "latest.tmp"})
    if (isWithin(resolved(model), resolved(made.string())))
      throw CheckpointError(fmt::format("MODEL '{}' lies at or inside '{}', which the import writes; move it elsewhere",
                                        model, made.string()));
  fs::create_directories(root, ec);
  if (ec) throw CheckpointError(fmt::format("cannot create '{}': {}", root, ec.message()));
  fs::remove_all(tmp, ec);  // an import that crashed before its rename
  if (!fs::create_directory(tmp, ec))
    throw CheckpointError(fmt::format("cannot create '{}': {}", tmp.string(), ec ? ec.message() : "exists"));

  // Any failure from here on removes the half-built folder: nothing is left behind.
  int64_t bytes = 0;
  try {
    // 1. The shard file: every tensor with elements, whole, keyed by its name.
    const std::string shardName = "rank_00000.safetensors";
    const StByteRanges ranges = writeSafeTensorsWithOffsets((tmp / shardName).string(), shard, /*durable=*/true);

    // 2. The index.
    ckpt::Index index;
    index.step = 0;
    index.optimizerState = false;
    index.trainer = {{"step", 0}, {"imported_from", model}};
    for (const auto& [name, t] : in.tensors) {
      ckpt::TensorEntry& e = index.tensors[name];
      e.shape = t.shape;
      auto it = shard.tensors.find(name);
      if (it == shard.tensors.end()) continue;  // no elements: no shard
      ckpt::ShardEntry s;
      s.offsets.assign(t.shape.size(), 0);
      s.lengths = t.shape;
      s.file = shardName;
      s.key = name;
      std::tie(s.begin, s.end) = ranges.at(name);
      s.crc32 = ckpt::blockCrcs(it->second.bytes.data(), it->second.bytes.size(), s.blockBytes);
      bytes += s.end - s.begin;
      e.shards.push_back(std::move(s));
    }
    const std::string text = ckpt::serializeIndex(index);
    try {
      ckpt::parseIndex(text, (tmp / "index.json").string());  // what a loader will accept
    } catch (const CheckpointError& e) {
      throw CheckpointError(fmt::format("safetensors file '{}' cannot become a checkpoint: {}", model, e.what()));
    }
    ckpt::writeFileAtomically((tmp / "index.json").string(), text);  // fsyncs the folder too
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }

  // 3. The commit: rename the folder, then point `latest` at it.
  if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
    const std::string cause = std::strerror(errno);
    fs::remove_all(tmp, ec);
    throw CheckpointError(fmt::format("cannot rename '{}' to '{}': {}", tmp.string(), dir.string(), cause));
  }
  ckpt::syncFolder(root);
  ckpt::writeFileAtomically((fs::path(root) / "latest").string(), std::string(kStepZero) + "\n");
  fmt::print("imported {} tensors ({}) from '{}' as '{}' (step 0, weights only: the optimizer state starts at zero)\n",
             in.tensors.size(), humanBytes(bytes), model, dir.string());
  return 0;
}

}  // namespace tessel::cli
