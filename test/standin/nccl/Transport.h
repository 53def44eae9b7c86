// The stand-in NCCL's transport: byte messages between the ranks of one communicator, over
// a full mesh of Unix-domain stream sockets (Linux abstract names, so nothing is left on
// disk and ranks in one process or in several processes of one machine connect alike).
// Tests only; no CUDA, no MPI.
//
// Why sockets and not MPI: a collective runs on a stream's worker thread of the stand-in
// CUDA driver, while the runtime owns MPI from its own progress thread at
// MPI_THREAD_FUNNELED (runtime/comm/MpiProgress.cpp), so no other thread may call MPI. Real
// NCCL also bootstraps over sockets; like it, the unique id (broadcast by the caller, over
// MPI in the runtime) is all the ranks share.
//
// Promise:
// - Construction blocks until every rank of the communicator connected (each rank listens
//   on "tessel-standin-nccl-<key>-<rank>", connects to every lower rank and accepts every
//   higher one); a rank missing after `timeoutSeconds` is a TransportError naming it.
// - exchange() runs a list of sends and receives to completion, all at once (non-blocking
//   sockets and poll), so the order in which two ranks list their transfers cannot
//   deadlock them. Transfers to or from one peer in one direction keep their list order; a
//   transfer to oneself is a copy matched in order with the receives from oneself.
// - A peer that closed its end (it ended, crashed or aborted) is a TransportError of kind
//   Remote naming the rank; abort() (from any thread) makes a blocked exchange, and every
//   later one, fail with kind Aborted within about 50 ms.
#pragma once

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::standin::nccl {

/// A failed transfer: the peer went away (Remote), abort() (Aborted), the operating system
/// refused something (System), or the ranks disagree about an operation (Usage, thrown by
/// the collectives above the transport).
class TransportError : public std::runtime_error {
public:
  enum Kind { Remote, Aborted, System, Usage };
  TransportError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

private:
  Kind kind_;
};

/// One message of an exchange: `bytes` bytes from `data` to `peer` (send) or from `peer`
/// into `data` (receive). Both ranks must list the same byte count.
struct Transfer {
  int peer = 0;
  bool send = false;
  void* data = nullptr;
  size_t bytes = 0;
};

/// The full mesh of one communicator's ranks.
class SocketTransport {
public:
  /// Connects rank `rank` of `size` ranks sharing `key` (e.g. the hex text of a unique id).
  /// Throws TransportError (System) when a peer does not connect within `timeoutSeconds`
  /// or a socket cannot be made.
  SocketTransport(const std::string& key, int rank, int size, double timeoutSeconds);
  ~SocketTransport();
  SocketTransport(const SocketTransport&) = delete;
  SocketTransport& operator=(const SocketTransport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Runs every transfer to completion (see the promise). Throws TransportError. Not
  /// reentrant: one exchange at a time per transport (the stand-in runs one communicator's
  /// operations on one stream at a time).
  void exchange(std::vector<Transfer>& transfers);

  /// Makes a blocked and every later exchange throw TransportError (Aborted). Thread-safe.
  void abort();

private:
  int rank_, size_;
  std::vector<int> fds_;  // per peer; -1 for oneself
  std::atomic<bool> aborted_{false};
};

}  // namespace tessel::standin::nccl
