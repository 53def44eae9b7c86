// Lowering a tessel module to an rt::Program; see Lowering.h.
//
// Per function, in op order:
//   1. tessel.param -> the persistent Parameter/State buffer of that name;
//      function arguments -> Input buffers named "<function>.<input>".
//   2. tessel.reshape -> an alias of its operand's buffer (no step).
//   3. tessel.matmul and tessel.matmul_epilogue -> a GemmStep (GemmLowering.h: batch, strides
//      from the shapes; a rank-2 rhs is shared; the epilogue's buffers).
//   4. tessel.assign -> a CopyStep into the parameter; the copy is placed right after the last
//      reader of the old value, so that every read sees the value from before the call.
//      Except clipped AdamW updates that may run in place (MultiTensorAdamW.h): consecutive
//      ones with the same scalars become one multi-tensor kernel writing the parameters and
//      moments directly, and their assignments no copy.
//   5. every other op -> a KernelStep calling its generated C++ kernel, and the kernel's
//      signature (each argument's dtype and element count) in Program::kernels; identical kernels
//      (same source up to comments) share one symbol, k<n>_<op> (k<n>_fused_<ops> for a
//      fused region: KernelCommon.h fusedKernelName). For the CUDA target the op's CUDA
//      kernel is emitted too, its launch goes on the step, and sharing needs both sources
//      to agree.
//      A CUDA kernel that sums across blocks also gets the function's scratch temp as its
//      last argument (CudaEmitter.h): one temp for all of them, live from a step that
//      zeroes its counter, before the first, to the last; each leaves the counter 0.
//   6. tessel.all_reduce_start/wait -> CollectiveSteps over a flat f32 bucket temp, live
//      from the start to the wait (the gradients are copied in and out by the executor,
//      unless planTemps makes the bucket in place: BucketViews.h),
//      over the op's grid axes (by name; Program::mesh is the grid: MeshLowering.h).
//      tessel.all_reduce -> a synchronous start and, at the next step, its wait over a
//      one-tensor bucket, numbered after the function's gradient buckets;
//      tessel.replicate -> an alias of its operand's buffer (the identity forward);
//      tessel.all_gather / reduce_scatter / all_to_all -> one CollectiveStep each
//      (ShardMoveLowering.h) with a staging temp live for that step only.
//   7. Temporaries live from their defining step to their last use (function results to the
//      end); planMemory gives their arena offsets (through planTemps, BucketViews.h).
#include "codegen/Lowering.h"

#include "codegen/BucketViews.h"
#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitter.h"
#include "codegen/FusedEmitter.h"
#include "codegen/GemmLowering.h"
#include "codegen/KernelCommon.h"
#include "codegen/MeshLowering.h"
#include "codegen/MultiTensorAdamW.h"
#include "codegen/PipelineLowering.h"
#include "codegen/ShardMoveLowering.h"
#include "compiler/FunctionAttrs.h"
#include "compiler/Location.h"
#include "compiler/TesselDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <cassert>
#include <map>
#include <set>
#include <sstream>

namespace tessel {
namespace {

std::vector<int64_t> shapeOf(mlir::Value v) {
  auto s = mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}

rt::DType dtypeOf(mlir::Value v) {
  mlir::Type e = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  return e.isInteger(32) ? rt::DType::I32 : e.isBF16() ? rt::DType::BF16 : rt::DType::F32;
}

/// Source without comments (kernels contain no string literals with "//"): the key under
/// which identical kernels, e.g. the same op in every transformer block, share one symbol.
std::string withoutComments(const std::string& src) {
  std::istringstream in(src);
  std::string line, out;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find("//"));
    if (line.find_first_not_of(' ') != std::string::npos) out += line + "\n";
  }
  return out;
}

class Lowerer {
 public:
  Lowerer(rt::Program& p, const LoweringOptions& options) : program_(p), options_(options) {}

  mlir::LogicalResult lower(mlir::func::FuncOp f);
  void finish() {
    program_.kernelSource = cppKernelPreamble() + fusedKernelPreamble() + kernels_;
    if (options_.cuda) program_.cudaSource = cudaKernelPreamble() + cudaKernels_;
  }

