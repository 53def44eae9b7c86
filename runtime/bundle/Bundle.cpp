// AOT bundles; see Bundle.h.
#include "runtime/bundle/Bundle.h"

#include "runtime/bundle/BundleConfig.h"
#include "runtime/bundle/BundleFolder.h"
#include "runtime/exec/KernelLibrary.h"

#include <algorithm>
#include <cmath>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessel::rt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("'{}': cannot open (missing or unreadable)",
                                                path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeSynced(const fs::path& path, const std::string& bytes) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("'{}': cannot write", path.string()));
  }
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

bool validArch(const std::string& arch) {
  return arch.size() > 3 && arch.rfind("sm_", 0) == 0 &&
         arch.find_first_not_of("0123456789", 3) == std::string::npos;
}

/// The JSON integer at `j` in [lo, hi]; throws naming `field` for a float (1.5, 2**70), a
/// string or a value out of range, which would otherwise be truncated or wrapped.
int64_t integerIn(const json& j, const std::string& field, int64_t lo, int64_t hi, const std::string& file) {
  if (!jsonIntegerIn(j, lo, hi))
    throw std::runtime_error(fmt::format("'{}': {} is {}; it must be an integer from {} to {}", file, field,
                                         j.dump(), lo, hi));
  return j.get<int64_t>();
}

/// The bundle.json fields that say how the program was compiled and how to run it. The
/// program checksum covers them (canonical JSON: sorted keys, no spaces), so an edit of any
/// of them is refused as damage, like an edit of program.json.
constexpr const char* kRecordedFields[] = {"model", "config", "train_flags", "optimizer", "plan"};

/// FNV-1a checksum of program.json, kernels.cpp and bundle.json's recorded fields.
std::string programChecksum(const std::string& programJson, const std::string& kernelsCpp, const json& meta) {
  json recorded = json::object();
  for (const char* f : kRecordedFields)
    if (meta.contains(f)) recorded[f] = meta.at(f);
  return kernelLibraryChecksum(programJson + kernelsCpp + recorded.dump());
}

json planJson(const BundlePlan& p) {
  json mesh = json::array();
  for (const auto& [axis, size] : p.mesh) mesh.push_back({{"axis", axis}, {"size", size}});
  return {{"mesh", mesh}, {"batch_axis", p.batchAxis}, {"fully_shard_axis", p.fullyShardAxis},
          {"microsteps", p.microsteps},
          {"bucket_mb", p.bucketMb}, {"overlap", p.overlap}};
}

/// bundle.json's "plan"; throws std::runtime_error naming the field when malformed.
BundlePlan readPlan(const json& j, const std::string& file) {
  BundlePlan p;
  try {
    p.mesh.clear();
    for (size_t i = 0; i < j.at("mesh").size(); ++i) {
      const json& a = j.at("mesh").at(i);
      p.mesh.emplace_back(a.at("axis").get<std::string>(),
                          integerIn(a.at("size"), fmt::format("plan.mesh[{}].size", i), 1, 1 << 20, file));
    }
    p.batchAxis = j.at("batch_axis").get<std::string>();
    p.fullyShardAxis = j.at("fully_shard_axis").get<std::string>();
    p.microsteps = integerIn(j.at("microsteps"), "plan.microsteps", 1, 1 << 20, file);
    p.bucketMb = j.at("bucket_mb").get<double>();
    p.overlap = j.at("overlap").get<bool>();
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("'{}': bad field plan: {}", file, e.what()));
  }
  auto bad = [&](const std::string& why) {
    return std::runtime_error(fmt::format("'{}': plan {}", file, why));
  };
  if (p.mesh.empty()) throw bad("has an empty mesh");
  std::set<std::string> seen;
  // The axes besides the batch axis are checked against the program's mesh (BundleConfig.cpp).
  for (const auto& [axis, size] : p.mesh)
    if (!seen.insert(axis).second) throw bad(fmt::format("names axis {} twice", axis));
  // An empty batch axis: the plan does not split the batch (tensor parallelism alone).
  if (!p.batchAxis.empty() && !seen.count(p.batchAxis))
    throw bad(fmt::format("batch_axis '{}' is not an axis of the mesh", p.batchAxis));
  if (!p.fullyShardAxis.empty() && !seen.count(p.fullyShardAxis))
    throw bad(fmt::format("fully_shard_axis '{}' is not an axis of the mesh", p.fullyShardAxis));
  if (!(p.bucketMb > 0) || !std::isfinite(p.bucketMb)) throw bad(fmt::format("bucket_mb {} is not positive", p.bucketMb));
  return p;
}

}  // namespace

