// Rank bootstrap: who this process is in the job, and the world communicator.
//
// Promise: a plain run (no launcher in the environment) is rank 0 of a world of size 1 and
// never initialises MPI. A launcher is recognised from the variables it sets, first match
// wins:
//   OpenMPI's mpirun     OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
//   Slurm's srun         SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID (srun sets the
//                        step variables; a batch script alone does not, so running a binary
//                        directly inside an allocation stays a plain run)
//   Hydra (MPICH)        PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   PMIx launchers       PMIX_RANK (the world size comes from MPI once it starts)
// makeWorld returns a SingleCommunicator for a world of one and an MpiCommunicator otherwise;
// with MPI the rank, size and host-local rank come from MPI and must agree with the
// launcher's variables.
//
// Launching: `mpirun -np N prog` (OpenMPI 4.1) or `srun -n N prog`. When a rank dies, mpirun
// ends the job by sending the other ranks SIGTERM; each of them then prints the collective it
// was waiting for and the ranks that had not arrived (MpiCommunicator.h). Do not pass
// `--mca orte_abort_on_non_zero_status 0` or `--enable-recovery`: with them OpenMPI 4.1.4's
// mpirun keeps the job alive after a rank dies and can itself hang or exit with status 0
// after the survivors' timeouts (observed with a SIGKILLed rank).
#pragma once

#include "runtime/comm/Communicator.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tessel::rt {

/// This process's place in the job.
struct WorldInfo {
  int rank = 0;
  int size = 1;          // 0 while unknown (a PMIx launcher before MPI starts)
  int localRank = 0;     // index among the ranks on this host (pick a GPU with it); -1 unknown
  int localSize = 1;     // ranks on this host; 0 unknown
  std::string launcher = "none";  // "openmpi", "slurm", "hydra", "pmix" or "none"
  bool launched() const { return launcher != "none"; }
};

/// Reads the launcher variables through `getenv` (std::getenv by default). Throws CommError
/// naming the variable when one is not a valid integer or the rank is outside [0, size).
WorldInfo detectWorld(const std::function<const char*(const char*)>& getenv = {});

struct WorldOptions {
  double timeoutSeconds = 300.0;  // per collective (Communicator::setTimeout)
  bool reportOnSigterm = true;    // MpiCommunicator: print what this rank waited for on SIGTERM
};

/// The world: its description and its communicator.
struct World {
  WorldInfo info;
  std::unique_ptr<Communicator> comm;
};

/// detectWorld(), then the matching communicator (see the promise). Throws CommError if MPI
/// cannot start or disagrees with the launcher (e.g. a binary linked against OpenMPI started
/// by another MPI's launcher reports a world of 1).
World makeWorld(const WorldOptions& options = {});

/// Ends the process after a CommError: writes "tessel: rank R: <message>" and a newline to
/// stderr, then exits with status 1 without running destructors or MPI_Finalize (which would
/// wait for the failed peers).
[[noreturn]] void abortJob(int rank, std::string_view message);

}  // namespace tessel::rt
