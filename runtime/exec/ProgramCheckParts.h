// Parts of validateProgram kept in files of their own (ProgramCheck.cpp runs them). Not a
// public interface: use validateProgram (Program.h).
#pragma once

#include "runtime/exec/Program.h"

#include <functional>
#include <string>

namespace tessel::rt {

/// Reports a failed check: (field, problem); must throw (validateProgram's "<context>:
/// <field>: <problem> (function '<name>')").
using CheckFailure = std::function<void(const std::string& field, const std::string& problem)>;

/// No two temps live at one step of `fn` share arena bytes (a temp is live from the first step
/// that names one to the last; a function output to the end): what the memory plan
/// guarantees, so an edited offset cannot make one temp overwrite another. Calls `fail` with
/// "buffers[<id>].offset" and both temps' byte ranges and the step otherwise.
void checkLiveTemps(const Program& program, const Function& fn, const CheckFailure& fail);

/// The step order of `fn`'s in-place buckets (Program.h CollectiveStep::inPlace): no tensor
/// is a view of two buckets; no step between a start and its wait names the buffer or a view;
/// no step after the start names (and no function output is) a start tensor that is not a wait
/// tensor; no step before the wait names a wait tensor that is not a start tensor. Calls `fail`
/// with "steps[<i>]" (or "outputs") and the tensor, bucket and steps otherwise. Time: the
/// function's step buffers once per in-place bucket.
void checkInPlaceBuckets(const Program& program, const Function& fn, const CheckFailure& fail);

}  // namespace tessel::rt
