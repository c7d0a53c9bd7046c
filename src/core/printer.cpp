// Graph and node printing: torch.fx's str(graph) / Node.format_node, in the
// dialect in force (Note [Dialect]) (fxcpp/core/printer.h; Graph::print and
// Node::format_node are members).
#include "fxcpp/core/printer.h"

#include <charconv>
#include <ostream>
#include <sstream>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/dialect.h"
#include "fxcpp/core/graph.h"

namespace fxcpp {

namespace {
void append_int(std::string& out, int64_t i) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), i);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void repr_into(std::string& out, const Argument& a, const NodeNameFn& nn);

void repr_seq(std::string& out, const std::vector<Argument>& items, const NodeNameFn& nn) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    repr_into(out, items[i], nn);
  }
}

void repr_into(std::string& out, const Argument& a, const NodeNameFn& nn) {
  switch (a.kind()) {
    case ArgKind::None: out += "None"; return;
    case ArgKind::Bool: out += a.as_bool() ? "True" : "False"; return;
    case ArgKind::Int: append_int(out, a.as_int()); return;
    case ArgKind::Double: out += py_repr_double(a.as_double()); return;
    case ArgKind::String: out += py_repr_string(a.as_string()); return;
    case ArgKind::NodeRef: out += nn(a.as_node()); return;
    case ArgKind::Tuple: {
      const Object& t = a.tuple_type();
      if (t) {
        // NamedTuple repr: Name(f1=v1, f2=v2)
        auto fields = t.iface()->tuple_fields(t.get());
        out += t.name();
        out += '(';
        const auto& items = a.items();
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += ", ";
          if (i < fields.size()) {
            out += fields[i];
            out += '=';
          }
          repr_into(out, items[i], nn);
        }
        out += ')';
        return;
      }
      out += '(';
      repr_seq(out, a.items(), nn);
      if (a.items().size() == 1) out += ',';
      out += ')';
      return;
    }
    case ArgKind::List:
      out += '[';
      repr_seq(out, a.items(), nn);
      out += ']';
      return;
    case ArgKind::Dict: {
      out += '{';
      bool first = true;
      for (auto& kv : a.pairs()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, kv.first, nn);
        out += ": ";
        repr_into(out, kv.second, nn);
      }
      out += '}';
      return;
    }
    case ArgKind::Slice:
      out += "slice(";
      repr_into(out, a.slice_start(), nn);
      out += ", ";
      repr_into(out, a.slice_stop(), nn);
      out += ", ";
      repr_into(out, a.slice_step(), nn);
      out += ')';
      return;
    case ArgKind::Foreign: out += a.as_object().repr(); return;
  }
}

std::string_view node_plain_name(const Node* n) { return n->name(); }

// Python str(): like repr() except that a top-level string prints raw and a
// foreign object uses its str().
std::string str_argument(const Argument& a) {
  if (a.kind() == ArgKind::String) return a.as_string();
  if (a.kind() == ArgKind::Foreign) return a.as_object().str();
  std::string out;
  repr_into(out, a, node_plain_name);
  return out;
}

void format_arg_into(std::string& out, const Argument& a) {
  switch (a.kind()) {
    case ArgKind::List:
    case ArgKind::Tuple: {
      bool list = a.kind() == ArgKind::List;
      out += list ? '[' : '(';
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (i) out += ", ";
        format_arg_into(out, a.items()[i]);
      }
      if (!list && a.items().size() == 1) out += ',';
      out += list ? ']' : ')';
      return;
    }
    case ArgKind::Dict: {
      out += '{';
      bool first = true;
      for (auto& kv : a.pairs()) {
        if (!first) out += ", ";
        first = false;
        out += str_argument(kv.first);
        out += ": ";
        format_arg_into(out, kv.second);
      }
      out += '}';
      return;
    }
    case ArgKind::NodeRef:
      out += '%';
      out += a.as_node()->name();
      return;
    default: out += str_argument(a); return;
  }
}

std::string type_str(const Object& t) { return t.iface()->type_repr(t.get()); }
}  // namespace

