// Multi-rank test of the device mesh's group communicators (runtime/comm/DeviceMesh.h) over
// MpiCommunicator, run by ctest as `mpirun -np N mesh_mpi_test MESH` (MESH like
// "pp=1,dp=2,tp=2", its size N).
//
// check: over every axis group and every set of two or more axes, all_reduce (sum, avg, max),
//   all_gather, reduce_scatter, all_to_all, broadcast and a send/recv ring, in f32 and i32,
//   checked against closed forms computed here from the world ranks: the members of a group
//   are derived from the coordinates by this file's own arithmetic, and rank w contributes
//   values that depend on w, so a wrong member, order or group shows; and groups that do not
//   partition the ranks are refused. Exit status 0 only if every rank passed.
// kill|skip TIMEOUT: every step (set on the world only: the groups' failures name it too)
//   all-reduces 1001 f32 over tp ("tp.step<s>") and then over dp. At step 2 the last rank waits for its tp neighbour's "issued" message (sent over the
//   tp group after it issued tp.step2), then raises SIGKILL (kill) or sleeps for three
//   timeouts and exits (skip: alive but absent, so its peers' own timeouts report it). A rank whose wait() throws prints
//   "rank R: CHECKED <message>" if the message names the collective, group, bytes, step and a
//   missing world rank, else "rank R: BAD <message>"; mesh_fault_test.sh checks the lines.
#include "runtime/comm/DeviceMesh.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/World.h"

#include "test/mpi/RankCheck.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace tessel::rt;

namespace {

using tessel::test::failures;
using tessel::test::W;

std::vector<MeshAxis> parseMesh(const std::string& text) {
  std::vector<MeshAxis> axes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t eq = item.find('=');
    axes.push_back({item.substr(0, eq), std::atoi(item.substr(eq + 1).c_str())});
  }
  return axes;
}

/// The world ranks of `rank`'s group along the axes in `set` (indices), ascending: every rank
/// whose coordinates (rank / stride_i mod size_i) agree with `rank`'s outside the set.
std::vector<int> members(const std::vector<MeshAxis>& axes, int world, int rank, const std::vector<int>& set) {
  auto coord = [&](int r, size_t i) {
    int stride = 1;
    for (size_t j = i + 1; j < axes.size(); ++j) stride *= axes[j].size;
    return r / stride % axes[i].size;
  };
  std::vector<int> out;
  for (int q = 0; q < world; ++q) {
    bool same = true;
    for (size_t i = 0; i < axes.size(); ++i)
      if (std::find(set.begin(), set.end(), static_cast<int>(i)) == set.end() && coord(q, i) != coord(rank, i))
        same = false;
    if (same) out.push_back(q);
  }
  return out;
}

/// Rank w's value at element i: exact in f32 and i32, and the sum over at most 8 ranks too.
double value(int w, int64_t i) { return (w + 1) * 3.0 + static_cast<double>(i % 17) * (w % 3 + 1) - 20; }
/// A code for block data from rank `from` to rank `to` (all_to_all, send).
double code(int from, int to, int64_t e) { return from * 64.0 + to * 8.0 + static_cast<double>(e % 8); }

/// A typed buffer (f32 or i32) of n elements and one guard element.
struct Buf {
  DType dtype;
  std::vector<double> shadow;
  std::vector<int32_t> words;  // f32 bits or i32 values
  Buf(DType d, int64_t n) : dtype(d), words(static_cast<size_t>(n) + 1, 0x5A5A5A5A) {}
  void* data() { return words.data(); }
  void set(int64_t i, double v) {
    if (dtype == DType::F32) {
      float f = static_cast<float>(v);
      std::memcpy(&words[static_cast<size_t>(i)], &f, 4);
    } else {
      words[static_cast<size_t>(i)] = static_cast<int32_t>(v);
    }
  }
  double get(int64_t i) const {
    if (dtype == DType::I32) return words[static_cast<size_t>(i)];
    float f;
    std::memcpy(&f, &words[static_cast<size_t>(i)], 4);
    return f;
  }
  bool guardIntact() const { return words.back() == 0x5A5A5A5A; }
};

