// Bounding what error messages echo from a hostile file: a 5000-digit JSON number or a long
// token a JSON parser quotes back must not turn a one-line error into pages.
#pragma once

#include <string>

namespace tessel {

/// Longest stretch of file content an error message echoes (characters).
inline constexpr size_t kMaxEchoedChars = 64;

/// `text` itself when it has at most `max` characters, else its first `max` characters and
/// "..." (for a value from a file, such as a JSON number's text).
inline std::string abbreviated(const std::string& text, size_t max = kMaxEchoedChars) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

/// `message` (e.g. a JSON parser's exception text) with every stretch between single quotes
/// longer than `max` characters cut to `max` and "...", and the whole capped at 4 x `max`
/// characters beyond its quoted parts: the cause stays readable, the echoed input bounded.
inline std::string abbreviatedQuotes(const std::string& message, size_t max = kMaxEchoedChars) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('\'', i);
    if (open == std::string::npos) {
      out += message.substr(i);
      break;
    }
    const size_t close = message.find('\'', open + 1);
    out += message.substr(i, open + 1 - i);
    const size_t end = close == std::string::npos ? message.size() : close;
    out += abbreviated(message.substr(open + 1, end - open - 1), max);
    if (close == std::string::npos) break;
    out += '\'';
    i = close + 1;
  }
  return abbreviated(out, 8 * max);
}

}  // namespace tessel
