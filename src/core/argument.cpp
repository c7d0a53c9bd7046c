#include "fxcpp/core/argument.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "fxcpp/core/node.h"

namespace fxcpp {

namespace {
struct StringPayload : detail::Payload {
  std::string value;
  explicit StringPayload(std::string v) : value(std::move(v)) {}
};
struct SeqPayload : detail::Payload {
  std::vector<Argument> items;
  Object type;
  bool has_nodes = false;
};
struct DictPayload : detail::Payload {
  ArgPairs items;
  bool has_nodes = false;
};
struct SlicePayload : detail::Payload {
  Argument start, stop, step;
  bool has_nodes = false;
};
struct ForeignPayload : detail::Payload {
  Object obj;
  explicit ForeignPayload(Object o) : obj(std::move(o)) {}
};

const std::vector<Argument>& empty_items() {
  static const std::vector<Argument> e;
  return e;
}
}  // namespace

// `U` is a union; the payload pointer member is set by the factories below.
Argument Argument::string(std::string s) {
  Argument a;
  a.kind_ = ArgKind::String;
  a.u_.p = new StringPayload(std::move(s));
  return a;
}

Argument Argument::tuple(std::vector<Argument> items, Object type) {
  auto* p = new SeqPayload();
  for (auto& i : items) p->has_nodes = p->has_nodes || i.contains_nodes();
  p->items = std::move(items);
  p->type = std::move(type);
  Argument a;
  a.kind_ = ArgKind::Tuple;
  a.u_.p = p;
  return a;
}

Argument Argument::list(std::vector<Argument> items) {
  auto* p = new SeqPayload();
  for (auto& i : items) p->has_nodes = p->has_nodes || i.contains_nodes();
  p->items = std::move(items);
  Argument a;
  a.kind_ = ArgKind::List;
  a.u_.p = p;
  return a;
}

Argument Argument::dict(ArgPairs items) {
  auto* p = new DictPayload();
  // Like torch.fx's map_aggregate, only values are traversed, never keys.
  for (auto& kv : items) p->has_nodes = p->has_nodes || kv.second.contains_nodes();
  p->items = std::move(items);
  Argument a;
  a.kind_ = ArgKind::Dict;
  a.u_.p = p;
  return a;
}

Argument Argument::slice(Argument start, Argument stop, Argument step) {
  auto* p = new SlicePayload();
  p->has_nodes = start.contains_nodes() || stop.contains_nodes() || step.contains_nodes();
  p->start = std::move(start);
  p->stop = std::move(stop);
  p->step = std::move(step);
  Argument a;
  a.kind_ = ArgKind::Slice;
  a.u_.p = p;
  return a;
}

Argument Argument::foreign(Object o) {
  if (!o) return Argument();
  Argument a;
  a.kind_ = ArgKind::Foreign;
  a.u_.p = new ForeignPayload(std::move(o));
  return a;
}

const std::string& Argument::as_string() const { return static_cast<StringPayload*>(u_.p)->value; }
const std::vector<Argument>& Argument::items() const {
  return is_sequence() ? static_cast<SeqPayload*>(u_.p)->items : empty_items();
}
const Object& Argument::tuple_type() const {
  static const Object none;
  return kind_ == ArgKind::Tuple ? static_cast<SeqPayload*>(u_.p)->type : none;
}
const ArgPairs& Argument::pairs() const { return static_cast<DictPayload*>(u_.p)->items; }
const Argument& Argument::slice_start() const { return static_cast<SlicePayload*>(u_.p)->start; }
const Argument& Argument::slice_stop() const { return static_cast<SlicePayload*>(u_.p)->stop; }
const Argument& Argument::slice_step() const { return static_cast<SlicePayload*>(u_.p)->step; }
const Object& Argument::as_object() const { return static_cast<ForeignPayload*>(u_.p)->obj; }

bool Argument::contains_nodes() const {
  switch (kind_) {
    case ArgKind::NodeRef: return true;
    case ArgKind::Tuple:
    case ArgKind::List: return static_cast<SeqPayload*>(u_.p)->has_nodes;
    case ArgKind::Dict: return static_cast<DictPayload*>(u_.p)->has_nodes;
    case ArgKind::Slice: return static_cast<SlicePayload*>(u_.p)->has_nodes;
    default: return false;
  }
}

// ---- Note [Python equality] -----------------------------------------------------------
// Argument::operator== is Python's `a == b` on the values a graph holds, the
// one equality of the core (the subgraph matcher's literal comparisons use it):
// * bool, int and float compare by value across kinds (True == 1 == 1.0), and
//   an int with a float exactly, as CPython does (2**53 + 1 != 2.0**53; nan
//   equals nothing, inf no int);
// * tuples and lists item by item, a tuple never equal to a list; a named
//   tuple compares as a plain tuple;
// * dicts by key set: same length, and each key of one found in the other
//   (keys compared with ==, so 1 and True are one key) with an equal value.
//   Insertion order does not matter;
// * Node references by identity, foreign objects through Object::equals,
//   slices by (start, stop, step).
// Two Arguments sharing one payload are equal without a walk, as CPython's
// containers compare an item with itself by identity first.
namespace {
bool is_numeric(ArgKind k) { return k == ArgKind::Bool || k == ArgKind::Int || k == ArgKind::Double; }

int64_t integer_value(const Argument& a) { return a.kind() == ArgKind::Bool ? (a.as_bool() ? 1 : 0) : a.as_int(); }

// CPython's int == float: exact, never through a rounded conversion.
bool int_equals_double(int64_t i, double d) {
  if (!std::isfinite(d) || d != std::floor(d)) return false;
  // [-2**63, 2**63) holds every int64; a double outside it equals none.
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(d) == i;
}

bool numbers_equal(const Argument& a, const Argument& b) {
  const bool ad = a.kind() == ArgKind::Double, bd = b.kind() == ArgKind::Double;
  if (ad && bd) return a.as_double() == b.as_double();
  if (ad) return int_equals_double(integer_value(b), a.as_double());
  if (bd) return int_equals_double(integer_value(a), b.as_double());
  return integer_value(a) == integer_value(b);
}

bool dicts_equal(const ArgPairs& x, const ArgPairs& y) {
  if (x.size() != y.size()) return false;
  for (const auto& kv : x) {
    auto it = std::find_if(y.begin(), y.end(), [&](const auto& o) { return o.first == kv.first; });
    if (it == y.end() || !(it->second == kv.second)) return false;
  }
  return true;
}
}  // namespace

bool Argument::operator==(const Argument& o) const {
  if (is_numeric(kind_) && is_numeric(o.kind_)) return numbers_equal(*this, o);
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case ArgKind::None: return true;
    case ArgKind::Bool:
    case ArgKind::Int:
    case ArgKind::Double: return numbers_equal(*this, o);  // not reached
    case ArgKind::NodeRef: return u_.n == o.u_.n;
    case ArgKind::String: return as_string() == o.as_string();
    case ArgKind::Tuple:
    case ArgKind::List: return u_.p == o.u_.p || items() == o.items();
    case ArgKind::Dict: return u_.p == o.u_.p || dicts_equal(pairs(), o.pairs());
    case ArgKind::Slice:
      return slice_start() == o.slice_start() && slice_stop() == o.slice_stop() && slice_step() == o.slice_step();
    case ArgKind::Foreign: return as_object().equals(o.as_object());
  }
  return false;
}