/// Every collective over one group communicator, against closed forms over `m` (its members).
void checkGroup(Communicator& g, const std::vector<int>& m, const std::string& label, DType d, int64_t n) {
  const int G = static_cast<int>(m.size());
  const int gr = static_cast<int>(std::find(m.begin(), m.end(), W) - m.begin());
  const char* dn = d == DType::F32 ? "f32" : "i32";
  CHECK(g.rank() == gr && g.worldSize() == G, "group %s: rank %d of %d, expected %d of %d", label.c_str(),
        g.rank(), g.worldSize(), gr, G);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    const char* on = op == ReduceOp::Sum ? "sum" : op == ReduceOp::Avg ? "avg" : "max";
    auto expect = [&](int64_t i) {
      double s = 0, mx = value(m[0], i);
      for (int w : m) {
        s += value(w, i);
        mx = std::max(mx, value(w, i));
      }
      if (op == ReduceOp::Max) return mx;
      if (op == ReduceOp::Sum) return s;
      // Avg: one f32 division of the exact sum, or the int64 sum truncated toward zero.
      return d == DType::F32 ? static_cast<double>(static_cast<float>(s) / static_cast<float>(G))
                             : static_cast<double>(static_cast<int64_t>(s) / G);
    };
    Buf x(d, n), send(d, n);
    for (int64_t i = 0; i < n; ++i) {
      x.set(i, value(W, i));
      send.set(i, value(W, i));
    }
    g.allReduce(x.data(), n, d, op, label + ".ar")->wait();
    for (int64_t i = 0; i < n; ++i)
      CHECK(x.get(i) == expect(i), "group %s all_reduce %s %s n=%lld i=%lld: %g, expected %g", label.c_str(), on,
            dn, (long long)n, (long long)i, x.get(i), expect(i));
    auto [lo, hi] = shardRange(n, gr, G);
    Buf shard(d, hi - lo);
    g.reduceScatter(send.data(), shard.data(), n, d, op, label + ".rs")->wait();
    for (int64_t i = lo; i < hi; ++i)
      CHECK(shard.get(i - lo) == expect(i), "group %s reduce_scatter %s %s n=%lld i=%lld", label.c_str(), on, dn,
            (long long)n, (long long)i);
    CHECK(x.guardIntact() && shard.guardIntact(), "group %s %s wrote past the end", label.c_str(), on);
  }
  // all_gather: element i comes from its owner (the group rank whose shard holds it).
  auto [lo, hi] = shardRange(n, gr, G);
  Buf mine(d, hi - lo), all(d, n);
  for (int64_t i = lo; i < hi; ++i) mine.set(i - lo, value(W, i));
  g.allGather(mine.data(), all.data(), n, d, label + ".ag")->wait();
  for (int owner = 0; owner < G; ++owner) {
    auto [f, l] = shardRange(n, owner, G);
    for (int64_t i = f; i < l; ++i)
      CHECK(all.get(i) == value(m[static_cast<size_t>(owner)], i), "group %s all_gather %s n=%lld i=%lld",
            label.c_str(), dn, (long long)n, (long long)i);
  }
  // all_to_all: block j goes to group rank j, whose world rank is m[j].
  Buf s(d, n * G), t(d, n * G);
  for (int j = 0; j < G; ++j)
    for (int64_t e = 0; e < n; ++e) s.set(j * n + e, code(W, m[static_cast<size_t>(j)], e));
  g.allToAll(s.data(), t.data(), n, d, label + ".a2a")->wait();
  for (int j = 0; j < G; ++j)
    for (int64_t e = 0; e < n; ++e)
      CHECK(t.get(j * n + e) == code(m[static_cast<size_t>(j)], W, e), "group %s all_to_all %s n=%lld block %d",
            label.c_str(), dn, (long long)n, j);
  // broadcast from the last group rank.
  Buf b(d, n);
  for (int64_t i = 0; i < n; ++i) b.set(i, gr == G - 1 ? value(W, i) : -1.0);
  g.broadcast(b.data(), n, d, G - 1, label + ".bc")->wait();
  for (int64_t i = 0; i < n; ++i)
    CHECK(b.get(i) == value(m.back(), i), "group %s broadcast %s n=%lld i=%lld", label.c_str(), dn, (long long)n,
          (long long)i);
  // send/recv around the group's ring (peers are group ranks).
  if (G > 1) {
    Buf out(d, n), in(d, n);
    const int next = (gr + 1) % G, prev = (gr + G - 1) % G;
    for (int64_t e = 0; e < n; ++e) out.set(e, code(W, m[static_cast<size_t>(next)], e));
    auto ws = g.send(out.data(), n, d, next, label + ".send");
    g.recv(in.data(), n, d, prev, label + ".recv")->wait();
    ws->wait();
    for (int64_t e = 0; e < n; ++e)
      CHECK(in.get(e) == code(m[static_cast<size_t>(prev)], W, e), "group %s recv %s n=%lld e=%lld", label.c_str(),
            dn, (long long)n, (long long)e);
  }
}

