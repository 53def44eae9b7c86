// Reading checkpoints (runtime/ckpt/Index.h readRegion and verifyCheckpoint; Checkpoint.h
// resolveCheckpoint).
//
// readRegion in steps, per shard that meets the requested box:
//   1. the shard file's safetensors header is read (readSafeTensorsHeader: every header check,
//      against the file's real size) and must agree with the index: the key exists, with the
//      tensor's dtype, the shard's lengths as shape, and exactly the shard's byte_range;
//   2. the intersection is cut into runs, stretches contiguous both in the shard and in the
//      output (the trailing dimensions both cover fully, times the first one they do not);
//   3. the CRC blocks those runs touch are merged into reads of at most kMaxReadBytes, each
//      read with pread, each block checked against its CRC before any byte is copied;
//   4. each run's bytes go to their place in the output.
// Nothing is trusted from the files beyond what the header checks and CRCs establish; every
// offset used is inside the file size measured on the open descriptor.
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/FileNames.h"
#include "runtime/ckpt/Index.h"
#include "runtime/io/RegularFile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace tessel::ckpt {

namespace {

/// Largest single read: bounds the buffer a partial read needs beside the output.
constexpr int64_t kMaxReadBytes = int64_t{64} << 20;

[[noreturn]] void fail(const std::string& file, const std::string& tensor, const std::string& cause) {
  throw CheckpointError(tensor.empty() ? fmt::format("checkpoint file '{}': {}", file, cause)
                                       : fmt::format("checkpoint file '{}': tensor {}: {}", file, quoteName(tensor),
                                                     cause));
}

/// An open shard file with its validated header.
struct ShardFile {
  int fd = -1;
  int64_t size = 0;
  SafeTensorsHeader header;
  ShardFile() = default;
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  ~ShardFile() {
    if (fd >= 0) ::close(fd);
  }
};

/// Validated headers by path, with the identity of the file they came from: a load calls
/// readRegion once per box, and a shard file holds many boxes, so each header is parsed once
/// per file version rather than once per box.
struct HeaderCache {
  struct Entry {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtimeNs;
    SafeTensorsHeader header;
  };
  std::mutex mutex;
  std::map<std::string, Entry> entries;
};

HeaderCache& headerCache() {
  static HeaderCache cache;
  return cache;
}

/// Opens `path` and reads its header (from the cache when the file is unchanged); the
/// header's file size must equal the descriptor's (the file did not change between the two).
std::unique_ptr<ShardFile> openShardFile(const std::string& path, const std::string& tensor) {
  auto file = std::make_unique<ShardFile>();
  std::string problem;
  file->fd = openRegularFile(path, problem);  // never blocks on a FIFO
  if (file->fd < 0) fail(path, tensor, problem);
  struct stat st {};
  if (::fstat(file->fd, &st) != 0) fail(path, tensor, fmt::format("cannot stat: {}", std::strerror(errno)));
  file->size = st.st_size;
  const int64_t mtimeNs = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  HeaderCache& cache = headerCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(path);
    if (it != cache.entries.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino &&
        it->second.size == st.st_size && it->second.mtimeNs == mtimeNs) {
      file->header = it->second.header;
      return file;
    }
  }
  try {
    file->header = readSafeTensorsHeader(path);
  } catch (const SafeTensorsError& e) {
    // Its message names the file too: keep only the cause, so the line names it once.
    std::string cause = e.what();
    const std::string prefix = fmt::format("safetensors file '{}': ", path);
    if (cause.rfind(prefix, 0) == 0) cause.erase(0, prefix.size());
    fail(path, tensor, "safetensors header: " + cause);
  }
  if (file->header.fileSize != file->size)
    fail(path, tensor, fmt::format("file changed while being read ({} then {} bytes)", file->size,
                                   file->header.fileSize));
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.entries.size() >= 256) cache.entries.clear();  // bounded: a few checkpoints' files
  cache.entries[path] = {st.st_dev, st.st_ino, st.st_size, mtimeNs, file->header};
  return file;
}