 private:
  int addBuffer(rt::Buffer b) {
    program_.buffers.push_back(std::move(b));
    return static_cast<int>(program_.buffers.size()) - 1;
  }
  int temp(mlir::Value v, size_t step) {
    rt::Buffer b;
    b.name = fmt::format("%{}", program_.buffers.size());
    b.dtype = dtypeOf(v);
    b.shape = shapeOf(v);
    b.kind = rt::BufferKind::Temp;
    if (mlir::Operation* def = v.getDefiningOp()) b.location = locationString(def->getLoc());
    int id = addBuffer(std::move(b));
    live_[id] = {static_cast<int64_t>(step), static_cast<int64_t>(step)};
    temps_.push_back(id);
    return id;
  }
  /// A temp without an IR value (a bucket).
  int tempOf(std::vector<int64_t> shape, rt::DType dtype, std::string location, size_t step) {
    rt::Buffer b;
    b.name = fmt::format("%{}", program_.buffers.size());
    b.dtype = dtype;
    b.shape = std::move(shape);
    b.kind = rt::BufferKind::Temp;
    b.location = std::move(location);
    int id = addBuffer(std::move(b));
    live_[id] = {static_cast<int64_t>(step), static_cast<int64_t>(step)};
    temps_.push_back(id);
    return id;
  }
  /// The nearest op before (after = true) or after a collective that is not a collective
  /// or a param: "after 'tessel.matmul' at loc" / "before 'tessel.global_norm' at loc".
  static std::string anchor(mlir::Operation* op, bool after) {
    mlir::Operation* n = after ? op->getPrevNode() : op->getNextNode();
    while (n &&
           (mlir::isa<AllReduceStartOp, AllReduceWaitOp, AllReduceOp, ReplicateOp, ParamOp>(n) || isShardMove(n)))
      n = after ? n->getPrevNode() : n->getNextNode();
    if (!n) return after ? "at the start of the function" : "at the end of the function";
    return fmt::format("{} '{}' at {}", after ? "after" : "before", n->getName().getStringRef().str(),
                       locationString(n->getLoc()));
  }
  void use(int id, size_t step) {
    auto it = live_.find(id);
    if (it != live_.end()) it->second.second = std::max<int64_t>(it->second.second, step);
  }
  static void rename(std::string& src, const std::string& symbol) {
    size_t at = 0;
    while ((at = src.find("TESSEL_KERNEL", at)) != std::string::npos) src.replace(at, 13, symbol);
  }
  /// The symbol of `op`'s kernel (and with options_.cuda, its launch in *launch and the
  /// bytes of scratch its CUDA kernel takes in *scratchBytes, else 0).
  std::string kernelSymbol(mlir::Operation* op, std::optional<rt::LaunchConfig>* launch,
                           int64_t* scratchBytes) {
    *scratchBytes = 0;
    auto fused = mlir::dyn_cast<FusedOp>(op);
    std::string src = fused ? emitFusedCppKernel(fused, "TESSEL_KERNEL")
                            : emitCppKernel(op, "TESSEL_KERNEL");
    std::string key = withoutComments(src);
    CudaKernel cuda;
    if (options_.cuda) {
      cuda = emitCudaKernel(op, "TESSEL_KERNEL");
      const CudaLaunch& l = cuda.launch;
      *launch = launchOf(l);
      *scratchBytes = cuda.scratchBytes;
      key += "\n// ---- cuda ----\n" + withoutComments(cuda.source) +
             fmt::format("// launch {} {} {} {} {} {} {}\n", l.grid[0], l.grid[1], l.grid[2],
                         l.block[0], l.block[1], l.block[2], l.sharedBytes);
    }
    auto it = symbols_.find(key);
    if (it != symbols_.end()) return it->second;
    // k<n>_<what it computes>: the op's name, or for a fused region the ops it fuses.
    std::string symbol = fmt::format("k{}_{}", symbols_.size(),
                                     fused ? kernelcommon::fusedKernelName(fused)
                                           : op->getName().stripDialect().str());
    rename(src, symbol);
    kernels_ += src + "\n";
    if (options_.cuda) {
      rename(cuda.source, symbol);
      cudaKernels_ += cuda.source + "\n";
    }
    symbols_.emplace(std::move(key), symbol);
    return symbol;
  }

