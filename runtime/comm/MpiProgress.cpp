// The progress thread of MpiCommunicator: every MPI call happens here (see MpiImpl.h).
//
// Threads: the caller issues operations into `queue`; the progress thread moves collectives
// into a FIFO (run one at a time, in order) and posts send/recv at once (they are ordered
// only per peer pair, by MPI's non-overtaking rule). Three duplicates of MPI_COMM_WORLD keep
// the traffic apart: collective data (tag = round index), arrival announcements (tag 1) and
// point-to-point messages (tag 0). Group communicators (subgroup) share all three: their
// schedules name world ranks, and their handshakes involve only their members.
#include "runtime/comm/MpiImpl.h"

#include "runtime/comm/Reduce.h"
#include "runtime/comm/SigtermReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <fmt/ranges.h>

namespace tessel::rt {
using namespace comm;
namespace {

std::string describeAnnounce(const Announce& a) {
  std::string group = a.group[0] ? fmt::format(" of group {}", a.group) : "";
  return fmt::format("{} '{}' (collective #{}{}, {} elements of {}, {} bytes)",
                     opKindName(static_cast<OpKind>(a.kind)), a.name, a.seq, group, a.count,
                     dtypeName(static_cast<DType>(a.dtype)), a.bytes);
}

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

std::string rankList(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

}  // namespace

std::string MpiCommunicator::Impl::initialise() {
  int flag = 0;
  MPI_Initialized(&flag);
  if (flag) return "MPI was initialised before the communicator (it must own MPI)";
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return "MPI_Init_thread failed";
  if (provided < MPI_THREAD_FUNNELED)
    return fmt::format("MPI provides thread level {}, MPI_THREAD_FUNNELED is needed", provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (MPI_Comm* c : {&dataComm, &controlComm, &p2pComm}) {
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, c);
    if (rc != MPI_SUCCESS) return "MPI_Comm_dup failed: " + mpiError(rc);
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  }
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) ==
      MPI_SUCCESS) {
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_size(local, &localSize);
    MPI_Comm_free(&local);
  }
  peerArrived.assign(world, false);
  announceSlot.resize(world);
  announceRecv.assign(world, MPI_REQUEST_NULL);
  announced.resize(world);
  for (int p = 0; p < world; ++p)
    if (p != rank)
      MPI_Irecv(&announceSlot[p], sizeof(Announce), MPI_BYTE, p, kAnnounceTag, controlComm,
                &announceRecv[p]);
  return "";
}

void MpiCommunicator::Impl::finalise() {
  for (MPI_Request& r : announceRecv)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  for (auto& [a, r] : announceSends) MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (MPI_Comm* c : {&dataComm, &controlComm, &p2pComm}) MPI_Comm_free(c);
  MPI_Finalize();
}

void MpiCommunicator::Impl::run(std::promise<std::string>& ready) {
  blockSigtermInThisThread();
  std::string error = initialise();
  heartbeatNs = nowNs();
  ready.set_value(error);
  if (!error.empty()) return;
  updateStatus();
  int idle = 0;
  for (;;) {
    std::vector<std::shared_ptr<Op>> incoming;
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (queue.empty() && fifo.empty() && p2p.empty()) {
        if (stopping) break;
        wake.wait_for(lock, std::chrono::milliseconds(50));
      }
      incoming.swap(queue);
    }
    heartbeatNs = nowNs();
    for (auto& op : incoming) {
      if (failed) {
        op->finish(fmt::format("{} did not run: an earlier operation failed: {}", describe(*op),
                               firstError));
      } else if (op->isPointToPoint()) {
        Running r{op, {}, {}};
        op->started = true;
        op->startedAt = Op::Clock::now();
        op->deadline = op->startedAt + std::chrono::duration_cast<Op::Clock::duration>(
                                           std::chrono::duration<double>(op->timeout));
        std::string err = post(r, op->rounds[0], p2pComm, 0);
        if (!err.empty()) fail(op, err);
        else p2p.push_back(std::move(r));
      } else {
        fifo.push_back(op);
      }
    }
    bool progressed = pollAnnouncements();
    if (!failed) progressed |= advanceFront();
    if (!failed) progressed |= advanceP2p();
    for (auto it = announceSends.begin(); it != announceSends.end();) {
      int done = 0;
      MPI_Test(&it->second, &done, MPI_STATUS_IGNORE);
      it = done ? announceSends.erase(it) : std::next(it);
    }
    if (!failed) checkDeadlines();
    // Poll without burning a core the caller's compute needs: yield first, then nap briefly.
    idle = progressed ? 0 : idle + 1;
    if (idle > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (idle > 0) std::this_thread::yield();
  }
  if (!failed) finalise();
}

