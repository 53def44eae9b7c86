// An in-process communicator for tests: N ranks are N threads of one process sharing a
// ThreadGroup. Collectives are synchronous rendezvous (issue returns a completed Work), so
// the executor's start/wait protocol runs unchanged; the reduction adds the ranks' values
// in rank order (x0 + x1 + ... in f32, then / N for Avg), so every rank gets bitwise the same
// result, as the MPI backend promises. Only allReduce (f32: sum, avg, max) and allGather are
// implemented.
#pragma once

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <condition_variable>
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
  /// Only the whole world forms a group (a mesh of one axis): it is this group again.
  std::unique_ptr<rt::Communicator> subgroup(const std::vector<int>& ranks,
                                             const std::string& label) override {
    for (int r = 0; r < group_.world(); ++r)
      if (static_cast<int>(ranks.size()) != group_.world() || ranks[static_cast<size_t>(r)] != r)
        return rt::Communicator::subgroup(ranks, label);
    return std::make_unique<ThreadCommunicator>(group_, rank_);
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
