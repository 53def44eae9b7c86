// program.json's pipeline parts (ProgramJson.cpp documents the whole format): send_recv steps,
// a function's action spans and the program's pipeline record. Decoding checks types and keys
// only; validateProgram (PipelineCheck.cpp) checks the values.
#include "runtime/exec/ProgramJsonParts.h"

namespace tessel::rt::json_detail {

ordered_json sendRecvToJson(const CollectiveStep& step) {
  ordered_json j;
  j["op"] = "send_recv";
  j["tensors"] = step.tensors;
  j["peers"] = step.peers;
  j["sends"] = step.sends;
  j["names"] = step.names;
  j["axes"] = step.axes;
  j["group"] = step.group;
  j["location"] = step.location;
  return j;
}

CollectiveStep readSendRecv(const ProgramJsonReader& r, const json& j, const std::string& field) {
  r.object(j, field, {"op", "tensors", "peers", "sends", "names", "axes", "group", "location"});
  CollectiveStep c;
  c.kind = CollectiveStep::Kind::SendRecv;
  c.buffer = -1;
  c.bucket = 0;
  c.tensors = r.list<int>(j, "tensors", field, [&](const json& v, const std::string& f) { return r.id(v, f); });
  c.peers = r.list<int64_t>(j, "peers", field, [&](const json& v, const std::string& f) { return r.integer(v, f); });
  c.sends = r.integer(j, "sends", field);
  if (j.contains("names"))
    c.names = r.list<std::string>(j, "names", field, [&](const json& v, const std::string& f) { return r.string(v, f); });
  c.axes = r.list<std::string>(j, "axes", field, [&](const json& v, const std::string& f) { return r.string(v, f); });
  c.group = r.integer(j, "group", field);
  c.location = r.string(j, "location", field, "");
  return c;
}

ordered_json actionsToJson(const std::vector<ActionSpan>& actions) {
  ordered_json out = ordered_json::array();
  for (const ActionSpan& a : actions) out.push_back(ordered_json::array({a.name, a.firstStep, a.endStep}));
  return out;
}

std::vector<ActionSpan> readActions(const ProgramJsonReader& r, const json& j, const std::string& field) {
  return r.list<ActionSpan>(j, "actions", field, [&](const json& v, const std::string& f) {
    if (!v.is_array() || v.size() != 3)
      r.fail(f, fmt::format("expected [name, first step, end step], got {}", v.dump()));
    return ActionSpan{r.string(v[0], f + "[0]"), r.integer(v[1], f + "[1]"), r.integer(v[2], f + "[2]")};
  });
}

ordered_json pipelineToJson(const PipelineInfo& p) {
  ordered_json j;
  j["axis"] = p.axis;
  j["stages"] = p.stages;
  j["stage"] = p.stage;
  j["microbatches"] = p.microbatches;
  j["virtual_stages"] = p.virtualStages;
  j["schedule"] = p.schedule;
  return j;
}

PipelineInfo readPipeline(const ProgramJsonReader& r, const json& j, const std::string& field) {
  r.object(j, field, {"axis", "stages", "stage", "microbatches", "virtual_stages", "schedule"});
  PipelineInfo p;
  p.axis = r.string(j, "axis", field);
  p.stages = r.integer(j, "stages", field);
  p.stage = r.integer(j, "stage", field);
  p.microbatches = r.integer(j, "microbatches", field);
  p.virtualStages = r.integer(j, "virtual_stages", field);
  p.schedule = r.string(j, "schedule", field);
  return p;
}

}  // namespace tessel::rt::json_detail