bool MpiCommunicator::Impl::pollAnnouncements() {
  bool any = false;
  for (int p = 0; p < world; ++p) {
    if (p == rank || announceRecv[p] == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&announceRecv[p], &done, MPI_STATUS_IGNORE);
    if (!done) continue;
    announced[p].push_back(announceSlot[p]);
    MPI_Irecv(&announceSlot[p], sizeof(Announce), MPI_BYTE, p, kAnnounceTag, controlComm,
              &announceRecv[p]);
    any = true;
  }
  if (any) updateStatus();
  return any;
}

std::string MpiCommunicator::Impl::post(Running& running, const Round& round, MPI_Comm comm,
                                        int tag) {
  running.requests.clear();
  running.expected.clear();
  for (const Transfer& t : round.transfers) {
    for (int64_t off = 0; off < t.bytes; off += kMaxMessage) {
      int len = static_cast<int>(std::min(kMaxMessage, t.bytes - off));
      char* p = static_cast<char*>(t.data) + off;
      MPI_Request r;
      int rc = t.isSend ? MPI_Isend(p, len, MPI_BYTE, t.peer, tag, comm, &r)
                        : MPI_Irecv(p, len, MPI_BYTE, t.peer, tag, comm, &r);
      if (rc != MPI_SUCCESS)
        return fmt::format("{} failed on rank {}: {} to rank {}: {}", describe(*running.op), rank,
                           t.isSend ? "MPI_Isend" : "MPI_Irecv", t.peer, mpiError(rc));
      running.requests.push_back(r);
      running.expected.push_back(t.isSend ? -1 : len);
    }
  }
  return "";
}

int MpiCommunicator::Impl::test(Running& running, std::string& error) {
  if (running.requests.empty()) return 1;
  std::vector<MPI_Status> statuses(running.requests.size());
  int done = 0;
  int rc = MPI_Testall(static_cast<int>(running.requests.size()), running.requests.data(), &done,
                       statuses.data());
  if (rc != MPI_SUCCESS) {
    int code = rc;
    for (const MPI_Status& s : statuses)
      if (rc == MPI_ERR_IN_STATUS && s.MPI_ERROR != MPI_SUCCESS) code = s.MPI_ERROR;
    error = fmt::format("{} failed on rank {}: {}", describe(*running.op), rank, mpiError(code));
    return -1;
  }
  if (!done) return 0;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (running.expected[i] < 0) continue;
    int got = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &got);
    if (got != running.expected[i]) {
      error = fmt::format("{} on rank {}: expected a message of {} bytes from rank {}, got {}",
                          describe(*running.op), rank, running.expected[i],
                          statuses[i].MPI_SOURCE, got);
      return -1;
    }
  }
  running.requests.clear();
  return 1;
}

bool MpiCommunicator::Impl::advanceFront() {
  if (fifo.empty()) return false;
  std::shared_ptr<Op> op = fifo.front();
  bool progressed = false;
  if (!op->started) {
    op->started = true;
    op->startedAt = Op::Clock::now();
    op->deadline = op->startedAt + std::chrono::duration_cast<Op::Clock::duration>(
                                       std::chrono::duration<double>(op->timeout));
    // Only the group's members take part: the others count as arrived from the start.
    peerArrived.assign(world, true);
    for (int p : op->group->members) peerArrived[p] = p == rank;
    for (int p : op->group->members) {
      if (p == rank) continue;
      auto a = std::make_unique<Announce>(announceOf(*op));
      MPI_Request r;
      int rc = MPI_Isend(a.get(), sizeof(Announce), MPI_BYTE, p, kAnnounceTag, controlComm, &r);
      if (rc != MPI_SUCCESS) {
        fail(op, fmt::format("{} failed on rank {}: announcing it to rank {}: {}", describe(*op),
                             rank, p, mpiError(rc)));
        return true;
      }
      announceSends.emplace_back(std::move(a), r);
    }
    front = Running{op, {}, {}};
    updateStatus();
    progressed = true;
  }
  // The arrival handshake: every peer's announcement of this collective.
  bool all = true;
  for (int p = 0; p < world; ++p) {
    if (peerArrived[p]) continue;
    if (announced[p].empty()) {
      all = false;
      continue;
    }
    Announce theirs = announced[p].front();
    const Announce mine = announceOf(*op);
    if (!sameCollective(theirs, mine)) {
      // A rank that ends early (after an error it reported itself, e.g. unreadable data)
      // reaches its final barrier while the others wait in a collective: say that, rather
      // than calling it a protocol mismatch.
      if (isFinalizeBarrier(theirs) && !isFinalizeBarrier(mine))
        fail(op, fmt::format("{} on rank {} cannot complete: rank {} has ended (it reached its final barrier, "
                             "most likely after an error it reported)",
                             describe(*op), rank, p));
      else if (isFinalizeBarrier(mine) && !isFinalizeBarrier(theirs))
        fail(op, fmt::format("rank {} has ended while rank {} waits in {}; the other ranks stop too", rank, p,
                             describeAnnounce(theirs)));
      else
        fail(op, fmt::format("{} on rank {} does not match rank {}, which issued {}: every rank must "
                             "issue the same collectives in the same order",
                             describe(*op), rank, p, describeAnnounce(theirs)));
      return true;
    }
    announced[p].pop_front();
    peerArrived[p] = true;
    progressed = true;
  }
  if (!all) return progressed;
  while (op->nextRound < op->rounds.size()) {
    const Round& step = op->rounds[op->nextRound];
    if (!op->roundPosted) {
      std::string err = post(front, step, dataComm, static_cast<int>(op->nextRound % 32768));
      if (!err.empty()) {
        fail(op, err);
        return true;
      }
      op->roundPosted = true;
      updateStatus();  // a SIGTERM report names the peers this round waits for
    }
    std::string err;
    int state = test(front, err);
    if (state < 0) {
      fail(op, err);
      return true;
    }
    if (state == 0) return progressed;
    if (step.after) step.after();
    ++op->nextRound;
    op->roundPosted = false;
    progressed = true;
  }
  fifo.pop_front();
  ++completed;
  op->finish("");
  updateStatus();
  return true;
}

