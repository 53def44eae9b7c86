// The JSON encoding of a program, program.json (see ProgramJson.h; Program.cpp saves and
// loads it beside kernels.cpp and, for a program with CUDA kernels, kernels.cu).
//
// program.json (written with keys in this order; `?` marks optional keys and their defaults):
//   {"format": "tessel-program", "version": 7 (CPU only) or 8 (with CUDA kernels); 5 and 6,
//    written before pipeline parallelism, are read too (they lack the pipeline keys),
//    "mesh"? []: [{"axis", "size"}] (the plan's mesh, outermost axis first),
//    "pipeline"? (a pipelined program only): {"axis", "stages", "stage", "microbatches",
//                "virtual_stages", "schedule"} (Program.h PipelineInfo),
//    "buffers": [{"name", "dtype": "f32"|"i32", "shape": [..], "kind":
//                 "parameter"|"state"|"input"|"temp", "offset" (temp only, required there),
//                 "init" + "stddev"? 0 (parameter only, init required), "location"? "",
//                 "sharding"? (parameter and state only): {"global_shape": [..],
//                   "dims": [{"axes": [names], "blocks"? 1, "padding"? 0}] (one per
//                   dimension)}}],
//    "functions": [{"name", "inputs": [ids], "outputs": [ids], "outputNames": [..],
//                   "arenaBytes", "batch_shards"? 0,
//                   "actions"? []: [[name, first step, end step]] (Program.h ActionSpan),
//                   "steps": [
//       {"op": "kernel", "symbol", "args": [ids], "location"? "",
//        "launch" (version 6 only, and there required): {"grid": [x, y, z], "block": [x, y, z],
//                                                         "shared": bytes}},
//       {"op": "gemm", "a", "b", "c", "m", "n", "k", "batch"? 1, "transA"? false,
//        "transB"? false, "accumulate"? false, "strideA"? 0, "strideB"? 0, "strideC"? 0,
//        "location"? "", "backend"? "default" ("openblas", "onednn"),
//        "epilogue"? {"bias"? -1, "gelu"? false, "pre_activation"? -1, "residual"? -1,
//                     "bias_gradient"? -1} (Program.h GemmEpilogue)},
//       {"op": "copy", "src", "dst"},
//       {"op": "all_reduce_start"|"all_reduce_wait", "bucket" (the bucket number),
//        "buffer" (the bucket's flat f32 buffer id), "tensors": [ids], "names"? [],
//        "reduce"? "avg", "axes"? ["dp"], "group"? 1, "synchronous"? false, "location"? "",
//        "anchor"? ""},
//       {"op": "all_gather"|"reduce_scatter"|"all_to_all", "buffer" (the staging temp),
//        "tensors": [input, output], "dim", "concat_dim" (all_to_all only), "names"? [],
//        "reduce"? "sum" (reduce_scatter only), "axes", "group", "location"? ""},
//       {"op": "send_recv", "tensors": [ids], "peers": [coordinates], "sends", "names"? [],
//        "axes", "group", "location"? ""}]}],
//    "kernels": [{"symbol", "args": [{"dtype", "numel", "at_least"?}]}]}
// Unknown keys are errors (a misspelt optional key would otherwise silently take its
// default). Version 6 means kernels.cu exists and every kernel step has a launch. After
// decoding, loadProgram runs validateProgram and checks that every kernel symbol occurs in
// kernels.cpp (and kernels.cu). Every error names the file and the field, e.g.
// "out/program.json: functions[0].steps[3].m: ...".
#include "runtime/exec/ProgramJson.h"

#include "runtime/exec/ProgramJsonParts.h"  // defines: ProgramJsonReader, the pipeline parts

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <stdexcept>