int Argument::occurrence(const Node* from) const {
  if (kind_ == ArgKind::NodeRef) return u_.n == from ? 1 : 0;
  if (!contains_nodes()) return 0;
  int found = 0;
  auto visit = [&](const Argument& c) {
    int k = c.occurrence(from);
    if (k < 0) return false;
    found |= k;
    return true;
  };
  switch (kind_) {
    case ArgKind::Tuple:
    case ArgKind::List:
      for (auto& i : items())
        if (!visit(i)) return -1;
      break;
    case ArgKind::Dict:
      for (auto& kv : pairs())
        if (!visit(kv.second)) return -1;
      break;
    case ArgKind::Slice:
      if (!visit(slice_start()) || !visit(slice_stop()) || !visit(slice_step())) return -1;
      break;
    default: return 0;
  }
  if (found && u_.p->refs != 1) return -1;
  return found;
}

bool Argument::can_replace_node_in_place(const Node* from) const { return occurrence(from) >= 0; }

void Argument::replace_node_in_place(const Node* from, Node* to) {
  switch (kind_) {
    case ArgKind::NodeRef:
      if (u_.n == from) u_.n = to;
      return;
    case ArgKind::Tuple:
    case ArgKind::List:
      if (!contains_nodes()) return;
      for (auto& i : static_cast<SeqPayload*>(u_.p)->items) i.replace_node_in_place(from, to);
      return;
    case ArgKind::Dict:
      if (!contains_nodes()) return;
      for (auto& kv : static_cast<DictPayload*>(u_.p)->items) kv.second.replace_node_in_place(from, to);
      return;
    case ArgKind::Slice: {
      if (!contains_nodes()) return;
      auto* sp = static_cast<SlicePayload*>(u_.p);
      sp->start.replace_node_in_place(from, to);
      sp->stop.replace_node_in_place(from, to);
      sp->step.replace_node_in_place(from, to);
      return;
    }
    default: return;
  }
}

