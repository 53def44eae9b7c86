// The `tessel` command's logic without a launcher (runtime/tools/tessel): nccl-tests' busbw
// factors, sizes and sweeps, the verification of every collective (including that it catches a
// wrong result), /proc/cpuinfo parsing, the tp placement warnings and the tables.
#include "runtime/comm/SingleCommunicator.h"
#include "runtime/tools/tessel/CommBench.h"
#include "runtime/tools/tessel/HostProbe.h"
#include "runtime/tools/tessel/Table.h"
#include "runtime/tools/tessel/TopologyReport.h"

#include <fmt/format.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace tessel::cli {
namespace {

// The busbw factors of nccl-tests' doc/PERFORMANCE.md, written out per world size (not by the
// formula under test): all_reduce 2(n-1)/n, all_gather / reduce_scatter / all_to_all (n-1)/n,
// broadcast and send/recv 1. Exact binary fractions, so compared exactly.
TEST(BusBandwidth, FactorsAreNcclTests) {
  EXPECT_EQ(busBandwidthFactor(CommOp::AllReduce, 1), 0.0);
  EXPECT_EQ(busBandwidthFactor(CommOp::AllReduce, 2), 1.0);
  EXPECT_EQ(busBandwidthFactor(CommOp::AllReduce, 4), 1.5);
  EXPECT_EQ(busBandwidthFactor(CommOp::AllReduce, 8), 1.75);
  for (CommOp op : {CommOp::AllGather, CommOp::ReduceScatter, CommOp::AllToAll}) {
    EXPECT_EQ(busBandwidthFactor(op, 1), 0.0) << commOpName(op);
    EXPECT_EQ(busBandwidthFactor(op, 2), 0.5) << commOpName(op);
    EXPECT_EQ(busBandwidthFactor(op, 4), 0.75) << commOpName(op);
  }
  for (CommOp op : {CommOp::Broadcast, CommOp::SendRecv})
    for (int n : {1, 2, 3, 64}) EXPECT_EQ(busBandwidthFactor(op, n), 1.0) << commOpName(op) << " n=" << n;
  // n = 3: 2(n-1)/n = 4/3 and (n-1)/n = 2/3, to a double's rounding (1 ulp).
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CommOp::AllReduce, 3), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CommOp::AllGather, 3), 2.0 / 3.0);
}

TEST(BusBandwidth, NamesRoundTrip) {
  for (CommOp op : allCommOps()) EXPECT_EQ(parseCommOp(commOpName(op)), op);
  EXPECT_EQ(parseCommOp("send/recv"), CommOp::SendRecv);
  EXPECT_FALSE(parseCommOp("allreduce").has_value());
  EXPECT_FALSE(parseCommOp("").has_value());
}

TEST(BenchSizes, ElementsAndAllToAllBlocks) {
  EXPECT_EQ(commSize(CommOp::AllReduce, 8, 4).count, 2);
  EXPECT_EQ(commSize(CommOp::AllReduce, 1, 4).count, 1);  // at least one element
  EXPECT_EQ(commSize(CommOp::AllReduce, 7, 4).bytes, 4);  // whole f32 elements
  EXPECT_EQ(commSize(CommOp::AllGather, 20, 4).count, 5);  // 5 elements on 4 ranks: uneven shards
  EXPECT_EQ(commSize(CommOp::AllToAll, 20, 4).count, 4);   // rounded down to 4 blocks of 1
  EXPECT_EQ(commSize(CommOp::AllToAll, 4, 4).count, 4);    // at least one element per rank
  EXPECT_EQ(commSize(CommOp::AllToAll, 40, 3).bytes, 36);  // 10 elements -> 3 blocks of 3
}

