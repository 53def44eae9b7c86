// The stand-in libnccl.so.2: exactly the NCCL functions Tessel's runtime calls
// (runtime/comm/NcclApi.h TESSEL_NCCL_FUNCTIONS), with NCCL 2.28's signatures from nccl.h.
// Tests only, never installed.
//
// Promise:
// - ncclGetUniqueId draws 16 random bytes; the ranks that pass the same id to
//   ncclCommInitRank form one communicator over sockets (Transport.h), whether they are
//   processes of one machine (as under mpirun) or threads of one process. ncclCommInitRank
//   blocks until every rank joined, or fails with ncclSystemError naming a rank that did not
//   join within TESSEL_STANDIN_NCCL_INIT_TIMEOUT seconds (default 120).
// - Arguments are checked as NCCL does before anything is queued: a null communicator or
//   buffer, a root or peer outside the communicator, a data type other than ncclFloat32,
//   ncclBfloat16 and ncclInt32, a reduction other than ncclSum, ncclAvg and ncclMax, and
//   overlapping buffers other than NCCL's in-place positions are ncclInvalidArgument with the
//   reason in ncclGetLastError. Nothing is guessed.
// - The work runs on the caller's stream (StreamOps.h); a count of 0 is a no-op.
// - ncclCommGetAsyncError reports a failed batch (a peer that ended: ncclRemoteError, ranks
//   calling different collectives: ncclInvalidUsage); after it, calls on that communicator
//   return that error.
// - ncclGetVersion reports the NCCL_VERSION_CODE of the nccl.h it was built with.
#include "test/standin/nccl/StreamOps.h"

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace tessel::standin::nccl;

namespace {

constexpr char kIdMagic[] = "tessel-standin-nccl";

const char* typeText(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    default: return "an unknown data type";
  }
}

bool dataType(ncclDataType_t t, DataType& out, const char* call) {
  switch (t) {
    case ncclFloat32: out = DataType::F32; return true;
    case ncclBfloat16: out = DataType::BF16; return true;
    case ncclInt32: out = DataType::I32; return true;
    default:
      fail(ncclInvalidArgument, std::string(call) + ": data type " + typeText(t) + " (" + std::to_string(t) +
                                    ") is not implemented by the stand-in (ncclFloat32, ncclBfloat16, ncclInt32 are)");
      return false;
  }
}

bool redOp(ncclRedOp_t op, RedOp& out, const char* call) {
  switch (op) {
    case ncclSum: out = RedOp::Sum; return true;
    case ncclAvg: out = RedOp::Avg; return true;
    case ncclMax: out = RedOp::Max; return true;
    default:
      fail(ncclInvalidArgument, std::string(call) + ": reduction " + std::to_string(op) +
                                    " is not implemented by the stand-in (ncclSum, ncclAvg, ncclMax are)");
      return false;
  }
}

/// The checks every operation shares; `rc` is the result to return when false.
bool usable(ncclComm_t comm, const char* call, ncclResult_t& rc) {
  if (!comm || !comm->state) {
    rc = fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
    return false;
  }
  if (int e = comm->state->asyncError; e != ncclSuccess) {
    rc = static_cast<ncclResult_t>(e);
    fail(rc, std::string(call) + ": the communicator failed earlier: " + lastError());
    return false;
  }
  return true;
}

CUdeviceptr address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

/// The checks every operation shares: the communicator, the data type and, for a reduction
/// (`op` not null), the reduction; fills o.type and o.op. ncclSuccess, or what to return.
ncclResult_t checkCall(ncclComm_t comm, const char* call, ncclDataType_t datatype, const ncclRedOp_t* op, Op& o) {
  ncclResult_t rc = ncclSuccess;
  if (!usable(comm, call, rc)) return rc;
  if (!dataType(datatype, o.type, call) || (op && !redOp(*op, o.op, call))) return ncclInvalidArgument;
  return ncclSuccess;
}

