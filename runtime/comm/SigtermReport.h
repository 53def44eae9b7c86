// The last words of a rank that its launcher terminates (internal to runtime/comm).
//
// When one rank dies, OpenMPI's mpirun (and srun) end the job by sending every other rank
// SIGCONT, SIGTERM and, shortly after, SIGKILL, long before a collective timeout could expire.
// The progress thread keeps a one-line status here (what this rank is waiting for and which
// ranks did not arrive); a SIGTERM handler writes it to stderr and then lets SIGTERM end the
// process as it would have. Reading the status in the handler is async-signal-safe: the text
// is published in two slots of atomic characters, each under a sequence lock.
#pragma once

#include <string>

namespace tessel::rt::comm {

/// Replaces the status line (truncated to 2047 bytes). Any thread; not from a signal handler.
void publishStatus(const std::string& line);

/// Blocks SIGTERM in the calling thread (the progress thread), so the handler runs on another
/// thread and never interrupts a publishStatus in progress.
void blockSigtermInThisThread();

/// Installs the SIGTERM handler if SIGTERM has its default action; returns whether it did.
bool installSigtermReport();
/// Restores the default action if installSigtermReport installed the handler.
void removeSigtermReport();

}  // namespace tessel::rt::comm
