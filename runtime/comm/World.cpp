// Rank bootstrap (see World.h).
#include "runtime/comm/World.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/SingleCommunicator.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <unistd.h>

namespace tessel::rt {
namespace {

using Env = std::function<const char*(const char*)>;

/// The integer value of `name`, or `fallback` when unset. Throws CommError when malformed.
int readInt(const Env& env, const char* name, int fallback) {
  const char* text = env(name);
  if (text == nullptr) return fallback;
  std::string_view s(text);
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < 0)
    throw CommError(fmt::format(
        "environment variable {}='{}' is not a non-negative integer (set by the launcher)", name,
        s));
  return value;
}

bool has(const Env& env, const char* name) { return env(name) != nullptr; }

}  // namespace

WorldInfo detectWorld(const std::function<const char*(const char*)>& getenv) {
  Env env = getenv ? getenv : Env([](const char* n) { return std::getenv(n); });
  WorldInfo w;
  const char* rankVar = nullptr;
  if (has(env, "OMPI_COMM_WORLD_SIZE") && has(env, "OMPI_COMM_WORLD_RANK")) {
    w.launcher = "openmpi";
    rankVar = "OMPI_COMM_WORLD_RANK";
    w.size = readInt(env, "OMPI_COMM_WORLD_SIZE", 1);
    w.rank = readInt(env, rankVar, 0);
    w.localRank = readInt(env, "OMPI_COMM_WORLD_LOCAL_RANK", -1);
    w.localSize = readInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 0);
  } else if (has(env, "SLURM_PROCID") && has(env, "SLURM_STEP_NUM_TASKS")) {
    w.launcher = "slurm";
    rankVar = "SLURM_PROCID";
    w.size = readInt(env, "SLURM_STEP_NUM_TASKS", 1);
    w.rank = readInt(env, rankVar, 0);
    w.localRank = readInt(env, "SLURM_LOCALID", -1);
    w.localSize = 0;
  } else if (has(env, "PMI_RANK") && has(env, "PMI_SIZE")) {
    w.launcher = "hydra";
    rankVar = "PMI_RANK";
    w.size = readInt(env, "PMI_SIZE", 1);
    w.rank = readInt(env, rankVar, 0);
    w.localRank = readInt(env, "MPI_LOCALRANKID", -1);
    w.localSize = readInt(env, "MPI_LOCALNRANKS", 0);
  } else if (has(env, "PMIX_RANK")) {
    w.launcher = "pmix";
    rankVar = "PMIX_RANK";
    w.size = 0;
    w.rank = readInt(env, rankVar, 0);
    w.localRank = -1;
    w.localSize = 0;
  } else {
    return w;  // a plain run
  }
  if (w.size == 0 && w.launcher != "pmix")
    throw CommError(fmt::format("the {} launcher reports a world of size 0", w.launcher));
  if (w.size > 0 && w.rank >= w.size)
    throw CommError(fmt::format("environment variable {}={} is outside the world of size {}",
                                rankVar, w.rank, w.size));
  if (w.size == 1 && w.localRank < 0) w.localRank = 0;
  if (w.size == 1 && w.localSize == 0) w.localSize = 1;
  return w;
}

World makeWorld(const WorldOptions& options) {
  World world;
  world.info = detectWorld();
  if (world.info.size == 1) {
    world.comm = std::make_unique<SingleCommunicator>();
    world.comm->setTimeout(options.timeoutSeconds);
    return world;
  }
  auto mpi = std::make_unique<MpiCommunicator>(
      MpiOptions{options.timeoutSeconds, options.reportOnSigterm});
  const WorldInfo& env = world.info;
  if ((env.size > 0 && mpi->worldSize() != env.size) || mpi->rank() != env.rank)
    throw CommError(fmt::format(
        "the launcher ({}) started rank {} of {}, but MPI reports rank {} of {}: this program "
        "uses OpenMPI; start it with OpenMPI's mpirun or srun --mpi=pmix",
        env.launcher, env.rank, env.size, mpi->rank(), mpi->worldSize()));
  world.info.size = mpi->worldSize();
  world.info.localRank = mpi->localRank();
  world.info.localSize = mpi->localSize();
  world.comm = std::move(mpi);
  return world;
}

void abortJob(int rank, std::string_view message) {
  std::string line = fmt::format("tessel: rank {}: {}\n", rank, message);
  // One write() so the line is not interleaved with other ranks' output.
  for (size_t done = 0; done < line.size();) {
    ssize_t n = write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  _exit(1);
}

}  // namespace tessel::rt