  /// The step of one multi-tensor AdamW kernel over `group` (MultiTensorAdamW.h), its
  /// arguments' buffers looked up in `buffer`.
  rt::KernelStep multiTensorAdamW(const std::vector<AdamWUpdate>& group,
                                  const llvm::DenseMap<mlir::Value, int>& buffer) {
    rt::KernelStep k;
    std::string src = emitMultiTensorAdamWCpp(group, "TESSEL_KERNEL");
    std::string key = withoutComments(src);
    CudaKernel cuda;
    if (options_.cuda) {
      cuda = emitMultiTensorAdamWCuda(group, "TESSEL_KERNEL");
      k.launch = launchOf(cuda.launch);
      key += "\n// ---- cuda ----\n" + withoutComments(cuda.source);
    }
    auto it = symbols_.find(key);
    if (it == symbols_.end()) {
      std::string symbol = fmt::format("k{}_multi_tensor_adamw", symbols_.size());
      rename(src, symbol);
      kernels_ += src + "\n";
      if (options_.cuda) {
        rename(cuda.source, symbol);
        cudaKernels_ += cuda.source + "\n";
      }
      it = symbols_.emplace(std::move(key), symbol).first;
    }
    k.symbol = it->second;
    for (const AdamWUpdate& u : group)
      for (mlir::Value v : {u.param, u.expAvg, u.expAvgSq}) k.args.push_back(buffer.at(v));
    for (const AdamWUpdate& u : group) k.args.push_back(buffer.at(u.grad));
    k.args.push_back(buffer.at(group.front().coef));
    for (mlir::Value v : group.front().hyper) k.args.push_back(buffer.at(v));
    std::vector<rt::KernelArg> signature;
    for (int id : k.args) signature.push_back({program_.buffers[id].dtype, program_.buffers[id].numel()});
    recordSignature(k.symbol, signature);
    std::vector<std::string> locations;
    for (const AdamWUpdate& u : group) locations.push_back(locationString(u.op->getLoc()));
    k.location = fmt::format("{}", fmt::join(locations, "; "));
    return k;
  }

  static rt::LaunchConfig launchOf(const CudaLaunch& l) {
    return {{l.grid[0], l.grid[1], l.grid[2]}, {l.block[0], l.block[1], l.block[2]}, l.sharedBytes};
  }
  /// The kernel step that zeroes the counter of `scratch` (one symbol for the program).
  rt::KernelStep scratchReset(int scratch, const std::string& location) {
    if (resetSymbol_.empty()) {
      resetSymbol_ = fmt::format("k{}_reset_scratch", symbols_.size());
      symbols_.emplace("// scratch reset", resetSymbol_);  // counts as a symbol, matches no kernel
      kernels_ += emitScratchResetCpp(resetSymbol_) + "\n";
      CudaKernel reset = emitScratchReset(resetSymbol_);
      cudaKernels_ += reset.source + "\n";
      resetLaunch_ = launchOf(reset.launch);
    }
    rt::KernelStep k;
    k.symbol = resetSymbol_;
    k.args = {scratch};
    recordSignature(k.symbol, {{rt::DType::F32, 1, /*atLeast=*/true}});  // the block counter
    k.location = location;
    k.launch = resetLaunch_;
    return k;
  }

  /// Records `symbol`'s argument list in Program::kernels (the first call decides; a symbol
  /// is shared only by identical sources, which fix the same arguments).
  void recordSignature(const std::string& symbol, const std::vector<rt::KernelArg>& signature) {
    auto [known, fresh] = program_.kernels.emplace(symbol, signature);
    assert((fresh || known->second == signature) && "one kernel symbol with two signatures");
    (void)known, (void)fresh;
  }

  rt::Program& program_;
  LoweringOptions options_;
  std::string resetSymbol_;           // the scratch reset kernel, once emitted
  rt::LaunchConfig resetLaunch_;       // and its launch
  std::string kernels_, cudaKernels_;
  std::map<std::string, std::string> symbols_;
  std::map<std::string, int> persistent_;  // parameter/state name -> buffer
  std::map<int, std::pair<int64_t, int64_t>> live_;
  std::vector<int> temps_;
};

