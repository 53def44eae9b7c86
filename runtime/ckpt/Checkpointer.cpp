// The Checkpointer: the write plan agreed once, the snapshot, and the writer thread; see
// Checkpoint.h. The writing and the commit themselves are Commit.cpp's (SaveJob.h).
#include "runtime/ckpt/Checkpoint.h"

#include "runtime/ckpt/Boxes.h"
#include "runtime/ckpt/SaveJob.h"
#include "runtime/comm/GatherBytes.h"
#include "runtime/exec/Sharding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tessel::ckpt {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::string stepFolderName(int64_t step) { return fmt::format("step_{:08d}", step); }

/// One buffer whose boxes (some or all) this rank writes.
struct PlannedBuffer {
  int buffer = -1;
  std::vector<LocalBox> boxes;  // only those this rank writes
};

struct Checkpointer::Impl {
  const rt::ProgramExecutor& ex;
  SaveOptions options;
  int rank = 0, world = 1;
  std::string nonce;  // rank 0's random number, agreed with the plan (SaveJob.h)
  int64_t saves = 0;
  int64_t lastStep = -1;  // the step saved last
  std::vector<PlannedBuffer> plan;
  std::map<std::string, detail::TensorMeta> tensors;
  int64_t bytes = 0;
  // The writer thread and what it reports (guarded by `mutex`).
  std::thread writer;
  std::atomic<bool> finished{false};
  std::mutex mutex;
  std::vector<std::string> lines;
  std::exception_ptr error;

  int lockFd = -1;  // rank 0: ROOT/.lock, held (flock) for the Checkpointer's life

