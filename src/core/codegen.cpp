// Python code generation: torch.fx 1.13 CodeGen._gen_python_code.
#include "fxcpp/core/codegen.h"

#include <regex>
#include <sstream>
#include <unordered_map>

namespace fxcpp {

namespace {

struct MagicEntry {
  const char* name;
  const char* fmt;
};
// torch.fx magic_methods (reflectable ones plus comparisons/unary).
const MagicEntry kMagic[] = {
    {"add", "{} + {}"},   {"sub", "{} - {}"},   {"mul", "{} * {}"},   {"floordiv", "{} // {}"},
    {"truediv", "{} / {}"}, {"div", "{} / {}"}, {"mod", "{} % {}"},   {"pow", "{} ** {}"},
    {"lshift", "{} << {}"}, {"rshift", "{} >> {}"}, {"and_", "{} & {}"}, {"or_", "{} | {}"},
    {"xor", "{} ^ {}"},   {"getitem", "{}[{}]"}, {"matmul", "{} @ {}"}, {"eq", "{} == {}"},
    {"ne", "{} != {}"},   {"lt", "{} < {}"},    {"gt", "{} > {}"},    {"le", "{} <= {}"},
    {"ge", "{} >= {}"},   {"pos", "+{}"},       {"neg", "-{}"},       {"invert", "~{}"},
};
const MagicEntry kInplace[] = {
    {"iadd", "{} += {}"},  {"iand", "{} &= {}"},  {"ifloordiv", "{} //= {}"}, {"ilshift", "{} <<= {}"},
    {"imod", "{} %= {}"},  {"imul", "{} *= {}"},  {"imatmul", "{} @= {}"},    {"ior", "{} |= {}"},
    {"ipow", "{} **= {}"}, {"irshift", "{} >>= {}"}, {"isub", "{} -= {}"},    {"itruediv", "{} /= {}"},
    {"ixor", "{} ^= {}"},  {"setitem", "{}[{}] = {}"},
};

const char* find_fmt(const MagicEntry* table, size_t n, const std::string& name) {
  for (size_t i = 0; i < n; ++i)
    if (name == table[i].name) return table[i].fmt;
  return nullptr;
}

// str.format with positional "{}" fields; throws like Python's IndexError.
std::string format_positional(const char* fmt, const std::vector<std::string>& vals) {
  std::string out;
  size_t k = 0;
  for (const char* p = fmt; *p; ++p) {
    if (p[0] == '{' && p[1] == '}') {
      if (k >= vals.size()) throw std::out_of_range("Replacement index " + std::to_string(k) + " out of range for positional args tuple");
      out += vals[k++];
      ++p;
    } else {
      out.push_back(*p);
    }
  }
  return out;
}

class Generator {
 public:
  Generator(const Graph& g, const PythonCodeOptions& o) : g_(g), o_(o) {}

