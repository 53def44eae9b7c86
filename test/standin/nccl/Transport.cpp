// The stand-in NCCL's socket mesh; see Transport.h.
#include "test/standin/nccl/Transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace tessel::standin::nccl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kHelloMagic = 0x7e55e1cc;
constexpr int kPollMilliseconds = 50;  // how soon a blocked exchange notices abort()

[[noreturn]] void systemError(const std::string& what) {
  throw TransportError(TransportError::System, what + ": " + std::strerror(errno));
}

/// The abstract socket address of `rank` of the communicator `key`.
sockaddr_un address(const std::string& key, int rank, socklen_t& length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = "tessel-standin-nccl-" + key.substr(0, 64) + "-" + std::to_string(rank);
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

/// Blocking full read or write of a small handshake record; false when the peer closed.
bool readFully(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t got = ::recv(fd, b, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    b += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

struct Hello {
  uint32_t magic;
  int32_t rank;
};

}  // namespace

SocketTransport::SocketTransport(const std::string& key, int rank, int size, double timeoutSeconds)
    : rank_(rank), size_(size), fds_(static_cast<size_t>(size), -1) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeoutSeconds));
  auto missing = [&](int peer) {
    for (int& fd : fds_)
      if (fd >= 0) ::close(fd);
    throw TransportError(TransportError::System,
                         "rank " + std::to_string(peer) + " of " + std::to_string(size) +
                             " did not join the communicator within " + std::to_string(timeoutSeconds) + " s");
  };
  int listener = -1;
  if (rank + 1 < size) {  // higher ranks connect to this one
    listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) systemError("socket");
    socklen_t length = 0;
    sockaddr_un a = address(key, rank, length);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&a), length) != 0) {
      ::close(listener);
      systemError("bind of rank " + std::to_string(rank) + " (was the unique id used twice?)");
    }
    if (::listen(listener, size) != 0) systemError("listen");
  }
  for (int peer = 0; peer < rank; ++peer) {
    socklen_t length = 0;
    sockaddr_un a = address(key, peer, length);
    for (;;) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) systemError("socket");
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), length) == 0) {
        Hello h{kHelloMagic, rank};
        if (::send(fd, &h, sizeof h, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h)) systemError("send");
        fds_[static_cast<size_t>(peer)] = fd;
        break;
      }
      ::close(fd);
      if (Clock::now() > deadline) {
        if (listener >= 0) ::close(listener);
        missing(peer);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the peer has not listened yet
    }
  }
  for (int accepted = 0; accepted < size - 1 - rank; ++accepted) {
    pollfd p{listener, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      ::close(listener);
      for (int peer = rank + 1; peer < size; ++peer)
        if (fds_[static_cast<size_t>(peer)] < 0) missing(peer);
    }
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) systemError("accept");
    Hello h{};
    if (!readFully(fd, &h, sizeof h) || h.magic != kHelloMagic || h.rank <= rank || h.rank >= size ||
        fds_[static_cast<size_t>(h.rank)] >= 0) {
      ::close(fd);
      throw TransportError(TransportError::System, "a connection to rank " + std::to_string(rank) +
                                                       " did not introduce itself as a higher rank");
    }
    fds_[static_cast<size_t>(h.rank)] = fd;
  }
  if (listener >= 0) ::close(listener);
  for (int fd : fds_)
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

SocketTransport::~SocketTransport() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void SocketTransport::abort() {
  if (aborted_.exchange(true)) return;
  for (int fd : fds_)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);  // wakes a blocked poll; peers see the end
}