Argument Argument::map_nodes(const std::function<Argument(Node*)>& fn) const {
  if (!contains_nodes()) return *this;
  switch (kind_) {
    case ArgKind::NodeRef: return fn(u_.n);
    case ArgKind::Tuple:
    case ArgKind::List: {
      std::vector<Argument> out;
      out.reserve(items().size());
      for (auto& i : items()) out.push_back(i.map_nodes(fn));
      return kind_ == ArgKind::Tuple ? Argument::tuple(std::move(out), tuple_type()) : Argument::list(std::move(out));
    }
    case ArgKind::Dict: {
      ArgPairs out;
      out.reserve(pairs().size());
      for (auto& kv : pairs()) out.emplace_back(kv.first, kv.second.map_nodes(fn));
      return Argument::dict(std::move(out));
    }
    case ArgKind::Slice: {
      // Sequenced (function arguments are evaluated in no set order): fn sees
      // start, stop, step in torch.fx's order, which decides which KeyError a
      // failing graph_copy reports.
      Argument start = slice_start().map_nodes(fn);
      Argument stop = slice_stop().map_nodes(fn);
      Argument step = slice_step().map_nodes(fn);
      return Argument::slice(std::move(start), std::move(stop), std::move(step));
    }
    default: return *this;
  }
}

// ---------------------------------------------------------------------------
// Python-compatible repr helpers.

std::string py_repr_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  // s looks like "-1.2345e+02": split sign, digits, exponent.
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    int decpt = exp + 1;  // digits before the point
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, decpt);
      out += '.';
      out += digits.substr(decpt);
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

namespace {
NonAsciiReprHook g_non_ascii_repr_hook = nullptr;
}  // namespace

void set_non_ascii_repr_hook(NonAsciiReprHook hook) { g_non_ascii_repr_hook = hook; }

std::string py_repr_string(const std::string& s) {
  if (g_non_ascii_repr_hook) {
    for (unsigned char c : s)
      if (c >= 0x80) return g_non_ascii_repr_hook(s);
  }
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(q);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0xa0) {
      // U+0080..U+00A0 are not printable in Python: \x80 .. \xa0.
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", static_cast<unsigned char>(s[i + 1]));
      out += b;
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(q);
  return out;
}

}  // namespace fxcpp
