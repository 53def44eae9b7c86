// The stand-in's streams, events, host functions and graphs.
//
// - A stream is a worker thread that runs its queue in order; streams run concurrently.
// - An event records the count of records made on it; a record queued on a stream completes
//   that count when the stream reaches it. cuStreamWaitEvent queues a wait for the count the
//   event had when it was called (an event never recorded is complete, as in CUDA), so the
//   waiting stream's worker really blocks until the other stream gets there.
// - Host synchronisation (cuStreamSynchronize, cuEventSynchronize, the synchronous copies)
//   waits for real and then reports a device fault of any queued work.
// - Capture: while a stream is captured, work given to it is recorded into its graph instead
//   of running; an instantiated graph replays the recorded work on the stream it is launched
//   on. As in CUDA's global capture mode, a synchronising call during a capture, or a wait on
//   an event recorded outside it, fails and invalidates the capture.
// - Host functions must not call the CUDA API (CUDA's rule); doing so is CUDA_ERROR_NOT_PERMITTED.
#include "test/standin/Standin.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <set>
#include <thread>
#include <vector>

using namespace tessel::standin;
using Clock = std::chrono::steady_clock;

struct CUgraph_st {
  std::vector<Work> works;
  std::set<const CUevent_st*> recorded;  // events recorded during the capture
};
struct CUgraphExec_st {
  std::vector<Work> works;
};

struct CUevent_st {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0, completed = 0;
  Clock::time_point when;
  bool timing = true;
};

struct CUstream_st {
  std::mutex mutex;
  std::condition_variable wake, progress;
  std::deque<Work> queue;
  uint64_t enqueued = 0, finished = 0;
  bool stop = false, blocking = true;
  CUgraph_st* capture = nullptr;  // set while captured
  bool invalidated = false;       // a capture broken by a prohibited call
  std::thread worker;
};

namespace tessel::standin {
namespace {

thread_local bool tInHostFunction = false;

/// Marks the running thread as inside a host function for its lifetime.
struct tInHostFunctionGuard {
  tInHostFunctionGuard() { tInHostFunction = true; }
  ~tInHostFunctionGuard() { tInHostFunction = false; }
};

struct Registry {
  std::mutex mutex;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> execs;
  CUstream_st* defaultStream = nullptr;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: workers may outlive static destruction
  return *r;
}

void workerLoop(CUstream_st* s) {
  for (;;) {
    Work w;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->wake.wait(lock, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;
      w = std::move(s->queue.front());
      s->queue.pop_front();
    }
    // Control work (event records and waits) runs even after a fault, so that no stream waits
    // forever on one that stopped executing.
    if (w.control || status() == CUDA_SUCCESS) {
      try {
        w.run();
      } catch (const std::exception& e) {
        fault(w.what + ": " + e.what());
      }
    }
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      ++s->finished;
    }
    s->progress.notify_all();
  }
}

CUstream_st* newStream(bool blocking) {
  auto* s = new CUstream_st;
  s->blocking = blocking;
  s->worker = std::thread(workerLoop, s);
  return s;
}

/// The stream object for a handle (nullptr and the legacy handles mean the default stream),
/// or nullptr if the handle is not a live stream.
CUstream_st* streamOf(CUstream h) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    if (!r.defaultStream) r.defaultStream = newStream(true);
    return r.defaultStream;
  }
  return r.streams.count(h) ? h : nullptr;
}

bool liveEvent(CUevent e) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.events.count(e) > 0;
}

void waitIdle(CUstream_st* s) {
  std::unique_lock<std::mutex> lock(s->mutex);
  s->progress.wait(lock, [&] { return s->finished == s->enqueued; });
}

