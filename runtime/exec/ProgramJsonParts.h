// Internals of program.json's encoding shared by its translation units (ProgramJson.cpp: the
// format and the classic steps; ProgramJsonPipeline.cpp: the pipeline parts). Not a public
// interface: use encodeProgramJson / decodeProgramJson (ProgramJson.h).
#pragma once

#include "runtime/exec/Program.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rt::json_detail {

using nlohmann::json;
using nlohmann::ordered_json;

/// Typed access to JSON values, failing with "<file>: <field>: <problem>".
class ProgramJsonReader {
 public:
  explicit ProgramJsonReader(std::string file) : file_(std::move(file)) {}

  /// Throws std::runtime_error "<file>: <field>: <problem>".
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", file_, field, problem));
  }

  /// Checks `j` is an object holding only `allowed` keys.
  void object(const json& j, const std::string& field, std::initializer_list<const char*> allowed) const {
    if (!j.is_object()) fail(field, fmt::format("expected an object, got {}", j.type_name()));
    for (const auto& [key, value] : j.items()) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok) fail(field, fmt::format("unknown field '{}'", key));
    }
  }

  /// The value of `key` in `obj`, or null when absent.
  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  /// The value of `key` in `obj`; fails "<field>.<key>: missing" when absent.
  const json& need(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v) fail(join(field, key), "missing");
    return *v;
  }

  /// "<field>.<key>" ("<key>" at the top level).
  static std::string join(const std::string& field, const char* key) {
    return field.empty() ? key : field + "." + key;
  }

  /// An int64 (required, or `dflt` when absent); fails on another type or an overflow.
  int64_t integer(const json& v, const std::string& field) const {
    if (!v.is_number_integer()) fail(field, fmt::format("expected an integer, got {}", v.dump()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(field, fmt::format("{} is too large", v.dump()));
    return v.get<int64_t>();
  }
  int64_t integer(const json& obj, const char* key, const std::string& field) const {
    return integer(need(obj, key, field), join(field, key));
  }
  int64_t integer(const json& obj, const char* key, const std::string& field, int64_t dflt) const {
    const json* v = find(obj, key);
    return v ? integer(*v, join(field, key)) : dflt;
  }

  /// A buffer id: range-checked here only against int (validateProgram checks the count).
  int id(const json& v, const std::string& field) const {
    int64_t i = integer(v, field);
    if (i < INT_MIN || i > INT_MAX) fail(field, fmt::format("buffer id {} out of range", i));
    return static_cast<int>(i);
  }
  int id(const json& obj, const char* key, const std::string& field) const {
    return id(need(obj, key, field), join(field, key));
  }

  /// A boolean, false when absent.
  bool boolean(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v) return false;
    if (!v->is_boolean()) fail(join(field, key), fmt::format("expected true or false, got {}", v->dump()));
    return v->get<bool>();
  }

  /// A number, 0 when absent.
  double number(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (!v) return 0.0;
    if (!v->is_number()) fail(join(field, key), fmt::format("expected a number, got {}", v->dump()));
    return v->get<double>();
  }

  /// A string (required, or `dflt` when absent).
  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  }
  std::string string(const json& obj, const char* key, const std::string& field) const {
    return string(need(obj, key, field), join(field, key));
  }
  std::string string(const json& obj, const char* key, const std::string& field, const char* dflt) const {
    const json* v = find(obj, key);
    return v ? string(*v, join(field, key)) : dflt;
  }

  /// The array at `key` (required).
  const json& array(const json& obj, const char* key, const std::string& field) const {
    const json& v = need(obj, key, field);
    if (!v.is_array()) fail(join(field, key), fmt::format("expected an array, got {}", v.type_name()));
    return v;
  }

  /// The array at `key` (required), each element converted by element(value, "<field>[i]").
  template <typename T, typename F>
  std::vector<T> list(const json& obj, const char* key, const std::string& field, F element) const {
    std::vector<T> out;
    const json& a = array(obj, key, field);
    for (size_t i = 0; i < a.size(); ++i) out.push_back(element(a[i], fmt::format("{}[{}]", join(field, key), i)));
    return out;
  }

 private:
  std::string file_;
};


/// A send_recv step as program.json writes it: {"op": "send_recv", "tensors", "peers",
/// "sends", "names", "axes", "group", "location"}.
ordered_json sendRecvToJson(const CollectiveStep& step);
/// Reads a send_recv step (`j` is an object whose "op" is "send_recv"); "names" and
/// "location" are optional, the rest required. Does not validate (validateProgram does).
CollectiveStep readSendRecv(const ProgramJsonReader& r, const json& j, const std::string& field);

/// A function's action spans: [[name, firstStep, endStep], ...].
ordered_json actionsToJson(const std::vector<ActionSpan>& actions);
/// Reads "actions" of a function; each entry must be a [string, integer, integer] triple.
std::vector<ActionSpan> readActions(const ProgramJsonReader& r, const json& j, const std::string& field);

/// The program's pipeline record: {"axis", "stages", "stage", "microbatches",
/// "virtual_stages", "schedule"}.
ordered_json pipelineToJson(const PipelineInfo& pipeline);
/// Reads the "pipeline" object (every key required).
PipelineInfo readPipeline(const ProgramJsonReader& r, const json& j, const std::string& field);

}  // namespace tessel::rt::json_detail
