// `tessel bench-comm`: a sweep of message sizes through the trainer's communicators (MPI on
// CPU ranks, NCCL on GPUs with --device cuda), every result verified against a local reference, with nccl-tests' time, algbw
// and busbw (CommBench.h). Run it under the launcher the trainer uses:
//   mpirun -np 4 tessel bench-comm --max-bytes 268435456 --ops all_reduce --save comm.json
// A plain run is a world of one (every collective still runs and is verified; send_recv,
// which needs a peer, is skipped and says so). The NCCL path (device buffers in the GPU's
// primary context, runtime/tools/tessel/CudaBenchMemory.cpp) has not run on a GPU yet: the
// machines it was written on have none. --save writes the measured bandwidths for the
// cost model in the format of docs/tessel.md ("bench-comm results").
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/cuda/Driver.h"
#include "runtime/tools/tessel/CommBench.h"
#include "runtime/tools/tessel/Subcommand.h"
#include "runtime/tools/tessel/Table.h"
#include "runtime/train/FlagChecks.h"
#include "runtime/train/Ranks.h"  // checkSameCommandLine, reportError

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace tessel::cli {
namespace {

struct BenchFlags {
  int64_t minBytes = 8, maxBytes = int64_t{1} << 30, stepBytes = 0;
  BenchOptions run;
  std::string ops = "all";
  std::string save;
  double commTimeout = 300.0;
  bool json = false;
  std::string device = "cpu";
  int cudaDevice = -1;
};

/// The operations --ops names ("all", or a comma-separated list of commOpName spellings).
std::vector<CommOp> opsFromFlag(const std::string& text) {
  if (text == "all") return allCommOps();
  std::vector<CommOp> ops;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::optional<CommOp> op = parseCommOp(item);
    if (!op) throw std::invalid_argument(item);
    if (std::find(ops.begin(), ops.end(), *op) == ops.end()) ops.push_back(*op);
  }
  if (ops.empty()) throw std::invalid_argument(text);
  return ops;
}

/// The --ops check: "'x' is not an operation; use all or a list of: all_reduce, ...".
CLI::Validator opsList() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return "an empty value is not a list of operations";
        try {
          opsFromFlag(s);
          return "";
        } catch (const std::invalid_argument& e) {
          std::string names;
          for (CommOp op : allCommOps()) names += std::string(names.empty() ? "" : ", ") + commOpName(op);
          return fmt::format("'{}' is not an operation; use all or a comma-separated list of: {}", e.what(), names);
        }
      },
      "");
}

/// Bytes of memory available to new allocations on this host (/proc/meminfo MemAvailable);
/// -1 when unknown.
int64_t availableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

/// Refuses, on every rank alike, a sweep whose largest size does not fit in this host's memory
/// (the ranks of a host share it), before any buffer is allocated.
void requireMemory(rt::Communicator& control, const std::vector<CommOp>& ops, int64_t maxBytes, int localSize) {
  int64_t need = 0;
  CommOp worst = ops.front();
  for (CommOp op : ops)
    if (int64_t b = bytesNeeded(op, maxBytes, control.worldSize()); b > need) need = b, worst = op;
  const int64_t have = availableBytes();
  const int64_t hostNeed = need * std::max(localSize, 1);
  float short_ = have >= 0 && hostNeed > have ? 1.0f : 0.0f;
  control.allReduce(&short_, 1, rt::DType::F32, rt::ReduceOp::Max, "bench memory check")->wait();
  if (short_ > 0)
    throw std::runtime_error(fmt::format(
        "--max-bytes {}: {} needs {} per rank, and a host's {} rank(s) need {}{}; lower --max-bytes",
        maxBytes, commOpName(worst), humanBytes(need), std::max(localSize, 1), humanBytes(hostNeed),
        have >= 0 && hostNeed > have ? fmt::format(", but this host has {} available", humanBytes(have))
                                     : std::string(" (more than another rank's host has available)")));
}