/// Fails `call` if any stream is being captured (a synchronising call is prohibited then),
/// invalidating those captures.
CUresult refuseDuringCapture(const char* call) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  bool capturing = false;
  for (CUstream_st* s : r.streams) {
    std::lock_guard<std::mutex> sl(s->mutex);
    if (s->capture) {
      s->invalidated = true;
      capturing = true;
    }
  }
  return capturing ? fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, call,
                          "a synchronising call while a stream is being captured (the capture is invalidated)")
                   : CUDA_SUCCESS;
}

}  // namespace

bool inHostFunction() { return tInHostFunction; }

CUresult enqueue(CUstream stream, Work w) {
  CUstream_st* s = streamOf(stream);
  if (!s) return fail(CUDA_ERROR_INVALID_HANDLE, w.what, "not a live stream");
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->capture) {
      s->capture->works.push_back(std::move(w));
      return CUDA_SUCCESS;
    }
    s->queue.push_back(std::move(w));
    ++s->enqueued;
  }
  s->wake.notify_one();
  return CUDA_SUCCESS;
}

CUresult synchronizeAll(const char* call) {
  if (CUresult rc = refuseDuringCapture(call)) return rc;
  std::vector<CUstream_st*> streams;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (CUstream_st* s : r.streams)
      if (s->blocking) streams.push_back(s);
    if (r.defaultStream) streams.push_back(r.defaultStream);
  }
  for (CUstream_st* s : streams) waitIdle(s);
  return status();
}

}  // namespace tessel::standin

CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!stream) return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate", "null result pointer");
  if (flags & ~unsigned{CU_STREAM_NON_BLOCKING})
    return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate", fmt::format("flags {:#x}", flags));
  CUstream_st* s = newStream(!(flags & CU_STREAM_NON_BLOCKING));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.streams.insert(s);
  *stream = s;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  if (CUresult rc = status(); rc && rc != CUDA_ERROR_ILLEGAL_ADDRESS) return rc;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!stream || !r.streams.count(stream)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy", "not a stream");
    if (stream->capture) return fail(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "cuStreamDestroy", "the stream is captured");
    r.streams.erase(stream);
  }
  waitIdle(stream);  // CUDA lets queued work finish
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stop = true;
  }
  stream->wake.notify_one();
  stream->worker.join();
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  if (inHostFunction()) return status();
  CUstream_st* s = streamOf(stream);
  if (!s) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamSynchronize", "not a live stream");
  if (CUresult rc = refuseDuringCapture("cuStreamSynchronize")) return rc;
  waitIdle(s);
  return status();
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* userData) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!fn) return fail(CUDA_ERROR_INVALID_VALUE, "cuLaunchHostFunc", "null function");
  return enqueue(stream, {"host function", [=] {
                            tInHostFunctionGuard guard;
                            fn(userData);
                          }});
}

CUresult cuEventCreate(CUevent* event, unsigned flags) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!event) return fail(CUDA_ERROR_INVALID_VALUE, "cuEventCreate", "null result pointer");
  if (flags & ~unsigned{CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING})
    return fail(CUDA_ERROR_INVALID_VALUE, "cuEventCreate", fmt::format("flags {:#x}", flags));
  auto* e = new CUevent_st;
  e->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.events.insert(e);
  *event = e;
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent event) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.events.erase(event)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy", "not an event");
  // Queued work may still complete it (CUDA defers the release): keep the object.
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveEvent(event)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord", "not an event");
  CUstream_st* s = streamOf(stream);
  if (!s) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord", "not a live stream");
  bool captured;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    captured = s->capture != nullptr;
    if (captured) s->capture->recorded.insert(event);
  }
  uint64_t version;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    version = captured ? 0 : ++event->recorded;
  }
  Work w{"cuEventRecord", [event, version] {
           {
             std::lock_guard<std::mutex> lock(event->mutex);
             // A replayed record completes whatever was recorded; a queued one its own count.
             event->completed = std::max(event->completed, version ? version : event->recorded);
             event->when = Clock::now();
           }
           event->changed.notify_all();
         }};
  w.control = true;
  return enqueue(stream, std::move(w));
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveEvent(event)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent", "not an event");
  CUstream_st* s = streamOf(stream);
  if (!s) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent", "not a live stream");
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->capture) {
      if (s->capture->recorded.count(event)) return CUDA_SUCCESS;  // ordered within the graph already
      s->invalidated = true;
      return fail(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "cuStreamWaitEvent",
                  "a captured stream waits for an event recorded outside the capture");
    }
  }
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    target = event->recorded;
  }
  Work w{"cuStreamWaitEvent", [event, target] {
           std::unique_lock<std::mutex> lock(event->mutex);
           event->changed.wait(lock, [&] { return event->completed >= target; });
         }};
  w.control = true;
  return enqueue(stream, std::move(w));
}