ncclResult_t badBuffer(const char* call, const char* why) {
  return fail(ncclInvalidArgument, std::string(call) + ": " + why);
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string text;
  text = lastError();
  return text.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdMagic, sizeof kIdMagic);
  std::random_device random;
  for (size_t i = 0; i < 16; i += 4) {
    const uint32_t r = random();
    std::memcpy(id->internal + 32 + i, &r, 4);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  if (nranks < 1) return fail(ncclInvalidArgument, "ncclCommInitRank: nranks " + std::to_string(nranks) + " < 1");
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " outside [0, " +
                                         std::to_string(nranks) + ")");
  if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the unique id was not made by the stand-in's ncclGetUniqueId");
  static const char hex[] = "0123456789abcdef";
  std::string key;
  for (int i = 32; i < 48; ++i) {
    key += hex[(id.internal[i] >> 4) & 15];
    key += hex[id.internal[i] & 15];
  }
  double timeout = 120;
  if (const char* t = std::getenv("TESSEL_STANDIN_NCCL_INIT_TIMEOUT"); t && *t) timeout = std::atof(t);
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->size = nranks;
  if (const char* f = std::getenv("TESSEL_STANDIN_NCCL_FAULT"); f && *f) {
    const std::string fault = f;
    if (fault == "no-compute-wait") state->fault = Fault::NoComputeWait;
    else if (fault == "no-done-wait") state->fault = Fault::NoDoneWait;
    else if (fault == "peer-exits") state->fault = Fault::PeerExits;
    else if (fault != "none")
      return fail(ncclInvalidArgument, "TESSEL_STANDIN_NCCL_FAULT=" + fault +
                                           " is not a planted fault (no-compute-wait, no-done-wait, peer-exits, none)");
  }
  try {
    state->transport = std::make_unique<SocketTransport>(key, rank, nranks, timeout);
  } catch (const TransportError& e) {
    return fail(ncclSystemError, "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                     "): " + e.what());
  }
  state->core = std::make_unique<Collectives>(*state->transport);
  *comm = new ncclComm{std::move(state)};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  {
    std::lock_guard<std::mutex> lock(comm->state->keptMutex);
    comm->state->kept.clear();
  }
  delete comm;  // queued batches hold the state until they ran
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // NCCL accepts a NULL communicator here
  comm->state->destroyed = true;
  comm->state->transport->abort();  // a blocked batch returns; peers see this rank leave
  return ncclCommDestroy(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!comm || !asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  *asyncError = static_cast<ncclResult_t>(comm->state->asyncError.load());
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return groupStart(); }
ncclResult_t ncclGroupEnd() { return groupEnd(); }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclAllReduce";
  Op o{Op::AllReduce, address(sendbuff), address(recvbuff), count};
  if (ncclResult_t rc = checkCall(comm, call, datatype, &op, o); rc != ncclSuccess) return rc;
  const size_t bytes = count * elementBytes(o.type);
  if (count > 0 && (!sendbuff || !recvbuff)) return badBuffer(call, "sendbuff or recvbuff is NULL");
  if (sendbuff != recvbuff && overlaps(o.send, bytes, o.recv, bytes))
    return badBuffer(call, "sendbuff and recvbuff overlap without being the same buffer (in place)");
  return enqueue(comm->state, stream, o);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclAllGather";
  Op o{Op::AllGather, address(sendbuff), address(recvbuff), sendcount};
  if (ncclResult_t rc = checkCall(comm, call, datatype, nullptr, o); rc != ncclSuccess) return rc;
  const size_t bytes = sendcount * elementBytes(o.type), n = static_cast<size_t>(comm->state->size);
  if (sendcount > 0 && (!sendbuff || !recvbuff)) return badBuffer(call, "sendbuff or recvbuff is NULL");
  if (o.send != o.recv + comm->state->rank * bytes && overlaps(o.send, bytes, o.recv, bytes * n))
    return badBuffer(call, "sendbuff overlaps recvbuff but is not at recvbuff + rank * sendcount (in place)");
  return enqueue(comm->state, stream, o);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclReduceScatter";
  Op o{Op::ReduceScatter, address(sendbuff), address(recvbuff), recvcount};
  if (ncclResult_t rc = checkCall(comm, call, datatype, &op, o); rc != ncclSuccess) return rc;
  const size_t bytes = recvcount * elementBytes(o.type), n = static_cast<size_t>(comm->state->size);
  if (recvcount > 0 && (!sendbuff || !recvbuff)) return badBuffer(call, "sendbuff or recvbuff is NULL");
  if (o.recv != o.send + comm->state->rank * bytes && overlaps(o.send, bytes * n, o.recv, bytes))
    return badBuffer(call, "recvbuff overlaps sendbuff but is not at sendbuff + rank * recvcount (in place)");
  return enqueue(comm->state, stream, o);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclBroadcast";
  Op o{Op::Broadcast, address(sendbuff), address(recvbuff), count};
  o.peer = root;
  if (ncclResult_t rc = checkCall(comm, call, datatype, nullptr, o); rc != ncclSuccess) return rc;
  if (root < 0 || root >= comm->state->size)
    return badBuffer(call, ("root " + std::to_string(root) + " outside the communicator").c_str());
  const size_t bytes = count * elementBytes(o.type);
  const bool isRoot = root == comm->state->rank;
  if (count > 0 && (!recvbuff || (isRoot && !sendbuff))) return badBuffer(call, "sendbuff or recvbuff is NULL");
  if (isRoot && sendbuff != recvbuff && overlaps(o.send, bytes, o.recv, bytes))
    return badBuffer(call, "sendbuff and recvbuff overlap without being the same buffer (in place)");
  return enqueue(comm->state, stream, o);
}

static ncclResult_t pointToPoint(Op::Kind kind, const void* buff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  const char* call = kind == Op::Send ? "ncclSend" : "ncclRecv";
  Op o{kind, address(buff), address(buff), count};
  o.peer = peer;
  if (ncclResult_t rc = checkCall(comm, call, datatype, nullptr, o); rc != ncclSuccess) return rc;
  if (peer < 0 || peer >= comm->state->size)
    return badBuffer(call, ("peer " + std::to_string(peer) + " outside the communicator").c_str());
  if (count > 0 && !buff) return badBuffer(call, "the buffer is NULL");
  return enqueue(comm->state, stream, o);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return pointToPoint(Op::Send, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return pointToPoint(Op::Recv, recvbuff, count, datatype, peer, comm, stream);
}

}  // extern "C"