mlir::LogicalResult Lowerer::lower(mlir::func::FuncOp f) {
  rt::Function fn;
  fn.name = f.getSymName().str();
  live_.clear();
  temps_.clear();
  int scratch = -1;        // the scratch of the CUDA two-level sums (5a), once needed
  int64_t scratchMax = 0;  // bytes: the most any of them needs
  llvm::DenseMap<mlir::Value, int> buffer;
  mlir::Block& body = f.getBody().front();

  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto name = inputName(f, i);
    rt::Buffer b;
    b.name = fmt::format("{}.{}", fn.name, name ? name.str() : fmt::format("arg{}", i));
    b.dtype = dtypeOf(arg);
    b.shape = shapeOf(arg);
    b.kind = rt::BufferKind::Input;
    int id = addBuffer(std::move(b));
    buffer[arg] = id;
    fn.inputs.push_back(id);
  }

  // Last reader (step index) of each parameter value, for placing assignment copies.
  std::vector<mlir::Operation*> ops;
  for (mlir::Operation& op : body) ops.push_back(&op);
  llvm::DenseMap<mlir::Operation*, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i]] = i;
  std::map<std::string, size_t> lastRead;
  std::set<std::string> assigned;
  std::map<size_t, std::vector<std::pair<int, int>>> pendingCopies;  // op index -> copies after it
  llvm::DenseMap<mlir::Value, rt::CollectiveStep> asyncGathers;       // in-flight value -> its Start
  llvm::DenseSet<mlir::Operation*> p2pDone;  // transfers already emitted with their group
  // Synchronous all-reduces are numbered after the gradient buckets the IR numbers, and the
  // in-flight slots of asynchronous all-gathers after every all-reduce (the executors index
  // one in-flight table by these numbers; all-reduce buckets must be 0 .. n-1).
  int nextBucket = 0, nextGatherSlot = 0;
  for (mlir::Operation* op : ops)
    if (auto start = mlir::dyn_cast<AllReduceStartOp>(op))
      nextBucket = std::max(nextBucket, static_cast<int>(start.getBucket()) + 1);
  nextGatherSlot = nextBucket;
  for (mlir::Operation* op : ops) nextGatherSlot += mlir::isa<AllReduceOp>(op);

  // 4. In-place AdamW updates waiting to be emitted as one kernel (at the next op that is
  // neither one of them nor an assignment), the action of the first, and their assignments.
  std::vector<AdamWUpdate> group;
  std::string groupAction;
  llvm::DenseSet<mlir::Operation*> inPlaceAssigns;
  auto flushGroup = [&] {
    if (group.empty()) return;
    const auto first = static_cast<int64_t>(fn.steps.size());
    rt::KernelStep k = multiTensorAdamW(group, buffer);
    for (int id : k.args) use(id, fn.steps.size());
    fn.steps.push_back(std::move(k));
    if (!groupAction.empty()) {
      if (!fn.actions.empty() && fn.actions.back().name == groupAction && fn.actions.back().endStep == first)
        fn.actions.back().endStep = first + 1;
      else
        fn.actions.push_back({groupAction, first, first + 1});
    }
    group.clear();
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    mlir::Operation* op = ops[i];
    std::optional<AdamWUpdate> u;
    if (options_.multiTensorAdamW && !pendingCopies.count(i)) u = matchInPlaceAdamW(op, index);  // (copies due after it: never, in practice)
    if (u) {
      if (!group.empty() && (!group.front().sameScalars(*u) || group.size() >= kMultiTensorAdamWMax ||
                             actionName(op) != groupAction))
        flushGroup();
      if (group.empty()) groupAction = actionName(op);
      group.push_back(*u);
      for (mlir::Operation* a : u->assigns) inPlaceAssigns.insert(a);
      continue;
    }
    if (!mlir::isa<AssignOp>(op)) flushGroup();
    size_t step = fn.steps.size();
    if (auto p = mlir::dyn_cast<ParamOp>(op)) {
      std::string name = p.getName().str();
      auto it = persistent_.find(name);
      if (it == persistent_.end()) {
        rt::Buffer b;
        b.name = name;
        b.shape = shapeOf(p.getResult());
        b.kind = p.getState() ? rt::BufferKind::State : rt::BufferKind::Parameter;
        if (!p.getState()) {  // optimizer state is always zero-initialised by the runtime
          b.init = stringifyInitKind(p.getInit()).str();
          if (auto s = p.getStd()) b.stddev = s->convertToDouble();
        }
        b.location = locationString(p.getLoc());
        // A sharded parameter's (and its optimizer state's) layout in the global tensor.
        if (mlir::failed(lowerParamSharding(p, b))) return mlir::failure();
        it = persistent_.emplace(name, addBuffer(std::move(b))).first;
      }
      buffer[p.getResult()] = it->second;
      size_t last = i;
      for (mlir::Operation* user : p.getResult().getUsers()) last = std::max(last, index[user]);
      lastRead[name] = last;
      continue;
    }
    if (auto mc = mlir::dyn_cast<MeshCoordinateOp>(op)) {
      // A rank's coordinate is filled by the executor once (rt::BufferKind::Coordinate);
      // one buffer per (axes, stride), shared by every function.
      llvm::SmallVector<llvm::StringRef> names = gridAxisNames(mc, mc.getGridAttr(), mc.getGridAxes());
      std::vector<std::string> axes(names.begin(), names.end());
      std::string name = fmt::format("mesh_coordinate[{}]*{}", fmt::join(axes, ","), mc.getStride());
      auto it = persistent_.find(name);
      if (it == persistent_.end()) {
        rt::Buffer b;
        b.name = name;
        b.dtype = rt::DType::I32;
        b.kind = rt::BufferKind::Coordinate;
        b.coordinateAxes = axes;
        b.coordinateStride = static_cast<int64_t>(mc.getStride());
        b.location = locationString(mc.getLoc());
        it = persistent_.emplace(name, addBuffer(std::move(b))).first;
      }
      buffer[mc.getResult()] = it->second;
      continue;
    }
    auto operandIds = [&]() {
      std::vector<int> ids;
      for (mlir::Value v : op->getOperands()) {
        ids.push_back(buffer.at(v));
        use(buffer.at(v), step);
      }
      return ids;
    };
    std::string action = actionName(op);  // its schedule action, for the function's spans
    if (p2pDone.contains(op)) {
      // 6. Emitted with the first transfer of its group.
    } else if (mlir::isa<SendOp, RecvOp>(op)) {
      // 6. A group of pipeline transfers: one send_recv step, sends' operands then recvs'
      // results (fresh temps, written by this step).
      mlir::FailureOr<llvm::SmallVector<mlir::Operation*>> members = p2pGroup(ops, i);
      if (mlir::failed(members)) return mlir::failure();
      llvm::SmallVector<mlir::Operation*> ordered;
      rt::CollectiveStep c = lowerP2PGroup(*members, ordered);
      std::vector<std::string> actions;
      for (mlir::Operation* m : ordered) {
        p2pDone.insert(m);
        if (auto send = mlir::dyn_cast<SendOp>(m)) {
          c.tensors.push_back(buffer.at(send.getInput()));
          use(buffer.at(send.getInput()), step);
        } else {
          auto recv = mlir::cast<RecvOp>(m);
          c.tensors.push_back(buffer[recv.getResult()] = temp(recv.getResult(), step));
        }
        if (std::string a = actionName(m); !a.empty()) actions.push_back(a);
      }
      action = fmt::format("{}", fmt::join(actions, "+"));
      fn.steps.push_back(std::move(c));
    } else if (auto r = mlir::dyn_cast<ReshapeOp>(op)) {
      buffer[r.getResult()] = buffer.at(r.getInput());
    } else if (auto rep = mlir::dyn_cast<ReplicateOp>(op)) {
      buffer[rep.getResult()] = buffer.at(rep.getInput());  // the identity forward (Megatron's f)
    } else if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
        fn.outputs.push_back(buffer.at(v));
        auto name = outputName(f, k);
        fn.outputNames.push_back(name ? name.str() : fmt::format("result{}", k));
      }
      for (int id : fn.outputs) use(id, ops.size() + 1);  // results outlive every step
    } else if (auto a = mlir::dyn_cast<AssignOp>(op)) {
      if (!assigned.insert(a.getName().str()).second)
        return a.emitOpError() << "assigns \"" << a.getName() << "\" a second time";
      if (!inPlaceAssigns.contains(op)) {  // else written by its multi-tensor AdamW kernel
        int src = buffer.at(a.getValue()), dst = persistent_.at(a.getName().str());
        size_t after = std::max(i, lastRead[a.getName().str()]);
        pendingCopies[after].emplace_back(src, dst);
      }
    } else if (mlir::isa<MatmulOp, MatmulEpilogueOp>(op)) {
      std::vector<int> in = operandIds(), out;
      for (mlir::Value r : op->getResults()) out.push_back(buffer[r] = temp(r, step));
      rt::GemmStep g = lowerGemm(op, in, out);  // GemmLowering.h
      g.location = locationString(op->getLoc());
      fn.steps.push_back(g);
    } else if (options_.cuda && (mlir::isa<FusedOp>(op) || hasCppKernel(op)) && !hasCudaKernel(op)) {
      auto diag = op->emitError() << "'" << op->getName()
                                  << "' has no CUDA kernel; it cannot be compiled for the GPU";
      if (mlir::isa<CausalAttentionGradOp, GroupedAttentionGradOp>(op))
        diag << " (the attention backward kernel keeps at most 4096 query rows of one kv head, "
                "G * T, and D <= 256; compile with decompose_attention instead)";
      return diag;
    } else if (auto ar = mlir::dyn_cast<AllReduceOp>(op)) {
      // 6. A synchronous all-reduce: a one-tensor bucket started and waited for at once.
      std::vector<int> in = operandIds();
      if (program_.buffers[in[0]].dtype != rt::DType::F32)
        return ar.emitOpError() << "only f32 tensors can be all-reduced";
      rt::CollectiveStep c;
      c.kind = rt::CollectiveStep::Kind::AllReduceStart;
      c.bucket = nextBucket++;
      c.buffer = tempOf({program_.buffers[in[0]].numel()}, rt::DType::F32, locationString(op->getLoc()), step);
      c.tensors = in;
      c.names = {locationPath(op->getLoc())};
      c.reduce = stringifyReduceKind(ar.getReduce()).str();
      c.axes = axisNames(op, ar.getGridAttr(), ar.getGridAxes());
      c.group = ar.getGroupSize();
      c.synchronous = true;
      c.location = locationString(op->getLoc());
      c.anchor = anchor(op, /*after=*/true);
      rt::CollectiveStep w = c;
      w.kind = rt::CollectiveStep::Kind::AllReduceWait;
      w.names.clear();
      w.anchor = anchor(op, /*after=*/false);
      fn.steps.push_back(std::move(c));
      use(w.buffer, fn.steps.size());
      w.tensors = {buffer[ar.getResult()] = temp(ar.getResult(), fn.steps.size())};
      fn.steps.push_back(std::move(w));
    } else if (auto gs = mlir::dyn_cast<AllGatherStartOp>(op)) {
      // 6. The Start of an asynchronous all-gather (FSDP prefetch): its input, staging temp
      //    and output stay live until its wait, as the communicator uses them in between.
      mlir::FailureOr<ShardMove> move = lowerShardMove(op);
      if (mlir::failed(move)) return mlir::failure();
      rt::CollectiveStep c = std::move(move->step);
      int in = operandIds()[0];
      if (program_.buffers[in].shape != shapeOf(op->getOperand(0))) {  // as for a one-step move
        int shaped = temp(op->getOperand(0), step);
        fn.steps.push_back(rt::CopyStep{in, shaped});
        in = shaped;
        step = fn.steps.size();
        use(in, step);
      }
      c.bucket = nextGatherSlot++;
      c.buffer = tempOf({move->stagingNumel}, program_.buffers[in].dtype, c.location, step);
      c.tensors = {in, buffer[gs.getInFlight()] = temp(gs.getInFlight(), step)};
      asyncGathers[gs.getInFlight()] = c;
      fn.steps.push_back(std::move(c));
    } else if (auto gw = mlir::dyn_cast<AllGatherWaitOp>(op)) {
      rt::CollectiveStep w = asyncGathers.at(gw.getInFlight());
      w.phase = rt::CollectiveStep::Phase::Wait;
      w.location = locationString(op->getLoc());
      for (int id : {w.tensors[0], w.tensors[1], w.buffer}) use(id, step);
      buffer[gw.getResult()] = w.tensors[1];
      fn.steps.push_back(std::move(w));
    } else if (isShardMove(op)) {
      // 6. A collective that moves shards: one step, repacking through its staging temp.
      mlir::FailureOr<ShardMove> move = lowerShardMove(op);
      if (mlir::failed(move)) return mlir::failure();
      rt::CollectiveStep c = std::move(move->step);
      int in = operandIds()[0];
      // A reshape aliases its operand's buffer, whose shape the step's dimension would then
      // not index: such an input is first copied into a buffer of the operand's own shape.
      if (program_.buffers[in].shape != shapeOf(op->getOperand(0))) {
        int shaped = temp(op->getOperand(0), step);
        fn.steps.push_back(rt::CopyStep{in, shaped});
        in = shaped;
        step = fn.steps.size();
        use(in, step);
      }
      c.buffer = tempOf({move->stagingNumel}, program_.buffers[in].dtype, c.location, step);
      c.tensors = {in, buffer[op->getResult(0)] = temp(op->getResult(0), step)};
      fn.steps.push_back(std::move(c));
    } else if (auto start = mlir::dyn_cast<AllReduceStartOp>(op)) {
      // 6. A bucket: a flat f32 temp from the start to the wait; the in-flight values are
      //    the bucket itself. The runtime addresses a group by its axis names and size;
      //    both derive from the op's grid (verified to resolve).
      std::vector<int> in = operandIds();
      rt::CollectiveStep c;
      c.kind = rt::CollectiveStep::Kind::AllReduceStart;
      int64_t total = 0;
      for (int id : in) {
        if (program_.buffers[id].dtype != rt::DType::F32)
          return start.emitOpError() << "only f32 tensors can be all-reduced";
        total += program_.buffers[id].numel();
      }
      c.buffer = tempOf({total}, rt::DType::F32, locationString(op->getLoc()), step);
      for (mlir::Value r : start.getInFlight()) buffer[r] = c.buffer;
      c.bucket = static_cast<int>(start.getBucket());
      c.tensors = in;
      for (mlir::Attribute a : start.getParams())
        c.names.push_back(mlir::cast<mlir::StringAttr>(a).str());
      c.reduce = stringifyReduceKind(start.getReduce()).str();
      c.axes = axisNames(op, start.getGridAttr(), start.getGridAxes());
      c.group = start.getGroupSize();
      c.location = locationString(op->getLoc());
      c.anchor = anchor(op, /*after=*/true);
      fn.steps.push_back(std::move(c));
    } else if (auto wait = mlir::dyn_cast<AllReduceWaitOp>(op)) {
      operandIds();  // the bucket lives until here
      auto start = wait.getInFlight()[0].getDefiningOp<AllReduceStartOp>();
      rt::CollectiveStep c;
      c.kind = rt::CollectiveStep::Kind::AllReduceWait;
      c.bucket = static_cast<int>(start.getBucket());
      c.buffer = buffer.at(wait.getInFlight()[0]);
      for (mlir::Value r : wait.getResults()) c.tensors.push_back(buffer[r] = temp(r, step));
      c.reduce = stringifyReduceKind(start.getReduce()).str();
      c.axes = axisNames(start, start.getGridAttr(), start.getGridAxes());
      c.group = start.getGroupSize();
      c.location = locationString(op->getLoc());
      c.anchor = anchor(op, /*after=*/false);
      fn.steps.push_back(std::move(c));
    } else if (mlir::isa<FusedOp>(op) || hasCppKernel(op)) {
      rt::KernelStep k;
      int64_t scratchBytes = 0;
      k.symbol = kernelSymbol(op, &k.launch, &scratchBytes);
      k.location = locationString(op->getLoc());
      if (scratchBytes > 0) {
        // 5a. A CUDA two-level sum's scratch: the function's scratch temp, created with a
        //     step that zeroes its counter before the first such kernel; each one leaves
        //     the counter 0 again, so the next finds it ready. Sized for the largest.
        if (scratch < 0) {
          scratch = tempOf({1}, rt::DType::F32, k.location, step);
          fn.steps.push_back(scratchReset(scratch, k.location));
          step = fn.steps.size();
        }
        scratchMax = std::max(scratchMax, scratchBytes);
        use(scratch, step);
      }
      std::vector<int> in = operandIds();
      for (mlir::Value r : op->getResults()) k.args.push_back(buffer[r] = temp(r, step));
      k.args.insert(k.args.end(), in.begin(), in.end());
      // The signature the runtime checks every call against. Steps share a symbol only when
      // their sources agree, and the source fixes every argument's element count and type.
      // The scratch (sized for the function's largest sum only when the function is done)
      // is recorded as the least this kernel needs.
      std::vector<rt::KernelArg> signature;
      for (int id : k.args) signature.push_back({program_.buffers[id].dtype, program_.buffers[id].numel()});
      if (scratchBytes > 0) {
        k.args.push_back(scratch);
        signature.push_back({rt::DType::F32, (scratchBytes + 3) / 4, /*atLeast=*/true});
      }
      recordSignature(k.symbol, signature);
      fn.steps.push_back(std::move(k));
    } else {
      return op->emitError() << "'" << op->getName()
                             << (options_.cuda ? "' has no CUDA kernel; it cannot be compiled for the GPU"
                                               : "' has no C++ kernel; it cannot be compiled for the CPU");
    }
    if (!action.empty() && fn.steps.size() > step) {
      const auto now = static_cast<int64_t>(fn.steps.size());
      if (!fn.actions.empty() && fn.actions.back().name == action && fn.actions.back().endStep == static_cast<int64_t>(step))
        fn.actions.back().endStep = now;
      else
        fn.actions.push_back({action, static_cast<int64_t>(step), now});
    }
    // Assignment copies whose last reader was this op.
    auto pending = pendingCopies.find(i);
    if (pending != pendingCopies.end()) {
      for (auto [src, dst] : pending->second) {
        use(src, fn.steps.size());
        fn.steps.push_back(rt::CopyStep{src, dst});
      }
      pendingCopies.erase(pending);
    }
  }

  flushGroup();  // (a function ends with its return, which flushed already)
  if (scratch >= 0) program_.buffers[scratch].shape = {(scratchMax + 3) / 4};
  fn.arenaBytes = planTemps(program_, fn, temps_, live_, options_.inPlaceBuckets);
  fn.batchShards = batchShards(f);
  program_.functions.push_back(std::move(fn));
  return mlir::success();
}

