// The NCCL backend's GPU-independent decisions; see NcclPlan.h.
#include "runtime/comm/NcclPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tessel::rt::nccl {

PaddedLayout paddedLayout(int64_t n, int world) {
  PaddedLayout l;
  l.n = n;
  l.world = world;
  l.block = world > 0 ? (n + world - 1) / world : 0;
  return l;
}

std::vector<Copy> allGatherPack(const PaddedLayout& l, int rank) {
  auto [first, last] = shardRange(l.n, rank, l.world);
  if (last == first) return {};
  return {Copy{0, rank * l.block, last - first}};
}

std::vector<Copy> allGatherUnpack(const PaddedLayout& l) {
  std::vector<Copy> out;
  for (int r = 0; r < l.world; ++r) {
    auto [first, last] = shardRange(l.n, r, l.world);
    if (last > first) out.push_back({r * l.block, first, last - first});
  }
  return out;
}

std::vector<Copy> reduceScatterPack(const PaddedLayout& l) {
  std::vector<Copy> out;
  for (int r = 0; r < l.world; ++r) {
    auto [first, last] = shardRange(l.n, r, l.world);
    if (last > first) out.push_back({first, r * l.block, last - first});
  }
  return out;
}

std::vector<Copy> reduceScatterUnpack(const PaddedLayout& l, int rank) {
  auto [first, last] = shardRange(l.n, rank, l.world);
  if (last == first) return {};
  return {Copy{rank * l.block, 0, last - first}};
}

std::vector<int32_t> encodeBootstrap(const BootstrapRecord& r) {
  std::vector<int32_t> w(kBootstrapWords, 0);
  w[0] = r.ok ? 1 : 0;
  w[1] = r.device;
  w[2] = r.ncclVersion;
  auto* bytes = reinterpret_cast<char*>(w.data() + 3);
  std::memcpy(bytes, r.uniqueId.data(), BootstrapRecord::kIdBytes);
  const size_t n = std::min(r.reason.size(), static_cast<size_t>(BootstrapRecord::kReasonBytes - 1));
  std::memcpy(bytes + BootstrapRecord::kIdBytes, r.reason.data(), n);  // the rest stays 0
  return w;
}

BootstrapRecord decodeBootstrap(const int32_t* w) {
  BootstrapRecord r;
  r.ok = w[0] == 1;
  r.device = w[1];
  r.ncclVersion = w[2];
  const auto* bytes = reinterpret_cast<const char*>(w + 3);
  std::memcpy(r.uniqueId.data(), bytes, BootstrapRecord::kIdBytes);
  const char* reason = bytes + BootstrapRecord::kIdBytes;
  r.reason.assign(reason, strnlen(reason, BootstrapRecord::kReasonBytes));
  return r;
}

std::vector<BootstrapRecord> exchangeBootstrap(Communicator& bootstrap, const BootstrapRecord& mine) {
  const int world = bootstrap.worldSize();
  std::vector<int32_t> send = encodeBootstrap(mine);
  std::vector<int32_t> all(static_cast<size_t>(kBootstrapWords) * static_cast<size_t>(world));
  bootstrap.allGather(send.data(), all.data(), static_cast<int64_t>(all.size()), DType::I32, "nccl bootstrap")
      ->wait();
  std::vector<BootstrapRecord> out;
  for (int r = 0; r < world; ++r) out.push_back(decodeBootstrap(all.data() + static_cast<size_t>(r) * kBootstrapWords));
  return out;
}

void requireAllReady(const std::vector<BootstrapRecord>& records) {
  std::string failed;
  for (size_t r = 0; r < records.size(); ++r)
    if (!records[r].ok)
      failed += fmt::format("{}rank {}: {}", failed.empty() ? "" : "; ", r,
                            records[r].reason.empty() ? "no reason given" : records[r].reason);
  if (!failed.empty()) throw CommError("the NCCL communicator cannot start: " + failed);
  std::string versions;
  for (size_t r = 1; r < records.size(); ++r)
    if (records[r].ncclVersion != records[0].ncclVersion)
      versions += fmt::format("{}rank {} has {}", versions.empty() ? "" : ", ", r, records[r].ncclVersion);
  if (!versions.empty())
    throw CommError(fmt::format("the NCCL communicator cannot start: the ranks loaded different NCCL versions "
                                "(rank 0 has {}, {}); every rank must use the same libnccl.so.2",
                                records[0].ncclVersion, versions));
}

std::string describeOp(const std::string& kind, const std::string& name, int64_t seq, int64_t bytes,
                       int64_t step, int peer) {
  if (kind == "send" || kind == "recv")
    return fmt::format("{} '{}' ({} rank {}, {} bytes, step {})", kind, name, kind == "send" ? "to" : "from", peer,
                       bytes, step);
  if (kind == "send_recv")  // a group of sends and receives: its name lists the transfers
    return fmt::format("send_recv '{}' ({} bytes, step {})", name, bytes, step);
  return fmt::format("{} '{}' (collective #{}, {} bytes, step {})", kind, name, seq, bytes, step);
}

std::string timeoutMessage(const std::string& description, double timeoutSeconds, int rank, int world) {
  return fmt::format("{} timed out after {} s on rank {} of {}; rank(s) that did not arrive: unknown (NCCL does "
                     "not report which rank is missing)",
                     description, timeoutSeconds, rank, world);
}

}  // namespace tessel::rt::nccl