int64_t BundlePlan::ranks() const {
  int64_t n = 1;
  for (const auto& axis : mesh) n *= axis.second;
  return n;
}

std::vector<std::string> BundlePlan::batchAxes() const {
  std::vector<std::string> axes;
  for (const auto& axis : mesh)
    if (!axis.first.empty() && (axis.first == batchAxis || axis.first == fullyShardAxis)) axes.push_back(axis.first);
  return axes;
}

int64_t BundlePlan::dp() const {
  const std::vector<std::string> axes = batchAxes();
  int64_t n = 1;
  for (const auto& [axis, size] : mesh)
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) n *= size;
  return n;
}

std::string BundlePlan::meshText() const {
  std::string text;
  for (const auto& [axis, size] : mesh) text += fmt::format("{}{}={}", text.empty() ? "" : ",", axis, size);
  return text;
}

void writeBundle(const Program& program, const std::string& kernelLibrary, BundleInfo info,
                 const std::string& dir, const CudaBinary* cuda) {
  if (program.cudaSource.empty() != (cuda == nullptr))
    throw std::runtime_error(fmt::format(
        "'{}': {}", dir,
        cuda ? "a cubin was given for a program without CUDA kernels"
             : "the program has CUDA kernels but no cubin was given"));
  if (cuda && (cuda->cubin.empty() || !validArch(cuda->arch)))
    throw std::runtime_error(fmt::format("'{}': the CUDA module needs a cubin and an arch sm_XY, got arch '{}' "
                                         "and {} bytes", dir, cuda->arch, cuda->cubin.size()));
  fs::path target = fs::absolute(fs::path(dir)).lexically_normal();
  if (target.filename().empty() || target.filename() == ".") target = target.parent_path();
  std::error_code ec;
  // Only an earlier bundle (a folder with bundle.json) or an empty folder is replaced: any
  // other file or folder at the path is the user's, and is never deleted.
  if (fs::exists(fs::symlink_status(target)) || fs::is_symlink(target)) {
    bool replaceable = fs::is_directory(fs::symlink_status(target)) &&
                       (fs::is_empty(target, ec) || fs::is_regular_file(target / "bundle.json"));
    if (fs::is_symlink(target))  // replacing it would replace the link, not the folder it names
      throw std::runtime_error(fmt::format(
          "'{}' is a symbolic link; refusing to replace it (give the folder it points to, or a new folder)",
          dir));
    if (!replaceable)
      throw std::runtime_error(fmt::format(
          "'{}' exists and is not a Tessel bundle; refusing to replace it (choose a new folder, "
          "an empty one, or an earlier bundle)",
          dir));
  }
  fs::create_directories(target.parent_path(), ec);
  sweepStaleBundleFolders(target);  // left by writers that died (SIGKILL, power loss)
  fs::path tmp = target.parent_path() / fmt::format(".{}.tmp.{}", target.filename().string(),
                                                    ::getpid());
  fs::remove_all(tmp, ec);
  BundleWriteGuard guard(tmp, target);  // SIGINT/SIGTERM from here on remove the folders
  fs::create_directories(tmp, ec);
  if (ec)
    throw std::runtime_error(fmt::format("'{}': cannot create: {}", tmp.string(), ec.message()));
  try {
    saveProgram(program, tmp.string());
    guard.checkpoint();
    std::string lib = readBytes(kernelLibrary);
    guard.checkpoint();
    writeSynced(tmp / "kernels.so", lib);
    guard.checkpoint();
    info.kernelsChecksum = kernelLibraryChecksum(lib);
    info.cpuFlags = hostCpuFlags();
    json j{{"format", kBundleFormatVersion},
           {"tessel_version", kTesselVersion},
           {"model", info.model},
           {"config", info.config},
           {"train_flags", {{"seq", info.seq}, {"batch", info.batch}}},
           {"optimizer", info.optimizer},
           {"plan", planJson(info.plan)},
           {"kernels", {{"file", "kernels.so"}, {"checksum", info.kernelsChecksum},
                        {"cpu_flags", info.cpuFlags}}}};
    // The step list is checked whole: an edited program.json (a kernel given the wrong
    // arguments, a buffer swapped) could pass validation and still corrupt memory; and so
    // is what bundle.json says about it (kRecordedFields).
    j["program"] = {{"file", "program.json"},
                    {"covers", {"program.json", "kernels.cpp", "bundle.json: model config train_flags optimizer plan"}},
                    {"checksum", programChecksum(readBytes(tmp / "program.json"), readBytes(tmp / "kernels.cpp"), j)}};
    info.programChecksum = j["program"]["checksum"].get<std::string>();
    if (cuda) {
      writeSynced(tmp / "kernels.cubin", cuda->cubin);
      writeSynced(tmp / "kernels.ptx", cuda->ptx);
      j["cuda"] = {{"arch", cuda->arch},
                   {"cubin", {{"file", "kernels.cubin"}, {"checksum", kernelLibraryChecksum(cuda->cubin)}}},
                   {"ptx", {{"file", "kernels.ptx"}, {"checksum", kernelLibraryChecksum(cuda->ptx)}}}};
    }
    writeSynced(tmp / "bundle.json", j.dump(1) + "\n");
    guard.checkpoint();
    // Replace an older bundle: move it aside, move the new one in, then drop the old one.
    if (fs::exists(target)) {
      fs::path old = target.parent_path() / fmt::format(".{}.old.{}", target.filename().string(),
                                                        ::getpid());
      fs::remove_all(old, ec);
      fs::rename(target, old);
      guard.movedAside(old);
    }
    fs::rename(tmp, target);
    guard.checkpoint();
    guard.undo();  // drops the earlier bundle
  } catch (const fs::filesystem_error& e) {
    guard.undo();
    throw std::runtime_error(fmt::format("'{}': cannot write the bundle: {}", target.string(),
                                         e.code().message()));
  } catch (...) {
    guard.undo();
    throw;
  }
}

