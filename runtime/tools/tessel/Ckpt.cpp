// `tessel ckpt info|verify|export|import`: inspect and convert distributed checkpoints
// (runtime/ckpt/Index.h). info and verify here; export and import in CkptConvert.cpp. DIR may
// be a checkpoint folder or a checkpoint root (then `latest` names the folder). One process,
// no world: the checkpoint is read from the file system only, and nothing in it is executed.
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/tools/tessel/CkptCommands.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/tools/tessel/Table.h"
#include "runtime/train/FlagChecks.h"

#include <fmt/format.h>

#include <map>
#include <memory>

namespace tessel::cli {

namespace {

using nlohmann::json;

/// "1 file", "2 files".
std::string count(int64_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

std::string shapeText(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

int64_t shardBytes(const ckpt::ShardEntry& s) { return s.end - s.begin; }

/// A trainer field as text ("-" when the loop did not record it).
std::string trainerText(const json& trainer, const char* key) {
  auto it = trainer.find(key);
  if (it == trainer.end()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

int info(const std::string& path, bool asJson) {
  const std::string dir = resolveCheckpointNoting(path);
  const ckpt::Index index = ckpt::readIndex(dir);
  std::map<std::string, std::pair<int64_t, int64_t>> files;  // file -> shards, bytes
  std::map<std::string, int64_t> bytesByKind;
  int64_t shards = 0, bytes = 0;
  for (const auto& [name, t] : index.tensors) {
    for (const ckpt::ShardEntry& s : t.shards) {
      ++files[s.file].first;
      files[s.file].second += shardBytes(s);
      bytesByKind[t.kind] += shardBytes(s);
      ++shards;
      bytes += shardBytes(s);
    }
  }
  if (asJson) {
    json tensors = json::array();
    for (const auto& [name, t] : index.tensors) {
      json list = json::array();
      for (const ckpt::ShardEntry& s : t.shards)
        list.push_back({{"offsets", s.offsets}, {"lengths", s.lengths}, {"file", s.file}, {"key", s.key},
                        {"bytes", shardBytes(s)}});
      tensors.push_back({{"name", name},
                         {"kind", t.kind},
                         {"dtype", dtypeName(t.dtype)},
                         {"shape", t.shape},
                         {"bytes", ckpt::elementCount(t.shape, name) * static_cast<int64_t>(dtypeSize(t.dtype))},
                         {"shards", list}});
    }
    json fileList = json::array();
    for (const auto& [file, counts] : files)
      fileList.push_back({{"file", file}, {"shards", counts.first}, {"bytes", counts.second}});
    fmt::print("{}\n", json{{"dir", dir},
                            {"step", index.step},
                            {"optimizer_state", index.optimizerState},
                            {"tensors", tensors},
                            {"files", fileList},
                            {"total_shards", shards},
                            {"total_bytes", bytes},
                            {"trainer", index.trainer}}
                           .dump());
    return 0;
  }
  fmt::print("checkpoint '{}': step {}, {}, {} in {}, {} ({} parameters, {} optimizer state{})\n", dir, index.step,
             count(static_cast<int64_t>(index.tensors.size()), "tensor"), count(shards, "shard"),
             count(static_cast<int64_t>(files.size()), "file"), humanBytes(bytes),
             humanBytes(bytesByKind["parameter"]), humanBytes(bytesByKind["optimizer_state"]),
             index.optimizerState ? "" : "; weights only: loading starts the optimizer state at zero");
  fmt::print("saved under: plan {}, mesh {}, world size {}\n", trainerText(index.trainer, "plan"),
             trainerText(index.trainer, "mesh"), trainerText(index.trainer, "world_size"));
  // The rest of the trainer state: what a resumed run must match, and where it continues.
  std::string trainer;
  for (const auto& [key, value] : index.trainer.items())
    if (key != "plan" && key != "mesh" && key != "world_size" && key != "step")
      trainer += fmt::format("  {}: {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
  fmt::print("trainer state:\n{}\n", trainer.empty() ? "  none (weights only)\n" : trainer);
  Table tensors({"tensor", "kind", "dtype", "shape", "shards", "bytes"});
  Table shardTable({"tensor", "offsets", "lengths", "file", "bytes"});
  for (const auto& [name, t] : index.tensors) {
    tensors.add({name, t.kind, dtypeName(t.dtype), shapeText(t.shape), std::to_string(t.shards.size()),
                 humanBytes(ckpt::elementCount(t.shape, name) * static_cast<int64_t>(dtypeSize(t.dtype)))});
    for (const ckpt::ShardEntry& s : t.shards)
      shardTable.add({name, shapeText(s.offsets), shapeText(s.lengths), s.file, humanBytes(shardBytes(s))});
  }
  Table fileTable({"file", "shards", "bytes"});
  for (const auto& [file, counts] : files)
    fileTable.add({file, std::to_string(counts.first), humanBytes(counts.second)});
  fmt::print("tensors:\n{}\nshards:\n{}\nfiles:\n{}", tensors.render(), shardTable.render(), fileTable.render());
  return 0;
}

int verify(const std::string& path) {
  const std::string dir = resolveCheckpointNoting(path);
  const ckpt::VerifyReport r = ckpt::verifyCheckpoint(dir);
  fmt::print("checkpoint '{}' verified: {}, {} in {}, {}; every header agrees with the index and every CRC block "
             "matches\n",
             dir, count(r.tensors, "tensor"), count(r.shards, "shard"), count(r.files, "file"), humanBytes(r.bytes));
  return 0;
}

}  // namespace

std::string resolveCheckpointNoting(const std::string& path) {
  std::vector<std::string> notes;
  const std::string dir = ckpt::resolveCheckpoint(path, &notes);
  for (const std::string& note : notes) fmt::print(stderr, "tessel ckpt: {}\n", note);
  return dir;
}

Action setupCkpt(CLI::App& sub) {
  struct CkptFlags {
    std::string dir, out, model;
    bool json = false, optimizerState = false, allowNonFinite = false;
  };
  auto f = std::make_shared<CkptFlags>();
  sub.require_subcommand(1, 1);
  const std::string dirHelp =
      "a checkpoint folder (holding index.json) or a checkpoint root (--checkpoint-dir: `latest` names the folder)";
  CLI::App* infoCmd = sub.add_subcommand("info", "the step, plan, tensors, shards and sizes of a checkpoint");
  infoCmd->add_option("DIR", f->dir, dirHelp)->required()->check(trainer::nonEmpty("folder"));
  addJsonFlag(*infoCmd, f->json);
  CLI::App* verifyCmd = sub.add_subcommand(
      "verify", "read every shard in full: each header against the index, each CRC block against its checksum");
  verifyCmd->add_option("DIR", f->dir, dirHelp)->required()->check(trainer::nonEmpty("folder"));
  CLI::App* exportCmd = sub.add_subcommand(
      "export", "write one consolidated safetensors file with the model's parameter names and global shapes");
  exportCmd->add_option("DIR", f->dir, dirHelp)->required()->check(trainer::nonEmpty("folder"));
  exportCmd->add_option("OUT", f->out, "the .safetensors file to write (atomically: tmp file, fsync, rename)")
      ->required()
      ->check(trainer::writableFile());
  exportCmd->add_flag("--optimizer-state", f->optimizerState,
                      "also write the optimizer state tensors (\"<param>:exp_avg\", ...), not only the parameters");
  CLI::App* importCmd = sub.add_subcommand(
      "import", "turn a full safetensors file into a step-0 weights-only checkpoint (DIR/step_00000000 and "
                "DIR/latest) that --resume DIR starts training from; F64, BF16 and F16 tensors become F32");
  importCmd->add_option("MODEL", f->model, "the .safetensors file to import (every tensor whole, by its parameter name)")
      ->required()
      ->check(trainer::nonEmpty("file name"));
  importCmd->add_option("DIR", f->dir, "the checkpoint root to create (must not hold a checkpoint yet)")
      ->required()
      ->check(trainer::nonEmpty("folder"));
  importCmd->add_flag("--allow-non-finite", f->allowNonFinite,
                      "import NaN and infinite values bit for bit (by default the first one is an error: training "
                      "from them silently produces garbage)");
  return [f, &sub](Context&) {
    const std::string which = sub.get_subcommands().front()->get_name();
    if (which == "info") return info(f->dir, f->json);
    if (which == "verify") return verify(f->dir);
    if (which == "export") return exportCheckpoint(f->dir, f->out, f->optimizerState);
    return importSafeTensors(f->model, f->dir, f->allowNonFinite);
  };
}

}  // namespace tessel::cli