/// Fails, at the op or function, on a tensor whose shape is not static: every buffer gets a
/// fixed size and every kernel constant extents, so `?` (or an unranked tensor) has no lowering.
mlir::LogicalResult requireStaticShapes(mlir::func::FuncOp f) {
  auto dynamic = [](mlir::Type t) {
    auto tensor = mlir::dyn_cast<mlir::TensorType>(t);
    return tensor && !tensor.hasStaticShape();
  };
  for (mlir::Type t : f.getFunctionType().getInputs())
    if (dynamic(t))
      return f.emitError() << "@" << f.getSymName() << " takes " << t
                           << ": codegen needs static shapes (every buffer has a fixed size)";
  for (mlir::Type t : f.getFunctionType().getResults())
    if (dynamic(t))
      return f.emitError() << "@" << f.getSymName() << " returns " << t
                           << ": codegen needs static shapes (every buffer has a fixed size)";
  mlir::WalkResult walk = f.walk([&](mlir::Operation* op) {
    for (mlir::Type t : op->getResultTypes())
      if (dynamic(t)) {
        op->emitError() << "'" << op->getName() << "' makes " << t
                        << ": codegen needs static shapes (every buffer has a fixed size)";
        return mlir::WalkResult::interrupt();
      }
    return mlir::WalkResult::advance();
  });
  return mlir::failure(walk.wasInterrupted());
}

}  // namespace

mlir::LogicalResult lowerToProgram(mlir::ModuleOp module, rt::Program& program,
                                   const LoweringOptions& options) {
  auto functions = module.getOps<mlir::func::FuncOp>();
  if (functions.empty())
    return module.emitError() << "the module has no func.func to lower: codegen translates the functions of a "
                                 "tessel module (such as the last stage --dump-ir writes)";
  for (auto f : functions)
    if (mlir::failed(requireStaticShapes(f))) return mlir::failure();
  mlir::FailureOr<std::vector<rt::MeshAxis>> mesh = lowerMesh(module);
  if (mlir::failed(mesh)) return mlir::failure();
  program.mesh = std::move(*mesh);
  program.pipeline = programPipeline(module);
  Lowerer lowerer(program, options);
  for (auto f : functions)
    if (mlir::failed(lowerer.lower(f))) return mlir::failure();
  lowerer.finish();
  return mlir::success();
}

}  // namespace tessel
