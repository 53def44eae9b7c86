// C++ kernels of the layout ops and reductions: transpose, split, concat, broadcast,
// reduce_sum and reduce_mean. Each first simplifies its index space at emit time: dimensions
// of size 1 are dropped and neighbours that stay contiguous together (and, for reductions and
// broadcasts, have the same role) are merged into one group. What is left is a short list of
// groups with constant sizes and strides, so the loops are plain and the innermost one runs
// over contiguous memory where the layout allows.
#include "codegen/CppEmitterInternal.h"
#include "codegen/KernelCommonSlice.h"  // defines: declareDynamicSlice

#include <fmt/format.h>

#include <algorithm>

namespace tessel::cppgen {

namespace {

std::vector<Group> select(const std::vector<Group>& groups, bool flag, size_t end) {
  std::vector<Group> out;
  for (size_t k = 0; k < end; ++k)
    if (groups[k].flag == flag) out.push_back(groups[k]);
  return out;
}

}  // namespace

void emitTranspose(KernelWriter& w) {
  auto op = mlir::cast<TransposeOp>(w.op());
  std::vector<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  llvm::ArrayRef<int64_t> perm = op.getPermutation();
  Letters inLetters = genericLetters(in.size()), outLetters;
  for (int64_t p : perm) outLetters.push_back(inLetters[p]);
  w.describe(fmt::format("out[i...] = inp[i permuted], permutation [{}]", fmt::join(perm, ", ")));
  w.output("out", op.getResult(), outLetters);
  w.input("inp", op.getInput(), inLetters);
  std::string type = elementType(op.getInput());
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<Group> groups;
  for (size_t i = 0; i < out.size(); ++i) groups.push_back({out[i], false, inStrides[perm[i]], 0});
  groups = simplify(groups, false);
  if (groups.empty()) {
    w.code("out[0] = inp[0];\n");
    return;
  }
  const Group& last = groups.back();
  if (last.inStride == 1) {  // rows stay contiguous: copy them whole
    std::vector<Group> outer(groups.begin(), groups.end() - 1);
    w.constant("OUTER", sizeOf(outer), "contiguous rows");
    w.constant("I", last.size, "elements per row");
    w.code(R"cpp($PAR
for (int64_t o = 0; o < OUTER; ++o) {
$DECOMPOSE  std::memcpy(out + o * I, inp + ib, I * sizeof($T));
}
)cpp",
           {{"PAR", parallelFor(numel(out), sizeOf(outer))},
            {"DECOMPOSE", indent(decompose("o", outer, "ib", ""), 2)},
            {"T", type}});
    return;
  }
  // The input's contiguous dimension is group j: copy TILE x TILE tiles of (j, last), so both
  // the reads (along j) and the writes (along last) touch few cache lines per tile.
  size_t j = 0;
  while (groups[j].inStride != 1) ++j;
  std::vector<Group> outer;
  for (size_t k = 0; k + 1 < groups.size(); ++k)
    if (k != j) outer.push_back(groups[k]);
  w.constant("OUTER", sizeOf(outer));
  w.constant("SA", groups[j].size, "the input's contiguous dimension");
  w.constant("OSA", groups[j].outStride, "its output stride");
  w.constant("SB", last.size, "the output's contiguous dimension");
  w.constant("ISB", last.inStride, "its input stride");
  w.constant("TILE", 32);
  w.constant("NA", (groups[j].size + 31) / 32);
  w.constant("NB", (last.size + 31) / 32);
  w.code(R"cpp($PAR
for (int64_t job = 0; job < OUTER * NA * NB; ++job) {
  const int64_t o = job / (NA * NB), ta = job / NB % NA, tb = job % NB;
$DECOMPOSE  const int64_t a1 = (ta + 1) * TILE < SA ? (ta + 1) * TILE : SA;
  const int64_t b1 = (tb + 1) * TILE < SB ? (tb + 1) * TILE : SB;
  for (int64_t a = ta * TILE; a < a1; ++a)
    for (int64_t b = tb * TILE; b < b1; ++b) out[ob + a * OSA + b] = inp[ib + a + b * ISB];
}
)cpp",
         {{"PAR", parallelFor(numel(out) * 2, sizeOf(outer) * ((groups[j].size + 31) / 32) *
                                                  ((last.size + 31) / 32))},
          {"DECOMPOSE", indent(decompose("o", outer, "ib", "ob"), 2)}});
}

