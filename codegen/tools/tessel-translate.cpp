// tessel-translate: MLIR's translate driver for Tessel's code generators. It reads a module
// of the tessel dialect (typically the last stage `--dump-ir` writes, after tessel-fuse),
// lowers it the way the trainer does (codegen/Lowering.h) and prints what codegen made:
//
//   --tessel-to-cpp   the C++ kernel file (codegen/CppEmitter.h, FusedEmitter.h)
//   --tessel-to-cuda  the CUDA C++ kernel file (codegen/CudaEmitter.h)
//
// Both start with the step program of every function as comments, one step a line, so that
// FileCheck tests can see what has no kernel (GEMMs, copies, collectives) and which kernel
// each op became, with its buffers and, for CUDA, its launch:
//
//   // func @train_step: 41 steps, arena 12288 bytes
//   //   kernel k3_fused_add_layer_norm(%12, %13, %4, %9, %10) grid [8,1,1] block [64,1,1]
//   //   gemm %14 = %13 x wte.weight^T (batch 1, m 8, n 256, k 32)
//
// A program with a mesh starts with it, its pipeline stage if it is one ("// pipeline over
// pp: stage 0 of 2, 4 microbatches, 1 virtual stage(s), schedule 1f1b") and its sharded
// buffers ("// mesh dp=2,tp=2", "// sharded w [2, 8] of [4, 8]: dim 0 over [tp] in 1
// block(s), dim 1 whole"). A pipelined function's step list ends with its action spans
// ("//   action 0F2 steps [5, 9)").
// Then comes the kernel file itself, exactly as the program carries it (preamble first), so
// the output compiles as it stands. An op that has no kernel is an error at its location.
#include "codegen/Lowering.h"
#include "compiler/TesselDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace {

/// The buffer's name as the step listing shows it: "%12" for a temporary, the parameter,
/// state or input name otherwise.
std::string nameOf(const tessel::rt::Program& p, int id) {
  if (id < 0 || id >= static_cast<int>(p.buffers.size())) return fmt::format("<bad buffer {}>", id);
  return p.buffers[id].name;
}

std::string names(const tessel::rt::Program& p, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(nameOf(p, id));
  return fmt::format("{}", fmt::join(out, ", "));
}

/// One comment line per step of `fn`.
void printSteps(const tessel::rt::Program& p, const tessel::rt::Function& fn, llvm::raw_ostream& os) {
  namespace rt = tessel::rt;
  os << fmt::format("// func @{}: {} steps, arena {} bytes\n", fn.name, fn.steps.size(),
                    fn.arenaBytes);
  for (const rt::Step& step : fn.steps) {
    std::string line;
    if (const auto* k = std::get_if<rt::KernelStep>(&step)) {
      line = fmt::format("kernel {}({})", k->symbol, names(p, k->args));
      if (k->launch)
        line += fmt::format(" grid [{}] block [{}]", fmt::join(k->launch->grid, ","),
                            fmt::join(k->launch->block, ","));
    } else if (const auto* g = std::get_if<rt::GemmStep>(&step)) {
      line = fmt::format("gemm {} {}= {}{} x {}{} (batch {}, m {}, n {}, k {})", nameOf(p, g->c),
                         g->accumulate ? "+" : "", nameOf(p, g->a), g->transA ? "^T" : "",
                         nameOf(p, g->b), g->transB ? "^T" : "", g->batch, g->m, g->n, g->k);
    } else if (const auto* c = std::get_if<rt::CopyStep>(&step)) {
      line = fmt::format("copy {} = {}", nameOf(p, c->dst), nameOf(p, c->src));
    } else if (const auto* c = std::get_if<rt::CollectiveStep>(&step); c && c->movesShards()) {
      // "all_gather dim 1 over tp (2 ranks): %3 = %1 via %2" (via: the staging buffer)
      line = fmt::format("{}{}{} dim {}{} over {} ({} ranks): {} = {} via {} [{}]",
                         rt::collectiveKindName(rt::collectiveKindIndex(*c)),
                         c->phase == rt::CollectiveStep::Phase::Whole ? ""
                         : c->phase == rt::CollectiveStep::Phase::Start ? fmt::format("_start {}", c->bucket)
                                                                        : fmt::format("_wait {}", c->bucket),
                         c->kind == rt::CollectiveStep::Kind::ReduceScatter ? " " + c->reduce : "", c->dim,
                         c->kind == rt::CollectiveStep::Kind::AllToAll ? fmt::format(" concat dim {}", c->concatDim)
                                                                       : std::string(),
                         fmt::join(c->axes, ","), c->group, nameOf(p, c->tensors.at(1)), nameOf(p, c->tensors.at(0)),
                         nameOf(p, c->buffer), fmt::join(p.buffers.at(static_cast<size_t>(c->buffer)).shape, "x"));
    } else if (const auto* c = std::get_if<rt::CollectiveStep>(&step);
               c && c->kind == rt::CollectiveStep::Kind::SendRecv) {
      // "send_recv over pp (2 ranks): send %17 to 1 [SEND_F mb 1 chunk 0], recv %21 from 1 [...]"
      std::vector<std::string> transfers;
      for (size_t t = 0; t < c->tensors.size(); ++t)
        transfers.push_back(fmt::format("{} {} {} {}{}", static_cast<int64_t>(t) < c->sends ? "send" : "recv",
                                        nameOf(p, c->tensors[t]), static_cast<int64_t>(t) < c->sends ? "to" : "from",
                                        t < c->peers.size() ? std::to_string(c->peers[t]) : "?",
                                        t < c->names.size() ? " [" + c->names[t] + "]" : ""));
      line = fmt::format("send_recv over {} ({} ranks): {}", fmt::join(c->axes, ","), c->group,
                         fmt::join(transfers, ", "));
    } else if (const auto* c = std::get_if<rt::CollectiveStep>(&step)) {
      const bool start = c->kind == rt::CollectiveStep::Kind::AllReduceStart;
      line = fmt::format("all_reduce_{} {} over {} ({} ranks){}: {}", start ? "start" : "wait",
                         c->reduce, fmt::join(c->axes, ","), c->group,
                         c->synchronous ? fmt::format(", synchronous, bucket {}", c->bucket) : "",
                         names(p, c->tensors));
    }
    os << "//   " << line << "\n";
  }
  // Pipeline actions, each over its steps (0-based, end exclusive): "//   action 0F2 steps [5, 9)".
  for (const rt::ActionSpan& a : fn.actions)
    os << fmt::format("//   action {} steps [{}, {})\n", a.name, a.firstStep, a.endStep);
}

