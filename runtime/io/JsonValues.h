// Reading numbers from a JSON file a user may have edited (bundle.json's config): whether a
// value is an integer or a finite number in a range, without the conversions nlohmann::json
// would do silently (a float to an integer, an unsigned value past INT64_MAX to a negative one,
// 1e30 to an int), and the value as an error message may echo it.
#pragma once

#include "runtime/io/MessageText.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tessel {

/// Whether the JSON value `j` is an integer in [lo, hi]: false for a float (1.5, 2**70), a
/// string, or an unsigned value past INT64_MAX, which reading as int64 would truncate or wrap.
inline bool jsonIntegerIn(const nlohmann::json& j, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= static_cast<uint64_t>(hi) && j.get<int64_t>() >= lo;
  return j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
}

/// Whether the JSON value `j` is a number (integer or float) in [lo, hi], or in (lo, hi] when
/// `openBelow`; false for a string, a boolean or null. JSON has no NaN or infinity, so a number
/// within bounds is finite.
inline bool jsonNumberIn(const nlohmann::json& j, double lo, double hi, bool openBelow = false) {
  if (!j.is_number()) return false;
  const double v = j.get<double>();
  return (openBelow ? v > lo : v >= lo) && v <= hi;
}

/// `object[key]` as an error message shows it: "missing" when `object` is not an object or
/// lacks `key`, else the value's JSON text, abbreviated (MessageText.h).
inline std::string jsonShown(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object() || !object.contains(key)) return "missing";
  return abbreviated(object.at(key).dump());
}

}  // namespace tessel