void emitSplit(KernelWriter& w) {
  auto op = mlir::cast<SplitOp>(w.op());
  std::vector<int64_t> in = shapeOf(op.getInput());
  int64_t axis = static_cast<int64_t>(op.getAxis()), parts = op.getNumResults();
  int64_t inner = product(in, axis + 1, in.size()), outer = product(in, 0, axis);
  Letters letters = genericLetters(in.size());
  w.describe(fmt::format("outs[p] = part p of {} equal parts of inp along dimension {}", parts,
                         axis));
  w.outputs("outs", op.getResults(), std::vector<Letters>(parts, letters));
  w.input("inp", op.getInput(), letters);
  w.constant("P", parts);
  w.constant("OUTER", outer, "rows before the axis");
  w.constant("PIECE", in[axis] / parts * inner, "elements of one part per row");
  w.code(R"cpp($PAR
for (int64_t job = 0; job < OUTER * P; ++job) {
  const int64_t o = job / P, p = job % P;
  std::memcpy(outs[p] + o * PIECE, inp + (o * P + p) * PIECE, PIECE * sizeof($T));
}
)cpp",
         {{"PAR", parallelFor(numel(in), outer * parts)}, {"T", elementType(op.getInput())}});
}

void emitDynamicSlice(KernelWriter& w) {
  kernelcommon::declareDynamicSlice(w);
  // The block is contiguous: one copy.
  w.code(R"cpp(const int64_t first = offset[0] < 0 ? 0 : offset[0] > D - R ? D - R : offset[0];
std::memcpy(out, inp + first * ROW, R * ROW * sizeof($T));
)cpp",
         {{"T", elementType(mlir::cast<DynamicSliceOp>(w.op()).getInput())}});
}

void emitConcat(KernelWriter& w) {
  auto op = mlir::cast<ConcatOp>(w.op());
  std::vector<int64_t> out = shapeOf(op.getResult());
  int64_t axis = static_cast<int64_t>(op.getAxis()), k = op.getNumOperands();
  int64_t inner = product(out, axis + 1, out.size()), outer = product(out, 0, axis);
  Letters letters = genericLetters(out.size());
  std::vector<int64_t> widths, offsets;
  for (mlir::Value v : op.getInputs()) {
    offsets.push_back(widths.empty() ? 0 : offsets.back() + widths.back());
    widths.push_back(shapeOf(v)[axis] * inner);
  }
  w.describe(fmt::format("out = the {} inputs joined along dimension {}", k, axis));
  w.output("out", op.getResult(), letters);
  w.inputs("ins", op.getInputs(), std::vector<Letters>(k, letters));
  w.constant("K", k);
  w.constant("OUTER", outer, "rows before the axis");
  w.constant("ROW", out[axis] * inner, "elements of an output row");
  w.code(R"cpp(constexpr int64_t WIDTH[K] = {$WIDTHS};  // elements of each input per row
constexpr int64_t OFFSET[K] = {$OFFSETS};
$PAR
for (int64_t job = 0; job < OUTER * K; ++job) {
  const int64_t o = job / K, k = job % K;
  std::memcpy(out + o * ROW + OFFSET[k], ins[k] + o * WIDTH[k], WIDTH[k] * sizeof($T));
}
)cpp",
         {{"PAR", parallelFor(numel(out), outer * k)},
          {"WIDTHS", fmt::format("{}", fmt::join(widths, ", "))},
          {"OFFSETS", fmt::format("{}", fmt::join(offsets, ", "))},
          {"T", elementType(op.getResult())}});
}

