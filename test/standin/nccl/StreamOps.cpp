// The stand-in NCCL's batches on streams; see StreamOps.h.
#include "test/standin/nccl/StreamOps.h"

#include "test/standin/StandinDevice.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>

namespace tessel::standin::nccl {
namespace {

std::mutex lastErrorMutex;
std::string lastErrorText;

/// The stand-in driver's entry points this library uses, from the already-loaded
/// libcuda.so.1 (StandinDevice.h). nullptr members while it is not loaded (looked up again at
/// the next call, so a program that loads the driver after NCCL still finds it).
struct Driver {
  decltype(&::cuLaunchHostFunc) launchHostFunc = nullptr;
  decltype(&::cuStreamIsCapturing) isCapturing = nullptr;  // optional
  decltype(&::tesselStandinHostAddress) hostAddress = nullptr;
  decltype(&::tesselStandinTryHostAddress) tryHostAddress = nullptr;  // optional
};

Driver driver() {
  static std::mutex mutex;
  static Driver d;
  std::lock_guard<std::mutex> lock(mutex);
  if (d.launchHostFunc && d.hostAddress) return d;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return d;
  d.launchHostFunc = reinterpret_cast<decltype(d.launchHostFunc)>(dlsym(lib, "cuLaunchHostFunc"));
  d.isCapturing = reinterpret_cast<decltype(d.isCapturing)>(dlsym(lib, "cuStreamIsCapturing"));
  d.hostAddress = reinterpret_cast<decltype(d.hostAddress)>(dlsym(lib, "tesselStandinHostAddress"));
  d.tryHostAddress = reinterpret_cast<decltype(d.tryHostAddress)>(dlsym(lib, "tesselStandinTryHostAddress"));
  return d;
}

const char* callName(Op::Kind k) {
  switch (k) {
    case Op::AllReduce: return "ncclAllReduce";
    case Op::AllGather: return "ncclAllGather";
    case Op::ReduceScatter: return "ncclReduceScatter";
    case Op::Broadcast: return "ncclBroadcast";
    case Op::Send: return "ncclSend";
    case Op::Recv: return "ncclRecv";
  }
  return "?";
}

ncclResult_t resultOf(TransportError::Kind k) {
  switch (k) {
    case TransportError::Remote: return ncclRemoteError;
    case TransportError::Usage: return ncclInvalidUsage;
    case TransportError::Aborted: return ncclInvalidUsage;
    case TransportError::System: return ncclSystemError;
  }
  return ncclInternalError;
}

/// One device buffer of an Op: its argument name, address and elements (0: not used).
struct Buffer {
  const char* name;
  CUdeviceptr address;
  size_t elements;
};

/// The buffers `o` reads (first) and writes (second) on rank `rank` of `size`, with NCCL's
/// sizes: all_gather's recvbuff and reduce_scatter's sendbuff hold `size` blocks.
std::pair<Buffer, Buffer> buffersOf(const Op& o, int rank, int size) {
  const size_t n = static_cast<size_t>(size), c = o.count;
  switch (o.kind) {
    case Op::AllReduce: return {{"sendbuff", o.send, c}, {"recvbuff", o.recv, c}};
    case Op::AllGather: return {{"sendbuff", o.send, c}, {"recvbuff", o.recv, c * n}};
    case Op::ReduceScatter: return {{"sendbuff", o.send, c * n}, {"recvbuff", o.recv, c}};
    case Op::Broadcast: return {{"sendbuff", o.send, rank == o.peer ? c : 0}, {"recvbuff", o.recv, c}};
    case Op::Send: return {{"sendbuff", o.send, c}, {"recvbuff", 0, 0}};
    case Op::Recv: return {{"sendbuff", 0, 0}, {"recvbuff", o.recv, c}};
  }
  return {};
}

/// A batch queued on a stream: shared so that a graph can keep it.
struct Queued {
  std::shared_ptr<Batch> batch;
  bool kept = false;
  std::shared_future<void> started;  // no-compute-wait: the batch already running
};

void hostFunction(void* p) {
  auto* q = static_cast<Queued*>(p);
  std::shared_ptr<Batch> b = q->batch;
  switch (b->comm->fault) {
    case Fault::None:
    case Fault::PeerExits: b->run(); break;
    case Fault::NoComputeWait: q->started.wait(); break;
    case Fault::NoDoneWait:
      b->comm->runLate([b] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        b->run();
      });
      break;
  }
  if (!q->kept) delete q;
}

thread_local int groupDepth = 0;
struct Pending {
  std::shared_ptr<CommState> comm;
  CUstream stream;
  Op op;
};
thread_local std::vector<Pending> pending;

ncclResult_t launch(const std::shared_ptr<CommState>& comm, CUstream stream, std::vector<Op> ops) {
  const Driver& d = driver();
  if (!d.launchHostFunc || !d.hostAddress)
    return fail(ncclSystemError,
                "the stand-in NCCL queues its work on streams of the stand-in CUDA driver, and no libcuda.so.1 "
                "with cuLaunchHostFunc and tesselStandinHostAddress is loaded in this process");
  auto q = std::make_unique<Queued>();
  q->batch = std::make_shared<Batch>(Batch{comm, std::move(ops)});
  // A driver that cannot say whether the stream is being captured: every batch is kept (a
  // replay must find it), at a few hundred bytes per call until ncclCommDestroy.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!d.isCapturing || (d.isCapturing(stream, &capture) == CUDA_SUCCESS && capture == CU_STREAM_CAPTURE_STATUS_ACTIVE))
    q->kept = true;
  if (comm->fault == Fault::NoComputeWait) {
    auto started = std::make_shared<std::promise<void>>();
    q->started = started->get_future().share();
    comm->runLate([b = q->batch, started] {
      b->run();
      started->set_value();
    });
  }
  const bool kept = q->kept;  // q may be gone once the host function ran
  if (CUresult rc = d.launchHostFunc(stream, hostFunction, q.get()); rc != CUDA_SUCCESS)
    return fail(ncclUnhandledCudaError, "cuLaunchHostFunc failed with CUresult " + std::to_string(rc));
  if (kept) {
    std::lock_guard<std::mutex> lock(comm->keptMutex);
    comm->kept.push_back(std::shared_ptr<void>(std::move(q)));  // replays rerun it; freed by ncclCommDestroy
  } else {
    q.release();  // the host function deletes it
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t fail(ncclResult_t rc, const std::string& text) {
  std::lock_guard<std::mutex> lock(lastErrorMutex);
  lastErrorText = "stand-in NCCL: " + text;
  return rc;
}

std::string lastError() {
  std::lock_guard<std::mutex> lock(lastErrorMutex);
  return lastErrorText;
}

CommState::~CommState() {
  if (lateThread.joinable() && lateThread.get_id() == std::this_thread::get_id()) {
    lateThread.detach();  // the last batch on the planted faults' thread released the communicator
  } else if (lateThread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(lateMutex);
      lateStop = true;
    }
    lateCv.notify_all();
    lateThread.join();
  }
}

void CommState::runLate(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(lateMutex);
  late.push_back(std::move(f));
  if (!lateThread.joinable())
    lateThread = std::thread([this] {
      std::unique_lock<std::mutex> l(lateMutex);
      for (;;) {
        lateCv.wait(l, [this] { return lateStop || !late.empty(); });
        if (late.empty()) return;
        std::function<void()> next = std::move(late.front());
        late.pop_front();
        l.unlock();
        next();
        l.lock();
      }
    });
  lateCv.notify_all();
}

void Batch::run() {
  std::lock_guard<std::mutex> lock(comm->run);
  if (comm->asyncError != ncclSuccess || comm->destroyed) return;
  if (++comm->batches == 2 && comm->fault == Fault::PeerExits && comm->rank == 1) {
    std::fprintf(stderr, "stand-in NCCL: planted fault peer-exits: rank 1 ends its process\n");
    std::_Exit(9);
  }
  const Driver& d = driver();
  // Host views when the work runs: the driver aborts, naming the call and argument, on a
  // range that was freed or is out of bounds by now.
  auto view = [&](const Op& o, const Buffer& b) -> void* {
    if (b.elements == 0) return nullptr;
    std::string what = std::string(callName(o.kind)) + " " + b.name;
    return d.hostAddress(b.address, b.elements * elementBytes(o.type), what.c_str());
  };
  try {
    std::vector<PointToPoint> p2p;
    for (const Op& o : ops) {
      if (o.count == 0) continue;
      const auto [in, out] = buffersOf(o, comm->rank, comm->size);
      void *send = view(o, in), *recv = view(o, out);
      Collectives& c = *comm->core;
      switch (o.kind) {
        case Op::AllReduce: c.allReduce(send, recv, o.count, o.type, o.op); break;
        case Op::AllGather: c.allGather(send, recv, o.count, o.type); break;
        case Op::ReduceScatter: c.reduceScatter(send, recv, o.count, o.type, o.op); break;
        case Op::Broadcast: c.broadcast(send, recv, o.count, o.type, o.peer); break;
        case Op::Send: p2p.push_back({true, o.peer, send, o.count, o.type}); break;
        case Op::Recv: p2p.push_back({false, o.peer, recv, o.count, o.type}); break;
      }
    }
    if (!p2p.empty()) comm->core->pointToPoint(p2p);
  } catch (const TransportError& e) {
    fail(resultOf(e.kind()), "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->size) + ": " +
                                 e.what());
    comm->asyncError = resultOf(e.kind());
    comm->transport->abort();  // the peers fail too instead of waiting for this rank
  }
}

ncclResult_t enqueue(const std::shared_ptr<CommState>& comm, CUstream stream, const Op& op) {
  // As NCCL checks its pointers at the call (cudaPointerGetAttributes), with whole ranges.
  if (const Driver& d = driver(); d.tryHostAddress && op.count > 0) {
    const auto [in, out] = buffersOf(op, comm->rank, comm->size);
    for (const Buffer& b : {in, out}) {
      const char* why = nullptr;
      if (b.elements > 0 && !d.tryHostAddress(b.address, b.elements * elementBytes(op.type), &why))
        return fail(ncclInvalidArgument, std::string(callName(op.kind)) + " " + b.name + " of " +
                                             std::to_string(b.elements) + " " + typeName(op.type) + ": " +
                                             (why ? why : "not device memory"));
    }
  }
  if (groupDepth > 0) {
    pending.push_back({comm, stream, op});
    return ncclSuccess;
  }
  return launch(comm, stream, {op});
}

ncclResult_t groupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (groupDepth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0) return ncclSuccess;
  std::vector<Pending> ops = std::move(pending);
  pending.clear();
  // One batch per communicator, in the order of its first call; collectives keep their
  // order, sends and receives run together after them (Batch::run).
  std::vector<CommState*> order;
  std::map<CommState*, std::vector<size_t>> byComm;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [it, fresh] = byComm.try_emplace(ops[i].comm.get());
    if (fresh) order.push_back(ops[i].comm.get());
    it->second.push_back(i);
  }
  for (CommState* c : order) {
    const std::vector<size_t>& idx = byComm[c];
    std::vector<Op> batch;
    for (size_t i : idx) {
      if (ops[i].stream != ops[idx[0]].stream)
        return fail(ncclInvalidUsage, "the stand-in runs a group's operations of one communicator on one stream; "
                                      "this group passed two streams for one communicator");
      batch.push_back(ops[i].op);
    }
    if (ncclResult_t rc = launch(ops[idx[0]].comm, ops[idx[0]].stream, std::move(batch)); rc != ncclSuccess)
      return rc;
  }
  return ncclSuccess;
}

}  // namespace tessel::standin::nccl