std::string repr_argument(const Argument& a, const std::function<std::string(const Node*)>& node_name) {
  std::string out;
  std::string held;  // the current node's name, kept alive for the view
  repr_into(out, a, [&](const Node* n) -> std::string_view {
    held = node_name(n);
    return held;
  });
  return out;
}

void repr_argument_into(std::string& out, const Argument& a, const NodeNameFn& node_name) {
  repr_into(out, a, node_name);
}

std::string format_arg(const Argument& a) {
  std::string out;
  format_arg_into(out, a);
  return out;
}

std::optional<std::string> Node::format_node(std::vector<std::string>* placeholder_names,
                                             std::string* maybe_return_typename) const {
  Graph::BusyScope busy(*graph());
  // Note [Dialect]: torch.fx 2.x spells the count `num_users`.
  std::string users = (dialect() == Dialect::fx_1_13 ? "[#users=" : "[num_users=") + std::to_string(num_users()) + "]";
  const Object& type_obj = type();
  // Placeholders and outputs print the annotation `if self.type` (a falsy one,
  // e.g. (), is left out); the other ops test `is not None`.
  const bool type_ = (op() == Op::Placeholder || op() == Op::Output) && type_obj &&
                     type_obj.iface()->truthy(type_obj.get());
  const std::string name_(name());
  const KwArgs& kwargs_ = kwargs();
  const ArgSpan args_ = args();
  const Op op_ = op();
  switch (op_) {
    case Op::Placeholder: {
      std::string arg_str = target_.str();
      if (type_) arg_str += arg_str + ": " + type_str(type_obj);  // (sic) torch.fx 1.13
      if (placeholder_names && !placeholder_names->empty()) {
        placeholder_names->push_back(arg_str);
        return std::nullopt;
      }
      std::string maybe_typename = type_ ? type_str(type_obj) + " " : "";
      std::string default_val = args_.empty() ? "" : "(default=" + str_argument(args_[0]) + ")";
      return "%" + name_ + " : " + maybe_typename + users + " = placeholder[target=" + target_.str() + "]" + default_val;
    }
    case Op::GetAttr: {
      std::string maybe_typename = type_obj ? type_str(type_obj) + " " : "";  // `is not None` here
      return "%" + name_ + " : " + maybe_typename + users + " = get_attr[target=" + target_.str() + "]";
    }
    case Op::Output: {
      if (type_ && maybe_return_typename) *maybe_return_typename = " -> " + type_str(type_obj);
      // torch.fx formats `self.args[0]`: an output without args raises IndexError.
      if (args_.empty()) throw std::out_of_range("tuple index out of range");
      return "return " + str_argument(args_[0]);
    }
    case Op::Root: return std::string();
    default: {
      std::string maybe_typename = type_obj ? type_str(type_obj) + " " : "";  // `is not None` here
      std::string tgt = target_.fn() ? target_.fn().iface()->pretty_target(target_.fn().get()) : target_.str().get();
      std::string a = "(";
      for (size_t i = 0; i < args_.size(); ++i) {
        if (i) a += ", ";
        format_arg_into(a, args_[i]);
      }
      if (args_.size() == 1) a += ',';
      a += ')';
      std::string k = "{";
      for (size_t i = 0; i < kwargs_.size(); ++i) {
        if (i) k += ", ";
        k += kwargs_[i].first;
        k += ": ";
        format_arg_into(k, kwargs_[i].second);
      }
      k += '}';
      return "%" + name_ + " : " + maybe_typename + users + " = " + op_name(op_) + "[target=" + tgt + "](args = " + a +
             ", kwargs = " + k + ")";
    }
  }
  return std::nullopt;
}

void Graph::print(std::ostream& os) const {
  BusyScope busy(*this);
  std::vector<std::string> placeholder_names;
  std::string s = "graph():";
  for (Node* n : nodes()) {
    auto line = n->format_node(&placeholder_names);
    if (line && !line->empty()) {
      s += "\n    ";
      s += *line;
    }
  }
  os << s;
}

}  // namespace fxcpp