namespace tessel::rt {
namespace {

using namespace json_detail;
using Reader = ProgramJsonReader;

constexpr const char* kFormat = "tessel-program";

const char* kindName(BufferKind k) {
  switch (k) {
    case BufferKind::Parameter: return "parameter";
    case BufferKind::State: return "state";
    case BufferKind::Input: return "input";
    case BufferKind::Temp: return "temp";
    case BufferKind::Coordinate: return "coordinate";
  }
  return "?";
}

// ---- writing --------------------------------------------------------------

ordered_json toJson(const Step& step) {
  ordered_json j;
  if (auto* k = std::get_if<KernelStep>(&step)) {
    j["op"] = "kernel";
    j["symbol"] = k->symbol;
    j["args"] = k->args;
    j["location"] = k->location;
    if (k->launch)
      j["launch"] = {{"grid", k->launch->grid}, {"block", k->launch->block}, {"shared", k->launch->sharedBytes}};
  } else if (auto* g = std::get_if<GemmStep>(&step)) {
    j["op"] = "gemm";
    for (auto [key, v] : {std::pair{"a", g->a}, {"b", g->b}, {"c", g->c}}) j[key] = v;
    for (auto [key, v] : {std::pair{"m", g->m}, {"n", g->n}, {"k", g->k}, {"batch", g->batch}}) j[key] = v;
    for (auto [key, v] : {std::pair{"transA", g->transA}, {"transB", g->transB}, {"accumulate", g->accumulate}})
      j[key] = v;
    for (auto [key, v] : {std::pair{"strideA", g->strideA}, {"strideB", g->strideB}, {"strideC", g->strideC}})
      j[key] = v;
    j["location"] = g->location;
    if (g->backend != GemmBackend::Default) j["backend"] = gemmBackendName(g->backend);
    if (const GemmEpilogue& e = g->epilogue; !e.empty()) {
      auto& ej = j["epilogue"] = decltype(j)::object();
      for (auto [key, v] : {std::pair{"bias", e.bias}, {"pre_activation", e.preActivation},
                            {"residual", e.residual}, {"bias_gradient", e.biasGradient}})
        if (v >= 0) ej[key] = v;
      if (e.gelu) ej["gelu"] = true;
    }
  } else if (auto* c = std::get_if<CopyStep>(&step)) {
    j["op"] = "copy";
    j["src"] = c->src;
    j["dst"] = c->dst;
  } else {
    const auto& col = std::get<CollectiveStep>(step);
    if (col.kind == CollectiveStep::Kind::SendRecv) return sendRecvToJson(col);
    if (col.movesShards()) {
      j["op"] = collectiveKindName(collectiveKindIndex(col));
      j["buffer"] = col.buffer;
      j["tensors"] = col.tensors;
      j["dim"] = col.dim;
      if (col.kind == CollectiveStep::Kind::AllToAll) j["concat_dim"] = col.concatDim;
      j["names"] = col.names;
      if (col.kind == CollectiveStep::Kind::ReduceScatter) j["reduce"] = col.reduce;
      j["axes"] = col.axes;
      j["group"] = col.group;
      j["location"] = col.location;
      if (col.phase != CollectiveStep::Phase::Whole) {
        j["phase"] = col.phase == CollectiveStep::Phase::Start ? "start" : "wait";
        j["bucket"] = col.bucket;
      }
      if (!col.unit.empty()) j["unit"] = col.unit;
      return j;
    }
    j["op"] = col.kind == CollectiveStep::Kind::AllReduceStart ? "all_reduce_start" : "all_reduce_wait";
    j["bucket"] = col.bucket;
    j["buffer"] = col.buffer;
    j["tensors"] = col.tensors;
    j["names"] = col.names;
    j["reduce"] = col.reduce;
    j["axes"] = col.axes;
    j["group"] = col.group;
    if (col.synchronous) j["synchronous"] = true;
    if (col.inPlace) j["in_place"] = true;
    j["location"] = col.location;
    j["anchor"] = col.anchor;
  }
  return j;
}

ordered_json toJson(const Program& p) {
  ordered_json root;
  root["format"] = kFormat;
  root["version"] = p.cudaSource.empty() ? kProgramFormatVersionCpu : kProgramFormatVersion;
  if (!p.mesh.empty()) {
    ordered_json mesh = ordered_json::array();
    for (const MeshAxis& a : p.mesh) mesh.push_back({{"axis", a.name}, {"size", a.size}});
    root["mesh"] = std::move(mesh);
  }
  if (p.pipeline) root["pipeline"] = pipelineToJson(*p.pipeline);
  ordered_json buffers = ordered_json::array();
  for (const Buffer& b : p.buffers) {
    ordered_json j;
    j["name"] = b.name;
    j["dtype"] = dtypeName(b.dtype);
    j["shape"] = b.shape;
    j["kind"] = kindName(b.kind);
    if (b.kind == BufferKind::Temp) j["offset"] = b.offset;
    if (b.kind == BufferKind::Parameter) {
      j["init"] = b.init;
      j["stddev"] = b.stddev;
    }
    j["location"] = b.location;
    if (b.kind == BufferKind::Coordinate) j["coordinate"] = {{"axes", b.coordinateAxes}, {"stride", b.coordinateStride}};
    if (!b.globalShape.empty() || !b.sharding.empty()) {
      ordered_json dims = ordered_json::array();
      for (const ShardDim& d : b.sharding) {
        ordered_json one{{"axes", d.axes}};
        if (d.blocks != 1) one["blocks"] = d.blocks;
        if (d.padding != 0) one["padding"] = d.padding;
        dims.push_back(std::move(one));
      }
      j["sharding"] = {{"global_shape", b.globalShape}, {"dims", std::move(dims)}};
    }
    buffers.push_back(std::move(j));
  }
  root["buffers"] = std::move(buffers);
  ordered_json functions = ordered_json::array();
  for (const Function& f : p.functions) {
    ordered_json j;
    j["name"] = f.name;
    j["inputs"] = f.inputs;
    j["outputs"] = f.outputs;
    j["outputNames"] = f.outputNames;
    j["arenaBytes"] = f.arenaBytes;
    if (f.batchShards != 0) j["batch_shards"] = f.batchShards;
    if (!f.actions.empty()) j["actions"] = actionsToJson(f.actions);
    ordered_json steps = ordered_json::array();
    for (const Step& s : f.steps) steps.push_back(toJson(s));
    j["steps"] = std::move(steps);
    functions.push_back(std::move(j));
  }
  root["functions"] = std::move(functions);
  ordered_json kernels = ordered_json::array();
  for (const auto& [symbol, args] : p.kernels) {
    ordered_json a = ordered_json::array();
    for (const KernelArg& arg : args) {
      ordered_json one{{"dtype", dtypeName(arg.dtype)}, {"numel", arg.numel}};
      if (arg.atLeast) one["at_least"] = true;
      a.push_back(std::move(one));
    }
    kernels.push_back({{"symbol", symbol}, {"args", std::move(a)}});
  }
  root["kernels"] = std::move(kernels);
  return root;
}

// ---- reading --------------------------------------------------------------

DType readDType(const Reader& r, const json& j, const std::string& field) {
  std::string dtype = r.string(j, "dtype", field);
  if (dtype == "f32") return DType::F32;
  if (dtype == "i32") return DType::I32;
  if (dtype == "bf16") return DType::BF16;
  r.fail(field + ".dtype", fmt::format("unknown dtype '{}' (expected f32, i32 or bf16)", dtype));
}

/// One entry of "kernels": a symbol and its arguments.
std::pair<std::string, std::vector<KernelArg>> readKernel(const Reader& r, const json& j, const std::string& field) {
  r.object(j, field, {"symbol", "args"});
  std::string symbol = r.string(j, "symbol", field);
  std::vector<KernelArg> args = r.list<KernelArg>(j, "args", field, [&](const json& v, const std::string& f) {
    r.object(v, f, {"dtype", "numel", "at_least"});
    return KernelArg{readDType(r, v, f), r.integer(v, "numel", f), r.boolean(v, "at_least", f)};
  });
  return {std::move(symbol), std::move(args)};
}

Buffer readBuffer(const Reader& r, const json& j, const std::string& field) {
  r.object(j, field, {"name", "dtype", "shape", "kind", "offset", "init", "stddev", "location", "sharding",
                      "coordinate"});
  Buffer b;
  b.name = r.string(j, "name", field);
  b.dtype = readDType(r, j, field);
  b.shape = r.list<int64_t>(j, "shape", field, [&](const json& v, const std::string& f) { return r.integer(v, f); });
  std::string kind = r.string(j, "kind", field);
  if (kind == "parameter") b.kind = BufferKind::Parameter;
  else if (kind == "state") b.kind = BufferKind::State;
  else if (kind == "input") b.kind = BufferKind::Input;
  else if (kind == "temp") b.kind = BufferKind::Temp;
  else if (kind == "coordinate") b.kind = BufferKind::Coordinate;
  else r.fail(field + ".kind",
              fmt::format("unknown kind '{}' (expected parameter, state, input, temp or coordinate)", kind));
  b.offset = b.kind == BufferKind::Temp ? r.integer(j, "offset", field) : r.integer(j, "offset", field, 0);
  b.init = b.kind == BufferKind::Parameter ? r.string(j, "init", field) : r.string(j, "init", field, "");
  b.stddev = r.number(j, "stddev", field);
  b.location = r.string(j, "location", field, "");
  if (const json* c = r.find(j, "coordinate")) {
    const std::string f = field + ".coordinate";
    r.object(*c, f, {"axes", "stride"});
    b.coordinateAxes = r.list<std::string>(*c, "axes", f, [&](const json& x, const std::string& h) { return r.string(x, h); });
    b.coordinateStride = r.integer(*c, "stride", f);
  } else if (b.kind == BufferKind::Coordinate) {
    r.fail(field + ".coordinate", "a coordinate buffer needs its axes and stride");
  }
  if (const json* sh = r.find(j, "sharding")) {
    const std::string f = field + ".sharding";
    r.object(*sh, f, {"global_shape", "dims"});
    b.globalShape = r.list<int64_t>(*sh, "global_shape", f, [&](const json& v, const std::string& g) {
      return r.integer(v, g);
    });
    b.sharding = r.list<ShardDim>(*sh, "dims", f, [&](const json& v, const std::string& g) {
      r.object(v, g, {"axes", "blocks", "padding"});
      ShardDim d;
      d.axes = r.list<std::string>(v, "axes", g, [&](const json& x, const std::string& h) { return r.string(x, h); });
      d.blocks = r.integer(v, "blocks", g, 1);
      d.padding = r.integer(v, "padding", g, 0);
      return d;
    });
  }
  return b;
}

/// One entry of "mesh": an axis name and its size in [1, 2^31).
MeshAxis readMeshAxis(const Reader& r, const json& j, const std::string& field) {
  r.object(j, field, {"axis", "size"});
  MeshAxis a;
  a.name = r.string(j, "axis", field);
  int64_t size = r.integer(j, "size", field);
  if (size < 1 || size > INT_MAX) r.fail(field + ".size", fmt::format("{} is not in [1, 2^31)", size));
  a.size = static_cast<int>(size);
  return a;
}

/// Three launch dimensions, each in [1, 2^31).
std::array<uint32_t, 3> readDims(const Reader& r, const json& obj, const char* key, const std::string& field) {
  std::vector<int64_t> v =
      r.list<int64_t>(obj, key, field, [&](const json& x, const std::string& f) { return r.integer(x, f); });
  std::string f = Reader::join(field, key);
  if (v.size() != 3) r.fail(f, fmt::format("expected 3 dimensions, got {}", v.size()));
  std::array<uint32_t, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (v[i] < 1 || v[i] > INT_MAX) r.fail(fmt::format("{}[{}]", f, i), fmt::format("{} is not in [1, 2^31)", v[i]));
    out[i] = static_cast<uint32_t>(v[i]);
  }
  return out;
}

LaunchConfig readLaunch(const Reader& r, const json& j, const std::string& field) {
  r.object(j, field, {"grid", "block", "shared"});
  LaunchConfig l;
  l.grid = readDims(r, j, "grid", field);
  l.block = readDims(r, j, "block", field);
  int64_t shared = r.integer(j, "shared", field);
  if (shared < 0 || shared > INT_MAX) r.fail(field + ".shared", fmt::format("{} is not in [0, 2^31)", shared));
  l.sharedBytes = static_cast<uint32_t>(shared);
  return l;
}

Step readStep(const Reader& r, const json& j, const std::string& field, bool cuda) {
  if (!j.is_object()) r.fail(field, fmt::format("expected an object, got {}", j.type_name()));
  std::string op = r.string(j, "op", field);
  if (op == "kernel") {
    if (cuda) r.object(j, field, {"op", "symbol", "args", "location", "launch"});
    else r.object(j, field, {"op", "symbol", "args", "location"});
    KernelStep k;
    k.symbol = r.string(j, "symbol", field);
    k.args = r.list<int>(j, "args", field, [&](const json& v, const std::string& f) { return r.id(v, f); });
    k.location = r.string(j, "location", field, "");
    if (cuda) k.launch = readLaunch(r, r.need(j, "launch", field), field + ".launch");
    return k;
  }
  if (op == "gemm") {
    r.object(j, field, {"op", "a", "b", "c", "m", "n", "k", "batch", "transA", "transB", "accumulate", "strideA",
                        "strideB", "strideC", "location", "backend", "epilogue"});
    GemmStep g;
    g.a = r.id(j, "a", field);
    g.b = r.id(j, "b", field);
    g.c = r.id(j, "c", field);
    g.m = r.integer(j, "m", field);
    g.n = r.integer(j, "n", field);
    g.k = r.integer(j, "k", field);
    g.batch = r.integer(j, "batch", field, 1);
    g.transA = r.boolean(j, "transA", field);
    g.transB = r.boolean(j, "transB", field);
    g.accumulate = r.boolean(j, "accumulate", field);
    g.strideA = r.integer(j, "strideA", field, 0);
    g.strideB = r.integer(j, "strideB", field, 0);
    g.strideC = r.integer(j, "strideC", field, 0);
    g.location = r.string(j, "location", field, "");
    std::string backend = r.string(j, "backend", field, "default");
    if (backend == "openblas") g.backend = GemmBackend::OpenBlas;
    else if (backend == "onednn") g.backend = GemmBackend::OneDnn;
    else if (backend != "default")
      r.fail(field + ".backend", fmt::format("unknown GEMM backend '{}' (expected default, openblas or onednn)", backend));
    if (j.contains("epilogue")) {
      const json& e = j["epilogue"];
      const std::string ef = field + ".epilogue";
      r.object(e, ef, {"bias", "gelu", "pre_activation", "residual", "bias_gradient"});
      auto optionalId = [&](const char* key) { return e.contains(key) ? r.id(e, key, ef) : -1; };
      g.epilogue.bias = optionalId("bias");
      g.epilogue.gelu = r.boolean(e, "gelu", ef);
      g.epilogue.preActivation = optionalId("pre_activation");
      g.epilogue.residual = optionalId("residual");
      g.epilogue.biasGradient = optionalId("bias_gradient");
    }
    return g;
  }
  if (op == "copy") {
    r.object(j, field, {"op", "src", "dst"});
    return CopyStep{r.id(j, "src", field), r.id(j, "dst", field)};
  }
  if (op == "all_reduce_start" || op == "all_reduce_wait") {
    r.object(j, field, {"op", "bucket", "buffer", "tensors", "names", "reduce", "axes", "group", "synchronous",
                        "in_place", "location", "anchor"});
    CollectiveStep c;
    c.kind = op == "all_reduce_start" ? CollectiveStep::Kind::AllReduceStart : CollectiveStep::Kind::AllReduceWait;
    int64_t bucket = r.integer(j, "bucket", field);
    if (bucket < 0 || bucket > INT_MAX) r.fail(field + ".bucket", fmt::format("bucket number {} is out of range", bucket));
    c.bucket = static_cast<int>(bucket);
    c.buffer = r.id(j, "buffer", field);
    c.tensors = r.list<int>(j, "tensors", field, [&](const json& v, const std::string& f) { return r.id(v, f); });
    if (j.contains("names"))
      c.names = r.list<std::string>(j, "names", field,
                                    [&](const json& v, const std::string& f) { return r.string(v, f); });
    c.reduce = r.string(j, "reduce", field, "avg");
    if (j.contains("axes"))
      c.axes = r.list<std::string>(j, "axes", field, [&](const json& v, const std::string& f) { return r.string(v, f); });
    c.group = r.integer(j, "group", field, 1);
    c.synchronous = r.boolean(j, "synchronous", field);
    c.inPlace = r.boolean(j, "in_place", field);
    c.location = r.string(j, "location", field, "");
    c.anchor = r.string(j, "anchor", field, "");
    return c;
  }
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") {
    const bool a2a = op == "all_to_all", rs = op == "reduce_scatter";
    if (a2a)
      r.object(j, field, {"op", "buffer", "tensors", "dim", "concat_dim", "names", "axes", "group", "location"});
    else if (rs)
      r.object(j, field, {"op", "buffer", "tensors", "dim", "reduce", "names", "axes", "group", "location"});
    else  // an all_gather may be split in a start and a wait (FSDP prefetch) and name its unit
      r.object(j, field,
               {"op", "buffer", "tensors", "dim", "names", "axes", "group", "location", "phase", "bucket", "unit"});
    CollectiveStep c;
    c.kind = a2a ? CollectiveStep::Kind::AllToAll
                 : rs ? CollectiveStep::Kind::ReduceScatter : CollectiveStep::Kind::AllGather;
    c.bucket = 0;
    c.buffer = r.id(j, "buffer", field);
    c.tensors = r.list<int>(j, "tensors", field, [&](const json& v, const std::string& f) { return r.id(v, f); });
    c.dim = r.integer(j, "dim", field);
    if (a2a) c.concatDim = r.integer(j, "concat_dim", field);
    if (j.contains("names"))
      c.names = r.list<std::string>(j, "names", field,
                                    [&](const json& v, const std::string& f) { return r.string(v, f); });
    c.reduce = rs ? r.string(j, "reduce", field, "sum") : "sum";
    c.axes = r.list<std::string>(j, "axes", field, [&](const json& v, const std::string& f) { return r.string(v, f); });
    c.group = r.integer(j, "group", field);
    c.synchronous = true;
    c.location = r.string(j, "location", field, "");
    if (!a2a && !rs) {
      const std::string phase = r.string(j, "phase", field, "whole");
      if (phase != "whole" && phase != "start" && phase != "wait")
        r.fail(field + ".phase", fmt::format("'{}' (expected start or wait)", phase));
      c.phase = phase == "start" ? CollectiveStep::Phase::Start
                : phase == "wait" ? CollectiveStep::Phase::Wait : CollectiveStep::Phase::Whole;
      if (c.phase != CollectiveStep::Phase::Whole) c.bucket = static_cast<int>(r.integer(j, "bucket", field));
      c.unit = r.string(j, "unit", field, "");
    }
    return c;
  }
  if (op == "send_recv") return readSendRecv(r, j, field);
  r.fail(field + ".op", fmt::format("unknown step '{}' (expected kernel, gemm, copy, all_reduce_start, "
                                    "all_reduce_wait, all_gather, reduce_scatter, all_to_all or send_recv)", op));
}