void emitReduce(KernelWriter& w) {
  mlir::Operation* op = w.op();
  mlir::Value input = op->getOperand(0);
  std::vector<int64_t> in = shapeOf(input);
  const kernelcommon::ReducePlan plan =
      kernelcommon::reducePlan(op, genericLetters(in.size()));
  kernelcommon::declareReduce(w, plan);
  const std::vector<Group>& groups = plan.groups;
  if (groups.empty()) {
    w.code("out[0] = static_cast<float>(inp[0] * SCALE);\n");
    return;
  }
  const Group& last = groups.back();
  std::vector<Group> kept = select(groups, false, groups.size() - 1);
  std::vector<Group> summed = select(groups, true, groups.size() - 1);
  w.constant("NQ", sizeOf(summed), "outer reduced positions");
  if (last.flag) {
    // The innermost group is reduced: each output is a sum of contiguous runs of RI.
    w.constant("NOUT", sizeOf(kept), "outputs");
    w.constant("RI", last.size, "contiguous elements summed per run");
    w.code(R"cpp($PAR
for (int64_t o = 0; o < NOUT; ++o) {
$DECOMPOSE  double acc = 0.0;
  for (int64_t q = 0; q < NQ; ++q) {
$DECOMPOSEQ    const auto* p = inp + ib + qb;
    #pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < RI; ++i) acc += p[i];
  }
  out[o] = static_cast<float>(acc * SCALE);
}
)cpp",
           {{"PAR", parallelFor(numel(in), sizeOf(kept))},
            {"DECOMPOSE", indent(decompose("o", kept, "ib", ""), 2)},
            {"DECOMPOSEQ", indent(decompose("q", summed, "qb", ""), 4)}});
    return;
  }
  // The innermost group is kept: accumulate blocks of KB contiguous outputs at once. When
  // that gives few jobs (a bias gradient [N, C] -> [C]), the reduced positions are also cut
  // into QC fixed chunks whose double sums are added in chunk order afterwards: the chunking
  // depends only on the shape, so the result does not depend on the thread count.
  int64_t kb = std::min<int64_t>(last.size, 256);
  int64_t nkb = (last.size + kb - 1) / kb, nouter = sizeOf(kept), nq = sizeOf(summed);
  int64_t qc = 1;
  if (numel(in) >= (int64_t{1} << 15) && nouter * nkb < 64)
    qc = std::clamp<int64_t>(64 / (nouter * nkb), 1, std::max<int64_t>(nq / 4, 1));
  int64_t qlen = (nq + qc - 1) / qc;
  qc = (nq + qlen - 1) / qlen;  // no empty chunk
  w.constant("NOUTER", nouter, "outer output positions");
  w.constant("KI", last.size, "contiguous outputs");
  w.constant("KB", kb, "outputs per block");
  w.constant("NKB", nkb);
  Subst subst{{"DECOMPOSE", indent(decompose("o", kept, "ib", ""), 2)},
              {"DECOMPOSEQ", indent(decompose("q", summed, "qb", ""), 4)}};
  if (qc == 1) {
    subst["PAR"] = parallelFor(numel(in), nouter * nkb);
    w.code(R"cpp($PAR
for (int64_t job = 0; job < NOUTER * NKB; ++job) {
  const int64_t o = job / NKB, k0 = job % NKB * KB;
  const int64_t kn = k0 + KB < KI ? KB : KI - k0;
$DECOMPOSE  double acc[KB] = {};
  for (int64_t q = 0; q < NQ; ++q) {
$DECOMPOSEQ    const auto* p = inp + ib + qb + k0;
    #pragma omp simd
    for (int64_t i = 0; i < kn; ++i) acc[i] += p[i];
  }
  auto* dst = out + o * KI + k0;
  for (int64_t i = 0; i < kn; ++i) dst[i] = static_cast<float>(acc[i] * SCALE);
}
)cpp",
           subst);
    return;
  }
  w.constant("QC", qc, "chunks of the reduced positions");
  w.constant("QLEN", qlen, "reduced positions per chunk");
  subst["PAR"] = parallelFor(numel(in), qc * nouter * nkb);
  subst["PARC"] = parallelFor(nouter * last.size * qc, nouter * last.size);
  w.code(R"cpp(std::unique_ptr<double[]> part(new double[QC * NOUTER * KI]);  // [QC][NOUTER * KI]
$PAR
for (int64_t job = 0; job < QC * NOUTER * NKB; ++job) {
  const int64_t c = job / (NOUTER * NKB), o = job / NKB % NOUTER, k0 = job % NKB * KB;
  const int64_t kn = k0 + KB < KI ? KB : KI - k0;
  const int64_t q1 = (c + 1) * QLEN < NQ ? (c + 1) * QLEN : NQ;
$DECOMPOSE  double* acc = part.get() + c * NOUTER * KI + o * KI + k0;
  for (int64_t i = 0; i < kn; ++i) acc[i] = 0.0;
  for (int64_t q = c * QLEN; q < q1; ++q) {
$DECOMPOSEQ    const auto* p = inp + ib + qb + k0;
    #pragma omp simd
    for (int64_t i = 0; i < kn; ++i) acc[i] += p[i];
  }
}
$PARC
for (int64_t j = 0; j < NOUTER * KI; ++j) {
  double s = 0.0;
  for (int64_t c = 0; c < QC; ++c) s += part[c * NOUTER * KI + j];
  out[j] = static_cast<float>(s * SCALE);
}
)cpp",
         subst);
}

