// CUDA kernels of the layout ops (transpose, split, concat, broadcast, embedding: one thread
// per element, or per 4 elements with 16-byte accesses where rows allow, in grid-stride
// loops; a transpose that moves the contiguous dimension goes through 32 x 32 shared-memory
// tiles) and of the sums across rows (reduce_sum/mean: one thread per output, or one warp
// per output when the summed elements are contiguous; embedding_grad: one thread per
// channel and range of vocabulary rows; global_norm: one block). Index spaces are simplified
// at emit time as in the C++ kernels (cppgen::simplify). Sums are deterministic: no atomics,
// each output is accumulated by one thread (or one fixed warp tree) in a fixed order, in
// double where the C++ kernel uses double.
#include "codegen/CudaEmitterInternal.h"
#include "codegen/KernelCommonSlice.h"  // defines: declareDynamicSlice

#include <fmt/format.h>

#include <algorithm>

namespace tessel::cudagen {

using cppgen::Group;

namespace {

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

/// A grid-stride loop over `work` items with index j (the body's text, indented inside).
std::string loop(int64_t work, const std::string& body) {
  return fmt::format(
             "for (idx_t j = static_cast<idx_t>(blockIdx.x) * THREADS + threadIdx.x; j < {};\n"
             "     j += static_cast<idx_t>(gridDim.x) * THREADS) {{\n",
             work) +
         indent(body, 2) + "}\n";
}

/// A 16-byte path (vecWork items, vecBody) taken when every pointer in `aligned` is 16-byte
/// aligned, else the scalar loop (work items, body) over the same grid; sets the launch.
void flatLoops(CudaWriter& w, const std::vector<std::string>& aligned, int64_t vecWork,
               const std::string& vecBody, int64_t work, const std::string& body,
               std::string_view why) {
  std::vector<std::string> checks;
  for (const std::string& p : aligned) checks.push_back(fmt::format("tessel_aligned16({})", p));
  w.code(fmt::format("if ({}) {{  // 128-bit accesses\n", fmt::join(checks, " && ")) +
         indent(loop(vecWork, vecBody), 2) + "} else {\n" + indent(loop(work, body), 2) + "}\n");
  unsigned threads = flatThreads(vecWork);
  w.launch(flatBlocks(vecWork, threads), threads, why);
}

}  // namespace

void flatLoop(CudaWriter& w, int64_t work, const std::string& body, std::string_view why) {
  w.code(loop(work, body));
  unsigned threads = flatThreads(work);
  w.launch(flatBlocks(work, threads), threads, why);
}

void emitTranspose(CudaWriter& w) {
  auto op = mlir::cast<TransposeOp>(w.op());
  std::vector<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  llvm::ArrayRef<int64_t> perm = op.getPermutation();
  Letters inLetters = genericLetters(in.size()), outLetters;
  for (int64_t p : perm) outLetters.push_back(inLetters[p]);
  w.kind(CudaKernelKind::Layout);
  w.describe(fmt::format("out[i...] = inp[i permuted], permutation [{}]", fmt::join(perm, ", ")));
  w.output("out", op.getResult(), outLetters);
  w.input("inp", op.getInput(), inLetters);
  std::string type = cppgen::elementType(op.getInput()), vec = vectorType(op.getInput());
  std::vector<int64_t> inStrides = cppgen::stridesOf(in);
  std::vector<Group> groups;
  for (size_t i = 0; i < out.size(); ++i) groups.push_back({out[i], false, inStrides[perm[i]], 0});
  groups = cppgen::simplify(groups, false);
  if (groups.empty()) {
    w.code("if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = inp[0];\n");
    w.launch(1, 32, "one element");
    return;
  }
  const Group& last = groups.back();
  if (last.inStride == 1) {  // rows stay contiguous: copy them, 16 bytes at a time if possible
    std::vector<Group> outer(groups.begin(), groups.end() - 1);
    w.constant("I", last.size, "elements per contiguous row");
    int64_t work = sizeOf(outer) * last.size;
    std::string body = indexCode("j / I", outer, "ib", "") + "out[j] = inp[ib + j % I];\n";
    if (last.size % 4 != 0) {
      flatLoop(w, work, body, "one thread per element");
      return;
    }
    flatLoops(w, {"out", "inp"}, work / 4,
              indexCode("j / (I / 4)", outer, "ib", "") +
                  fmt::format("reinterpret_cast<{0}*>(out)[j] = reinterpret_cast<const {0}*>(inp)"
                              "[ib / 4 + j % (I / 4)];\n",
                              vec),
              work, body, "one thread per 16 bytes of a contiguous row");
    return;
  }
  // The input's contiguous dimension is group j: 32 x 32 tiles of (j, last) pass through
  // shared memory, so both the reads (along j) and the writes (along last) are coalesced.
  size_t j = 0;
  while (groups[j].inStride != 1) ++j;
  std::vector<Group> outer;
  for (size_t k = 0; k + 1 < groups.size(); ++k)
    if (k != j) outer.push_back(groups[k]);
  int64_t na = (groups[j].size + 31) / 32, nb = (last.size + 31) / 32;
  w.constant("OUTER", sizeOf(outer));
  w.constant("SA", groups[j].size, "the input's contiguous dimension");
  w.constant("OSA", groups[j].outStride, "its output stride");
  w.constant("SB", last.size, "the output's contiguous dimension");
  w.constant("ISB", last.inStride, "its input stride");
  w.constant("NA", na, "tiles along SA");
  w.constant("NB", nb, "tiles along SB");
  w.code(R"cuda(__shared__ $T tile[32][33];  // padded: the column reads hit 32 different banks
for (idx_t o = blockIdx.y; o < OUTER; o += gridDim.y) {
$DECOMPOSE  for (idx_t t = blockIdx.x; t < NA * NB; t += gridDim.x) {
    const idx_t a0 = t % NA * 32, b0 = t / NA * 32;
    for (int k = threadIdx.y; k < 32; k += 8) {  // read along the input's contiguous SA
      const idx_t a = a0 + threadIdx.x, b = b0 + k;
      if (a < SA && b < SB) tile[k][threadIdx.x] = inp[ib + a + b * ISB];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += 8) {  // write along the output's contiguous SB
      const idx_t b = b0 + threadIdx.x, a = a0 + k;
      if (a < SA && b < SB) out[ob + a * OSA + b] = tile[threadIdx.x][k];
    }
    __syncthreads();  // the tile is reused by the next one
  }
}
)cuda",
         {{"T", type}, {"DECOMPOSE", indent(indexCode("o", outer, "ib", "ob"), 2)}});
  int64_t maxBlocks = kResidentThreads / 256, gx = std::clamp<int64_t>(na * nb, 1, maxBlocks);
  w.launch(static_cast<unsigned>(gx), 32,
           "one block per 32 x 32 tile (x) and outer position (y), grid-stride over both",
           static_cast<unsigned>(
               std::clamp<int64_t>(sizeOf(outer), 1, std::max<int64_t>(maxBlocks / gx, 1))),
           1, 8);
}