void requireCpuKernels(const Bundle& bundle) {
  if (!bundle.cpuKernelsProblem.empty()) throw std::runtime_error(bundle.cpuKernelsProblem);
}

Bundle readBundle(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root))
    throw std::runtime_error(fs::exists(root) ? fmt::format("'{}' is not a folder: give the bundle folder that "
                                                            "--emit-bundle wrote", dir)
                                              : fmt::format("'{}': no such bundle folder", dir));
  fs::path meta = root / "bundle.json";
  std::string file = meta.string();
  json j;
  try {
    j = json::parse(readBytes(meta));
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("'{}': malformed JSON: {}", file, e.what()));
  }
  auto field = [&](const char* name) -> const json& {
    if (!j.is_object() || !j.contains(name))
      throw std::runtime_error(fmt::format("'{}': missing field '{}'", file, name));
    return j.at(name);
  };
  Bundle b;
  try {
    const json& format = field("format");
    if (!format.is_number_integer() || format.get<int>() != kBundleFormatVersion)
      throw std::runtime_error(fmt::format(
          "'{}': bundle format version {} is not supported (this tessel-run reads version {}); "
          "recompile it with --emit-bundle",
          file, format.dump(), kBundleFormatVersion));
    std::string version = field("tessel_version").get<std::string>();
    if (version != kTesselVersion)
      throw std::runtime_error(fmt::format(
          "'{}': written by Tessel {}, but this is Tessel {}; recompile it with --emit-bundle",
          file, version, kTesselVersion));
    b.info.model = field("model").get<std::string>();
    b.info.config = field("config");
    b.info.seq = integerIn(field("train_flags").at("seq"), "train_flags.seq", 1, int64_t{1} << 40, file);
    b.info.batch = integerIn(field("train_flags").at("batch"), "train_flags.batch", 1, int64_t{1} << 40, file);
    b.info.optimizer = field("optimizer").get<std::string>();
    b.info.plan = readPlan(field("plan"), file);
    b.info.kernelsChecksum = field("kernels").at("checksum").get<std::string>();
    b.info.cpuFlags = field("kernels").value("cpu_flags", std::string());
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("'{}': bad field: {}", file, e.what()));
  }
  checkConfigFields(b.info, file);
  {
    std::string want;
    try {
      want = field("program").at("checksum").get<std::string>();
    } catch (const json::exception& e) {
      throw std::runtime_error(fmt::format("'{}': bad field: {}", file, e.what()));
    }
    std::string got = programChecksum(readBytes(root / "program.json"), readBytes(root / "kernels.cpp"), j);
    if (got != want)
      throw std::runtime_error(fmt::format(
          "'{}' and kernels.cpp with bundle.json's model, config, train_flags, optimizer and plan: checksum {} "
          "does not match {} recorded in bundle.json (edited, damaged or replaced)",
          (root / "program.json").string(), got, want));
    b.info.programChecksum = got;
  }
  b.program = loadProgram(dir);  // names program.json/kernels.cpp on any problem
  checkBundleConfig(b.info, b.program, file);
  fs::path lib = root / "kernels.so";
  std::string sum = kernelLibraryChecksum(readBytes(lib));
  if (sum != b.info.kernelsChecksum)
    throw std::runtime_error(fmt::format(
        "'{}': checksum {} does not match {} recorded in bundle.json (damaged or replaced)",
        lib.string(), sum, b.info.kernelsChecksum));
  // kernels.so was built with -march=native: it runs only where every feature it may use
  // exists. Noted here, refused by requireCpuKernels (a GPU run never loads kernels.so).
  std::set<std::string> here;
  std::istringstream hereFlags(hostCpuFlags());
  for (std::string f; hereFlags >> f;) here.insert(f);
  std::string missing;
  std::istringstream builtFlags(b.info.cpuFlags);
  for (std::string f; builtFlags >> f;)
    if (!here.count(f)) missing += " " + f;
  if (!missing.empty() && !here.empty())
    b.cpuKernelsProblem = fmt::format(
        "'{}': kernels.so was built for a CPU with features this CPU lacks:{}; recompile the "
        "bundle on a machine like this one",
        lib.string(), missing);
  b.kernelsPath = fs::absolute(lib).string();
  // The CUDA module: present exactly when the program has CUDA kernels.
  const bool hasCuda = j.contains("cuda");
  if (hasCuda != !b.program.cudaSource.empty())
    throw std::runtime_error(fmt::format(
        "'{}': {}", file,
        hasCuda ? "has a \"cuda\" module but program.json has no CUDA kernels (version 1)"
                : "has no \"cuda\" module but program.json has CUDA kernels"));
  if (hasCuda) {
    CudaBinary cuda;
    auto verified = [&](const char* key) {
      std::string name, want;
      try {
        name = j.at("cuda").at(key).at("file").get<std::string>();
        want = j.at("cuda").at(key).at("checksum").get<std::string>();
      } catch (const json::exception& e) {
        throw std::runtime_error(fmt::format("'{}': bad field cuda.{}: {}", file, key, e.what()));
      }
      if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
        throw std::runtime_error(fmt::format("'{}': cuda.{}.file '{}' is not a file name in the bundle", file, key, name));
      std::string bytes = readBytes(root / name);
      if (std::string sum = kernelLibraryChecksum(bytes); sum != want)
        throw std::runtime_error(fmt::format(
            "'{}': checksum {} does not match {} recorded in bundle.json (damaged or replaced)",
            (root / name).string(), sum, want));
      return bytes;
    };
    try {
      cuda.arch = j.at("cuda").at("arch").get<std::string>();
    } catch (const json::exception& e) {
      throw std::runtime_error(fmt::format("'{}': bad field cuda.arch: {}", file, e.what()));
    }
    if (!validArch(cuda.arch))
      throw std::runtime_error(fmt::format("'{}': cuda.arch '{}' is not sm_XY", file, cuda.arch));
    cuda.cubin = verified("cubin");
    cuda.ptx = verified("ptx");
    if (cuda.cubin.size() < 4 || cuda.cubin.compare(0, 4, "\x7f" "ELF") != 0)
      throw std::runtime_error(fmt::format("'{}': not an ELF cubin", (root / "kernels.cubin").string()));
    b.cuda = std::move(cuda);
  }
  return b;
}

}  // namespace tessel::rt
