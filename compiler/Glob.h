// Globs over dotted names, as a plan writes them ("blocks.*.attn.qkv.weight"): the one
// matcher that the DSL (Plan::shard and Plan::checkpoint, dsl/Plan.h glob_matches) and the
// passes that take globs (tessel-activation-checkpointing) share. Plain C++, no MLIR.
#pragma once

#include <string_view>

namespace tessel {

/// Whether `glob` matches the whole of `name`: `*` matches any run of characters, dots
/// included (so "blocks.*.weight" matches "blocks.0.attn.qkv.weight"), `?` any one
/// character, and every other character itself; no character classes, no escapes.
/// Greedy with one backtrack point (the last '*'): linear without '*', O(|glob| |name|) at
/// worst.
inline bool globMatches(std::string_view glob, std::string_view name) {
  size_t g = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
      ++g;
      ++n;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

}  // namespace tessel