void emitSplit(CudaWriter& w) {
  auto op = mlir::cast<SplitOp>(w.op());
  std::vector<int64_t> in = shapeOf(op.getInput());
  int64_t axis = static_cast<int64_t>(op.getAxis()), parts = op.getNumResults();
  int64_t inner = product(in, axis + 1, in.size()), outer = product(in, 0, axis);
  int64_t piece = in[axis] / parts * inner;
  Letters letters = genericLetters(in.size());
  w.kind(CudaKernelKind::Layout);
  w.describe(
      fmt::format("outs[p] = part p of {} equal parts of inp along dimension {}", parts, axis));
  for (int64_t p = 0; p < parts; ++p) w.output(fmt::format("outs{}", p), op.getResult(p), letters);
  w.input("inp", op.getInput(), letters);
  std::string vec = vectorType(op.getInput());
  w.constant("P", parts);
  w.constant("PIECE", piece, "elements of one part per row");
  std::string body = "const idx_t o = j / PIECE, k = j % PIECE;\n",
              vecBody = "const idx_t o = j / (PIECE / 4), k = j % (PIECE / 4);\n";
  for (int64_t p = 0; p < parts; ++p) {
    body += fmt::format("outs{0}[j] = inp[(o * P + {0}) * PIECE + k];\n", p);
    vecBody += fmt::format(
        "reinterpret_cast<{0}*>(outs{1})[j] = reinterpret_cast<const {0}*>(inp)"
        "[(o * P + {1}) * (PIECE / 4) + k];\n",
        vec, p);
  }
  if (piece % 4 != 0) {
    flatLoop(w, outer * piece, body, "one thread per element of every part");
    return;
  }
  std::vector<std::string> aligned{"inp"};
  for (int64_t p = 0; p < parts; ++p) aligned.push_back(fmt::format("outs{}", p));
  flatLoops(w, aligned, outer * piece / 4, vecBody, outer * piece, body,
            "one thread per 16 bytes of every part");
}