TEST(BenchSizes, MemoryOfOneRank) {
  // Buffers plus the host copies of input and output, written out per op for S = 1 KiB on 4
  // ranks (256 elements, shards of 64 = 256 B).
  EXPECT_EQ(bytesNeeded(CommOp::AllReduce, 1024, 4), 3 * 1024);            // data, input, output
  EXPECT_EQ(bytesNeeded(CommOp::Broadcast, 1024, 4), 3 * 1024);
  EXPECT_EQ(bytesNeeded(CommOp::AllGather, 1024, 4), 2 * (256 + 1024));    // shard + result, twice
  EXPECT_EQ(bytesNeeded(CommOp::ReduceScatter, 1024, 4), 2 * (1024 + 256));
  EXPECT_EQ(bytesNeeded(CommOp::AllToAll, 1024, 4), 4 * 1024);             // send + recv, twice
  EXPECT_EQ(bytesNeeded(CommOp::SendRecv, 1024, 4), 4 * 1024);
}

TEST(BenchSizes, Sweeps) {
  std::vector<int64_t> doubling = sweepSizes(8, int64_t{1} << 30, 0);
  ASSERT_EQ(doubling.size(), 28u);  // 2^3 .. 2^30
  for (size_t i = 0; i < doubling.size(); ++i) EXPECT_EQ(doubling[i], int64_t{8} << i);
  EXPECT_EQ(sweepSizes(5, 20, 0), (std::vector<int64_t>{5, 10, 20}));
  EXPECT_EQ(sweepSizes(5, 21, 0), (std::vector<int64_t>{5, 10, 20, 21}));  // the maximum is always measured
  EXPECT_EQ(sweepSizes(4, 16, 4), (std::vector<int64_t>{4, 8, 12, 16}));
  EXPECT_EQ(sweepSizes(7, 7, 0), (std::vector<int64_t>{7}));
  const int64_t top = int64_t{1} << 40;  // no overflow past the largest size the flags allow
  EXPECT_EQ(sweepSizes(top - 1, top, top), (std::vector<int64_t>{top - 1, top}));
  EXPECT_THROW(sweepSizes(9, 8, 0), std::invalid_argument);
}

/// A one-rank communicator whose collectives write one wrong element into their output: the
/// verification must catch it for every operation.
class CorruptingCommunicator final : public rt::Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  std::unique_ptr<rt::Work> allReduce(void* data, int64_t count, rt::DType dtype, rt::ReduceOp op,
                                      const std::string& name) override {
    auto w = inner_.allReduce(data, count, dtype, op, name);
    corrupt(data);
    return w;
  }
  std::unique_ptr<rt::Work> allGather(const void* send, void* recv, int64_t n, rt::DType dtype,
                                      const std::string& name) override {
    auto w = inner_.allGather(send, recv, n, dtype, name);
    corrupt(recv);
    return w;
  }
  std::unique_ptr<rt::Work> reduceScatter(const void* send, void* recv, int64_t n, rt::DType dtype,
                                          rt::ReduceOp op, const std::string& name) override {
    auto w = inner_.reduceScatter(send, recv, n, dtype, op, name);
    corrupt(recv);
    return w;
  }
  std::unique_ptr<rt::Work> allToAll(const void* send, void* recv, int64_t c, rt::DType dtype,
                                     const std::string& name) override {
    auto w = inner_.allToAll(send, recv, c, dtype, name);
    corrupt(recv);
    return w;
  }
  std::unique_ptr<rt::Work> broadcast(void* data, int64_t count, rt::DType dtype, int root,
                                      const std::string& name) override {
    auto w = inner_.broadcast(data, count, dtype, root, name);
    corrupt(data);
    return w;
  }
  std::unique_ptr<rt::Work> send(const void* d, int64_t c, rt::DType t, int p, const std::string& n) override {
    return inner_.send(d, c, t, p, n);
  }
  std::unique_ptr<rt::Work> recv(void* d, int64_t c, rt::DType t, int p, const std::string& n) override {
    return inner_.recv(d, c, t, p, n);
  }
  void setTimeout(double s) override { inner_.setTimeout(s); }
  void setStep(int64_t s) override { inner_.setStep(s); }
  rt::CommStats stats() const override { return inner_.stats(); }

