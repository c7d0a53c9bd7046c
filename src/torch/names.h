// The names a model file may use (private to the torch layer; Note [Names a
// file may use] below). One copy of these rules for every reader and writer:
// load.cpp (.fxpt), pt2.cpp (.pt2), save.cpp (what the writers may record)
// and ops.cpp (operator names).
#pragma once

#include <string>
#include <string_view>

namespace fxcpp::torch::names {

// Note [Names a file may use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The Python runtime rebuilds a loaded graph and generates `forward` from it,
// so strings from a file end up in Python source: a placeholder target becomes
// a parameter of `def forward(self, ...)`, node names become variables, kwargs
// keys keyword arguments, tensor names attribute paths, class_name a class.
// So they are checked for every file, trusted or not (fxcpp never writes
// anything else):
//  - node names, placeholder targets (optionally behind `*` or `**`), kwargs
//    keys and class names are ASCII Python identifiers that are not keywords
//    (the core's NameRules::keywords, Python 3.11's), at most kMaxNameBytes;
//  - tensor names and get_attr targets are module paths: dotted, non-empty
//    parts of [A-Za-z0-9_-] ("layer1.0.conv1.weight"; torch's module names
//    may hold '-', as torchvision's regnets' "block1-0" do, and torch.fx
//    spells such a part getattr(m, "block1-0"), a string literal);
//  - operator names are "namespace::name.overload" of ASCII words, where
//    keywords are allowed (they never become Python names).
// JSON strings are valid UTF-8 (the parsers refuse anything else). Messages
// show a name through shown(), which escapes everything but printable ASCII.

/// The longest name a file may use, in bytes.
constexpr size_t kMaxNameBytes = 4096;

/// [A-Za-z0-9_].
inline bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// A non-empty run of word characters that does not start with a digit, at
/// most kMaxNameBytes long (keywords included). O(size).
bool is_ascii_word(std::string_view s);

/// An ASCII Python identifier that is not a Python keyword. O(size).
bool is_identifier(std::string_view s);

/// Dotted, non-empty parts of [A-Za-z0-9_-], at most kMaxNameBytes. O(size).
bool is_module_path(std::string_view s);

/// `s` quoted for a message: printable ASCII as is, other bytes as \xNN, at
/// most 80 characters then "...".
std::string shown(std::string_view s);

}  // namespace fxcpp::torch::names