void emitDynamicSlice(CudaWriter& w) {
  w.kind(CudaKernelKind::Layout);
  kernelcommon::declareDynamicSlice(w);
  flatLoop(w, numel(shapeOf(mlir::cast<DynamicSliceOp>(w.op()).getResult())),
           "const idx_t first = offset[0] < 0 ? 0 : offset[0] > D - R ? D - R : offset[0];\n"
           "out[j] = inp[first * ROW + j];\n",
           "one thread per element of the block");
}

void emitConcat(CudaWriter& w) {
  auto op = mlir::cast<ConcatOp>(w.op());
  std::vector<int64_t> out = shapeOf(op.getResult());
  int64_t axis = static_cast<int64_t>(op.getAxis()), k = op.getNumOperands();
  int64_t inner = product(out, axis + 1, out.size()), outer = product(out, 0, axis);
  Letters letters = genericLetters(out.size());
  std::vector<int64_t> widths, offsets;
  bool v4 = true;
  for (mlir::Value v : op.getInputs()) {
    offsets.push_back(widths.empty() ? 0 : offsets.back() + widths.back());
    widths.push_back(shapeOf(v)[axis] * inner);
    v4 = v4 && widths.back() % 4 == 0;
  }
  w.kind(CudaKernelKind::Layout);
  w.describe(fmt::format("out = the {} inputs joined along dimension {}", k, axis));
  w.output("out", op.getResult(), letters);
  for (int64_t i = 0; i < k; ++i) w.input(fmt::format("ins{}", i), op.getOperand(i), letters);
  std::string vec = vectorType(op.getResult());
  w.constant("ROW", out[axis] * inner, "elements of an output row");
  // One loop per input over its own elements (an input's part of a row is contiguous).
  auto loops = [&](int64_t d) {
    std::string code;
    for (int64_t i = 0; i < k; ++i) {
      if (widths[i] == 0) continue;
      std::string store = d == 4
                              ? fmt::format(
                                    "reinterpret_cast<{0}*>(out)[o * (ROW / 4) + {1} + e] = "
                                    "reinterpret_cast<const {0}*>(ins{2})[j];\n",
                                    vec, offsets[i] / 4, i)
                              : fmt::format("out[o * ROW + {} + e] = ins{}[j];\n", offsets[i], i);
      code += fmt::format("// ins{}\n", i) +
              loop(outer * widths[i] / d,
                   fmt::format("const idx_t o = j / {0}, e = j % {0};\n", widths[i] / d) + store);
    }
    return code;
  };
  int64_t work = outer * out[axis] * inner / std::max<int64_t>(k, 1);  // per input, about
  if (!v4) {
    w.code(loops(1));
    unsigned threads = flatThreads(work);
    w.launch(flatBlocks(work, threads), threads,
             "one thread per element of each input (grid-stride)");
    return;
  }
  std::vector<std::string> checks{"tessel_aligned16(out)"};
  for (int64_t i = 0; i < k; ++i) checks.push_back(fmt::format("tessel_aligned16(ins{})", i));
  w.code(fmt::format("if ({}) {{  // 128-bit accesses\n", fmt::join(checks, " && ")) +
         indent(loops(4), 2) + "} else {\n" + indent(loops(1), 2) + "}\n");
  unsigned threads = flatThreads(work / 4);
  w.launch(flatBlocks(work / 4, threads), threads,
           "one thread per 16 bytes of each input (grid-stride)");
}