private:
  static void corrupt(void* data) { static_cast<float*>(data)[0] += 1.0f; }
  rt::SingleCommunicator inner_;
};

TEST(BenchVerify, EveryOperationPassesOnOneRank) {
  rt::SingleCommunicator comm;
  auto memory = hostMemory();
  for (CommOp op : allCommOps()) {
    if (op == CommOp::SendRecv) {
      EXPECT_THROW(measure(comm, comm, *memory, op, 64, {1, 2}), std::invalid_argument);
      continue;
    }
    for (int64_t bytes : {4, 8, 20, 4096}) {
      BenchResult r = measure(comm, comm, *memory, op, bytes, {1, 2});
      EXPECT_EQ(r.wrongRanks, 0) << commOpName(op) << " " << bytes << ": " << r.firstError;
      EXPECT_GT(r.seconds, 0);
      EXPECT_DOUBLE_EQ(r.algbw, static_cast<double>(r.bytes) / r.seconds / 1e9);
      EXPECT_DOUBLE_EQ(r.busbw, r.algbw * busBandwidthFactor(op, 1));
    }
  }
}

TEST(BenchVerify, AWrongElementIsCaughtForEveryOperation) {
  CorruptingCommunicator comm;
  rt::SingleCommunicator control;
  auto memory = hostMemory();
  for (CommOp op : allCommOps()) {
    if (op == CommOp::SendRecv) continue;  // needs two ranks: covered by the mpirun test
    BenchResult r = measure(comm, control, *memory, op, 64, {0, 1});
    EXPECT_EQ(r.wrongRanks, 1) << commOpName(op);
    EXPECT_NE(r.firstError.find("element 0"), std::string::npos) << r.firstError;
  }
}

TEST(BenchVerify, ValuesDependOnRankAndElement) {
  // The reference could not tell a block from the wrong rank or offset if values repeated.
  EXPECT_NE(benchValue(0, 0), benchValue(1, 0));
  EXPECT_NE(benchValue(0, 0), benchValue(0, 1));
  for (int r = 0; r < 8; ++r)
    for (int64_t i = 0; i < 100; ++i) EXPECT_LE(std::abs(benchValue(r, i)), 8.0f);
}

// A two-socket machine with two cores per socket and two threads per core, as /proc/cpuinfo
// lists it (one block per logical CPU; only the fields the parser reads, plus noise).
std::string cpuinfoFixture() {
  std::string text;
  int cpu = 0;
  for (int socket = 0; socket < 2; ++socket)
    for (int thread = 0; thread < 2; ++thread)
      for (int core = 0; core < 2; ++core)
        text += "processor\t: " + std::to_string(cpu++) + "\nmodel name\t: Test CPU\nphysical id\t: " +
                std::to_string(socket) + "\ncore id\t\t: " + std::to_string(core) +
                "\nflags\t\t: fpu sse avx2 avx512f avx512bw amx_tile avx512_bf16x\nbogomips\t: 1.0\n\n";
  return text;
}

TEST(CpuInfo, SocketsCoresAndSimd) {
  CpuInfo c = parseCpuInfo(cpuinfoFixture());
  EXPECT_EQ(c.model, "Test CPU");
  EXPECT_EQ(c.logicalCpus, 8);
  EXPECT_EQ(c.sockets, 2);
  EXPECT_EQ(c.cores, 4);
  // Whole words only: "avx512_bf16x" is not avx512_bf16.
  EXPECT_EQ(c.simd, (std::vector<std::string>{"avx2", "avx512f", "avx512bw", "amx_tile"}));
  CpuInfo none = parseCpuInfo("processor : 0\nflags : fpu sse\n\nprocessor : 1\nflags : fpu sse\n");
  EXPECT_EQ(none.logicalCpus, 2);
  EXPECT_EQ(none.sockets, 1);  // no physical id: one socket
  EXPECT_EQ(none.cores, 2);    // no core id: every logical CPU counts
  EXPECT_TRUE(none.simd.empty());
}