Function readFunction(const Reader& r, const json& j, const std::string& field, bool cuda) {
  r.object(j, field, {"name", "inputs", "outputs", "outputNames", "arenaBytes", "batch_shards", "actions", "steps"});
  Function f;
  f.name = r.string(j, "name", field);
  auto ids = [&](const json& v, const std::string& fl) { return r.id(v, fl); };
  f.inputs = r.list<int>(j, "inputs", field, ids);
  f.outputs = r.list<int>(j, "outputs", field, ids);
  f.outputNames = r.list<std::string>(j, "outputNames", field,
                                      [&](const json& v, const std::string& fl) { return r.string(v, fl); });
  f.arenaBytes = r.integer(j, "arenaBytes", field);
  f.batchShards = r.integer(j, "batch_shards", field, 0);
  if (j.contains("actions")) f.actions = readActions(r, j, field);
  f.steps = r.list<Step>(j, "steps", field,
                         [&](const json& v, const std::string& fl) { return readStep(r, v, fl, cuda); });
  return f;
}

}  // namespace

std::string encodeProgramJson(const Program& program) { return toJson(program).dump(1) + "\n"; }

Program decodeProgramJson(const std::string& text, const std::string& file, int64_t& version) {
  Reader r(file);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    r.fail("(document)", fmt::format("invalid JSON: {}", e.what()));
  }
  r.object(root, "(document)", {"format", "version", "mesh", "pipeline", "buffers", "functions", "kernels"});
  if (std::string format = r.string(root, "format", ""); format != kFormat)
    r.fail("format", fmt::format("'{}' is not '{}'", format, kFormat));
  version = r.integer(root, "version", "");
  if (version == 1 || version == 2)
    r.fail("version", fmt::format("version {} was written by an older Tessel (no kernel signatures; a collective's "
                                  "'bucket' was its buffer); compile the program again", version));
  if (version == 3 || version == 4)
    r.fail("version", fmt::format("version {} was written by an older Tessel (no mesh, no sharded buffers, a "
                                  "collective over one 'axis'); compile the program again", version));
  const bool older = version == 5 || version == 6;  // before pipeline parallelism: no pipeline keys
  if (version != kProgramFormatVersion && version != kProgramFormatVersionCpu && !older)
    r.fail("version", fmt::format("unsupported version {} (this build reads 5 to {})", version, kProgramFormatVersion));
  const bool cuda = programFormatHasCuda(version);
  if (older && root.contains("pipeline"))
    r.fail("pipeline", fmt::format("version {} predates pipeline parallelism", version));
  Program p;
  if (root.contains("mesh"))
    p.mesh = r.list<MeshAxis>(root, "mesh", "", [&](const json& v, const std::string& f) { return readMeshAxis(r, v, f); });
  if (const json* pl = r.find(root, "pipeline")) p.pipeline = readPipeline(r, *pl, "pipeline");
  p.buffers = r.list<Buffer>(root, "buffers", "", [&](const json& v, const std::string& f) { return readBuffer(r, v, f); });
  p.functions = r.list<Function>(root, "functions", "",
                                 [&](const json& v, const std::string& f) { return readFunction(r, v, f, cuda); });
  const json& kernels = r.array(root, "kernels", "");
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string field = fmt::format("kernels[{}]", i);
    auto [symbol, args] = readKernel(r, kernels[i], field);
    if (!p.kernels.emplace(symbol, std::move(args)).second)
      r.fail(field + ".symbol", fmt::format("kernel '{}' is listed twice", symbol));
  }
  return p;
}

}  // namespace tessel::rt