int runCheck(MpiCommunicator& world, const std::string& meshText) {
  const std::vector<MeshAxis> axes = parseMesh(meshText);
  DeviceMesh mesh(MeshLayout(axes), world);
  const int n = static_cast<int>(axes.size());
  // Every non-empty set of axes, in a fixed order on every rank (groups form collectively).
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> set;
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i)
      if (mask & (1 << i)) {
        set.push_back(i);
        names.push_back(axes[static_cast<size_t>(i)].name);
      }
    const std::vector<int> m = members(axes, world.worldSize(), W, set);
    Communicator& g = mesh.group(names);
    const std::string label = mesh.layout().groupKey(names);
    for (DType d : {DType::F32, DType::I32})
      for (int64_t len : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) checkGroup(g, m, label, d, len);
    // The group's counters: per (dtype, n): 3 x (all_reduce + reduce_scatter) + all_gather +
    // all_to_all + broadcast, plus send and recv when G > 1.
    const int64_t G = static_cast<int64_t>(m.size());
    const int64_t perSize = 9 + (G > 1 ? 2 : 0);
    CHECK(g.stats().collectives == 2 * 4 * perSize, "group %s counted %lld operations", label.c_str(),
          (long long)g.stats().collectives);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int stride = 1;
    for (size_t j = i + 1; j < axes.size(); ++j) stride *= axes[j].size;
    CHECK(mesh.coordinate(axes[i].name) == W / stride % axes[i].size, "coordinate on %s", axes[i].name.c_str());
  }
  // Groups that do not partition the ranks (rank r asks for {r, r + 1 mod N}) are refused on
  // every rank, naming a member that formed another group; the world stays usable.
  if (world.worldSize() >= 3) {
    std::vector<int> pair = {W, (W + 1) % world.worldSize()};
    std::sort(pair.begin(), pair.end());
    std::string error = "no error";
    try {
      world.subgroup(pair, "pairs");
    } catch (const CommError& e) {
      error = e.what();
    }
    CHECK(error.find("formed a different group") != std::string::npos, "overlapping groups: %s", error.c_str());
  }
  int32_t total = failures;
  world.allReduce(&total, 1, DType::I32, ReduceOp::Sum, "failures")->wait();
  if (W == 0) std::printf("mesh_mpi_test: %s on %d ranks, %d failures\n", meshText.c_str(), world.worldSize(), total);
  return total == 0 ? 0 : 1;
}

/// The kill and skip scenarios (see the file comment) on the mesh dp=D,tp=T.
int runFault(MpiCommunicator& world, const std::string& meshText, const std::string& scenario,
             double timeout) {
  DeviceMesh mesh(MeshLayout(parseMesh(meshText)), world);
  Communicator& tp = mesh.group({"tp"});
  Communicator& dp = mesh.group({"dp"});
  const int last = world.worldSize() - 1;
  std::vector<float> grad(1001, 1.0f);
  for (int step = 0; step < 4; ++step) {
    world.setStep(step);  // the groups name the world's step, as under the training loop
    const std::string name = "tp.step" + std::to_string(step);
    if (step == 2 && W == last) {
      int32_t token = 0;
      tp.recv(&token, 1, DType::I32, tp.rank() - 1, "issued")->wait();
      if (scenario == "skip") {
        std::this_thread::sleep_for(std::chrono::duration<double>(3 * timeout));
        std::_Exit(0);
      }
      std::fprintf(stderr, "rank %d: raising SIGKILL at step 2\n", W);
      std::raise(SIGKILL);
    }
    auto work = tp.allReduce(grad.data(), 1001, DType::F32, ReduceOp::Sum, name);
    if (step == 2 && W == last - 1) {
      int32_t token = 1;
      tp.send(&token, 1, DType::I32, tp.rank() + 1, "issued");  // completes with the last rank's recv
    }
    try {
      work->wait();
      dp.allReduce(grad.data(), 1001, DType::F32, ReduceOp::Sum, "dp.step" + std::to_string(step))->wait();
    } catch (const CommError& e) {
      const std::string m = e.what();
      // The tp neighbour of the killed rank must name the tp collective and the killed world
      // rank; the others fail later (in their dp all_reduce), naming whoever they miss.
      bool ok = m.find("4004 bytes") != std::string::npos && m.find("step 2") != std::string::npos &&
                m.find("timed out after") != std::string::npos && m.find("did not arrive: ") != std::string::npos;
      if (W == last - 1)
        ok = ok && m.find("all_reduce 'tp.step2' (collective #3 of group tp, 4004 bytes, step 2)") != std::string::npos &&
             m.find("did not arrive: " + std::to_string(last)) != std::string::npos;
      std::fprintf(stderr, "rank %d: %s %s\n", W, ok ? "CHECKED" : "BAD", m.c_str());
      std::fflush(stderr);
      abortJob(W, m);
    }
  }
  std::printf("rank %d: finished without a failure\n", W);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 2 ? argv[2] : "";
  if (!(argc == 2 || (argc == 4 && (scenario == "kill" || scenario == "skip")))) {
    std::fprintf(stderr, "usage: mesh_mpi_test MESH [kill|skip TIMEOUT_SECONDS]\n");
    return 2;
  }
  const double timeout = argc == 4 ? std::atof(argv[3]) : 60.0;
  MpiCommunicator world(MpiOptions{timeout, true});
  W = world.rank();
  try {
    return argc == 4 ? runFault(world, argv[1], scenario, timeout) : runCheck(world, argv[1]);
  } catch (const CommError& e) {
    abortJob(W, e.what());
  }
}
