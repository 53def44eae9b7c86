// Running the model binary for its compiled memory; see CompiledMemory.h.
#include "runtime/tools/tessel/CompiledMemory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace tessel::cli {
namespace {

/// The child's exit status, stdout and stderr (both read to the end while it runs, so neither
/// pipe fills and blocks it).
struct Captured {
  int status = 0;
  std::string out, err;
};

Captured run(const std::string& binary, const std::vector<std::string>& args) {
  int outPipe[2], errPipe[2];
  if (pipe(outPipe) != 0 || pipe(errPipe) != 0) throw std::runtime_error("cannot create a pipe for " + binary);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2);
  for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(outPipe[1]);
  close(errPipe[1]);
  if (spawned != 0) {
    close(outPipe[0]);
    close(errPipe[0]);
    throw std::runtime_error(fmt::format("cannot run {}: {}", binary, std::strerror(spawned)));
  }
  Captured c;
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  std::string* into[2] = {&c.out, &c.err};
  for (int open = 2; open > 0;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        into[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.status = status;
  return c;
}

/// The last non-empty line of `text`.
std::string lastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

}  // namespace

std::string modelBinary(const std::string& model) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the folder of the tessel binary: " + ec.message());
  const std::filesystem::path binary = self.parent_path() / ("tessel-" + model);
  if (!std::filesystem::exists(binary, ec))
    throw std::runtime_error(fmt::format("--model {} compiles the plan with {}, which is not next to tessel (build "
                                         "the target tessel-{})",
                                         model, binary.string(), model));
  return binary.string();
}

nlohmann::json compiledMemory(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<std::string> all = args;
  all.push_back("--memory-json");
  const Captured c = run(binary, all);
  const std::string name = std::filesystem::path(binary).filename().string();
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
    std::string why = lastLine(c.err);
    if (why.empty()) why = lastLine(c.out);
    if (why.empty())
      why = WIFSIGNALED(c.status) ? fmt::format("killed by signal {}", WTERMSIG(c.status)) : "no message";
    throw std::runtime_error(fmt::format("{} could not compile the plan: {}", name, why));
  }
  nlohmann::json j = nlohmann::json::parse(c.out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != "tessel-memory-compiled")
    throw std::runtime_error(fmt::format("{} {} printed no memory report (its output began: '{}')", name,
                                         fmt::join(all, " "), c.out.substr(0, 200)));
  return j;
}

}  // namespace tessel::cli
