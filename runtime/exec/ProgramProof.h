// The whole program's communication proof before training: every rank's compiled program,
// read as the sequence of communication events it will issue (point-to-point groups,
// synchronous collectives, asynchronous starts and waits), checked together with every other
// rank's by runtime/pipeline's rendezvous verifier.
//
// Promise: a multi-rank run whose proof passes cannot hang on its own communication and
// issues no mismatched transfer or collective: every send has its recv with the same bytes,
// dtype and shape, the members of every group issue the same collectives in the same order,
// and no cycle of waits exists, with sends blocking until their recv is posted (rendezvous,
// as MPI for large messages and NCCL). This holds for every plan (dp, tp, fsdp, pp and their
// mixes), not only for pipelines: ranks of different pipeline stages run different programs,
// and the proof is the one place where they are checked against each other. A failing proof
// stops every rank before the first training step with the same message.
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceMesh.h"  // MeshLayout
#include "runtime/exec/Program.h"
#include "runtime/pipeline/Verify.h"  // CommEvent, VerifyResult

#include <string>
#include <vector>

namespace tessel::rt {

/// The communication events of `function` of `program` as world rank `rank` of `mesh` issues
/// them, in step order (empty when the program has no such function):
///   - a send_recv step: one P2P event, one transfer per tensor (send for the first `sends`),
///     the peer's world rank being `rank`'s coordinates with the step's axis coordinate
///     replaced by peers[i], with the tensor's bytes, dtype and shape;
///   - a synchronous all-reduce (its start; the wait right after it adds nothing): one
///     Collective of the group MeshLayout::groupRanks(rank, axes), op "all_reduce <reduce>";
///   - a gradient bucket's start and wait: Start and Wait with slot = bucket, op
///     "all_reduce <reduce>";
///   - an all_gather / reduce_scatter / all_to_all in one step: one Collective, op naming the
///     kind and its dimension(s) ("all_gather dim 0", "reduce_scatter sum dim 0",
///     "all_to_all dim 1 concat 2"), bytes and dtype of its input; the split all_gather's
///     halves: Start and Wait with slot = bucket.
/// A program without a mesh communicates over the whole world: every group is all ranks of
/// `mesh`. Labels name the function, the step and what it moves:
/// "@train_step step 41: all_reduce 'blocks.0.attn.proj' over tp". Throws std::runtime_error
/// if a step's axis is not one of `mesh`'s, or a peer is outside it.
std::vector<pipeline::CommEvent> commEvents(const Program& program, const std::string& function,
                                            const MeshLayout& mesh, int rank);

/// The proof of `function` over the world: every rank computes its own events (commEvents on
/// the program's mesh, or on a one-axis mesh of the world for a program without one),
/// serialises them (JSON) and all-gathers them (their sizes as I32, then the bytes padded to
/// whole I32 words), then every rank runs pipeline::verifyEvents on all ranks' lists.
/// Collective over `world`: every rank must call it, with the same function, in the same
/// order. Returns what was checked. Throws std::runtime_error "the compiled program can hang
/// or mismatch: <the verifier's message>" (which names the rank, the event index and its
/// label) on every rank alike when the proof fails, and CommError when the exchange fails.
pipeline::VerifyResult proveProgram(const Program& mine, Communicator& world, const std::string& function);

/// What the training loop runs, proved in its order: @train_step, @accumulate_step (when the
/// program has it) and @forward (validation). Collective over `world`; a world of one rank
/// proves nothing and returns an empty result. Throws as proveProgram.
pipeline::VerifyResult proveTraining(const Program& mine, Communicator& world);

/// The line rank 0 prints after proveTraining: "proof: N events on W ranks (P send/recv
/// groups, C collectives): no rank can hang, every transfer and collective matches\n".
std::string proofLine(const pipeline::VerifyResult& result, int world);

}  // namespace tessel::rt
