// The language-independent helpers of the C++ and CUDA kernel emitters (KernelCommon.h).
#include "codegen/KernelCommon.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessel::kernelcommon {

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::vector<Group> simplify(const std::vector<Group>& in, bool outFlag) {
  std::vector<Group> out;
  for (const Group& g : in) {
    if (g.size == 1) continue;
    if (!out.empty() && out.back().flag == g.flag &&
        out.back().inStride == g.inStride * g.size) {
      out.back().size *= g.size;
      out.back().inStride = g.inStride;
      continue;
    }
    out.push_back(g);
  }
  int64_t stride = 1;
  for (size_t k = out.size(); k-- > 0;) {
    out[k].outStride = out[k].flag == outFlag ? stride : 0;
    if (out[k].flag == outFlag) stride *= out[k].size;
  }
  return out;
}

int64_t sizeOf(const std::vector<Group>& groups) {
  int64_t n = 1;
  for (const Group& g : groups) n *= g.size;
  return n;
}

ReducePlan reducePlan(mlir::Operation* op, const std::vector<std::string>& inLetters) {
  ReducePlan p;
  p.mean = mlir::isa<ReduceMeanOp>(op);
  llvm::ArrayRef<int64_t> dims = p.mean ? mlir::cast<ReduceMeanOp>(op).getDims()
                                        : mlir::cast<ReduceSumOp>(op).getDims();
  p.dims.assign(dims.begin(), dims.end());
  auto shape = mlir::cast<mlir::RankedTensorType>(op->getOperand(0).getType()).getShape();
  std::vector<int64_t> in(shape.begin(), shape.end());
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : dims) {
    reduced[d] = true;
    p.count *= in[d];
  }
  p.inLetters = inLetters;
  for (size_t d = 0; d < in.size(); ++d)
    if (!reduced[d]) p.outLetters.push_back(p.inLetters[d]);
  std::vector<int64_t> inStrides = stridesOf(in);
  for (size_t d = 0; d < in.size(); ++d)
    p.groups.push_back({in[d], static_cast<bool>(reduced[d]), inStrides[d], 0});
  p.groups = simplify(p.groups, /*outFlag=*/false);
  return p;
}

std::string reduceDescription(const ReducePlan& plan) {
  return fmt::format("out = the {} of inp over dimensions [{}], accumulated in double",
                     plan.mean ? "mean" : "sum", fmt::join(plan.dims, ", "));
}

std::string reduceScaleLine(const ReducePlan& plan) {
  std::string scale = !plan.mean       ? "1.0"
                      : plan.count == 0 ? "NAN"
                                        : fmt::format("{:.17g}", 1.0 / plan.count);
  return fmt::format("constexpr double SCALE = {};  // {}\n", scale,
                     plan.mean ? fmt::format("1 / {} elements averaged", plan.count) : "a sum");
}

std::string bf16Preamble(const std::string& fn, const std::string& member) {
  return fmt::format(R"(// bfloat16 storage: the upper 16 bits of an f32, rounded to nearest even on store.
{0} unsigned short tessel_bf16_bits(float f) {{
  const unsigned int u = static_cast<unsigned int>(tessel_float_to_bits(f));
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  return static_cast<unsigned short>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}}
{0} float tessel_bf16_value(unsigned short bits) {{
  return tessel_bits_to_float(static_cast<int32_t>(static_cast<unsigned int>(bits) << 16));
}}
{0} float tessel_round_bf16(float f) {{ return tessel_bf16_value(tessel_bf16_bits(f)); }}
struct tessel_bf16 {{
  unsigned short bits;
  tessel_bf16() = default;
  {1} explicit tessel_bf16(float f) : bits(tessel_bf16_bits(f)) {{}}
  {1} tessel_bf16& operator=(float f) {{ bits = tessel_bf16_bits(f); return *this; }}
  {1} operator float() const {{ return tessel_bf16_value(bits); }}
}};

)",
                     fn, member);
}