void emitBroadcast(CudaWriter& w) {
  auto op = mlir::cast<BroadcastOp>(w.op());
  std::vector<int64_t> out = shapeOf(op.getResult()), in = shapeOf(op.getInput());
  llvm::ArrayRef<int64_t> dims = op.getDims();
  std::vector<bool> inserted(out.size(), false);
  for (int64_t d : dims) inserted[d] = true;
  Letters outLetters = genericLetters(out.size()), inLetters;
  for (size_t d = 0; d < out.size(); ++d)
    if (!inserted[d]) inLetters.push_back(outLetters[d]);
  w.kind(CudaKernelKind::Layout);
  w.describe(
      fmt::format("out = inp repeated along the new dimensions [{}]", fmt::join(dims, ", ")));
  w.output("out", op.getResult(), outLetters);
  w.input("inp", op.getInput(), inLetters);
  std::vector<int64_t> inStrides = cppgen::stridesOf(in);
  std::vector<Group> groups;
  for (size_t d = 0, k = 0; d < out.size(); ++d)
    groups.push_back({out[d], inserted[d], inserted[d] ? 0 : inStrides[k++], 0});
  groups = cppgen::simplify(groups, /*outFlag=*/false);
  if (groups.empty()) {
    w.code("if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = inp[0];\n");
    w.launch(1, 32, "one element");
    return;
  }
  const Group& last = groups.back();
  std::vector<Group> outer(groups.begin(), groups.end() - 1);
  int64_t work = sizeOf(outer) * last.size, i = last.size;  // i: elements per output row
  // The innermost dimension new: one input element fills the row; else rows are copied.
  std::string body =
      indexCode(fmt::format("j / {}", i), outer, "ib", "") +
      (last.flag ? "out[j] = inp[ib];\n" : fmt::format("out[j] = inp[ib + j % {}];\n", i));
  if (i % 4 != 0 || (last.flag && cppgen::elementType(op.getResult()) != "float")) {
    flatLoop(w, work, body, "one thread per element");
    return;
  }
  std::string vecBody =
      indexCode(fmt::format("j / {}", i / 4), outer, "ib", "") +
      (last.flag
           ? "const float v = inp[ib];\nreinterpret_cast<float4*>(out)[j] = make_float4(v, v, v, "
             "v);\n"
           : fmt::format("reinterpret_cast<float4*>(out)[j] = reinterpret_cast<const float4*>(inp)"
                         "[ib / 4 + j % {}];\n",
                         i / 4));
  flatLoops(w, last.flag ? std::vector<std::string>{"out"} : std::vector<std::string>{"out", "inp"},
            work / 4, vecBody, work, body, "one thread per 16 bytes of the output");
}