nlohmann::json resultJson(const BenchResult& r) {
  return {{"op", commOpName(r.op)},  {"bytes", r.bytes},       {"count", r.count},
          {"time_s", r.seconds},     {"algbw_gbps", r.algbw},  {"busbw_gbps", r.busbw},
          {"verified", r.wrongRanks == 0}};
}

int run(const BenchFlags& f, Context& context) {
  const std::vector<CommOp> ops = opsFromFlag(f.ops);
  const std::vector<int64_t> sizes = sweepSizes(f.minBytes, f.maxBytes, f.stepBytes);
  context.world = rt::makeWorld({.timeoutSeconds = f.commTimeout});
  rt::Communicator& comm = *context.world->comm;
  const int rank = comm.rank(), world = comm.worldSize();
  trainer::checkSameCommandLine(context.argc, context.argv, comm);
  requireMemory(comm, ops, f.maxBytes, context.world->info.localSize);
  // On GPUs the operations go through NCCL on device buffers, as the trainer's collectives
  // do; the MPI (or single-rank) world still synchronises and reduces the results. Ranks
  // launched onto GPUs learn together, in the NCCL bootstrap, whether every rank can start.
  const bool gpu = f.device == "cuda";
  if (gpu && world == 1) rt::resolveDevice("cuda", /*cudaBackendReady=*/true);  // throws with the reason
  std::unique_ptr<rt::NcclCommunicator> nccl;
  if (gpu)
    nccl = std::make_unique<rt::NcclCommunicator>(
        comm, rt::NcclOptions{.timeoutSeconds = f.commTimeout, .device = f.cudaDevice, .hostWait = true});
  std::unique_ptr<BenchMemory> memory = gpu ? cudaMemory(nccl->device()) : hostMemory();
  rt::Communicator& opsComm = gpu ? static_cast<rt::Communicator&>(*nccl) : comm;

  const std::string backend = gpu ? "nccl" : world == 1 ? "single" : "mpi";
  Table table({"op", "size", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "check"});
  nlohmann::json results = nlohmann::json::array(), skipped = nlohmann::json::array();
  int wrong = 0;
  if (rank == 0 && !f.json)
    fmt::print("tessel bench-comm: {} rank(s), {} communicator {}, f32; each time is the slowest rank's "
               "mean over {} iterations after {} warmup; GB/s = 1e9 B/s; busbw as nccl-tests\n",
               world, gpu ? "NCCL" : world > 1 ? "MPI" : "single-rank", gpu ? "on GPUs" : "on the CPU", f.run.iters,
               f.run.warmup);
  for (CommOp op : ops) {
    if (op == CommOp::SendRecv && world < 2) {
      skipped.push_back({{"op", commOpName(op)}, {"reason", "send_recv needs at least 2 ranks"}});
      if (rank == 0 && !f.json) fmt::print("  send_recv: skipped, it needs at least 2 ranks (run under mpirun)\n");
      continue;
    }
    int64_t previous = -1;  // all_to_all rounds sizes to whole blocks: measure each S once
    for (int64_t bytes : sizes) {
      if (commSize(op, bytes, world).bytes == previous) continue;
      previous = commSize(op, bytes, world).bytes;
      BenchResult r = measure(opsComm, comm, *memory, op, bytes, f.run);
      if (!r.firstError.empty()) trainer::reportError("tessel bench-comm: wrong result: " + r.firstError);
      wrong += r.wrongRanks > 0;
      results.push_back(resultJson(r));
      table.add({commOpName(op), humanBytes(r.bytes), std::to_string(r.count), fmt::format("{:.2f}", r.seconds * 1e6),
                 fmt::format("{:.3f}", r.algbw), fmt::format("{:.3f}", r.busbw),
                 r.wrongRanks ? fmt::format("WRONG on {} rank(s)", r.wrongRanks) : std::string("ok")});
    }
  }
  if (rank != 0) return wrong ? 1 : 0;
  nlohmann::json doc = {{"format", "tessel-bench-comm"}, {"version", 1},
                        {"backend", backend},            {"device", f.device},
                        {"world_size", world},           {"ranks_per_host", context.world->info.localSize},
                        {"dtype", "f32"},                {"iters", f.run.iters},
                        {"warmup", f.run.warmup},        {"results", results}};
  if (!skipped.empty()) doc["skipped"] = skipped;
  if (f.json)
    fmt::print("{}\n", doc.dump(2));
  else
    fmt::print("{}{}\n", table.render(),
               wrong ? fmt::format("{} measurement(s) gave WRONG results", wrong)
                     : std::string("every result matched the reference"));
  if (!f.save.empty()) {
    std::ofstream out(f.save);
    out << doc.dump(2) << "\n";
    if (!out) throw std::runtime_error(fmt::format("--save: cannot write '{}'", f.save));
  }
  return wrong ? 1 : 0;
}

}  // namespace

