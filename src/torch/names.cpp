// Note [Names a file may use] in names.h.
#include "names.h"

#include <cstdio>

#include "fxcpp/core/namespace.h"

namespace fxcpp::torch::names {

bool is_ascii_word(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!is_word_char(c)) return false;
  return true;
}

bool is_identifier(std::string_view s) {
  return is_ascii_word(s) && !name_rules().keywords.count(std::string(s));
}

bool is_module_path(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes || s.front() == '.' || s.back() == '.') return false;
  char prev = 0;
  for (char c : s) {
    if (c == '.' ? prev == '.' : !(is_word_char(c) || c == '-')) return false;
    prev = c;
  }
  return true;
}

std::string shown(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + (s.size() > 80 ? "...'" : "'");
}

}  // namespace fxcpp::torch::names