void emitEmbedding(CudaWriter& w) {
  auto op = mlir::cast<EmbeddingOp>(w.op());
  std::vector<int64_t> table = shapeOf(op.getTable());
  Letters idx = cppgen::leadingLetters(shapeOf(op.getIndices()).size());
  Letters outLetters = idx;
  outLetters.push_back("C");
  int64_t n = numel(shapeOf(op.getIndices()));
  w.kind(CudaKernelKind::Layout);
  w.describe("out[n, :] = table[indices[n], :]; an index outside [0, V) gives a NaN row");
  w.output("out", op.getResult(), outLetters);
  w.input("table", op.getTable(), {"V", "C"});
  w.input("indices", op.getIndices(), idx);
  w.constant("V", table[0]);
  w.constant("C", table[1]);
  std::string body =
      "const int32_t v = indices[j / C];\n"
      "out[j] = v >= 0 && v < V ? table[v * C + j % C] : NAN;\n";
  if (table[1] % 4 != 0 || cppgen::elementType(op.getTable()) != "float") {
    flatLoop(w, n * table[1], body, "one thread per element");
    return;
  }
  flatLoops(w, {"out", "table"}, n * table[1] / 4,
            "const int32_t v = indices[j / (C / 4)];\n"
            "reinterpret_cast<float4*>(out)[j] = v >= 0 && v < V\n"
            "    ? reinterpret_cast<const float4*>(table)[v * (C / 4) + j % (C / 4)]\n"
            "    : make_float4(NAN, NAN, NAN, NAN);\n",
            n * table[1], body, "one thread per 16 bytes of the output");
}

void emitEmbeddingGrad(CudaWriter& w) {
  auto op = mlir::cast<EmbeddingGradOp>(w.op());
  std::vector<int64_t> table = shapeOf(op.getResult());
  Letters idx = cppgen::leadingLetters(shapeOf(op.getIndices()).size());
  Letters gradLetters = idx;
  gradLetters.push_back("C");
  int64_t n = numel(shapeOf(op.getIndices()));
  w.describe("dtable[v, :] = sum of dout[n, :] over n with indices[n] == v, in index order;");
  w.describe("deterministic: each thread owns a channel of a range of vocabulary rows and scans");
  w.describe("every index in order (no atomics). Indices outside [0, V) are skipped.");
  w.output("dtable", op.getResult(), {"V", "C"});
  w.input("indices", op.getIndices(), idx);
  w.input("dout", op.getGrad(), gradLetters);
  w.constant("N", n, "indices");
  w.constant("V", table[0]);
  w.constant("C", table[1]);
  scatterRows(w, table[0], table[1], "indices[n]");
}

void scatterRows(CudaWriter& w, int64_t v, int64_t c, const std::string& index) {
  const bool bf16Table = cppgen::elementType(w.op()->getResult(0)) == "tessel_bf16";
  // Threads own (channel, range of vocabulary rows) pairs: ~32 Ki threads in all, each
  // scanning every index and adding the rows in its range, in index order, in f32: the same
  // additions in the same order as the C++ kernel, so the same bits.
  int64_t ranges = std::clamp<int64_t>((32768 + c - 1) / std::max<int64_t>(c, 1), 1, v);
  w.kind(CudaKernelKind::Reduction);
  w.constant("RANGES", ranges, "ranges of vocabulary rows");
  flatLoop(w, c * ranges,
           std::string("const idx_t i = j % C, range = j / C;\n"
                       "const idx_t v0 = V * range / RANGES, v1 = V * (range + 1) / RANGES;\n") +
               replaceAll(
                   bf16Table
                       // f32 sums for a bf16 table (one rounding per element), a scan per row:
                       // slow, and unused by mixed precision, whose tables stay f32
                       // (MixedPrecision.cpp).
                       ? "for (idx_t v = v0; v < v1; ++v) {\n"
                         "  float acc = 0.0f;\n"
                         "  for (idx_t n = 0; n < N; ++n)\n"
                         "    if ($INDEX == v) acc += dout[n * C + i];\n"
                         "  dtable[v * C + i] = acc;\n"
                         "}\n"
                       : "for (idx_t v = v0; v < v1; ++v) dtable[v * C + i] = 0.0f;\n"
                         "for (idx_t n = 0; n < N; ++n) {\n"
                         "  const idx_t v = $INDEX;\n"
                         "  if (v >= v0 && v < v1) dtable[v * C + i] += dout[n * C + i];\n"
                         "}\n",
                   "$INDEX", index),
           "one thread per channel and range of vocabulary rows");
}

