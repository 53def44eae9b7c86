// The NCCL backend; see NcclCommunicator.h. Written against the NCCL 2.28 and CUDA 13
// documentation; never run on a GPU so far (docs/gpu.md).
#include "runtime/comm/NcclCommunicator.h"

#include "runtime/comm/NcclApi.h"
#include "runtime/comm/NcclPlan.h"
#include "runtime/comm/Reduce.h"
#include "runtime/comm/World.h"
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/CudaPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::rt {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(50);
constexpr auto kHostPoll = std::chrono::microseconds(50);
static_assert(sizeof(ncclUniqueId) == nccl::BootstrapRecord::kIdBytes);

ncclDataType_t ncclType(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclReduce(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

/// One issued operation: its description for errors, its completion event, its scratch.
struct NcclOp {
  enum State { Pending, Done, Failed };
  const cuda::DriverApi* cu = nullptr;
  std::string description;
  Clock::time_point deadline;
  double timeout = 0;
  CUevent done = nullptr;
  CUdeviceptr scratch = 0;
  State state = Pending;  // guarded by Impl::mutex
  std::string error;
  bool streamWaited = false;
  ~NcclOp() {
    if (done) cu->cuEventDestroy(done);    // released once the event completes
    if (scratch) cu->cuMemFree(scratch);   // only after completion or abort (see Impl)
  }
};

}  // namespace

struct NcclCommunicator::Impl {
  const cuda::DriverApi* cu = nullptr;
  const nccl::NcclApi* nc = nullptr;
  NcclOptions options;
  Communicator* bootstrap = nullptr;                 // for subgroup (outlives this one)
  std::unique_ptr<Communicator> ownedBootstrap;      // a group's host communicator
  int rank = 0, world = 1, ordinal = -1, version = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream commStream = nullptr, compute = nullptr;
  ncclComm_t comm = nullptr;
  std::atomic<double> timeout{300.0};
  std::atomic<int64_t> step{0}, collectives{0}, payloadBytes{0};
  // A group's parent's step (the parent outlives its groups): the training loop sets the
  // world's step, and a group's failure names it too.
  const std::atomic<int64_t>* parentStep = nullptr;
  int64_t seq = 0;

  std::mutex mutex;  // guards everything below and serialises NCCL calls with ncclCommAbort
  std::vector<std::shared_ptr<NcclOp>> inflight;
  bool failed = false, aborted = false;
  std::string firstError;
  std::thread watchdog;
  std::condition_variable stopCv;
  bool stopping = false;

  ~Impl() {
    if (watchdog.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      stopCv.notify_all();
      watchdog.join();
    }
    inflight.clear();
    if (comm && !aborted && !failed) nc->ncclCommDestroy(comm);  // a failed run is exiting
    if (commStream) cu->cuStreamDestroy(commStream);
    if (ctx) cu->cuDevicePrimaryCtxRelease(dev);
  }

  /// Records the first failure and, with hostWait, aborts NCCL (its kernels stop, so the
  /// streams drain and the thrown CommError can be handled). Without hostWait the process is
  /// about to end (the watchdog's abortJob, or runMain for a CommError at issue), which tears
  /// down the context and NCCL's kernels; ncclCommAbort is skipped there because it can
  /// itself block when a kernel waits for a dead peer. `culprit` gets `message`; every other
  /// pending collective "did not complete".
  void failLocked(const std::string& message, NcclOp* culprit = nullptr) {
    if (!failed) {
      failed = true;
      firstError = message;
    }
    if (!aborted && comm && options.hostWait) {
      aborted = true;
      nc->ncclCommAbort(comm);
    }
    if (culprit && culprit->state == NcclOp::Pending) {
      culprit->state = NcclOp::Failed;
      culprit->error = message;
    }
    for (auto& op : inflight)
      if (op->state == NcclOp::Pending) {
        op->state = NcclOp::Failed;
        op->error = fmt::format("{} did not complete: {}", op->description, firstError);
      }
  }

  /// Advances `op`: Done once its event completed; Failed on an NCCL async error, a CUDA
  /// error or its deadline (which fails the communicator). The async error is asked first:
  /// NCCL reports an operation's errors there until it completes, and a collective that
  /// failed (a peer that ended) can still complete its event, with a result that is not the
  /// reduction; counting it done would train on it and blame the next collective.
  NcclOp::State pollLocked(NcclOp& op) {
    if (op.state != NcclOp::Pending) return op.state;
    ncclResult_t async = ncclSuccess;
    ncclResult_t qrc = nc->ncclCommGetAsyncError(comm, &async);
    if (qrc != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      failLocked(fmt::format("{} failed on rank {} of {}: NCCL {}", op.description, rank, world,
                             nccl::resultText(*nc, qrc != ncclSuccess ? qrc : async, comm)),
                 &op);
      return op.state;
    }
    CUresult rc = cu->cuEventQuery(op.done);
    if (rc == CUDA_SUCCESS) {
      op.state = NcclOp::Done;
      return op.state;
    }
    if (rc != CUDA_ERROR_NOT_READY) {
      failLocked(fmt::format("{} failed on rank {}: cuEventQuery: {}", op.description, rank,
                             cuda::errorText(*cu, rc)),
                 &op);
      return op.state;
    }
    if (Clock::now() > op.deadline) failLocked(nccl::timeoutMessage(op.description, op.timeout, rank, world), &op);
    return op.state;
  }

  void runWatchdog() {
    cu->cuCtxSetCurrent(ctx);  // cuEventQuery needs the context on this thread
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      stopCv.wait_for(lock, kWatchdogPeriod);
      if (stopping) break;
      std::string fatal;
      for (size_t i = 0; i < inflight.size();) {
        NcclOp::State s = pollLocked(*inflight[i]);
        if (s == NcclOp::Pending) {
          ++i;
          continue;
        }
        if (s == NcclOp::Failed && !options.hostWait && fatal.empty()) fatal = inflight[i]->error;
        inflight.erase(inflight.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (!fatal.empty()) {
        lock.unlock();
        abortJob(rank, fatal);  // no thread is blocked where a CommError could reach it
      }
    }
  }

  void ckCuda(CUresult rc, const std::string& description, const char* what) {
    if (rc == CUDA_SUCCESS) return;
    std::string message =
        fmt::format("{} failed on rank {}: {}: {}", description, rank, what, cuda::errorText(*cu, rc));
    failLocked(message);
    throw CommError(message);
  }
  void ckNccl(ncclResult_t rc, const std::string& description, const char* what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    std::string message = fmt::format("{} failed on rank {} of {}: {}: {}", description, rank, world, what,
                                      nccl::resultText(*nc, rc, comm));
    failLocked(message);
    throw CommError(message);
  }

  /// Device-to-device copies of `elementBytes`-sized elements on the communication stream.
  void copies(const std::vector<nccl::Copy>& plan, const void* src, void* dst, int64_t elementBytes,
              const std::string& description) {
    for (const nccl::Copy& c : plan)
      ckCuda(cu->cuMemcpyDtoDAsync(dptr(dst) + static_cast<CUdeviceptr>(c.dst * elementBytes),
                                   dptr(src) + static_cast<CUdeviceptr>(c.src * elementBytes),
                                   static_cast<size_t>(c.count * elementBytes), commStream),
             description, "cuMemcpyDtoDAsync");
  }

  std::unique_ptr<Work> issue(const char* kind, const std::string& name, int64_t bytes, int64_t payload, int peer,
                              const std::function<void(NcclOp&)>& enqueue);
};

namespace {

class NcclWork final : public Work {
public:
  NcclWork(std::shared_ptr<NcclOp> op, NcclCommunicator::Impl* impl) : op_(std::move(op)), impl_(impl) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    if (!op_->streamWaited) {
      op_->streamWaited = true;
      CUresult rc = impl_->cu->cuStreamWaitEvent(impl_->compute, op_->done, 0);
      if (rc != CUDA_SUCCESS && op_->state == NcclOp::Pending)
        impl_->ckCuda(rc, op_->description, "cuStreamWaitEvent");
    }
    if (!impl_->options.hostWait) {
      if (op_->state == NcclOp::Failed) throw CommError(op_->error);
      return;
    }
    for (;;) {
      NcclOp::State s = impl_->pollLocked(*op_);
      if (s == NcclOp::Done) return;
      if (s == NcclOp::Failed) throw CommError(op_->error);
      lock.unlock();
      std::this_thread::sleep_for(kHostPoll);
      lock.lock();
    }
  }
  bool test() override {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->pollLocked(*op_) != NcclOp::Pending;
  }

private:
  std::shared_ptr<NcclOp> op_;
  NcclCommunicator::Impl* impl_;
};

}  // namespace

std::unique_ptr<Work> NcclCommunicator::Impl::issue(const char* kind, const std::string& name, int64_t bytes,
                                                    int64_t payload, int peer,
                                                    const std::function<void(NcclOp&)>& enqueue) {
  std::lock_guard<std::mutex> lock(mutex);
  // Point-to-point operations are not numbered: only some ranks issue each of them.
  const bool p2p = std::strcmp(kind, "send") == 0 || std::strcmp(kind, "recv") == 0 ||
                   std::strcmp(kind, "send_recv") == 0;
  auto op = std::make_shared<NcclOp>();
  op->cu = cu;
  const int64_t at = parentStep ? std::max(step.load(), parentStep->load()) : step.load();
  op->description = nccl::describeOp(kind, name, p2p ? 0 : ++seq, bytes, at, peer);
  if (failed)
    throw CommError(fmt::format("{} did not run: an earlier operation failed: {}", op->description, firstError));
  op->timeout = timeout.load();
  op->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(op->timeout));
  // The communication stream starts after what the compute stream has enqueued so far.
  CUevent ready = nullptr;
  ckCuda(cu->cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING), op->description, "cuEventCreate");
  CUresult rc = cu->cuEventRecord(ready, compute);
  if (rc == CUDA_SUCCESS) rc = cu->cuStreamWaitEvent(commStream, ready, 0);
  cu->cuEventDestroy(ready);  // released by the driver once the wait is satisfied
  ckCuda(rc, op->description, "ordering after the compute stream (cuEventRecord, cuStreamWaitEvent)");
  enqueue(*op);
  ckCuda(cu->cuEventCreate(&op->done, CU_EVENT_DISABLE_TIMING), op->description, "cuEventCreate");
  ckCuda(cu->cuEventRecord(op->done, commStream), op->description, "cuEventRecord");
  inflight.push_back(op);
  collectives += 1;
  payloadBytes += payload;
  return std::make_unique<NcclWork>(std::move(op), this);
}

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, const NcclOptions& options)
    : impl_(std::make_unique<Impl>()) {
  checkTimeoutSeconds(options.timeoutSeconds);
  Impl& s = *impl_;
  s.options = options;
  s.timeout = options.timeoutSeconds;
  s.bootstrap = &bootstrap;
  s.rank = bootstrap.rank();
  s.world = bootstrap.worldSize();

  // Local setup; its outcome is shared with every rank before anyone enters NCCL.
  nccl::BootstrapRecord mine;
  try {
    s.cu = &cuda::driverApi();
    cuda::check(*s.cu, s.cu->cuInit(0), "cuInit");
    int count = 0;
    cuda::check(*s.cu, s.cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
    s.ordinal = selectCudaDevice(options.device, count);
    cuda::check(*s.cu, s.cu->cuDeviceGet(&s.dev, s.ordinal), "cuDeviceGet");
    cuda::check(*s.cu, s.cu->cuDevicePrimaryCtxRetain(&s.ctx, s.dev), "cuDevicePrimaryCtxRetain");
    cuda::check(*s.cu, s.cu->cuCtxSetCurrent(s.ctx), "cuCtxSetCurrent");
    s.nc = &nccl::ncclApi();
    s.version = s.nc->version;
    mine.ncclVersion = s.version;
    if (s.rank == 0) {
      ncclUniqueId id;
      ncclResult_t rc = s.nc->ncclGetUniqueId(&id);
      if (rc != ncclSuccess) throw std::runtime_error("ncclGetUniqueId: " + nccl::resultText(*s.nc, rc));
      std::memcpy(mine.uniqueId.data(), id.internal, sizeof id.internal);
    }
    mine.device = s.ordinal;
    mine.ok = true;
  } catch (const std::exception& e) {
    mine.reason = e.what();
  }
  std::vector<nccl::BootstrapRecord> all = nccl::exchangeBootstrap(bootstrap, mine);
  nccl::requireAllReady(all);

  ncclUniqueId id;
  std::memcpy(id.internal, all[0].uniqueId.data(), sizeof id.internal);
  auto fail = [&](const std::string& what) {
    throw CommError(fmt::format("the NCCL communicator cannot start on rank {} (cuda:{}): {}", s.rank, s.ordinal, what));
  };
  if (CUresult rc = s.cu->cuStreamCreate(&s.commStream, CU_STREAM_NON_BLOCKING); rc != CUDA_SUCCESS)
    fail("cuStreamCreate: " + cuda::errorText(*s.cu, rc));
  // Blocking initialisation: returns once every rank joined (see the promise for a rank
  // that fails inside it).
  if (ncclResult_t rc = s.nc->ncclCommInitRank(&s.comm, s.world, id, s.rank); rc != ncclSuccess) {
    s.comm = nullptr;
    fail("ncclCommInitRank: " + nccl::resultText(*s.nc, rc));
  }
  s.watchdog = std::thread([&s] { s.runWatchdog(); });
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> groupBootstrap,
                                   const NcclOptions& options)
    : NcclCommunicator(*groupBootstrap, options) {
  impl_->ownedBootstrap = std::move(groupBootstrap);
}

std::unique_ptr<Communicator> NcclCommunicator::subgroup(const std::vector<int>& ranks,
                                                         const std::string& label) {
  // The group forms on the host communicator first (it checks that the members agree), then
  // starts NCCL over it with the constructor's bootstrap: its own unique id from group rank 0.
  std::unique_ptr<Communicator> host = impl_->bootstrap->subgroup(ranks, label);
  NcclOptions options = impl_->options;
  options.timeoutSeconds = impl_->timeout.load();
  options.device = impl_->ordinal;  // the device this rank already uses
  std::unique_ptr<NcclCommunicator> group(new NcclCommunicator(std::move(host), options));
  group->setStep(impl_->step.load());
  group->impl_->parentStep = &impl_->step;
  return group;
}

NcclCommunicator::~NcclCommunicator() {
  Impl& s = *impl_;
  // Let in-flight collectives finish (each has its deadline) before NCCL is torn down.
  for (;;) {
    std::unique_lock<std::mutex> lock(s.mutex);
    bool pending = false;
    for (auto& op : s.inflight) pending |= s.pollLocked(*op) == NcclOp::Pending;
    if (!pending) break;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s.failed && s.commStream) s.cu->cuStreamSynchronize(s.commStream);
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::worldSize() const { return impl_->world; }
int NcclCommunicator::device() const { return impl_->ordinal; }
int NcclCommunicator::version() const { return impl_->version; }

void NcclCommunicator::setComputeStream(void* stream) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->compute = static_cast<CUstream>(stream);
}

std::unique_ptr<Work> NcclCommunicator::allReduce(void* data, int64_t count, DType dtype, ReduceOp op,
                                                  const std::string& name) {
  comm::checkCount("all_reduce", name, count, data, data);
  Impl& s = *impl_;
  const int64_t bytes = count * dtypeBytes(dtype);
  return s.issue("all_reduce", name, bytes, bytes, -1, [&](NcclOp& o) {
    if (count > 0)
      s.ckNccl(s.nc->ncclAllReduce(data, data, static_cast<size_t>(count), ncclType(dtype), ncclReduce(op), s.comm,
                                   s.commStream),
               o.description, "ncclAllReduce");
  });
}

std::unique_ptr<Work> NcclCommunicator::allGather(const void* send, void* recv, int64_t n, DType dtype,
                                                  const std::string& name) {
  comm::checkCount("all_gather", name, n, send, recv);
  Impl& s = *impl_;
  const int64_t eb = dtypeBytes(dtype), bytes = n * eb;
  return s.issue("all_gather", name, bytes, bytes, -1, [&](NcclOp& o) {
    const nccl::PaddedLayout l = nccl::paddedLayout(n, s.world);
    if (n == 0) return;
    if (!l.padded()) {
      s.ckNccl(s.nc->ncclAllGather(send, recv, static_cast<size_t>(l.block), ncclType(dtype), s.comm, s.commStream),
               o.description, "ncclAllGather");
      return;
    }
    s.ckCuda(s.cu->cuMemAlloc(&o.scratch, static_cast<size_t>(l.scratchElements() * eb)), o.description,
             "cuMemAlloc of the padding scratch");
    auto* scratch = reinterpret_cast<std::byte*>(o.scratch);
    s.copies(nccl::allGatherPack(l, s.rank), send, scratch, eb, o.description);
    s.ckNccl(s.nc->ncclAllGather(scratch + s.rank * l.block * eb, scratch, static_cast<size_t>(l.block),
                                 ncclType(dtype), s.comm, s.commStream),
             o.description, "ncclAllGather");
    s.copies(nccl::allGatherUnpack(l), scratch, recv, eb, o.description);
  });
}

std::unique_ptr<Work> NcclCommunicator::reduceScatter(const void* send, void* recv, int64_t n, DType dtype,
                                                      ReduceOp op, const std::string& name) {
  comm::checkCount("reduce_scatter", name, n, send, recv);
  Impl& s = *impl_;
  const int64_t eb = dtypeBytes(dtype), bytes = n * eb;
  return s.issue("reduce_scatter", name, bytes, bytes, -1, [&](NcclOp& o) {
    const nccl::PaddedLayout l = nccl::paddedLayout(n, s.world);
    if (n == 0) return;
    if (!l.padded()) {
      s.ckNccl(s.nc->ncclReduceScatter(send, recv, static_cast<size_t>(l.block), ncclType(dtype), ncclReduce(op),
                                       s.comm, s.commStream),
               o.description, "ncclReduceScatter");
      return;
    }
    s.ckCuda(s.cu->cuMemAlloc(&o.scratch, static_cast<size_t>(l.scratchElements() * eb)), o.description,
             "cuMemAlloc of the padding scratch");
    auto* scratch = reinterpret_cast<std::byte*>(o.scratch);
    s.copies(nccl::reduceScatterPack(l), send, scratch, eb, o.description);
    s.ckNccl(s.nc->ncclReduceScatter(scratch, scratch + s.rank * l.block * eb, static_cast<size_t>(l.block),
                                     ncclType(dtype), ncclReduce(op), s.comm, s.commStream),
             o.description, "ncclReduceScatter");
    s.copies(nccl::reduceScatterUnpack(l, s.rank), scratch, recv, eb, o.description);
  });
}

std::unique_ptr<Work> NcclCommunicator::allToAll(const void* send, void* recv, int64_t countPerRank, DType dtype,
                                                 const std::string& name) {
  comm::checkCount("all_to_all", name, countPerRank, send, recv);
  Impl& s = *impl_;
  const int64_t eb = dtypeBytes(dtype), bytes = countPerRank * s.world * eb;
  return s.issue("all_to_all", name, bytes, bytes, -1, [&](NcclOp& o) {
    if (countPerRank == 0) return;
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    const size_t count = static_cast<size_t>(countPerRank);
    s.ckNccl(s.nc->ncclGroupStart(), o.description, "ncclGroupStart");
    for (int p = 0; p < s.world; ++p) {
      s.ckNccl(s.nc->ncclSend(in + p * countPerRank * eb, count, ncclType(dtype), p, s.comm, s.commStream),
               o.description, "ncclSend");
      s.ckNccl(s.nc->ncclRecv(out + p * countPerRank * eb, count, ncclType(dtype), p, s.comm, s.commStream),
               o.description, "ncclRecv");
    }
    s.ckNccl(s.nc->ncclGroupEnd(), o.description, "ncclGroupEnd");
  });
}

std::unique_ptr<Work> NcclCommunicator::broadcast(void* data, int64_t count, DType dtype, int root,
                                                  const std::string& name) {
  comm::checkCount("broadcast", name, count, data, data);
  comm::checkRoot("broadcast", name, root, impl_->world);
  Impl& s = *impl_;
  const int64_t bytes = count * dtypeBytes(dtype);
  return s.issue("broadcast", name, bytes, bytes, -1, [&](NcclOp& o) {
    if (count > 0)
      s.ckNccl(s.nc->ncclBroadcast(data, data, static_cast<size_t>(count), ncclType(dtype), root, s.comm,
                                   s.commStream),
               o.description, "ncclBroadcast");
  });
}

std::unique_ptr<Work> NcclCommunicator::send(const void* data, int64_t count, DType dtype, int peer,
                                             const std::string& name) {
  comm::checkCount("send", name, count, data, data);
  comm::checkPeer("send", name, peer, impl_->rank, impl_->world);
  Impl& s = *impl_;
  const int64_t bytes = count * dtypeBytes(dtype);
  return s.issue("send", name, bytes, bytes, peer, [&](NcclOp& o) {
    if (count > 0)
      s.ckNccl(s.nc->ncclSend(data, static_cast<size_t>(count), ncclType(dtype), peer, s.comm, s.commStream),
               o.description, "ncclSend");
  });
}

std::unique_ptr<Work> NcclCommunicator::recv(void* data, int64_t count, DType dtype, int peer,
                                             const std::string& name) {
  comm::checkCount("recv", name, count, data, data);
  comm::checkPeer("recv", name, peer, impl_->rank, impl_->world);
  Impl& s = *impl_;
  return s.issue("recv", name, count * dtypeBytes(dtype), 0, peer, [&](NcclOp& o) {
    if (count > 0)
      s.ckNccl(s.nc->ncclRecv(data, static_cast<size_t>(count), ncclType(dtype), peer, s.comm, s.commStream),
               o.description, "ncclRecv");
  });
}

std::unique_ptr<Work> NcclCommunicator::sendRecv(const std::vector<P2pTransfer>& transfers, const std::string& name) {
  Impl& s = *impl_;
  int64_t bytes = 0, sent = 0;
  for (const P2pTransfer& t : transfers) {
    comm::checkCount(t.send ? "send" : "recv", t.name, t.count, t.data, t.data);
    comm::checkPeer(t.send ? "send" : "recv", t.name, t.peer, s.rank, s.world);
    bytes += t.count * dtypeBytes(t.dtype);
    if (t.send) sent += t.count * dtypeBytes(t.dtype);
  }
  // One group: NCCL posts every send and receive together, so a rank may send to and receive
  // from a peer that does the same (an ungrouped ncclSend waits on the stream for its match).
  return s.issue("send_recv", name, bytes, sent, -1, [&](NcclOp& o) {
    s.ckNccl(s.nc->ncclGroupStart(), o.description, "ncclGroupStart");
    for (const P2pTransfer& t : transfers) {
      if (t.count == 0) continue;
      if (t.send)
        s.ckNccl(s.nc->ncclSend(t.data, static_cast<size_t>(t.count), ncclType(t.dtype), t.peer, s.comm,
                                s.commStream),
                 o.description + " [" + t.name + "]", "ncclSend");
      else
        s.ckNccl(s.nc->ncclRecv(t.data, static_cast<size_t>(t.count), ncclType(t.dtype), t.peer, s.comm,
                                s.commStream),
                 o.description + " [" + t.name + "]", "ncclRecv");
    }
    s.ckNccl(s.nc->ncclGroupEnd(), o.description, "ncclGroupEnd");
  });
}

void NcclCommunicator::setTimeout(double seconds) {
  checkTimeoutSeconds(seconds);
  impl_->timeout = seconds;
}

void NcclCommunicator::setStep(int64_t step) { impl_->step = step; }

CommStats NcclCommunicator::stats() const { return CommStats{impl_->collectives.load(), impl_->payloadBytes.load()}; }

}  // namespace tessel::rt