bool MpiCommunicator::Impl::advanceP2p() {
  bool progressed = false;
  for (auto it = p2p.begin(); it != p2p.end();) {
    std::string err;
    int state = test(*it, err);
    if (state < 0) {
      fail(it->op, err);
      return true;
    }
    if (state == 1) {
      it->op->finish("");
      it = p2p.erase(it);
      progressed = true;
    } else {
      ++it;
    }
  }
  return progressed;
}

/// The peers whose data the current round of `op` still waits for: "waiting for data from
/// rank(s) 1" (in a ring, a rank that died mid-exchange stalls its neighbour first).
static std::string pendingPeers(const Op& op) {
  std::vector<int> peers;
  if (op.roundPosted && op.nextRound < op.rounds.size())
    for (const Transfer& t : op.rounds[op.nextRound].transfers)
      if (!t.isSend && std::find(peers.begin(), peers.end(), t.peer) == peers.end())
        peers.push_back(t.peer);
  return peers.empty() ? std::string("no receive pending")
                       : "waiting for data from rank(s) " + rankList(peers);
}

void MpiCommunicator::Impl::checkDeadlines() {
  auto now = Op::Clock::now();
  if (!fifo.empty() && fifo.front()->started && now > fifo.front()->deadline) {
    const Op& op = *fifo.front();
    std::vector<int> missing;
    for (int p = 0; p < world; ++p)
      if (!peerArrived[p] && announced[p].empty()) missing.push_back(p);
    std::string who =
        missing.empty()
            ? "every rank arrived, but the data exchange did not finish (a rank may have died "
              "during it); " + pendingPeers(op)
            : "rank(s) that did not arrive: " + rankList(missing);
    fail(fifo.front(), fmt::format("{} timed out after {} s on rank {} of {}; {}", describe(op),
                                   op.timeout, rank, world, who));
    return;
  }
  for (Running& r : p2p) {
    if (now <= r.op->deadline) continue;
    fail(r.op, fmt::format("{} timed out after {} s on rank {} of {}; rank(s) that did not "
                           "arrive: {} (no matching {})",
                           describe(*r.op), r.op->timeout, rank, world, r.op->root,
                           r.op->kind == OpKind::Send ? "recv" : "send"));
    return;
  }
}

void MpiCommunicator::Impl::fail(std::shared_ptr<Op> op, const std::string& message) {
  failed = true;
  firstError = message;
  publishStatus(fmt::format("tessel: rank {} of {}: terminated by SIGTERM after a failure: {}",
                            rank, world, message));
  op->finish(message);
  std::string later =
      fmt::format("did not run: an earlier operation failed: {}", message);
  for (auto& other : fifo)
    if (other != op) other->finish(describe(*other) + " " + later);
  for (auto& other : p2p)
    if (other.op != op) other.op->finish(describe(*other.op) + " " + later);
  fifo.clear();
  p2p.clear();
}

void MpiCommunicator::Impl::updateStatus() {
  std::string what;
  if (!fifo.empty() && fifo.front()->started) {
    std::vector<int> missing;
    for (int p = 0; p < world; ++p)
      if (!peerArrived[p] && announced[p].empty()) missing.push_back(p);
    what = fmt::format("while waiting for {}; {}", describe(*fifo.front()),
                       missing.empty() ? "every rank had arrived; " + pendingPeers(*fifo.front())
                                       : "rank(s) that did not arrive: " + rankList(missing));
  } else if (!p2p.empty()) {
    what = fmt::format("while waiting for {}", describe(*p2p.front().op));
  } else {
    what = fmt::format("outside any collective ({} completed)", completed);
  }
  publishStatus(fmt::format("tessel: rank {} of {}: terminated by SIGTERM {}", rank, world, what));
}

}  // namespace tessel::rt