void emitReduce(CudaWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value input = op->getOperand(0);
  std::vector<int64_t> in = shapeOf(input);
  const kernelcommon::ReducePlan plan =
      kernelcommon::reducePlan(op, genericLetters(in.size()));
  w.kind(CudaKernelKind::Reduction);
  kernelcommon::declareReduce(w, plan);
  const std::vector<Group>& groups = plan.groups;
  if (groups.empty()) {
    w.code(
        "if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = static_cast<float>(inp[0] * SCALE);\n");
    w.launch(1, 32, "one element");
    return;
  }
  const Group& last = groups.back();
  std::vector<Group> kept, summed;
  for (size_t k = 0; k + 1 < groups.size(); ++k)
    (groups[k].flag ? summed : kept).push_back(groups[k]);
  w.constant("NQ", sizeOf(summed), "outer reduced positions");
  if (last.flag) {
    // The innermost group is summed: one warp per output, lanes striding over each run of RI
    // contiguous elements, each lane in double, then a fixed butterfly over the lanes.
    int64_t nout = sizeOf(kept);
    w.constant("NOUT", nout, "outputs");
    w.constant("RI", last.size, "contiguous elements summed per run");
    w.code(R"cuda(const int lane = threadIdx.x % 32;
for (idx_t o = (static_cast<idx_t>(blockIdx.x) * THREADS + threadIdx.x) / 32; o < NOUT;
     o += static_cast<idx_t>(gridDim.x) * (THREADS / 32)) {
$DECOMPOSE  double acc = 0.0;
  for (idx_t q = 0; q < NQ; ++q) {
$DECOMPOSEQ    const auto* p = inp + ib + qb;
    for (idx_t i = lane; i < RI; i += 32) acc += p[i];
  }
  acc = tessel_warp_sum_d(acc);
  if (lane == 0) out[o] = static_cast<float>(acc * SCALE);
}
)cuda",
           {{"DECOMPOSE", indent(indexCode("o", kept, "ib", ""), 2)},
            {"DECOMPOSEQ", indent(indexCode("q", summed, "qb", ""), 4)}});
    unsigned threads = flatThreads(nout * 32);
    w.launch(flatBlocks(nout * 32, threads), threads, "one warp per output (grid-stride)");
    return;
  }
  // The innermost group is kept: one thread per output, summing its column over the reduced
  // positions in order (neighbouring threads read neighbouring elements). With few outputs
  // (a bias gradient [N, C] -> [C]), the reduced positions are also cut into QC chunks of
  // at least 32, so that chunks x outputs (~64 Ki threads) fill the GPU: each thread sums one
  // chunk of one column, and the chunk sums are added in chunk order (lastBlockCombine).
  // The chunking depends only on the shape: the result does not depend on the grid.
  int64_t nout = sizeOf(kept) * last.size, nq = sizeOf(summed);
  int64_t qc = std::clamp<int64_t>(std::min<int64_t>(65536 / std::max<int64_t>(nout, 1), nq / 32),
                                   1, std::max<int64_t>(nq, 1));
  int64_t qlen = (nq + qc - 1) / qc;
  qc = qlen == 0 ? 1 : (nq + qlen - 1) / qlen;  // no empty chunk
  w.constant("KI", last.size, "contiguous outputs");
  std::string column = indexCode("o / KI", kept, "ib", "") + "double acc = 0.0;\n";
  std::string position =
      indent(indexCode("q", summed, "qb", ""), 2) + "  acc += inp[ib + qb + o % KI];\n";
  if (qc == 1) {
    flatLoop(w, nout,
             "const idx_t o = j;\n" + column + "for (idx_t q = 0; q < NQ; ++q) {\n" + position +
                 "}\n" + "out[o] = static_cast<float>(acc * SCALE);\n",
             "one thread per output (grid-stride)");
    return;
  }
  w.constant("NOUT", nout, "outputs");
  w.constant("QC", qc, "chunks of the reduced positions");
  w.constant("QLEN", qlen, "reduced positions per chunk");
  flatLoop(w, qc * nout,
           "const idx_t c = j / NOUT, o = j % NOUT;\n" + column +
               "const idx_t q1 = (c + 1) * QLEN < NQ ? (c + 1) * QLEN : NQ;\n"
               "for (idx_t q = c * QLEN; q < q1; ++q) {\n" +
               position + "}\n" + "chunkSums[c * NOUT + o] = acc;\n",
           "one thread per chunk of an output column (grid-stride)");
  w.code(lastBlockCombine(
      w, "double", qc * nout,
      "for (idx_t o = threadIdx.x; o < NOUT; o += THREADS) {\n"
      "  double sum = 0.0;\n"
      "  #pragma unroll 4  // a trip count that grows with the shapes: bounded registers\n"
      "  for (idx_t c = 0; c < QC; ++c) sum += partial[c * NOUT + o];\n"
      "  out[o] = static_cast<float>(sum * SCALE);\n"
      "}\n"));
}