std::vector<RankPlace> hosts(std::initializer_list<const char*> names) {
  std::vector<RankPlace> out;
  for (const char* n : names) out.push_back({n, "", 0});
  return out;
}

TEST(PlanPlacement, TpGroupsAcrossHostsAreNamed) {
  rt::MeshLayout plan({{"dp", 2}, {"tp", 2}});
  EXPECT_TRUE(planWarnings(plan, hosts({"a", "a", "b", "b"})).empty());
  std::vector<std::string> w = planWarnings(plan, hosts({"a", "b", "a", "b"}));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("ranks 0-1 spans 2 hosts (a, b)"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("ranks 2-3"), std::string::npos) << w[1];
  EXPECT_TRUE(planWarnings(rt::MeshLayout({{"dp", 4}}), hosts({"a", "b", "c", "d"})).empty());  // no tp
  std::vector<std::string> size = planWarnings(plan, hosts({"a", "a"}));
  ASSERT_EQ(size.size(), 1u);
  EXPECT_NE(size[0].find("has 4 ranks but this job has 2 ranks"), std::string::npos) << size[0];
}

/// A sysfs tree under a temporary folder: one Ethernet NIC on a PCI device, loopback, and an
/// InfiniBand device with one active port (the files the probes read).
struct SysfsFixture {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("tessel-sysfs-" + std::to_string(::getpid()));
  SysfsFixture() {
    namespace fs = std::filesystem;
    fs::remove_all(root);
    auto write = [&](const fs::path& p, const std::string& text) {
      fs::create_directories(p.parent_path());
      std::ofstream(p) << text << "\n";
    };
    const fs::path pci = root / "devices/pci0000:00/0000:3b:00.0";
    write(pci / "net/eth0/type", "1");
    write(pci / "net/eth0/operstate", "up");
    write(pci / "net/eth0/speed", "100000");
    write(pci / "numa_node", "1");
    fs::create_directories(root / "class/net");
    fs::create_symlink(pci / "net/eth0", root / "class/net/eth0");
    fs::create_directory_symlink(pci, pci / "net/eth0/device");
    write(root / "devices/virtual/net/lo/type", "772");
    write(root / "devices/virtual/net/lo/operstate", "unknown");
    fs::create_symlink(root / "devices/virtual/net/lo", root / "class/net/lo");
    const fs::path port = root / "class/infiniband/mlx5_0/ports/1";
    write(port / "state", "4: ACTIVE");
    write(port / "rate", "200 Gb/sec (4X HDR)");
    write(port / "link_layer", "InfiniBand");
  }
  ~SysfsFixture() { std::filesystem::remove_all(root); }
};

TEST(HostProbe, NicsAndInfinibandFromSysfs) {
  SysfsFixture sys;
  std::vector<NetInterface> nics = probeNetInterfaces(sys.root);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].name, "eth0");
  EXPECT_EQ(nics[0].kind, "ethernet");
  EXPECT_EQ(nics[0].speedMbps, 100000);
  EXPECT_EQ(nics[0].device, "0000:3b:00.0");
  EXPECT_EQ(nics[0].numaNode, 1);
  EXPECT_EQ(nics[1].kind, "loopback");
  EXPECT_EQ(nics[1].device, "virtual");
  EXPECT_EQ(nics[1].speedMbps, -1);  // not reported, not 0
  std::vector<IbDevice> ib = probeInfiniband(sys.root);
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ(ib[0].name, "mlx5_0");
  ASSERT_EQ(ib[0].ports.size(), 1u);
  EXPECT_EQ(ib[0].ports[0].state, "4: ACTIVE");
  EXPECT_EQ(ib[0].ports[0].linkLayer, "InfiniBand");
  EXPECT_TRUE(probeInfiniband(sys.root / "nothing").empty());
}

