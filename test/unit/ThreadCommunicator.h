// An in-process communicator for tests: N ranks are N threads of one process sharing a
// ThreadGroup. Collectives are synchronous rendezvous (issue returns a completed Work), so
// the executor's start/wait protocol runs unchanged; the reduction adds the ranks' values
// in rank order (x0 + x1 + ... in f32, then / N for Avg), so every rank gets bitwise the same
// result, as the MPI backend promises. Only allReduce (f32: sum, avg, max) and allGather are
// implemented, and of the groups only the world itself (a device mesh whose one axis spans
// every rank).
#pragma once

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <thread>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace tessel::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), slots_(static_cast<size_t>(world)) {}
  int world() const { return world_; }

  /// Every rank calls it with its own `data`; when all have arrived, `combine` runs once
  /// with all ranks' pointers (in rank order), then every rank leaves.
  template <class F>
  void rendezvous(int rank, const void* data, F combine) {
    std::unique_lock lock(mutex_);
    int64_t generation = generation_;
    slots_[static_cast<size_t>(rank)] = data;
    if (++arrived_ == world_) {
      combine(slots_);
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  int world_;
  std::vector<const void*> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

/// Runs body(rank) for rank 0 .. world - 1, each on its own thread, waits for all, then
/// rethrows the first rank's exception, if any (a rank that throws must not leave the others
/// waiting in a collective: tests use this only where every rank fails alike or none does).
inline void runRanks(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

class ThreadCommunicator final : public rt::Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int worldSize() const override { return group_.world(); }

  std::unique_ptr<rt::Work> allReduce(void* data, int64_t count, rt::DType dtype, rt::ReduceOp op,
                                      const std::string& name) override {
    if (dtype != rt::DType::F32) throw std::logic_error("ThreadCommunicator: f32 only");
    stats_.collectives++;
    stats_.payloadBytes += count * 4;
    // Phase 1: the last arriving rank reduces every rank's buffer into `result_`.
    group_.rendezvous(rank_, data, [&](const std::vector<const void*>& all) {
      const float* first = static_cast<const float*>(all.front());
      result_.assign(first, first + count);
      for (size_t r = 1; r < all.size(); ++r) {
        const float* x = static_cast<const float*>(all[r]);
        for (int64_t i = 0; i < count; ++i) {
          float& y = result_[static_cast<size_t>(i)];
          y = op == rt::ReduceOp::Max ? std::max(y, x[i]) : y + x[i];
        }
      }
      if (op == rt::ReduceOp::Avg)
        for (float& v : result_) v /= static_cast<float>(all.size());
    });
    // Phase 2: everyone copies the result, and nobody overwrites it before all have.
    std::memcpy(data, shared().data(), static_cast<size_t>(count) * 4);
    group_.rendezvous(rank_, nullptr, [](const std::vector<const void*>&) {});
    return std::make_unique<Done>();
  }
  std::unique_ptr<rt::Work> allGather(const void* send, void* recv, int64_t n, rt::DType dtype,
                                      const std::string&) override {
    stats_.collectives++;
    stats_.payloadBytes += n * rt::dtypeBytes(dtype);
    group_.rendezvous(rank_, send, [&](const std::vector<const void*>& all) {
      gathered_.assign(static_cast<size_t>(n * rt::dtypeBytes(dtype)), 0);
      for (int r = 0; r < static_cast<int>(all.size()); ++r) {
        auto [a, b] = rt::shardRange(n, r, static_cast<int>(all.size()));
        std::memcpy(gathered_.data() + a * rt::dtypeBytes(dtype), all[static_cast<size_t>(r)],
                    static_cast<size_t>((b - a) * rt::dtypeBytes(dtype)));
      }
    });
    std::memcpy(recv, gathered(), gathered_.size());
    group_.rendezvous(rank_, nullptr, [](const std::vector<const void*>&) {});
    return std::make_unique<Done>();
  }
  std::unique_ptr<rt::Work> reduceScatter(const void*, void*, int64_t, rt::DType, rt::ReduceOp,
                                          const std::string&) override { return unsupported(); }
  std::unique_ptr<rt::Work> allToAll(const void*, void*, int64_t, rt::DType, const std::string&) override {
    return unsupported();
  }
  std::unique_ptr<rt::Work> broadcast(void*, int64_t, rt::DType, int, const std::string&) override {
    return unsupported();
  }
  std::unique_ptr<rt::Work> send(const void*, int64_t, rt::DType, int, const std::string&) override {
    return unsupported();
  }
  std::unique_ptr<rt::Work> recv(void*, int64_t, rt::DType, int, const std::string&) override {
    return unsupported();
  }
  /// The group of every rank in order (a one-axis mesh over the world): another communicator
  /// on the same rendezvous, which is safe because every rank issues its collectives in one
  /// program order. Any other group throws, as the base class does.
  std::unique_ptr<rt::Communicator> subgroup(const std::vector<int>& ranks,
                                             const std::string& label) override {
    bool world = static_cast<int>(ranks.size()) == group_.world();
    for (size_t i = 0; world && i < ranks.size(); ++i) world = ranks[i] == static_cast<int>(i);
    if (!world) return rt::Communicator::subgroup(ranks, label);
    return std::make_unique<ThreadCommunicator>(group_, rank_);
  }
  void setTimeout(double) override {}
  void setStep(int64_t) override {}
  rt::CommStats stats() const override { return stats_; }

 private:
  struct Done final : rt::Work {
    void wait() override {}
    bool test() override { return true; }
  };
  static std::unique_ptr<rt::Work> unsupported() {
    throw std::logic_error("ThreadCommunicator: only allReduce and allGather are implemented");
  }
  // The group-wide result buffers live in static storage keyed by the group (one group per
  // test at a time).
  std::vector<float>& shared() { return result_; }
  const unsigned char* gathered() { return gathered_.data(); }

  ThreadGroup& group_;
  int rank_;
  rt::CommStats stats_;
  static inline std::vector<float> result_;
  static inline std::vector<unsigned char> gathered_;
};

}  // namespace tessel::test