void emitGlobalNorm(CudaWriter& w) {
  auto op = mlir::cast<GlobalNormOp>(w.op());
  // Each input goes in chunks of 8 Ki elements (as tessel_sum_squares in the C++ kernels);
  // a chunk's squares are summed in double by one block (a fixed tree), and the chunk sums
  // in order, input by input, by the block that finishes last (lastBlockCombine).
  constexpr int64_t kChunk = 8192;
  w.kind(CudaKernelKind::Reduction);
  w.describe("norm = sqrt(sum of x^2 over every element of every input), in double (squares of");
  w.describe("floats are exact there): per chunk of 8 Ki elements of an input, then the chunks");
  w.describe("in order");
  w.output("norm", op.getResult(), {});
  int64_t chunks = 0;
  std::string loops;
  for (auto [k, v] : llvm::enumerate(op.getInputs())) {
    std::string name = fmt::format("grads{}", k);
    w.input(name, v, genericLetters(shapeOf(v).size()));
    int64_t n = numel(shapeOf(v)), nc = (n + kChunk - 1) / kChunk;
    if (n == 0) continue;
    loops += fmt::format(
        "for (idx_t ch = blockIdx.x; ch < {0}; ch += gridDim.x) {{  // {1}: {2} elements\n"
        "  double acc = 0.0;\n"
        "  const idx_t end = ch * CHUNK + CHUNK < {2} ? ch * CHUNK + CHUNK : {2};\n"
        "  for (idx_t i = ch * CHUNK + threadIdx.x; i < end; i += THREADS) {{\n"
        "    const double x = {1}[i];\n"
        "    acc += x * x;\n"
        "  }}\n"
        "{3}"
        "  if (threadIdx.x == 0) $STORE[{4} + ch] = acc;\n"
        "}}\n",
        nc, name, n, indent(blockReduce("acc", "dsum"), 2), chunks);
    chunks += nc;
  }
  w.constant("CHUNK", kChunk, "elements per chunk");
  w.constant("CHUNKS", chunks, "chunks of all inputs");
  unsigned threads = 256;
  w.launch(static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, kResidentThreads / threads)),
           threads, "one block per chunk of 8 Ki elements (grid-stride)");
  w.useBlockReductions(false, true);
  const std::string finish =
      "double total = 0.0;\n"
      "#pragma unroll 4  // a trip count that grows with the shapes\n"
      "for (idx_t ch = 0; ch < CHUNKS; ++ch) total += partial[ch];\n"
      "norm[0] = static_cast<float>(sqrt(total));\n";
  if (chunks <= 1) {  // one block: its chunk sum (if any) is the total
    w.code(
        "__shared__ double chunkSum[1];\n"
        "if (threadIdx.x == 0) chunkSum[0] = 0.0;\n" +
        replaceAll(loops, "$STORE", "chunkSum") +
        "if (threadIdx.x == 0) {\n  const double* partial = chunkSum;\n" + indent(finish, 2) +
        "}\n");
    return;
  }
  w.code(replaceAll(loops, "$STORE", "chunkSums") +
         lastBlockCombine(w, "double", chunks,
                          "if (threadIdx.x == 0) {\n" + indent(finish, 2) + "}\n"));
}

}  // namespace tessel::cudagen