/// A report as two GPUs joined by NVLink would give it.
TopologyReport twoGpus(bool nvml) {
  TopologyReport r;
  r.host = "node1";
  r.gpus.driverLoaded = true;
  r.gpus.driverVersion = 13000;
  for (int i = 0; i < 2; ++i)
    r.gpus.devices.push_back({i, "NVIDIA H200", int64_t{141} << 30, 132, 9, 0, fmt::format("0000:{}b:00.0", i + 1), i});
  r.gpus.peer = {{1, 1}, {1, 1}};
  if (nvml) r.gpus.nvlinks = {{0, 18}, {18, 0}};
  else r.gpus.nvmlWhy = "NVML (libnvidia-ml.so.1) cannot be loaded: not found";
  r.infiniband = {{"mlx5_0", {{1, "4: ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand"}}}};
  r.ranks = {{"node1", "0000:1b:00.0", 0}, {"node1", "0000:1b:00.0", 1}};
  return r;
}

TEST(TopologyText, ClaimsOnlyWhatWasReported) {
  const std::string with = renderText(twoGpus(true));
  EXPECT_NE(with.find("GPUs: 2 GPUs (CUDA driver 13.0)"), std::string::npos) << with;
  EXPECT_NE(with.find("NVLink (NVML"), std::string::npos) << with;
  EXPECT_NE(with.find("NV18"), std::string::npos) << with;
  EXPECT_NE(with.find("mlx5_0"), std::string::npos) << with;
  EXPECT_EQ(with.find("no InfiniBand"), std::string::npos) << with;
  EXPECT_NE(with.find("ranks 0-1 share the GPU 0000:1b:00.0 on node1"), std::string::npos) << with;
  const std::string without = renderText(twoGpus(false));
  EXPECT_NE(without.find("NVLink: no NVLink information (NVML"), std::string::npos) << without;
  EXPECT_EQ(without.find("NV18"), std::string::npos) << without;
  nlohmann::json j = toJson(twoGpus(false));
  EXPECT_TRUE(j["nvlink"].is_null());
  EXPECT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["compute_capability"], nlohmann::json({9, 0}));
  TopologyReport none;
  none.gpus.why = "the CUDA driver libcuda.so.1 cannot be loaded";
  const std::string empty = renderText(none);
  EXPECT_NE(empty.find("GPUs: no GPU (the CUDA driver"), std::string::npos) << empty;
  EXPECT_NE(empty.find("InfiniBand: no InfiniBand"), std::string::npos) << empty;
  EXPECT_TRUE(toJson(none)["gpus"].empty());
}

TEST(Tables, AlignedColumnsAndRowWidth) {
  Table t({"op", "time"});
  t.add({"all_reduce", "1.5"});
  t.add({"broadcast", "12.25"});
  EXPECT_EQ(t.render(0), "op          time\n----------  -----\nall_reduce    1.5\nbroadcast   12.25\n");
  EXPECT_THROW(t.add({"x"}), std::logic_error);
  EXPECT_EQ(humanBytes(8), "8 B");
  EXPECT_EQ(humanBytes(1024), "1 KiB");
  EXPECT_EQ(humanBytes(1536), "1.5 KiB");
  EXPECT_EQ(humanBytes(int64_t{256} << 20), "256 MiB");
  EXPECT_EQ(humanBytes(int64_t{1} << 30), "1 GiB");
}

TEST(Tables, WidthsCountCodePointsNotBytes) {
  // "16Ψ/N" is 5 columns on a terminal but 6 bytes (Ψ is 2 in UTF-8): counted in bytes, the
  // rows below it would be one column off.
  Table t({"formula", "GB"});
  t.add({"16Ψ/N", "1.5"});
  t.add({"4Ψ + 12Ψ/N", "31.41"});
  EXPECT_EQ(t.render(0), "formula     GB\n----------  -----\n16Ψ/N         1.5\n4Ψ + 12Ψ/N  31.41\n");
}

}  // namespace
}  // namespace tessel::cli