  Impl(const rt::ProgramExecutor& e, SaveOptions o) : ex(e), options(std::move(o)) {}
  ~Impl() {
    if (lockFd >= 0) ::close(lockFd);  // releases the flock
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// Joins the writer thread if one ran; returns its error (cleared) if any.
  std::exception_ptr join() {
    if (writer.joinable()) writer.join();
    std::lock_guard lock(mutex);
    if (error) lastStep = -1;  // that step is not saved: saving it again is a real save
    return std::exchange(error, nullptr);
  }
};

namespace {

/// A box of a tensor, as the ranks compare them.
using BoxId = std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>;

/// 64 random bits as 16 hex digits: the run's part of every save id (SaveJob.h).
std::string randomNonce() {
  std::random_device device;
  const uint64_t bits = (uint64_t{device()} << 32) ^ device() ^
                        static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", bits);
}

/// Rank 0's claim on `root`: takes flock(LOCK_EX | LOCK_NB) on ROOT/.lock (created if missing)
/// and writes "PID HOST" into it, so that a second run saving into the same root is refused
/// with one line instead of the two racing on step_N.tmp and `latest`. Stores the descriptor in
/// `fd` (kept open: closing it releases the lock, also when the process dies). Returns the
/// problem, or "" when the lock is held. flock locks belong to the open file description, so a
/// second Checkpointer on the same root conflicts even within one process.
std::string lockRoot(const std::string& root, int& fd) {
  const std::string path = root + "/.lock";
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);  // never truncate a link's target
  if (fd < 0) return fmt::format("cannot open the lock file '{}': {}", path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char text[256] = {};
    const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
    ::close(fd);
    fd = -1;
    if (error != EWOULDBLOCK) return fmt::format("cannot lock '{}': {}", path, std::strerror(error));
    std::string holder(text, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    for (char& c : holder)  // any other text in the file stays on one line of the message
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    const size_t space = holder.find(' ');
    const std::string who = space == std::string::npos
                                ? "another process"
                                : fmt::format("pid {} on {}", holder.substr(0, space), holder.substr(space + 1));
    return fmt::format("another run is saving checkpoints into '{}' ({} holds {})", root, who, path);
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  const std::string owner = fmt::format("{} {}\n", ::getpid(), host);
  // Informative only (the lock is the flock): a failed write leaves an older owner's text.
  if (::ftruncate(fd, 0) == 0) {
    const ssize_t written = ::pwrite(fd, owner.data(), owner.size(), 0);
    (void)written;
  }
  return "";
}

/// Every rank's plan (its JSON: "problem", "tensors" with their boxes, rank 0's "nonce") made
/// into the writer of each box: boxes taken largest first (ties in box order), each given to the
/// rank holding it that has the fewest bytes to write so far (ties: the lowest rank). So the
/// replicas of data parallelism share the writing instead of rank 0 writing everything, as
/// torch.distributed.checkpoint's default planner spreads replicated tensors over their
/// holders; every rank computes the same answer from the same plans. Adds to `problems` each
/// rank's own problem, tensors the ranks describe differently and tensors whose distinct boxes
/// do not hold exactly their elements.
std::map<BoxId, int> agreeOnWriters(const std::vector<std::string>& plans, std::string& nonce,
                                    std::vector<std::string>& problems) {
  std::map<BoxId, std::vector<int>> holders;  // ascending ranks
  std::map<BoxId, int64_t> boxBytes;
  struct Described {
    std::string text;  // "kind dtype shape"
    int rank = 0;      // the first rank describing it
    std::vector<int64_t> shape;
    int64_t covered = 0;  // elements of its distinct boxes
  };
  std::map<std::string, Described> described;
  for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
    const nlohmann::json j = nlohmann::json::parse(plans[static_cast<size_t>(r)]);
    if (r == 0) nonce = j.value("nonce", "");
    if (const std::string problem = j["problem"].get<std::string>(); !problem.empty())
      problems.push_back(fmt::format("rank {}: {}", r, problem));
    for (const nlohmann::json& t : j["tensors"]) {
      const std::string name = t["name"].get<std::string>();
      const std::string text = fmt::format("{} {} {}", t["kind"].get<std::string>(), t["dtype"].get<std::string>(),
                                           t["shape"].dump());
      auto [it, fresh] = described.emplace(name, Described{text, r, t["shape"].get<std::vector<int64_t>>(), 0});
      if (!fresh && it->second.text != text)
        problems.push_back(fmt::format("tensor '{}' is {} on rank {} but {} on rank {}", name, text, r,
                                       it->second.text, it->second.rank));
      StDType dtype = StDType::F32;
      if (!dtypeFromName(t["dtype"].get<std::string>(), dtype))
        problems.push_back(fmt::format("rank {}: tensor '{}' has the unknown dtype {}", r, name, t["dtype"].dump()));
      for (const nlohmann::json& box : t["boxes"]) {
        const auto lengths = box[1].get<std::vector<int64_t>>();
        const BoxId id{name, box[0].get<std::vector<int64_t>>(), lengths};
        std::vector<int>& ranks = holders[id];
        if (ranks.empty()) {
          it->second.covered += elementCount(lengths, name);
          boxBytes[id] = elementCount(lengths, name) * static_cast<int64_t>(dtypeSize(dtype));
        }
        ranks.push_back(r);
      }
    }
  }
  for (const auto& [name, d] : described)
    if (d.covered != elementCount(d.shape, name))
      problems.push_back(fmt::format("the ranks' shards of '{}' hold {} elements, not its {}", name, d.covered,
                                     elementCount(d.shape, name)));
  std::vector<std::pair<int64_t, const BoxId*>> order;
  for (const auto& [id, bytes] : boxBytes) order.emplace_back(bytes, &id);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int64_t> assigned(plans.size(), 0);
  std::map<BoxId, int> writerOf;
  for (const auto& [bytes, id] : order) {
    int best = -1;
    for (int r : holders.at(*id))
      if (best < 0 || assigned[static_cast<size_t>(r)] < assigned[static_cast<size_t>(best)]) best = r;
    assigned[static_cast<size_t>(best)] += bytes;
    writerOf[*id] = best;
  }
  return writerOf;
}

}  // namespace

Checkpointer::Checkpointer(const rt::ProgramExecutor& ex, rt::Communicator* world, SaveOptions options)
    : impl_(std::make_unique<Impl>(ex, std::move(options))) {
  Impl& s = *impl_;
  const rt::Program& p = ex.program();
  s.rank = world ? world->rank() : 0;
  s.world = world ? world->worldSize() : 1;
  // Every rank checks what it can on its own, then all exchange the outcome with the plan, so
  // that a problem on one rank is every rank's error (no rank is left waiting in a collective).
  std::string problem;
  std::error_code ec;
  fs::create_directories(s.options.root, ec);
  if (ec || !fs::is_directory(s.options.root))
    problem = fmt::format("cannot create the checkpoint root '{}': {}", s.options.root,
                          ec ? ec.message() : "not a folder");
  else if (s.rank == 0)
    problem = lockRoot(s.options.root, s.lockFd);  // one run per root (a load ignores the lock)
  std::unique_ptr<rt::MeshLayout> layout;
  std::vector<int> coordinates;
  if (!p.mesh.empty()) {
    layout = std::make_unique<rt::MeshLayout>(rt::meshLayoutOf(p));
    if (layout->size() != s.world)
      problem = fmt::format("the program's mesh {} has {} ranks but the world has {}", layout->describe(),
                            layout->size(), s.world);
    else
      coordinates = layout->coordinates(s.rank);
  }
  std::map<int, std::vector<LocalBox>> boxes;  // by buffer id
  nlohmann::json mine = {{"problem", problem}, {"tensors", nlohmann::json::array()}};
  if (s.rank == 0) mine["nonce"] = randomNonce();
  for (size_t i = 0; i < p.buffers.size() && problem.empty(); ++i) {
    const rt::Buffer& b = p.buffers[i];
    if (b.kind != rt::BufferKind::Parameter && b.kind != rt::BufferKind::State) continue;
    const std::vector<int64_t> shape = b.globalShape.empty() ? b.shape : b.globalShape;
    detail::TensorMeta meta{detail::indexKind(b.kind), detail::indexDType(b.dtype), shape};
    s.tensors[b.name] = meta;
    nlohmann::json list = nlohmann::json::array();
    for (LocalBox& box : boxes[static_cast<int>(i)] = localBoxes(b, layout.get(), coordinates))
      list.push_back({box.offsets, box.lengths});
    mine["tensors"].push_back({{"name", b.name}, {"kind", meta.kind}, {"dtype", dtypeName(meta.dtype)},
                               {"shape", shape}, {"boxes", list}});
  }
  std::vector<std::string> plans{mine.dump()};
  if (world && s.world > 1) plans = rt::allGatherBytes(*world, plans[0], "the checkpoint write plan");
  std::vector<std::string> problems;
  const std::map<BoxId, int> writerOf = agreeOnWriters(plans, s.nonce, problems);
  if (!problems.empty())
    throw CheckpointError(fmt::format("cannot plan checkpoints under '{}': {}", s.options.root, fmt::join(problems, "; ")));
  for (const auto& [id, list] : boxes) {
    PlannedBuffer planned{id, {}};
    const std::string& name = p.buffers[static_cast<size_t>(id)].name;
    for (const LocalBox& box : list)
      if (writerOf.at(BoxId{name, box.offsets, box.lengths}) == s.rank) {
        planned.boxes.push_back(box);
        s.bytes += elementCount(box.lengths, name) * static_cast<int64_t>(dtypeSize(s.tensors[name].dtype));
      }
    if (!planned.boxes.empty()) s.plan.push_back(std::move(planned));
  }
}

Checkpointer::~Checkpointer() {
  if (std::exception_ptr e = impl_->join()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "%s\n", x.what());
    }
  }
}

