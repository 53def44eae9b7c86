// Step traces; see Trace.h.
#include "runtime/exec/Trace.h"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tessel::rt {

void TraceRecorder::alignClocks(Communicator* comm) {
  if (comm && comm->worldSize() > 1) {
    float token = 0;
    comm->allReduce(&token, 1, DType::F32, ReduceOp::Sum, "trace clock")->wait();
  }
  epoch_ = Clock::now();
}

double TraceRecorder::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - epoch_).count();
}

void TraceRecorder::complete(std::string name, const char* category, Clock::time_point start, Clock::time_point end,
                             std::string detail) {
  if (!active_) return;
  events_.push_back({std::move(name), category, micros(start), micros(end) - micros(start), std::move(detail)});
}

void TraceRecorder::fillIdle(Clock::time_point start, Clock::time_point end) {
  if (!active_) return;
  const double from = micros(start), to = micros(end);
  // The outermost events inside [from, to): sorted by start, longest first, skipping any
  // that lies inside the previous one.
  std::vector<const TraceEvent*> inside;
  for (const TraceEvent& e : events_)
    if (e.startUs >= from && e.startUs + e.durationUs <= to && !(e.startUs == from && e.durationUs == to - from))
      inside.push_back(&e);
  std::sort(inside.begin(), inside.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return a->startUs != b->startUs ? a->startUs < b->startUs : a->durationUs > b->durationUs;
  });
  std::vector<TraceEvent> idle;
  double covered = from;
  for (const TraceEvent* e : inside) {
    if (e->startUs + e->durationUs <= covered) continue;  // nested in one already counted
    if (e->startUs > covered) idle.push_back({"idle", "idle", covered, e->startUs - covered, ""});
    covered = e->startUs + e->durationUs;
  }
  if (to > covered) idle.push_back({"idle", "idle", covered, to - covered, ""});
  events_.insert(events_.end(), idle.begin(), idle.end());
}

TraceScope::TraceScope(TraceRecorder* trace, std::string name, const char* category, std::string detail)
    : trace_(trace && trace->active() ? trace : nullptr),
      name_(std::move(name)),
      detail_(std::move(detail)),
      category_(category),
      start_(trace_ ? TraceRecorder::Clock::now() : TraceRecorder::Clock::time_point()) {}

TraceScope::~TraceScope() {
  if (trace_) trace_->complete(std::move(name_), category_, start_, TraceRecorder::Clock::now(), std::move(detail_));
}

std::string traceEventsJson(const TraceRecorder& trace, int rank, const std::string& host) {
  std::string out;
  auto add = [&](const nlohmann::json& e) {
    if (!out.empty()) out += ",\n";
    out += e.dump();
  };
  add({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0},
       {"args", {{"name", fmt::format("rank {} ({})", rank, host)}}}});
  add({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
  add({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "training loop"}}}});
  for (const TraceEvent& e : trace.events()) {
    nlohmann::json j = {{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", rank}, {"tid", 0},
                        {"ts", e.startUs}, {"dur", e.durationUs}};
    if (!e.detail.empty()) j["args"] = {{"detail", e.detail}};
    add(j);
  }
  return out;
}

void writeTrace(const TraceRecorder& trace, Communicator* comm, const std::string& path,
                const std::string& otherDataJson) {
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) std::strcpy(hostname, "unknown host");
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->worldSize() : 1;
  std::string mine = traceEventsJson(trace, rank, hostname);
  std::vector<std::string> all = {mine};
  if (world > 1) {
    // Every rank's text, padded to the longest, in i32 words (the communicators' element types).
    int32_t longest = static_cast<int32_t>(mine.size());
    comm->allReduce(&longest, 1, DType::I32, ReduceOp::Max, "trace size")->wait();
    const int64_t words = (longest + 4) / 4;  // at least one NUL after the text
    std::vector<int32_t> send(static_cast<size_t>(words), 0), recv(static_cast<size_t>(words * world), 0);
    std::memcpy(send.data(), mine.data(), mine.size());
    comm->allGather(send.data(), recv.data(), words * world, DType::I32, "trace events")->wait();
    all.clear();
    for (int r = 0; r < world; ++r) all.emplace_back(reinterpret_cast<const char*>(recv.data() + r * words));
  }
  if (rank != 0) return;
  std::ofstream out(path);
  out << "{\"traceEvents\": [\n";
  for (size_t r = 0; r < all.size(); ++r) out << all[r] << (r + 1 < all.size() ? ",\n" : "\n");
  out << "],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": " << otherDataJson << "}\n";
  if (!out) throw std::runtime_error(fmt::format("--trace: cannot write '{}'", path));
}

}  // namespace tessel::rt