/// Step 1: the header entry of `shard` agrees with the index.
void checkShardHeader(const ShardFile& file, const std::string& path, const std::string& name,
                      const TensorEntry& t, const ShardEntry& shard) {
  auto it = file.header.tensors.find(shard.key);
  if (it == file.header.tensors.end())
    fail(path, name, fmt::format("key {} is not in the file's header", quoteName(shard.key)));
  const StTensorInfo& info = it->second;
  if (info.dtype != t.dtype)
    fail(path, name, fmt::format("key {} is {} in the file but {} in the index", quoteName(shard.key),
                                 dtypeName(info.dtype), dtypeName(t.dtype)));
  if (info.shape != shard.lengths)
    fail(path, name, fmt::format("key {} has shape [{}] in the file but the index's shard is [{}]",
                                 quoteName(shard.key), fmt::join(info.shape, ", "), fmt::join(shard.lengths, ", ")));
  if (info.begin != shard.begin || info.end != shard.end)
    fail(path, name, fmt::format("key {} lies at bytes [{}, {}) of the file but the index says [{}, {})",
                                 quoteName(shard.key), info.begin, info.end, shard.begin, shard.end));
}

/// One stretch contiguous in both the shard and the output, in bytes.
struct Run {
  int64_t src = 0;         // offset in the shard's bytes
  uint8_t* dst = nullptr;  // where the run's bytes go (in the output of its box)
  int64_t bytes = 0;
};

/// Step 2: the runs of the intersection of shard `s` with the box (offsets, lengths), in
/// increasing source order. Returns false when they do not meet.
bool intersectionRuns(const ShardEntry& s, const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths,
                      int64_t elementBytes, uint8_t* out, std::vector<Run>& runs, int64_t& elements) {
  const size_t rank = offsets.size();
  std::vector<int64_t> srcLo(rank), dstLo(rank), ext(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t lo = std::max(offsets[d], s.offsets[d]);
    const int64_t hi = std::min(offsets[d] + lengths[d], s.offsets[d] + s.lengths[d]);
    if (hi <= lo) return false;
    srcLo[d] = lo - s.offsets[d];
    dstLo[d] = lo - offsets[d];
    ext[d] = hi - lo;
  }
  // Row-major strides in elements.
  std::vector<int64_t> srcStride(rank, 1), dstStride(rank, 1);
  for (size_t d = rank; d-- > 1;) {
    srcStride[d - 1] = srcStride[d] * s.lengths[d];
    dstStride[d - 1] = dstStride[d] * lengths[d];
  }
  // The run: trailing dimensions covered fully on both sides, times the next one.
  size_t inner = rank;  // dimensions [inner, rank) form one run
  int64_t runElements = 1;
  while (inner > 0) {
    const size_t d = inner - 1;
    runElements *= ext[d];
    --inner;
    if (ext[d] != s.lengths[d] || ext[d] != lengths[d]) break;
  }
  elements = runElements;
  for (size_t d = 0; d < inner; ++d) elements *= ext[d];
  std::vector<int64_t> idx(inner, 0);  // counter over the outer dimensions
  while (true) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = d < inner ? idx[d] : 0;
      src += (srcLo[d] + i) * srcStride[d];
      dst += (dstLo[d] + i) * dstStride[d];
    }
    runs.push_back({src * elementBytes, out + dst * elementBytes, runElements * elementBytes});
    size_t d = inner;
    while (d > 0 && ++idx[d - 1] == ext[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return true;
}

/// Steps 3 and 4 for one shard: reads the CRC blocks the runs touch, verifies them, copies.
void readRuns(const ShardFile& file, const std::string& path, const std::string& name, const ShardEntry& shard,
              const std::vector<Run>& runs, ReadStats* stats) {
  const int64_t bs = shard.blockBytes, size = shard.end - shard.begin;
  // Block spans [first, last] the runs need, merged where they touch, split at kMaxReadBytes.
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const Run& r : runs) {
    const int64_t first = r.src / bs, last = (r.src + r.bytes - 1) / bs;
    if (!merged.empty() && first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, last);
    else
      merged.emplace_back(first, last);
  }
  const int64_t maxBlocks = std::max<int64_t>(1, kMaxReadBytes / bs);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& [first, last] : merged)
    for (int64_t b = first; b <= last; b += maxBlocks) spans.emplace_back(b, std::min(last, b + maxBlocks - 1));
  std::vector<uint8_t> buffer;
  size_t run = 0;
  for (const auto& [first, last] : spans) {
    const int64_t lo = first * bs, hi = std::min(size, (last + 1) * bs);
    buffer.resize(static_cast<size_t>(hi - lo));
    int64_t done = 0;
    while (done < hi - lo) {
      const ssize_t n = ::pread(file.fd, buffer.data() + done, static_cast<size_t>(hi - lo - done),
                                static_cast<off_t>(shard.begin + lo + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        fail(path, name, fmt::format("cannot read bytes [{}, {}): {}", shard.begin + lo, shard.begin + hi,
                                     n < 0 ? std::strerror(errno) : "unexpected end of file"));
      done += n;
    }
    for (int64_t b = first; b <= last; ++b) {
      const int64_t blo = b * bs - lo, bhi = std::min(size, (b + 1) * bs) - lo;
      const uint32_t crc = crc32Of(buffer.data() + blo, static_cast<size_t>(bhi - blo));
      if (crc != shard.crc32[static_cast<size_t>(b)])
        fail(path, name, fmt::format("key {}: CRC mismatch in block {} (bytes [{}, {}) of the file): "
                                     "{:08x} stored, {:08x} read",
                                     quoteName(shard.key), b, shard.begin + b * bs, shard.begin + lo + bhi,
                                     shard.crc32[static_cast<size_t>(b)], crc));
    }
    if (stats) stats->bytesRead += hi - lo;
    // Copy the parts of the runs inside [lo, hi); runs and spans are both in source order.
    while (run < runs.size() && runs[run].src < hi) {
      const Run& r = runs[run];
      const int64_t from = std::max(r.src, lo), to = std::min(r.src + r.bytes, hi);
      if (to > from) std::memcpy(r.dst + (from - r.src), buffer.data() + (from - lo), static_cast<size_t>(to - from));
      if (r.src + r.bytes > hi) break;  // continues in the next span
      ++run;
    }
  }
}

}  // namespace