double Checkpointer::save(int64_t step, const nlohmann::json& trainer) {
  Impl& s = *impl_;
  const Clock::time_point start = Clock::now();
  if (std::exception_ptr e = s.join()) std::rethrow_exception(e);  // the previous save's error
  // Same step, same state: a second save would only race rank 0's commit of the first (it
  // removes what its folder holds besides that save's shards).
  if (step == s.lastStep) return since(start);
  s.lastStep = step;
  detail::SaveJob job;
  job.root = s.options.root;
  job.step = step;
  job.saveId = fmt::format("{}-{}", s.nonce, ++s.saves);
  job.rank = s.rank;
  job.world = s.world;
  job.blockBytes = s.options.blockBytes;
  job.timeoutSeconds = s.options.timeoutSeconds;
  job.keep = s.options.keep;
  job.async = s.options.async;
  job.tensors = s.tensors;
  if (s.rank == 0) {
    job.trainer = trainer.is_null() ? nlohmann::json::object() : trainer;
    if (!job.trainer.is_object() || (job.trainer.contains("step") && job.trainer["step"] != step))
      throw CheckpointError(fmt::format("checkpoint step {}: the trainer state must be an object with \"step\": {}, "
                                        "not {}", step, step, trainer.dump()));
    job.trainer["step"] = step;
  }
  // The snapshot: the only part an asynchronous save blocks training for.
  const rt::Program& p = s.ex.program();
  std::vector<uint8_t> local;
  for (const PlannedBuffer& planned : s.plan) {
    const rt::Buffer& b = p.buffers[static_cast<size_t>(planned.buffer)];
    const size_t element = static_cast<size_t>(rt::dtypeBytes(b.dtype));
    if (planned.boxes.size() == 1 && planned.boxes[0].lengths == b.shape) {  // the whole buffer: no staging copy
      detail::SnapshotBox snap{b.name, planned.boxes[0].offsets, b.shape, std::vector<uint8_t>(b.bytes())};
      s.ex.readBuffer(planned.buffer, snap.bytes.data());
      job.boxes.push_back(std::move(snap));
      continue;
    }
    local.resize(static_cast<size_t>(b.bytes()));
    s.ex.readBuffer(planned.buffer, local.data());
    for (const LocalBox& box : planned.boxes) {
      detail::SnapshotBox snap{b.name, box.offsets, box.lengths, {}};
      snap.bytes.resize(static_cast<size_t>(elementCount(box.lengths, b.name)) * element);
      extractBox(local.data(), b.shape, box, element, snap.bytes.data());
      job.boxes.push_back(std::move(snap));
    }
  }
  job.blockedSeconds = since(start);
  if (!s.options.async) {
    s.lastStep = -1;  // until it succeeds
    std::string line = detail::runSave(std::move(job));
    s.lastStep = step;
    std::lock_guard lock(s.mutex);
    if (!line.empty()) s.lines.push_back(std::move(line));
    return since(start);
  }
  s.finished = false;
  s.writer = std::thread([&s, job = std::move(job)]() mutable {
    try {
      std::string line = detail::runSave(std::move(job));
      std::lock_guard lock(s.mutex);
      if (!line.empty()) s.lines.push_back(std::move(line));
    } catch (...) {
      std::lock_guard lock(s.mutex);
      s.error = std::current_exception();
    }
    s.finished = true;
  });
  return since(start);
}

void Checkpointer::wait() {
  if (std::exception_ptr e = impl_->join()) std::rethrow_exception(e);
}

std::vector<std::string> Checkpointer::poll() {
  Impl& s = *impl_;
  if (s.writer.joinable() && s.finished) s.writer.join();
  std::lock_guard lock(s.mutex);
  if (s.error) {
    s.lastStep = -1;
    std::rethrow_exception(std::exchange(s.error, nullptr));
  }
  return std::exchange(s.lines, {});
}

int64_t Checkpointer::bytesPerSave() const { return impl_->bytes; }

}  // namespace tessel::ckpt
