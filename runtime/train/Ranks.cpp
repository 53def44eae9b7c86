// Startup agreement among the ranks; see Ranks.h.
#include "runtime/train/Ranks.h"

#include "runtime/comm/World.h"
#include "runtime/numeric/Fnv1a.h"

#include <array>
#include <cstdio>
#include <new>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>
#include <vector>

namespace tessel::trainer {

namespace {

std::string ranksWord(int64_t n) { return n == 1 ? "one rank" : fmt::format("{} ranks", n); }

/// All-gathers `words` 64-bit values per rank (sent as pairs of i32, which every
/// communicator moves bit for bit) into one row per rank.
template <size_t N>
std::vector<std::array<uint64_t, N>> gatherWords(rt::Communicator& comm, const std::array<uint64_t, N>& mine,
                                                 const std::string& name) {
  std::vector<std::array<uint64_t, N>> all(static_cast<size_t>(comm.worldSize()));
  comm.allGather(mine.data(), all.data(), static_cast<int64_t>(2 * N * all.size()), rt::DType::I32, name)
      ->wait();
  return all;
}

/// All-gathers `mine` (collective `name`) and returns the ranks whose fingerprint differs from
/// rank 0's, with every rank's fingerprint.
std::vector<int> differingRanks(rt::Communicator& comm, const DataFingerprint& mine, const std::string& name,
                                std::vector<std::array<uint64_t, 2>>& all) {
  all = gatherWords(comm, std::array<uint64_t, 2>{mine.hash, mine.bytes}, name);
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ.push_back(static_cast<int>(r));
  return differ;
}

}  // namespace

void requireWorldSize(int world, int64_t planRanks, const std::string& plan, const std::string& remedy) {
  if (planRanks == world) return;
  const std::string launch =
      planRanks == 1 ? std::string("one process") : fmt::format("{} processes (mpirun -np {})", planRanks, planRanks);
  // Only a plain data-parallel plan has one obvious plan for the world: replacing a plan with
  // other axes (pp, tp, fsdp) by dp=N would silently drop them.
  const bool dpOnly = plan.starts_with("dp=") && plan.find(',') == std::string::npos;
  const std::string fix = dpOnly ? fmt::format("{} --plan dp={} or launch {}", remedy, world, launch)
                                 : fmt::format("launch {}, or {} a plan whose axis sizes multiply to {}", launch,
                                               remedy, world);
  throw std::runtime_error(fmt::format("{} as {} but the plan is {} ({}); {}", world == 1 ? "started" : "launched",
                                       ranksWord(world), plan, ranksWord(planRanks), fix));
}

void checkSameCommandLine(int argc, char** argv, rt::Communicator& comm) {
  if (comm.worldSize() == 1) return;
  std::array<uint64_t, 1> h{numeric::kFnv1aOffsetBasis};  // over the arguments, each with its NUL
  for (int i = 1; i < argc; ++i) h[0] = numeric::fnv1a(h[0], argv[i], std::strlen(argv[i]) + 1);
  auto all = gatherWords(comm, h, "command_line");
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ.push_back(static_cast<int>(r));
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "rank(s) {} were started with other arguments than rank 0; every rank of a "
        "data-parallel job must run the same command",
        fmt::join(differ, ", ")));
}

void DataFingerprint::add(const void* data, size_t n) {
  hash = numeric::fnv1a(hash, data, n);
  bytes += n;
}

DataFingerprint fingerprintOf(const TextDataset& data) {
  DataFingerprint f;
  f.add(data.bytes().data(), data.bytes().size());
  return f;
}

DataFingerprint fingerprintOf(std::initializer_list<const ImageDataset*> sets) {
  DataFingerprint f;
  for (const ImageDataset* d : sets) {
    const std::array<int64_t, 3> dims{d->count, d->rows, d->cols};
    f.add(dims.data(), sizeof dims);
    f.add(d->images.data(), d->images.size() * sizeof(float));
    f.add(d->labels.data(), d->labels.size() * sizeof(int32_t));
  }
  return f;
}

void requireSameData(rt::Communicator& comm, const DataFingerprint& mine, const std::string& where) {
  if (comm.worldSize() == 1) return;
  std::vector<std::array<uint64_t, 2>> all;
  std::vector<std::string> differ;
  for (int r : differingRanks(comm, mine, "data_fingerprint", all))
    differ.push_back(fmt::format("{} ({} bytes{})", r, all[r][1], all[r][1] == all[0][1] ? ", other contents" : ""));
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "the ranks read different data at {}: rank(s) {} differ from rank 0 ({} bytes); every rank "
        "must read the same data, or the global batches are not the ones the plan promises",
        where, fmt::join(differ, ", "), all[0][1]));
}

void requireSameBundle(rt::Communicator& comm, const DataFingerprint& mine, const std::string& where) {
  if (comm.worldSize() == 1) return;
  std::vector<std::array<uint64_t, 2>> all;
  std::vector<int> differ = differingRanks(comm, mine, "bundle_fingerprint", all);
  if (!differ.empty())
    throw std::runtime_error(fmt::format(
        "the ranks loaded different bundles at {}: rank(s) {} differ from rank 0 (other program, kernels or "
        "bundle.json checksums); every rank must load the same bundle",
        where, fmt::join(differ, ", ")));
}

void reportError(const std::string& message) {
  std::string line = message;
  try {
    rt::WorldInfo w = rt::detectWorld();
    if (w.size > 1) line += fmt::format(" [rank {} of {}]", w.rank, w.size);
  } catch (const std::exception&) {  // malformed launcher variables: report without the rank
  }
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

int runGuarded(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const rt::CommError& e) {
    // A collective failed (a dead or late rank, a timeout): every surviving rank ends here,
    // naming the collective, its size, the step and the missing ranks.
    rt::abortJob(rt::detectWorld().rank, e.what());
  } catch (const std::bad_alloc&) {
    reportError(program +
                ": error: out of memory: the model, batch or data set does not fit in this "
                "machine's memory; reduce the model size or --batch");
  } catch (const std::exception& e) {
    reportError(program + ": error: " + e.what());
  }
  return 1;
}

}  // namespace tessel::trainer
