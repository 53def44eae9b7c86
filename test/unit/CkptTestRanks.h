// Ranks as threads for the checkpoint engine's unit tests (ThreadCommunicator.h) and the
// per-process folder their checkpoints go to.
#pragma once

#include "CkptTestModel.h"
#include "ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace tessel::test {

/// Runs fn(rank, world) on `n` threads (world: a ThreadCommunicator; null when `n` is 1 and
/// `nullWorld`); returns each rank's error text ("" when it returned normally).
inline std::vector<std::string> runRanks(int n, const std::function<void(int, rt::Communicator*)>& fn,
                                         bool nullWorld = false) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  ThreadGroup group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        fn(r, n == 1 && nullWorld ? nullptr : &comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

/// The folder of this process's test checkpoints, removed after the last test.
inline std::filesystem::path testFolder() {
  return std::filesystem::temp_directory_path() / ("tessel_ckpt_test_" + std::to_string(::getpid()));
}

/// Removes testFolder() when the tests end (kept on failure, to look at).
class RemoveTestFolder : public testing::Environment {
 public:
  void TearDown() override {
    if (!testing::UnitTest::GetInstance()->Failed()) std::filesystem::remove_all(testFolder());
  }
};
inline testing::Environment* const kRemoveTestFolder = testing::AddGlobalTestEnvironment(new RemoveTestFolder);

/// A fresh empty folder under testFolder().
inline std::string freshFolder(const std::string& name) {
  const std::filesystem::path dir = testFolder() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace tessel::test
