// A communicator whose collectives take device pointers and run in stream order on a GPU
// (the NCCL backend, runtime/comm/NcclCommunicator.h). The GPU executor recognises one by
// this interface (dynamic_cast), so it needs no link dependency on NCCL.
#pragma once

#include "runtime/comm/Communicator.h"

namespace tessel::rt {

class StreamCommunicator : public Communicator {
public:
  /// The CUDA device ordinal the communicator's buffers must live on.
  virtual int device() const = 0;
  /// The stream (a CUstream of the device's primary context, passed as void* so this header
  /// needs no CUDA header) that produces the buffers and consumes the results: every
  /// collective starts after the work enqueued on it before the issue, and Work::wait() makes
  /// it wait for the collective. nullptr: the legacy default stream.
  virtual void setComputeStream(void* stream) = 0;
};

}  // namespace tessel::rt