void readRegions(const std::string& dir, const Index& index, const std::string& name, const std::vector<Box>& boxes,
                 const std::vector<void*>& outs, ReadStats* stats) {
  const std::string indexPath = dir + "/index.json";
  auto it = index.tensors.find(name);
  if (it == index.tensors.end())
    throw CheckpointError(fmt::format("checkpoint '{}': no tensor {}", dir, quoteName(name)));
  const TensorEntry& t = it->second;
  if (outs.size() != boxes.size())
    throw CheckpointError(fmt::format("checkpoint '{}': tensor {}: {} boxes asked for with {} outputs", dir,
                                      quoteName(name), boxes.size(), outs.size()));
  int64_t wanted = 0;
  for (const Box& box : boxes) {
    const auto& [offsets, lengths] = box;
    if (offsets.size() != t.shape.size() || lengths.size() != t.shape.size())
      throw CheckpointError(fmt::format("checkpoint '{}': tensor {} has rank {}, but the box asked for has rank {}",
                                        dir, quoteName(name), t.shape.size(), offsets.size()));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (offsets[d] < 0 || lengths[d] < 0 || offsets[d] > t.shape[d] || lengths[d] > t.shape[d] - offsets[d])
        throw CheckpointError(fmt::format("checkpoint '{}': tensor {}: box at [{}] of lengths [{}] lies outside its "
                                          "shape [{}]",
                                          dir, quoteName(name), fmt::join(offsets, ", "), fmt::join(lengths, ", "),
                                          fmt::join(t.shape, ", ")));
    }
    wanted += elementCount(lengths, name);
  }
  if (wanted == 0) return;
  const auto elementBytes = static_cast<int64_t>(dtypeSize(t.dtype));
  std::map<std::string, std::unique_ptr<ShardFile>> files;
  int64_t copied = 0;
  for (const ShardEntry& shard : t.shards) {
    // An Index need not come from parseIndex: re-check what the arithmetic below relies on.
    const int64_t size = shard.end - shard.begin;
    if (shard.offsets.size() != t.shape.size() || shard.lengths.size() != t.shape.size() ||
        shard.blockBytes < 1 || shard.begin < 0 || size < 0 || !plainFileNameProblem(shard.file).empty() ||
        static_cast<int64_t>(shard.crc32.size()) != size / shard.blockBytes + (size % shard.blockBytes != 0))
      throw CheckpointError(fmt::format("checkpoint index '{}': tensor {}: shard in {} is malformed", indexPath,
                                        quoteName(name), quoteName(shard.file)));
    // The runs of every box this shard meets, read together: a CRC block two boxes need (the
    // q, k and v blocks of a fused weight under tensor parallelism) is read and checked once.
    std::vector<Run> runs;
    for (size_t i = 0; i < boxes.size(); ++i) {
      int64_t elements = 0;
      if (intersectionRuns(shard, boxes[i].first, boxes[i].second, elementBytes, static_cast<uint8_t*>(outs[i]), runs,
                           elements))
        copied += elements;
    }
    if (runs.empty()) continue;
    // Disjoint boxes meet disjoint parts of the shard: sorted by source, the runs never overlap.
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.src < b.src; });
    const std::string path = dir + "/" + shard.file;
    auto& file = files[shard.file];
    if (!file) {
      file = openShardFile(path, name);
      if (stats) ++stats->files;
    }
    checkShardHeader(*file, path, name, t, shard);
    readRuns(*file, path, name, shard, runs, stats);
  }
  if (stats) stats->bytesNeeded += wanted * elementBytes;
  if (copied != wanted)
    throw CheckpointError(fmt::format("checkpoint index '{}': tensor {}: its shards hold {} of the {} elements asked "
                                      "for",
                                      indexPath, quoteName(name), copied, wanted));
}