void emitBroadcast(KernelWriter& w) {
  auto op = mlir::cast<BroadcastOp>(w.op());
  std::vector<int64_t> out = shapeOf(op.getResult()), in = shapeOf(op.getInput());
  llvm::ArrayRef<int64_t> dims = op.getDims();
  std::vector<bool> inserted(out.size(), false);
  for (int64_t d : dims) inserted[d] = true;
  Letters outLetters = genericLetters(out.size()), inLetters;
  for (size_t d = 0; d < out.size(); ++d)
    if (!inserted[d]) inLetters.push_back(outLetters[d]);
  w.describe(
      fmt::format("out = inp repeated along the new dimensions [{}]", fmt::join(dims, ", ")));
  w.output("out", op.getResult(), outLetters);
  w.input("inp", op.getInput(), inLetters);
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<Group> groups;
  for (size_t d = 0, k = 0; d < out.size(); ++d)
    groups.push_back({out[d], inserted[d], inserted[d] ? 0 : inStrides[k++], 0});
  // Merging needs nesting input strides; inserted groups have stride 0 and merge among
  // themselves (0 == 0 * size).
  groups = simplify(groups, /*outFlag=*/false);
  if (groups.empty()) {
    w.code("out[0] = inp[0];\n");
    return;
  }
  const Group& last = groups.back();
  std::vector<Group> outer(groups.begin(), groups.end() - 1);
  w.constant("OUTER", sizeOf(outer), "output rows");
  w.constant("I", last.size, "elements per row");
  w.code(R"cpp($PAR
for (int64_t o = 0; o < OUTER; ++o) {
$DECOMPOSE  auto* dst = out + o * I;
  $INNER
}
)cpp",
         {{"PAR", parallelFor(numel(out), sizeOf(outer))},
          {"DECOMPOSE", indent(decompose("o", outer, "ib", ""), 2)},
          {"INNER", last.flag ? "const float v = inp[ib];\n  #pragma omp simd\n  for (int64_t "
                                "i = 0; i < I; ++i) dst[i] = v;"
                              : "std::memcpy(dst, inp + ib, I * sizeof(*dst));"}});
}

}  // namespace tessel::cppgen