  PythonCode run() {
    // Body lines are kept one by one only for a body_transformer hook;
    // otherwise they go straight into one buffer.
    keep_lines_ = static_cast<bool>(o_.hooks.body_transformer);
    if (!keep_lines_) body_text_.reserve(g_.size() * 40 + 64);
    ns_.reserve(g_.size() + 16);
    // Pre-fill the globals table with the registered custom builtins.
    for (auto& kv : name_rules().custom_builtins) {
      if (kv.second) add_global(kv.first, kv.second);
      else ns_.reserve_name(kv.first);
    }
    compute_last_uses();
    for (Node* n : g_.nodes()) {
      if (o_.verbose) append_stacktrace_summary(*n);
      emit_node(*n);
      delete_unused_values(*n);
    }
    if (body_.empty() && body_text_.empty()) emit("pass\n");

    std::string wrap_stmts;
    if (!wrapped_.empty()) {
      std::string wrap_name = o_.hooks.wrap_fn ? add_global("wrap", o_.hooks.wrap_fn) : std::string("wrap");
      for (size_t i = 0; i < wrapped_.size(); ++i) {
        if (i) wrap_stmts += '\n';
        wrap_stmts += wrap_name + "(\"" + wrapped_[i] + "\")";
      }
    }
    if (o_.hooks.body_transformer) body_ = o_.hooks.body_transformer(std::move(body_));
    if (!keep_lines_) body_.push_back(std::move(body_text_));  // one piece: the whole body
    if (o_.hooks.additional_globals)
      for (auto& kv : o_.hooks.additional_globals()) add_global(kv.first, kv.second);

    std::string prologue;
    if (o_.hooks.gen_fn_def) {
      prologue = o_.hooks.gen_fn_def(free_vars_, maybe_return_annotation_);
    } else {
      if (free_vars_.empty() || free_vars_[0] != "self") free_vars_.insert(free_vars_.begin(), "self");
      prologue = "def forward(";
      for (size_t i = 0; i < free_vars_.size(); ++i) {
        if (i) prologue += ", ";
        prologue += free_vars_[i];
      }
      prologue += ")" + maybe_return_annotation_ + ":";
    }

    // src = "\n" + wrap + "\n\n" + prologue + "\n" + body, where body is
    // '\n'.join('    ' + line for line in ''.join(body_).split('\n')),
    // written straight into one exactly-sized buffer (no intermediate copies:
    // for large graphs each copy is tens of megabytes of fresh pages).
    size_t total = 0;
    size_t newlines = 0;
    for (auto& b : body_) {
      total += b.size();
      for (char c : b) newlines += c == '\n';
    }
    PythonCode pc;
    pc.src.reserve(8 + wrap_stmts.size() + prologue.size() + total + 4 * (newlines + 1));
    pc.src += "\n";
    pc.src += wrap_stmts;
    pc.src += "\n\n";
    pc.src += prologue;
    pc.src += "\n    ";
    for (auto& b : body_) {
      size_t from = 0;
      for (size_t nl; (nl = b.find('\n', from)) != std::string::npos; from = nl + 1) {
        pc.src.append(b, from, nl + 1 - from);
        pc.src += "    ";
      }
      pc.src.append(b, from, std::string::npos);
    }
    pc.globals = std::move(globals_);
    return pc;
  }

  /// Codegen name of a node of this graph: created at first mention (torch.fx
  /// order), then cached by the node's index.
  std::string_view node_repr(const Node* n) {
    if (n->graph() != &g_) return ns_.create_name(n->name(), n, nullptr);  // lint-invalid graphs
    const char*& slot = names_[n->index()];
    if (!slot) slot = ns_.create_name(n->name(), nullptr, nullptr).c_str();
    return NameRef(slot).view();
  }

 private:
  std::string add_global(const std::string& hint, const Object& obj) {
    std::string ref = obj.iface()->qualified_reference(obj.get());
    if (!ref.empty()) return ref;
    std::string name = ns_.create_name(hint, obj.get(), &obj).str();
    if (global_index_.count(name)) return name;
    global_index_[name] = globals_.size();
    globals_.emplace_back(name, obj);
    return name;
  }

  std::string type_repr(const Object& t) {
    return t.iface()->annotation(t.get(), [this](const std::string& h, const Object& o) { return add_global(h, o); });
  }

  std::string repr(const Argument& a) {
    return repr_argument(a, [this](const Node* n) { return std::string(node_repr(n)); });
  }

  std::string get_repr(const Argument& a) {
    // Top-level NamedTuples are rebuilt through their (global) class.
    if (a.kind() == ArgKind::Tuple && a.tuple_type()) {
      const Object& t = a.tuple_type();
      std::string gname = add_global(t.qualified_name(), t);
      return gname + repr(Argument::tuple(a.items()));
    }
    return repr(a);
  }

  std::string format_args(ArgSpan args, size_t from, const KwArgs& kwargs) {
    std::string args_s;
    for (size_t i = from; i < args.size(); ++i) {
      if (i > from) args_s += ", ";
      args_s += get_repr(args[i]);
    }
    std::string kwargs_s;
    for (size_t i = 0; i < kwargs.size(); ++i) {
      if (i) kwargs_s += ", ";
      kwargs_s += kwargs[i].first + " = " + get_repr(kwargs[i].second);
    }
    if (!args_s.empty() && !kwargs_s.empty()) return args_s + ", " + kwargs_s;
    return args_s.empty() ? kwargs_s : args_s;
  }