CUresult cuEventSynchronize(CUevent event) {
  if (!liveEvent(event)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize", "not an event");
  if (CUresult rc = refuseDuringCapture("cuEventSynchronize")) return rc;
  std::unique_lock<std::mutex> lock(event->mutex);
  const uint64_t target = event->recorded;
  event->changed.wait(lock, [&] { return event->completed >= target; });
  return status();
}

CUresult cuEventQuery(CUevent event) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!liveEvent(event)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery", "not an event");
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!ms) return fail(CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime", "null result pointer");
  if (!liveEvent(start) || !liveEvent(end)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "not an event");
  std::scoped_lock lock(start->mutex, end->mutex);
  if (!start->timing || !end->timing)
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "an event created with CU_EVENT_DISABLE_TIMING");
  if (start->recorded == 0 || end->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;  // never recorded
  if (start->completed < start->recorded || end->completed < end->recorded) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!stream || !r.streams.count(stream))
    return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamBeginCapture",
                "only a created stream can be captured (not the default stream)");
  std::lock_guard<std::mutex> sl(stream->mutex);
  if (stream->capture) return fail(CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture", "the stream is already captured");
  auto* g = new CUgraph_st;
  r.graphs.insert(g);
  stream->capture = g;
  stream->invalidated = false;
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (!graph) return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamEndCapture", "null result pointer");
  *graph = nullptr;
  CUstream_st* s = streamOf(stream);
  if (!s) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamEndCapture", "not a live stream");
  std::lock_guard<std::mutex> lock(s->mutex);
  if (!s->capture) return fail(CUDA_ERROR_ILLEGAL_STATE, "cuStreamEndCapture", "the stream is not captured");
  CUgraph_st* g = s->capture;
  s->capture = nullptr;
  if (s->invalidated) {
    Registry& r = registry();
    std::lock_guard<std::mutex> rl(r.mutex);
    r.graphs.erase(g);
    delete g;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = g;
  return status();
}

CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  if (!exec) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate", "null result pointer");
  if (flags != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate", fmt::format("flags {:#x}", flags));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.graphs.count(graph)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuGraphInstantiate", "not a graph");
  auto* e = new CUgraphExec_st{graph->works};
  r.execs.insert(e);
  *exec = e;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (CUresult rc = contextStatus(__func__)) return rc;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.execs.count(exec)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuGraphLaunch", "not an instantiated graph");
  }
  for (const Work& w : exec->works)
    if (CUresult rc = enqueue(stream, w)) return rc;
  return CUDA_SUCCESS;
}

namespace {
/// Deletes `object` if `live` holds it (under the registry's lock); launched copies of a
/// graph's work are already queued, so the object itself can go.
template <typename T>
CUresult destroyIn(std::set<T*>& live, T* object, const char* call, const char* what) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (!live.erase(object)) return fail(CUDA_ERROR_INVALID_HANDLE, call, std::string("not ") + what);
  delete object;
  return CUDA_SUCCESS;
}
}  // namespace

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  return destroyIn(registry().execs, exec, "cuGraphExecDestroy", "an instantiated graph");
}

CUresult cuGraphDestroy(CUgraph graph) { return destroyIn(registry().graphs, graph, "cuGraphDestroy", "a graph"); }