void SocketTransport::exchange(std::vector<Transfer>& transfers) {
  auto aborted = [] { return TransportError(TransportError::Aborted, "the communicator was aborted"); };
  if (aborted_) throw aborted();
  // Per peer: the queue of sends and of receives (indices into `transfers`), and the bytes
  // of the head transfer already moved.
  struct Queue {
    std::vector<size_t> items;
    size_t head = 0, done = 0;
    bool empty() const { return head == items.size(); }
  };
  std::vector<Queue> sends(static_cast<size_t>(size_)), recvs(static_cast<size_t>(size_));
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    if (t.peer < 0 || t.peer >= size_)
      throw TransportError(TransportError::Usage, "transfer with rank " + std::to_string(t.peer) +
                                                      " outside the communicator of " + std::to_string(size_));
    if (t.bytes > 0) (t.send ? sends : recvs)[static_cast<size_t>(t.peer)].items.push_back(i);
  }
  // Oneself: the k-th send is the k-th receive.
  Queue& selfSend = sends[static_cast<size_t>(rank_)];
  Queue& selfRecv = recvs[static_cast<size_t>(rank_)];
  if (selfSend.items.size() != selfRecv.items.size())
    throw TransportError(TransportError::Usage, "sends to oneself and receives from oneself do not pair up");
  for (size_t k = 0; k < selfSend.items.size(); ++k) {
    const Transfer& s = transfers[selfSend.items[k]];
    const Transfer& r = transfers[selfRecv.items[k]];
    if (s.bytes != r.bytes)
      throw TransportError(TransportError::Usage, "a send to oneself of " + std::to_string(s.bytes) +
                                                      " bytes meets a receive of " + std::to_string(r.bytes));
    std::memmove(r.data, s.data, s.bytes);
  }
  selfSend.head = selfSend.items.size();
  selfRecv.head = selfRecv.items.size();

  std::vector<pollfd> polls;
  std::vector<int> peers;
  auto peerGone = [&](int peer, const char* what) {
    if (aborted_) throw aborted();
    throw TransportError(TransportError::Remote, "rank " + std::to_string(peer) + " of " + std::to_string(size_) +
                                                     " closed its connection during a " + what +
                                                     " (it ended, failed or aborted)");
  };
  for (;;) {
    polls.clear();
    peers.clear();
    for (int p = 0; p < size_; ++p) {
      short events = 0;
      if (!sends[static_cast<size_t>(p)].empty()) events |= POLLOUT;
      if (!recvs[static_cast<size_t>(p)].empty()) events |= POLLIN;
      if (events) {
        polls.push_back({fds_[static_cast<size_t>(p)], events, 0});
        peers.push_back(p);
      }
    }
    if (polls.empty()) return;
    int ready = ::poll(polls.data(), polls.size(), kPollMilliseconds);
    if (aborted_) throw aborted();
    if (ready < 0 && errno != EINTR) systemError("poll");
    for (size_t k = 0; ready > 0 && k < polls.size(); ++k) {
      const int p = peers[k];
      const int fd = polls[k].fd;
      Queue& in = recvs[static_cast<size_t>(p)];
      Queue& out = sends[static_cast<size_t>(p)];
      if ((polls[k].revents & (POLLIN | POLLHUP | POLLERR)) && !in.empty()) {
        const Transfer& t = transfers[in.items[in.head]];
        ssize_t got = ::recv(fd, static_cast<char*>(t.data) + in.done, t.bytes - in.done, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) peerGone(p, "receive");
        if (got > 0 && (in.done += static_cast<size_t>(got)) == t.bytes) {
          ++in.head;
          in.done = 0;
        }
      }
      if ((polls[k].revents & (POLLOUT | POLLHUP | POLLERR)) && !out.empty()) {
        const Transfer& t = transfers[out.items[out.head]];
        ssize_t put = ::send(fd, static_cast<const char*>(t.data) + out.done, t.bytes - out.done, MSG_NOSIGNAL);
        if (put < 0 && errno != EAGAIN && errno != EINTR) peerGone(p, "send");
        if (put > 0 && (out.done += static_cast<size_t>(put)) == t.bytes) {
          ++out.head;
          out.done = 0;
        }
      }
    }
  }
}

}  // namespace tessel::standin::nccl