  void compute_last_uses() {
    // Reverse walk: the first use met is the last use in program order. The
    // values freed after each user are the contiguous run
    // dels_[del_begin_[user] .. del_end_[user]) (side tables by node index).
    size_t cap = g_.node_capacity();
    names_.assign(cap, nullptr);
    del_begin_.assign(cap, 0);
    del_end_.assign(cap, 0);
    std::vector<bool> seen(cap, false);
    dels_.clear();
    dels_.reserve(g_.size());
    std::vector<const Node*> foreign_seen;  // lint-invalid graphs only
    for (Node* user : g_.nodes().reversed()) {
      uint32_t ui = user->index();
      del_begin_[ui] = static_cast<uint32_t>(dels_.size());
      auto reg = [&](Node* n) {
        if (n->graph() != &g_) {
          for (const Node* f : foreign_seen)
            if (f == n) return;
          foreign_seen.push_back(n);
        } else {
          if (seen[n->index()]) return;
          seen[n->index()] = true;
        }
        dels_.push_back(n);
      };
      for (auto& a : user->args()) a.for_each_node(reg);
      for (auto& kv : user->kwargs()) kv.second.for_each_node(reg);
      del_end_[ui] = static_cast<uint32_t>(dels_.size());
    }
  }

  void delete_unused_values(const Node& user) {
    if (user.op() == Op::Placeholder) return;
    if (user.op() == Op::Output) {
      emit("\n");
      return;
    }
    uint32_t ui = user.index();
    if (del_begin_[ui] == del_end_[ui]) {
      emit("\n");
      return;
    }
    std::string s = ";  ";
    for (uint32_t k = del_begin_[ui]; k < del_end_[ui]; ++k) {
      const Node* n = dels_[k];
      s += node_repr(n);
      s += " = ";
    }
    s += "None\n";
    emit(std::move(s));
  }

  void append_stacktrace_summary(const Node& n) {
    if (n.op() == Op::Placeholder || n.op() == Op::Output) return;
    std::optional<std::string> st = o_.hooks.stack_trace ? o_.hooks.stack_trace(n) : std::nullopt;
    if (st && !st->empty()) {
      if (!prev_stacktrace_ || *st != *prev_stacktrace_) {
        prev_stacktrace_ = *st;
        // Split stripped text into stripped lines.
        std::vector<std::string> lines;
        {
          auto strip = [](const std::string& x) {
            size_t b = x.find_first_not_of(" \t\r\n\f\v");
            if (b == std::string::npos) return std::string();
            size_t e = x.find_last_not_of(" \t\r\n\f\v");
            return x.substr(b, e - b + 1);
          };
          std::string all = strip(*st);
          std::istringstream in(all);
          std::string l;
          while (std::getline(in, l)) lines.push_back(l);
          if (!all.empty() && all.back() == '\n') lines.push_back("");
          for (auto& x : lines) x = strip(x);
        }
        size_t idx = 0;
        std::vector<std::string> context;
        while (idx < lines.size()) {
          if (lines[idx].rfind("File ", 0) == 0) break;
          context.push_back(lines[idx]);
          ++idx;
        }
        std::vector<std::string> summary;
        if (!context.empty()) {
          std::string c;
          for (size_t i = 0; i < context.size(); ++i) c += (i ? ", " : "") + context[i];
          summary.push_back(c);
        }
        if (idx + 1 < lines.size()) {
          static const std::regex pat("^File \"(.+)\", line (\\d+), in (.+)$");
          std::smatch m;
          if (std::regex_match(lines[idx], m, pat)) summary.push_back("File: " + m[1].str() + ":" + m[2].str());
          summary.push_back("code: " + lines[idx + 1]);
        }
        std::string s;
        for (size_t i = 0; i < summary.size(); ++i) s += (i ? ", " : "") + summary[i];
        emit("\n# " + s + "\n");
      }
    } else if (!prev_stacktrace_ || !prev_stacktrace_->empty()) {
      prev_stacktrace_ = std::string();
      emit("\n# No stacktrace found for following nodes \n");
    }
  }