std::string storageType(mlir::Value v) {
  mlir::Type e = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  return e.isInteger(32) ? "int32_t" : e.isBF16() ? "tessel_bf16" : "float";
}

std::string indent(const std::string& text, int spaces) {
  std::string out, pad(spaces, ' ');
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += pad + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

std::string shapeComment(std::string_view name, const std::vector<int64_t>& shape,
                         const std::vector<std::string>& letters) {
  if (shape.empty()) return fmt::format("// {} scalar", name);
  std::string dims = fmt::format("[{}]", fmt::join(shape, ", "));
  if (letters.size() != shape.size()) return fmt::format("// {} {}", name, dims);
  return fmt::format("// {} [{}] = {}", name, fmt::join(letters, ", "), dims);
}

std::string withComment(const std::string& code, const std::string& comment) {
  constexpr size_t column = 60;
  std::string pad(code.size() < column ? column - code.size() : 2, ' ');
  return code + pad + comment + "\n";
}

std::vector<std::string> fusedMemberNames(FusedOp op) {
  std::vector<std::string> names;
  for (mlir::Operation& m : op.getBody().front().without_terminator())
    names.push_back(m.getName().stripDialect().str());
  return names;
}

std::string fusedKernelName(FusedOp op) {
  std::vector<std::string> names;
  for (const std::string& name : fusedMemberNames(op))
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  std::string symbol = "fused";
  for (size_t i = 0; i < names.size() && i < kFusedNameOps; ++i) symbol += "_" + names[i];
  if (names.size() > kFusedNameOps)
    symbol += fmt::format("_and_{}_more", names.size() - kFusedNameOps);
  return symbol;
}

const char* binarySign(mlir::Operation* op) {
  return mlir::isa<AddOp>(op) ? "+" : mlir::isa<SubOp>(op) ? "-" : "*";
}

std::string binaryDescription(const char* sign, int64_t na, int64_t nb, int64_t n) {
  if (na == n && nb == n) return fmt::format("out = a {} b, elementwise", sign);
  return fmt::format("out = a {} b, elementwise, {} repeated over the leading dimensions", sign,
                     na < n ? "a" : "b");
}

UnaryForm unaryForm(mlir::Operation* op) {
  UnaryForm f;
  f.isGrad = mlir::isa<GeluGradOp, ReluGradOp, SiluGradOp>(op);
  if (mlir::isa<ScaleOp>(op)) {
    f.description = "out = x * factor, elementwise";
    f.expr = "x * FACTOR";
  } else if (mlir::isa<GeluOp>(op)) {
    f.description =
        "out = gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise";
    f.expr = "tessel_gelu(x)";
    f.cost = 8;
  } else if (auto cast = mlir::dyn_cast<CastOp>(op)) {
    f.description = cast.getType().getElementType().isBF16()
                        ? "out = bf16(x), elementwise, rounded to nearest even"
                        : "out = float(x), elementwise (exact)";
    f.expr = "x";  // the store into the result's storage type does the conversion
  } else if (mlir::isa<ReluOp>(op)) {
    f.description = "out = max(x, 0), elementwise (NaN gives 0, as the reference)";
    f.expr = "x > 0.0f ? x : 0.0f";
  } else if (mlir::isa<SiluOp>(op)) {
    f.description = "out = silu(x) = x * sigmoid(x), elementwise";
    f.expr = "tessel_silu(x)";
    f.cost = 4;
  } else if (mlir::isa<SiluGradOp>(op)) {
    f.description = "dinp = dout * silu'(inp), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)";
    f.expr = "tessel_silu_grad(x, dy)";
    f.cost = 4;
  } else if (mlir::isa<GeluGradOp>(op)) {
    f.description = "dinp = dout * gelu'(inp), elementwise (tanh form)";
    f.expr = "tessel_gelu_grad(x, dy)";
    f.cost = 8;
  } else {
    f.description = "dinp = inp > 0 ? dout : 0, elementwise";
    f.expr = "x > 0.0f ? dy : 0.0f";
  }
  return f;
}

}  // namespace tessel::kernelcommon