/// The program's mesh, its pipeline stage and its sharded buffers, one comment line each
/// (nothing without a mesh):
///   // mesh dp=2,tp=2
///   // sharded fc.weight [2, 8] of [4, 8]: dim 0 over [tp] in 1 block(s), dim 1 whole
void printMesh(const tessel::rt::Program& p, llvm::raw_ostream& os) {
  if (p.mesh.empty()) return;
  std::vector<std::string> axes;
  for (const tessel::rt::MeshAxis& a : p.mesh) axes.push_back(fmt::format("{}={}", a.name, a.size));
  os << fmt::format("// mesh {}\n", fmt::join(axes, ","));
  if (const auto& pp = p.pipeline)
    os << fmt::format("// pipeline over {}: stage {} of {}, {} microbatches, {} virtual stage(s), schedule {}\n",
                      pp->axis, pp->stage, pp->stages, pp->microbatches, pp->virtualStages, pp->schedule);
  for (const tessel::rt::Buffer& b : p.buffers) {
    if (!b.sharded()) continue;
    std::vector<std::string> dims;
    for (size_t d = 0; d < b.sharding.size(); ++d)
      dims.push_back(b.sharding[d].axes.empty()
                         ? fmt::format("dim {} whole", d)
                         : fmt::format("dim {} over [{}] in {} block(s)", d, fmt::join(b.sharding[d].axes, ","),
                                       b.sharding[d].blocks));
    os << fmt::format("// sharded {} [{}] of [{}]: {}\n", b.name, fmt::join(b.shape, ", "),
                      fmt::join(b.globalShape, ", "), fmt::join(dims, ", "));
  }
}

/// Lowers `module` (for the GPU too with `cuda`) and prints the steps and one kernel file.
mlir::LogicalResult translate(mlir::ModuleOp module, llvm::raw_ostream& os, bool cuda) {
  tessel::rt::Program program;
  tessel::LoweringOptions options;
  options.cuda = cuda;
  try {
    if (mlir::failed(tessel::lowerToProgram(module, program, options))) return mlir::failure();
    // What the runtime would check on load: a lowering that breaks an invariant is a bug.
    tessel::rt::validateProgram(program, "the lowered program");
  } catch (const std::exception& e) {  // an emitter's invalid_argument names the op
    return module.emitError() << e.what();
  }
  printMesh(program, os);
  for (const tessel::rt::Function& fn : program.functions) printSteps(program, fn, os);
  os << "\n" << (cuda ? program.cudaSource : program.kernelSource);
  return mlir::success();
}

void registerDialects(mlir::DialectRegistry& registry) { tessel::registerTesselDialects(registry); }

/// The translations named on the command line ("-tessel-to-cpp" or "--tessel-to-cuda", with
/// or without "=..."): more than one is a usage error, which MLIR's driver would report only
/// as a parse error of the option.
std::vector<std::string> translationsNamed(int argc, char** argv) {
  std::vector<std::string> named;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    arg.remove_prefix(std::min(arg.find_first_not_of('-'), arg.size()));
    arg = arg.substr(0, arg.find('='));
    if (arg == "tessel-to-cpp" || arg == "tessel-to-cuda") named.emplace_back(arg);
  }
  return named;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::vector<std::string> named = translationsNamed(argc, argv); named.size() > 1) {
    llvm::errs() << fmt::format("tessel-translate: error: --{} and --{} given together; choose one translation "
                                "(--tessel-to-cpp: C++ kernels, --tessel-to-cuda: CUDA kernels)\n",
                                named[0], named[1]);
    return 1;
  }
  mlir::TranslateFromMLIRRegistration toCpp(
      "tessel-to-cpp", "the C++ kernels (and step program) of a tessel module",
      [](mlir::ModuleOp m, llvm::raw_ostream& os) { return translate(m, os, /*cuda=*/false); },
      registerDialects);
  mlir::TranslateFromMLIRRegistration toCuda(
      "tessel-to-cuda", "the CUDA kernels (and step program) of a tessel module",
      [](mlir::ModuleOp m, llvm::raw_ostream& os) { return translate(m, os, /*cuda=*/true); },
      registerDialects);
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "Tessel kernel translator\n"));
}