Action setupBenchComm(CLI::App& sub) {
  auto f = std::make_shared<BenchFlags>();
  sub.footer(
      "\nMeasures collectives through the communicators the trainer uses (MPI between CPU ranks; NCCL between GPUs "
      "with --device cuda) over a sweep of sizes, and reports per size the time, algbw = S / t and busbw = algbw * factor, with nccl-tests' "
      "definitions: S is the whole tensor's bytes; factor 2(n-1)/n for all_reduce, (n-1)/n for all_gather, "
      "reduce_scatter and all_to_all, 1 for broadcast and send_recv. Every size's result is first checked "
      "against a reference computed on each rank. Run under mpirun (mpirun -np 4 tessel bench-comm); a plain "
      "run is one rank. Exits 1 if any result is wrong.");
  const int64_t maxSize = int64_t{1} << 40;
  sub.add_option("--min-bytes", f->minBytes, "smallest message size S in bytes (f32 elements: S / 4, at least one)")
      ->capture_default_str()->check(trainer::integerIn(1, maxSize));
  sub.add_option("--max-bytes", f->maxBytes, "largest message size S in bytes (the sweep ends with it)")
      ->capture_default_str()->check(trainer::integerIn(1, maxSize));
  sub.add_option("--step-bytes", f->stepBytes, "add this many bytes per size instead of doubling (0: double)")
      ->capture_default_str()->check(trainer::integerIn(0, maxSize));
  sub.add_option("--iters", f->run.iters, "timed iterations per size")
      ->capture_default_str()->check(trainer::integerIn(1, int64_t{1} << 20));
  sub.add_option("--warmup", f->run.warmup, "untimed iterations per size before timing")
      ->capture_default_str()->check(trainer::integerIn(0, int64_t{1} << 20));
  sub.add_option("--ops", f->ops, "operations to measure: all, or a comma-separated list of all_reduce, all_gather, "
                                  "reduce_scatter, all_to_all, broadcast, send_recv")
      ->capture_default_str()->check(opsList());
  sub.add_option("--save", f->save, "write the measured bandwidths as JSON to this file (format: docs/tessel.md)")
      ->type_name("FILE")->check(trainer::writableFile());
  sub.add_option("--comm-timeout", f->commTimeout, "seconds one collective may take before the job is aborted")
      ->capture_default_str()->check(trainer::positiveUpTo(rt::kMaxTimeoutSeconds));
  sub.add_option("--device", f->device, "cpu: MPI between host buffers; cuda: NCCL between GPU buffers (one GPU "
                                         "per rank), as the trainer's collectives on each")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  sub.add_option("--cuda-device", f->cudaDevice, "with --device cuda: the GPU of every rank (default: the local "
                                                 "rank's, as the trainer picks it)")
      ->check(trainer::integerIn(0, 1023));
  addJsonFlag(sub, f->json);
  return [f](Context& context) { return run(*f, context); };
}

}  // namespace tessel::cli