  void emit_node(const Node& node) {
    std::string ann = node.type() ? " : " + type_repr(node.type()) : "";
    const auto& args = node.args();
    switch (node.op()) {
      case Op::Placeholder: {
        std::string def = args.empty() ? "" : " = " + repr(args[0]);
        free_vars_.push_back(node.target().str() + ann + def);
        std::string raw;
        for (char c : node.target().str())
          if (c != '*') raw.push_back(c);
        std::string r(node_repr(&node));
        if (raw != r) emit(r + " = " + raw + "\n");
        return;
      }
      case Op::CallMethod: {
        std::string r(node_repr(&node));
        std::string self = args.empty() ? throw std::out_of_range("call_method node without arguments") : repr(args[0]);
        std::string line = r + ann + " = " + format_target(self, node.target().str());
        line += "(" + format_args(args, 1, node.kwargs()) + ")";
        emit(std::move(line));
        return;
      }
      case Op::CallFunction: {
        const Object& fn = node.target().fn();
        std::string opname = fn.iface()->operator_name(fn.get());
        if (!opname.empty()) {
          if (const char* fmt = find_fmt(kMagic, sizeof(kMagic) / sizeof(kMagic[0]), opname)) {
            std::string r(node_repr(&node));
            std::vector<std::string> vals;
            for (auto& a : args) vals.push_back(repr(a));
            emit(r + ann + " = " + format_positional(fmt, vals));
            return;
          }
          if (const char* fmt = find_fmt(kInplace, sizeof(kInplace) / sizeof(kInplace[0]), opname)) {
            std::vector<std::string> vals;
            for (auto& a : args) vals.push_back(repr(a));
            std::string stmt = format_positional(fmt, vals);
            std::string r(node_repr(&node));
            emit(stmt + ";  " + r + ann + " = " + repr(args.empty() ? throw std::out_of_range("vector::_M_range_check") : args[0]));
            return;
          }
        }
        std::string gname = add_global(fn.qualified_name(), fn);
        if (gname == "getattr" && args.size() == 2 && args[1].is_string() && is_identifier(args[1].as_string())) {
          std::string r(node_repr(&node));
          emit(r + ann + " = " + format_target(repr(args[0]), args[1].as_string()));
          return;
        }
        std::string r(node_repr(&node));
        emit(r + ann + " = " + gname + "(" + format_args(args, 0, node.kwargs()) + ")");
        if (o_.hooks.is_wrapped && o_.hooks.is_wrapped(node)) {
          bool seen = false;
          for (auto& w : wrapped_) seen = seen || w == gname;
          if (!seen) wrapped_.push_back(gname);
        }
        return;
      }
      case Op::CallModule: {
        std::string r(node_repr(&node));
        emit(r + ann + " = " + format_target(o_.root_module, node.target().str()) + "(" +
                        format_args(args, 0, node.kwargs()) + ")");
        return;
      }
      case Op::GetAttr: {
        std::string r(node_repr(&node));
        emit(r + ann + " = " + format_target(o_.root_module, node.target().str()));
        return;
      }
      case Op::Output: {
        if (node.type()) maybe_return_annotation_ = " -> " + type_repr(node.type());
        Argument out = args.empty() ? Argument() : args[0];
        if (o_.hooks.generate_output) {
          emit(o_.hooks.generate_output(out, [this](const Argument& a) { return repr(a); }));
        } else {
          emit("return " + repr(out));
        }
        return;
      }
      case Op::Root: return;
    }
  }

  const Graph& g_;
  const PythonCodeOptions& o_;
  Namespace ns_;
  std::vector<std::pair<std::string, Object>> globals_;
  std::unordered_map<std::string, size_t> global_index_;
  std::vector<std::string> free_vars_;
  std::vector<std::string> body_;   // lines, when keep_lines_
  std::string body_text_;           // the body, when !keep_lines_
  bool keep_lines_ = false;
  void emit(std::string&& piece) {
    if (keep_lines_) body_.push_back(std::move(piece));
    else body_text_ += piece;
  }
  void emit(const char* piece) { emit(std::string(piece)); }
  std::vector<std::string> wrapped_;
  std::vector<const Node*> dels_;       // values freed after each user, grouped by user
  std::vector<uint32_t> del_begin_;     // by user index: range in dels_
  std::vector<uint32_t> del_end_;
  std::vector<const char*> names_;      // codegen name (NameRef text) by node index
  std::string maybe_return_annotation_;
  std::optional<std::string> prev_stacktrace_;
};

}  // namespace

std::string format_target(const std::string& base, const std::string& target) {
  std::string r = base;
  size_t start = 0;
  while (true) {
    size_t dot = target.find('.', start);
    std::string e = target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!is_identifier(e)) r = "getattr(" + r + ", \"" + e + "\")";
    else r += "." + e;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return r;
}

PythonCode python_code(const Graph& g, const PythonCodeOptions& opts) {
  Generator gen(g, opts);
  return gen.run();
}

std::string ObjectInterface::annotation(void* p, const AddGlobalFn& add_global) const {
  return add_global(type_repr(p), Object::borrow(this, p));
}

}  // namespace fxcpp