void readRegion(const std::string& dir, const Index& index, const std::string& name,
                const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths, void* out,
                ReadStats* stats) {
  readRegions(dir, index, name, {Box{offsets, lengths}}, {out}, stats);
}

VerifyReport verifyCheckpoint(const std::string& dir) {
  const Index index = readIndex(dir);
  VerifyReport report;
  std::map<std::string, std::unique_ptr<ShardFile>> files;
  std::vector<uint8_t> block;
  for (const auto& [name, t] : index.tensors) {
    ++report.tensors;
    for (const ShardEntry& shard : t.shards) {
      ++report.shards;
      const std::string path = dir + "/" + shard.file;
      auto& file = files[shard.file];
      if (!file) file = openShardFile(path, name);
      checkShardHeader(*file, path, name, t, shard);
      // The whole shard as one run: every block read and checked, one block in memory at a time.
      const int64_t size = shard.end - shard.begin;
      for (int64_t lo = 0, b = 0; lo < size; lo += shard.blockBytes, ++b) {
        const int64_t n = std::min(shard.blockBytes, size - lo);
        block.resize(static_cast<size_t>(n));
        readRuns(*file, path, name, shard, {Run{lo, block.data(), n}}, nullptr);
      }
      report.bytes += size;
    }
  }
  report.files = static_cast<int64_t>(files.size());
  return report;
}

namespace {

bool endsWithTmp(const std::string& name) {
  return name.size() >= 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
}

/// Throws unless `dir` is a committed checkpoint folder: a folder, not named "*.tmp" (an
/// uncommitted save is never loaded, however it is named), holding a regular index.json.
/// `via` is "" or " (named by '<root>/latest')".
void checkCheckpointFolder(const std::string& dir, const std::string& via) {
  namespace fs = std::filesystem;
  // By the name given and by the folder it reaches ("x.tmp/sub/..", a link to "x.tmp").
  std::error_code ec;
  const fs::path reached = fs::weakly_canonical(dir, ec);
  if (endsWithTmp(fs::path(dir).filename().string()) || (!ec && endsWithTmp(reached.filename().string())))
    throw CheckpointError(
        fmt::format("checkpoint '{}'{}: an uncommitted save (a folder ending in .tmp): never loaded", dir, via));
  const std::string indexPath = dir + "/index.json";
  struct stat st {};
  if (::lstat(indexPath.c_str(), &st) != 0)
    throw CheckpointError(fmt::format("checkpoint '{}'{}: has no index.json", dir, via));
  if (std::string problem = replaceableFileProblem(indexPath); !problem.empty())
    throw CheckpointError(fmt::format("checkpoint index '{}'{}: {}", indexPath, via, problem));
  if (::stat(indexPath.c_str(), &st) != 0)
    throw CheckpointError(
        fmt::format("checkpoint index '{}'{}: cannot open: {}", indexPath, via, std::strerror(errno)));
}

/// The uncommitted save folders ("step_*.tmp") directly inside `root`, sorted.
std::vector<std::string> uncommittedFolders(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string folder = entry.path().filename().string();
    if (endsWithTmp(folder) && folder.rfind("step_", 0) == 0 && entry.is_directory(ec)) out.push_back(folder);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string resolveCheckpoint(const std::string& given, std::vector<std::string>* notes) {
  std::error_code ec;
  std::string path = given;  // "ck/" names the same root as "ck"
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw CheckpointError(fmt::format("checkpoint '{}': no such folder", path));
    if (errno == ELOOP) throw CheckpointError(fmt::format("checkpoint '{}': a symbolic link loop, not a folder", path));
    throw CheckpointError(fmt::format("checkpoint '{}': cannot open: {}", path, std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode))
    throw CheckpointError(
        fmt::format("checkpoint '{}': is a file, not a folder (give a checkpoint folder or a root)", path));
  if (!S_ISDIR(st.st_mode))
    throw CheckpointError(fmt::format("checkpoint '{}': is {}, not a folder", path, fileKindName(st.st_mode)));
  const std::string latestPath = path + "/latest";
  const bool hasIndex = ::lstat((path + "/index.json").c_str(), &st) == 0;
  if (hasIndex) {
    checkCheckpointFolder(path, "");
    return path;
  }
  if (::lstat(latestPath.c_str(), &st) != 0) {
    // A save's folder (step_N.tmp, killed before its index) given itself; a root of another
    // name may end in .tmp too, so only the step-folder form is taken for a save.
    for (const std::string& name : {std::filesystem::path(path).filename().string(),
                                    std::filesystem::weakly_canonical(path, ec).filename().string()})
      if (endsWithTmp(name) && name.rfind("step_", 0) == 0)
        throw CheckpointError(
            fmt::format("checkpoint '{}': an uncommitted save (a folder ending in .tmp): never loaded", path));
    const std::vector<std::string> uncommitted = uncommittedFolders(path);
    if (!uncommitted.empty())
      throw CheckpointError(fmt::format("checkpoint root '{}': no committed checkpoint yet; skipped '{}' (a save that "
                                        "did not commit)",
                                        path, fmt::join(uncommitted, "', '")));
    throw CheckpointError(
        fmt::format("checkpoint '{}': neither a checkpoint (no index.json) nor a root (no 'latest')", path));
  }
  std::string text, problem;
  if (!readRegularFile(latestPath, 256, text, problem))  // never blocks on a FIFO
    throw CheckpointError(fmt::format("checkpoint root file '{}': {}", latestPath, problem));
  if (text.empty() || text.back() != '\n' || text.find('\n') != text.size() - 1)
    throw CheckpointError(fmt::format("checkpoint root file '{}': not one line ending in a newline", latestPath));
  const std::string name = text.substr(0, text.size() - 1);
  if (std::string nameProblem = plainFileNameProblem(name); !nameProblem.empty())
    throw CheckpointError(fmt::format("checkpoint root file '{}': {} is not a folder name inside the root: {}",
                                      latestPath, quoteName(name), nameProblem));
  const std::string dir = path + "/" + name;
  const std::string via = fmt::format(" (named by '{}')", latestPath);
  if (::stat(dir.c_str(), &st) != 0)
    throw CheckpointError(
        fmt::format("checkpoint root file '{}' names '{}': {}", latestPath, dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw CheckpointError(fmt::format("checkpoint root file '{}' names '{}', which is {}, not a folder", latestPath,
                                      dir, fileKindName(st.st_mode)));
  checkCheckpointFolder(dir, via);
  if (notes && name.rfind("step_", 0) == 0) {
    // Saves newer than `latest` that never committed (a crash, or one still being written);
    // step folder names have 8 digits, so name order is step order.
    for (const std::string& folder : uncommittedFolders(path))
      if (folder.substr(0, folder.size() - 4) > name)
        notes->push_back(fmt::format("skipped '{}/{}': a save that did not commit", path, folder));
  }
  return dir;
}

}  // namespace tessel::ckpt
