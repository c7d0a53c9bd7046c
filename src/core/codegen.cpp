// Python code generation: torch.fx CodeGen._gen_python_code, in the dialect
// in force (Note [Dialect]).
#include "fxcpp/core/codegen.h"

#include "fxcpp/core/dialect.h"
#include "fxcpp/core/last_uses.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <stdexcept>
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

// Note [Strings in generated code]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A graph may come from a file (fxcpp.aten.load, fxcpp::torch::load), so no
// string of it may reach the generated source as code unchecked: a
// placeholder's target becomes a parameter of `def forward`, attribute names
// (get_attr, call_module, call_method targets) become `.name` or
// `getattr(base, "name")`, keyword argument names become `name = value`.
// Each such string is either checked to be a plain name (an identifier that
// is not a keyword; a placeholder may add a leading `*` or `**`) or embedded
// as an escaped string literal (append_string_literal); what can be neither
// (a placeholder target or a keyword argument name that is not a plain name)
// raises std::invalid_argument naming the node. For every graph whose
// torch.fx code compiles, the output is byte-identical to torch.fx's; where
// torch.fx embeds such text verbatim -- code that does not compile, or that
// runs the text, as `def forward(self, x=__import__('os').system(...))`
// would -- fxcpp escapes or refuses (a deliberate divergence). Node names
// need no check: codegen names every value through its Namespace, which
// only makes identifiers. The loaders validate these strings too
// (src/torch/load.cpp); this is the second wall.

// A Python identifier that is not a keyword: safe to write as code.
bool is_plain_name(std::string_view s) {
  if (!is_identifier(s)) return false;
  if (s.size() < 2 || s.size() > 8) return true;  // Python's keywords have 2 to 8 characters
  return name_rules().keywords.count(std::string(s)) == 0;
}

// Appends `s` as a double-quoted Python string literal: identical to the text
// torch.fx writes between its quotes unless `s` holds a quote, a backslash or
// a control character, which are escaped. (Not py_repr_string: repr picks its
// quote by content and escapes U+0080..U+00A0, which torch.fx writes raw.)
void append_string_literal(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
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
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::string refusal_text(const Node& node, const std::string& what, const std::string& text) {
  return "cannot generate code for node '" + std::string(node.name()) + "': its " + what + " " +
         py_repr_string(text) + " is not a Python identifier, so it cannot be written into the generated code";
}

class Generator {
 public:
  Generator(const Graph& g, const PythonCodeOptions& o) : g_(g), o_(o) {}

  PythonCode run() {
    // Body lines are kept one by one only for a body_transformer hook;
    // otherwise they go straight into one buffer.
    keep_lines_ = static_cast<bool>(o_.hooks.body_transformer);
    // Over-reserving is cheap: pages never written are never faulted in,
    // while a regrow copies the whole body into fresh pages.
    if (!keep_lines_) body_text_.reserve(g_.size() * 96 + 4096);
    fast_names_ = g_.names_from_namespace();
    if (!fast_names_) ns_.reserve(g_.size() + 16);
    // Pre-fill the globals table with the registered custom builtins.
    for (auto& kv : name_rules().custom_builtins) {
      if (kv.second) add_global(kv.first, kv.second);
      else ns_.reserve_name(kv.first);
    }
    names_.assign(g_.node_capacity(), nullptr);
    last_uses_ = last_uses(g_, /*include_foreign=*/true);  // Note [Freeing values in generated code]
    // Note [Verbose annotations]: profiler markers (torch.fx 2.x record_func).
    const bool record = fx2_ && o_.record_func;
    if (record) emit("_rf = torch._C._profiler._RecordFunctionFast('## ENTER_GRAPH_PLACEHOLDER_KEY ##'); _rf.__enter__()\n");
    size_t index = 0;
    std::vector<uint32_t> node_lines;
    node_lines.reserve(g_.size());
    // With a body_transformer, torch.fx 2.x's counter markers go through it (Note [Line
    // numbers of generated code]).
    const bool counters = fx2_ && keep_lines_;
    for (Node* n : g_.nodes()) {
      if (o_.verbose) append_stacktrace_summary(*n);
      if (counters) emit("# COUNTER: " + std::to_string(index) + "\n");
      node_lines.push_back(static_cast<uint32_t>(body_newlines() + stripped_lines_));
      const bool record_node =
          record && (n->op() == Op::CallFunction || n->op() == Op::CallMethod || n->op() == Op::CallModule);
      if (record_node) {
        std::string rf = "_rf_" + std::string(n->name());
        emit(rf + " = torch._C._profiler._RecordFunctionFast('## " + std::to_string(index) + " ##'); " + rf +
             ".__enter__()\n");
      }
      emit_node(*n);
      delete_unused_values(*n);
      if (record_node) emit("_rf_" + std::string(n->name()) + ".__exit__(None, None, None)\n");
      ++index;
    }
    if (record) emit("_rf.__exit__(None, None, None)\n");
    // Raised after every node is generated, so that an error torch.fx raises
    // at a later node comes first, as it does in torch.fx.
    if (refusal_) throw std::invalid_argument(*refusal_);
    // An empty body is `pass`; torch.fx 2.x writes it only for a graph
    // without nodes (a graph of placeholders gets an empty body).
    if (fx2_ ? g_.size() == 0 && !record : body_.empty() && body_text_.empty()) emit("pass\n");

    std::string wrap_stmts;
    if (!wrapped_.empty()) {
      std::string wrap_name = o_.hooks.wrap_fn ? add_global("wrap", o_.hooks.wrap_fn) : std::string("wrap");
      for (size_t i = 0; i < wrapped_.size(); ++i) {
        if (i) wrap_stmts += '\n';
        wrap_stmts += wrap_name + "(\"" + wrapped_[i] + "\")";
      }
    }
    if (o_.hooks.body_transformer) body_ = o_.hooks.body_transformer(std::move(body_));
    if (o_.hooks.additional_globals)
      for (auto& kv : o_.hooks.additional_globals()) add_global(kv.first, kv.second);

    std::string prologue;
    if (o_.hooks.gen_fn_def) {
      prologue = o_.hooks.gen_fn_def(free_vars_, maybe_return_annotation_);
    } else {
      if (free_vars_.empty() || free_vars_[0] != "self") free_vars_.insert(free_vars_.begin(), "self");
      prologue = "def forward(";
      if (fx2_ && o_.expanded_def) {
        // One parameter per line; a parameter's text after a '#' becomes its comment.
        prologue += '\n';
        for (const std::string& v : free_vars_) {
          size_t hash = v.find('#');
          if (hash == std::string::npos) {
            prologue += "    " + v + ",\n";
          } else {
            prologue += "    " + rstrip_ws(v.substr(0, hash)) + ",  # " + lstrip_ws(v.substr(hash + 1)) + "\n";
          }
        }
      } else {
        for (size_t i = 0; i < free_vars_.size(); ++i) {
          if (i) prologue += ", ";
          prologue += free_vars_[i];
        }
      }
      prologue += ")" + maybe_return_annotation_ + ":";
    }

    // src = "\n" + wrap + "\n\n" + prologue + "\n" + body, where body is
    // '\n'.join('    ' + line for line in ''.join(body_).split('\n')).
    PythonCode pc;
    // Note [Line numbers of generated code]. torch.fx 2.x numbers the body's
    // lines as it builds them, a marker line before each node (then dropped),
    // and before stripping the body's leading newline: a verbose body whose
    // first piece is a stack-trace comment counts one more line than it shows
    // (stripped_lines_). Its keys start after the header's lines. With a
    // body_transformer the markers are real "# COUNTER: i" lines that go
    // through the transformer and are read back afterwards (counted_body), as
    // torch.fx 2.x does; 1.13 writes none and keeps no map.
    if (!o_.hooks.body_transformer) {
      pc.node_lines = std::move(node_lines);
      pc.body_lines = static_cast<uint32_t>(body_newlines() + stripped_lines_ + 1);
    }
    pc.prologue_lines = static_cast<uint32_t>(std::count(prologue.begin(), prologue.end(), '\n') + 1);
    pc.prologue_start = static_cast<uint32_t>(std::count(wrap_stmts.begin(), wrap_stmts.end(), '\n') + 4);
    std::string header = "\n" + wrap_stmts + "\n\n" + prologue + "\n    ";
    if (counters) return counted_body(std::move(pc), wrap_stmts, prologue);
    if (!keep_lines_) {
      // body_text_ is indented already: the header goes in front, in place
      // (no second buffer: for large graphs that is tens of megabytes of
      // fresh pages).
      body_text_.insert(0, header);
      pc.src = std::move(body_text_);
      pc.globals = std::move(globals_);
      return pc;
    }
    size_t total = 0;
    size_t newlines = 0;
    for (auto& b : body_) {
      total += b.size();
      for (char c : b) newlines += c == '\n';
    }
    pc.src.reserve(header.size() + total + 4 * (newlines + 1));
    pc.src += header;
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

  /// The source of a body that went through a body_transformer with torch.fx 2.x's
  /// "# COUNTER: i" markers: each line holding one sets the current node (the first
  /// digits after the marker) and is dropped; every other line is kept and mapped to the
  /// current node; the body loses its leading newlines and each line is indented.
  PythonCode counted_body(PythonCode pc, const std::string& wrap_stmts, const std::string& prologue) {
    std::string joined;
    for (auto& b : body_) joined += b;
    static const std::string marker = "# COUNTER: ";
    std::vector<std::string_view> kept;
    int64_t current = -1;
    size_t from = 0;
    while (true) {
      size_t nl = joined.find('\n', from);
      std::string_view line(joined.data() + from, (nl == std::string::npos ? joined.size() : nl) - from);
      size_t m = line.find(marker);
      size_t d = m == std::string_view::npos ? m : m + marker.size();
      if (d != std::string_view::npos && d < line.size() && line[d] >= '0' && line[d] <= '9') {
        int64_t v = 0;
        for (; d < line.size() && line[d] >= '0' && line[d] <= '9'; ++d)
          v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (line[d] - '0');
        current = v;
      } else {
        pc.line_nodes.push_back(current);
        kept.push_back(line);
      }
      if (nl == std::string::npos) break;
      from = nl + 1;
    }
    size_t first = 0;  // "\n".join(kept).lstrip("\n"): leading empty lines go
    while (first + 1 < kept.size() && kept[first].empty()) ++first;
    pc.src = "\n" + wrap_stmts + "\n\n" + prologue + "\n";
    for (size_t i = first; i < kept.size(); ++i) {
      if (i > first) pc.src += '\n';
      pc.src += "    ";
      pc.src += kept[i];
    }
    pc.globals = std::move(globals_);
    return pc;
  }

  /// Codegen name of a node of this graph: created at first mention (torch.fx
  /// order), then cached by the node's index.
  std::string_view node_repr(const Node* n) {
    // A node of another graph (lint-invalid graphs): torch.fx overrides the
    // repr of this graph's nodes only, so it prints under its own name.
    if (n->graph() != &g_) return n->name();
    const char*& slot = names_[n->index()];
    if (!slot) {
      if (fast_names_ && ns_.keeps(n->name())) {
        slot = n->name_c_str();
      } else {
        leave_fast_names();
        slot = ns_.create_name(n->name(), nullptr, nullptr).c_str();
      }
    }
    return NameRef(slot).view();
  }

 private:
  // Note [Codegen naming fast path]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // torch.fx names every node again in a fresh namespace while generating
  // code, so a node keeps its name unless a global (or a keyword or builtin)
  // took it first. When all node names came from the graph's namespace they
  // are unique, clean and legal already, so the re-naming is the identity
  // unless a name clashes with something in ns_ -- which then holds only the
  // globals and reserved names. While fast_names_ holds, a node whose name
  // ns_ keeps() is recorded without being inserted (no hash-table traffic per
  // node), and a global's name is vetoed if the graph's namespace has it (it
  // might be a recorded node's). On any doubt, leave_fast_names() inserts the
  // recorded node names into ns_, which is then exactly the namespace the
  // plain algorithm would have built, and naming continues the plain way.
  // In Dialect::fx_2 a global whose name needs a suffix search is such a
  // doubt too (the per-base counters depend on the node names not recorded
  // in ns_, Note [Per-base counters]); the replay sets the counters from the
  // recorded names in graph order, which is their creation order up to a
  // global whose own hint ends in "_<digits>" sharing a base with them.
  void leave_fast_names() {
    if (!fast_names_) return;
    fast_names_ = false;
    ns_.reserve(g_.size() + 16);
    for (Node* m : g_.nodes()) {
      const char* slot = names_[m->index()];
      if (!slot) continue;
      ns_.reserve_name(NameRef(slot).view());
      // Note [Per-base counters]: the name was "created" in graph order.
      if (fx2_) ns_.note_created_fx2(NameRef(slot).view());
    }
  }

  std::string add_global(const std::string& hint, const Object& obj) {
    std::string ref = obj.iface()->qualified_reference(obj.get());
    if (!ref.empty()) return ref;
    NameRef created;
    if (fast_names_) {
      const Namespace& graph_names = g_.names();
      std::function<bool(std::string_view)> veto = [&graph_names](std::string_view c) {
        return graph_names.is_used(c);
      };
      created = ns_.create_name(hint, obj.get(), &obj, &veto);
      if (created.size() == 0) leave_fast_names();
    }
    if (created.size() == 0) created = ns_.create_name(hint, obj.get(), &obj);
    std::string name = created.str();
    if (global_index_.count(name)) return name;
    global_index_[name] = globals_.size();
    globals_.emplace_back(name, obj);
    return name;
  }

  std::string type_repr(const Object& t) {
    return t.iface()->annotation(t.get(), [this](const std::string& h, const Object& o) { return add_global(h, o); });
  }

  std::string repr(const Argument& a) {
    std::string out;
    repr_argument_into(out, a, node_name_fn_);
    return out;
  }
  void repr_to(std::string& out, const Argument& a) { repr_argument_into(out, a, node_name_fn_); }

  // An argument as the generated code writes it: torch.fx 1.13's repr(), or
  // 2.x's _get_repr (Note [Constants in generated code]).
  void arg_repr_to(std::string& out, const Argument& a) {
    if (fx2_) code_repr_to(out, a);
    else repr_to(out, a);
  }
  std::string arg_repr(const Argument& a) {
    std::string out;
    arg_repr_to(out, a);
    return out;
  }

  // Note [Constants in generated code]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Dialect::fx_2 writes an argument as torch.fx 2.x's _get_repr does: a
  // NamedTuple at any depth through its class, bound as a global, applied to
  // the plain repr of its items; tuples, lists and slices item by item; an
  // object the core does not represent as its interface's code_repr (the
  // Python bindings: a tensor as `torch.Tensor(size=[2, 3], dtype=float32)`,
  // an enum member as `Cls.NAME` and an OpOverload by its qualified name, both
  // through globals, a complex as `complex(re, im)` where its repr would not
  // read back); anything else (None, numbers, strings, a dict as a whole) as
  // its repr, blue in colored code. Dialect::fx_1_13 writes repr(), but a
  // top-level NamedTuple through its class. A foreign object's form is asked
  // once per code generation.
  void code_repr_to(std::string& out, const Argument& a) {
    switch (a.kind()) {
      case ArgKind::NodeRef: out += node_repr(a.as_node()); return;
      case ArgKind::Tuple: {
        if (const Object& t = a.tuple_type()) {
          out += add_global(t.qualified_name(), t);
          repr_to(out, Argument::tuple(a.items()));
          return;
        }
        out += '(';
        const auto& items = a.items();
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += ", ";
          code_repr_to(out, items[i]);
        }
        if (items.size() == 1) out += ',';
        out += ')';
        return;
      }
      case ArgKind::List: {
        out += '[';
        const auto& items = a.items();
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += ", ";
          code_repr_to(out, items[i]);
        }
        out += ']';
        return;
      }
      case ArgKind::Slice:
        out += "slice(";
        code_repr_to(out, a.slice_start());
        out += ", ";
        code_repr_to(out, a.slice_stop());
        out += ", ";
        code_repr_to(out, a.slice_step());
        out += ')';
        return;
      case ArgKind::Foreign: {
        const Object& obj = a.as_object();
        auto it = foreign_repr_.find(obj.get());
        if (it == foreign_repr_.end()) {
          std::string text = obj.iface()->code_repr(
              obj.get(), [this](const std::string& h, const Object& o) { return add_global(h, o); },
              [this](std::string t) { return blue(std::move(t)); });
          it = foreign_repr_.emplace(obj.get(), std::move(text)).first;
        }
        out += it->second;
        return;
      }
      default:
        if (!colored_) {
          repr_to(out, a);
          return;
        }
        out += kBlue;
        repr_to(out, a);
        out += kReset;
        return;
    }
  }
  std::unordered_map<const void*, std::string> foreign_repr_;  // by object, for one run

  static constexpr const char* kBlue = "\033[34m";
  static constexpr const char* kDim = "\033[2m";
  static constexpr const char* kReset = "\033[0m";
  std::string blue(std::string s) const { return colored_ ? kBlue + s + kReset : s; }
  std::string dim(std::string s) const { return colored_ ? kDim + s + kReset : s; }
  static std::string rstrip_ws(std::string_view x) {
    size_t e = x.find_last_not_of(" \t\r\n\f\v");
    return e == std::string_view::npos ? std::string() : std::string(x.substr(0, e + 1));
  }
  static std::string lstrip_ws(std::string_view x) {
    size_t b = x.find_first_not_of(" \t\r\n\f\v");
    return b == std::string_view::npos ? std::string() : std::string(x.substr(b));
  }

  // torch.fx _get_repr: top-level NamedTuples are rebuilt through their
  // (global) class.
  void get_repr_to(std::string& out, const Argument& a) {
    if (fx2_) {
      code_repr_to(out, a);
      return;
    }
    if (a.kind() == ArgKind::Tuple && a.tuple_type()) {
      const Object& t = a.tuple_type();
      std::string gname = add_global(t.qualified_name(), t);
      out += gname;
      repr_to(out, Argument::tuple(a.items()));
      return;
    }
    repr_to(out, a);
  }

  // torch.fx _format_args: ', '.join of the args' reprs and "k = v" pairs;
  // an args text that came out empty gets no separator.
  void format_args_to(std::string& out, ArgSpan args, size_t from, const KwArgs& kwargs, const Node& node) {
    for (const auto& kv : kwargs)  // Note [Strings in generated code]
      if (!is_plain_name(kv.first)) refuse(node, "keyword argument name", kv.first);
    size_t start = out.size();
    for (size_t i = from; i < args.size(); ++i) {
      if (i > from) out += ", ";
      get_repr_to(out, args[i]);
    }
    bool have_args = out.size() > start;
    for (size_t i = 0; i < kwargs.size(); ++i) {
      if (i || have_args) out += ", ";
      out += kwargs[i].first;
      out += " = ";
      get_repr_to(out, kwargs[i].second);
    }
  }

  // Note [Freeing values in generated code]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // After each node the generated code sets the values whose last use it is
  // to None (`relu = torch.relu(lin);  lin = None`), so that eager execution
  // frees them as torch.fx's code does. Which values those are is the core
  // analysis last_uses() (core/last_uses.cpp), the same analysis the
  // Interpreter uses, here with inputs of other graphs included (torch.fx
  // frees those by name too). Dialect::fx_2 (Note [Dialect]) also frees a
  // value nobody uses right after it is computed (`y = f(x);  x = y = None`),
  // after the values it frees; placeholders and the output free nothing.
  void delete_unused_values(const Node& user) {
    if (user.op() == Op::Placeholder) return;
    std::string& out = piece();
    if (user.op() != Op::Output) {
      LastUses::Range dels = last_uses_.freed_after(user);
      const bool free_self = fx2_ && user.num_users() == 0;
      if (!dels.empty() || free_self) {
        out += ";  ";
        if (colored_) out += kDim;
        for (const Node* d : dels) {
          out += node_repr(d);
          out += " = ";
        }
        if (free_self) {
          out += node_repr(&user);
          out += " = ";
        }
        out += "None";
        if (colored_) out += kReset;
      }
    }
    out += '\n';
    end_piece();
  }

  // Note [Verbose code comments]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Verbose code (print_readable) puts a comment before each run of nodes
  // with the same stack trace summary. Dialect::fx_1_13: the summary is the
  // leading context lines and the outermost frame ("# ctx, File: f.py:3,
  // code: y = x + 1"), a new one is written whenever the raw stack trace
  // text changes, and every comment follows a blank line; a node without a
  // stack trace gets "# No stacktrace found for following nodes " (sic, with
  // the space). Dialect::fx_2: the summary is the innermost frame that has a
  // code line ("# File: f.py:3 in fn, code: y = x + 1"; a stack trace
  // without one counts as none), a comment is written when the summary
  // changes, "No stacktrace ..." has no trailing space, and the blank line is
  // written only when the body already has something in it. In fx_2 the
  // comment is `<prefix>#<middle> <summary>` with hooks.comment_parts'
  // (additional_meta keys, "Annotation: ..." and recompute tags), dim in
  // colored code, and a new one is written whenever that text changes.
  void append_stacktrace_summary(const Node& n) {
    if (n.op() == Op::Placeholder || n.op() == Op::Output) return;
    std::optional<std::string> st = o_.hooks.stack_trace ? o_.hooks.stack_trace(n) : std::nullopt;
    if (fx2_) {
      std::string summary = st ? innermost_frame_summary(*st) : std::string();
      std::pair<std::string, std::string> parts;
      if (o_.hooks.comment_parts) parts = o_.hooks.comment_parts(n);
      std::string text = parts.first + "#" + parts.second + " " +
                         (summary.empty() ? std::string("No stacktrace found for following nodes") : summary);
      if (prev_stacktrace_ && *prev_stacktrace_ == text) return;
      prev_stacktrace_ = text;
      const bool body_empty = keep_lines_ ? body_.empty() : body_text_.empty();
      if (body_empty) ++stripped_lines_;  // torch.fx writes the newline, then strips it
      emit(std::string(body_empty ? "" : "\n") + dim(text) + "\n");
      return;
    }
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

  static std::string strip_ws(std::string_view x) {
    size_t b = x.find_first_not_of(" \t\r\n\f\v");
    if (b == std::string_view::npos) return std::string();
    size_t e = x.find_last_not_of(" \t\r\n\f\v");
    return std::string(x.substr(b, e - b + 1));
  }
  // Note [Verbose code comments]: fx_2's summary of a stack trace, "" when
  // it has no frame with a code line.
  static std::string innermost_frame_summary(const std::string& st) {
    std::vector<std::string> lines;
    std::string all = strip_ws(st);
    for (size_t from = 0;;) {
      size_t nl = all.find('\n', from);
      lines.push_back(strip_ws(std::string_view(all).substr(from, nl == std::string::npos ? std::string::npos : nl - from)));
      if (nl == std::string::npos) break;
      from = nl + 1;
    }
    static const std::regex pat("File \"(.+)\", line (\\d+), in (.+)");
    for (size_t i = lines.size(); i-- > 1;) {
      std::smatch m;
      if (std::regex_match(lines[i - 1], m, pat))
        return "File: " + m[1].str() + ":" + m[2].str() + " in " + m[3].str() + ", code: " + lines[i];
    }
    return std::string();
  }

  // Note [Verbose annotations]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // torch.fx 2.x's verbose code (print_readable) annotates a value with what
  // its metadata knows about it: `lin: "f32[2, 3]" = self.lin(x)` from a
  // tensor in node.meta["val"] (else "tensor_meta", else "example_value"),
  // with strides and device when asked (include_stride, include_device), a
  // subclass's name around it, `Sym(s0)` for a symbolic value. The text
  // comes from hooks.meta_annotation (the bindings read the metadata; the
  // hook is asked per node only in verbose Dialect::fx_2 code) and replaces
  // the node's type annotation, which is still rendered first (it may
  // register globals). The options colored (ANSI colors, Note [Constants in
  // generated code]), expanded_def (one parameter per line) and record_func
  // (profiler markers `_rf_<name> = ...RecordFunctionFast('## <index> ##')`
  // around each call, `_rf` around the whole body) are 2.x's too (with
  // expanded_def, hooks.descs comments a parameter, and the items of a
  // returned list or tuple one per line, with node.meta["desc"]); in
  // Dialect::fx_1_13 they change nothing (torch.fx 1.13 has none of them).
  void emit_node(const Node& node) {
    std::string ann = node.type() ? " : " + type_repr(node.type()) : "";
    if (fx2_ && o_.verbose && o_.hooks.meta_annotation) {  // Note [Verbose annotations]
      std::optional<std::string> meta_ann = o_.hooks.meta_annotation(node);
      if (meta_ann) ann = ": \"" + *meta_ann + "\"";
    }
    const auto& args = node.args();
    switch (node.op()) {
      case Op::Placeholder: {
        // Note [Strings in generated code]: `name`, `*name` or `**name`.
        std::string target = node.target().str().get();
        std::string_view raw = target;
        if (raw.rfind("**", 0) == 0) raw.remove_prefix(2);
        else if (raw.rfind("*", 0) == 0) raw.remove_prefix(1);
        if (!is_plain_name(raw)) refuse(node, "placeholder target", target);
        std::string def = args.empty() ? "" : " = " + arg_repr(args[0]);
        std::string comment;
        if (fx2_ && o_.expanded_def && o_.hooks.descs) {
          std::optional<std::vector<std::string>> d = o_.hooks.descs(node);
          if (d && !d->empty()) comment = "  # " + d->front();
        }
        free_vars_.push_back(target + ann + def + comment);
        std::string r(node_repr(&node));
        if (raw != r) emit(r + " = " + std::string(raw) + "\n");
        return;
      }
      case Op::CallMethod: {
        std::string& out = begin_assignment(node, ann);
        if (args.empty()) throw std::out_of_range("tuple index out of range");
        scratch_.clear();
        arg_repr_to(scratch_, args[0]);
        format_target_into(out, scratch_, node.target().str().get());
        out += '(';
        format_args_to(out, args, 1, node.kwargs(), node);
        out += ')';
        end_piece();
        return;
      }
      case Op::CallFunction: {
        FunctionInfo& fi = function_info(node.target().fn());
        if (fi.magic && fi.magic_fields == args.size()) {
          // repr(node), then the args in order, straight into the body.
          std::string& out = begin_assignment(node, ann);
          size_t k = 0;
          for (const char* p = fi.magic; *p; ++p) {
            if (p[0] == '{' && p[1] == '}') {
              arg_repr_to(out, args[k++]);
              ++p;
            } else {
              out += *p;
            }
          }
          end_piece();
          return;
        }
        if (fi.magic) {  // argument count differs from the template: Python's str.format rules
          std::string r(node_repr(&node));
          std::vector<std::string> vals;
          for (auto& a : args) vals.push_back(arg_repr(a));
          emit(r + ann + " = " + format_positional(fi.magic, vals));
          return;
        }
        if (fi.inplace) {
          std::vector<std::string> vals;
          for (auto& a : args) vals.push_back(arg_repr(a));
          std::string stmt = format_positional(fi.inplace, vals);
          std::string r(node_repr(&node));
          emit(stmt + ";  " + r + ann + " = " + arg_repr(args.empty() ? throw std::out_of_range("tuple index out of range") : args[0]));
          return;
        }
        const std::string& gname = global_for(node.target().fn(), fi);
        // torch.fx tests `node.args[1]` before the length: fewer than two args raise IndexError.
        if (gname == "getattr" && args.size() < 2) throw std::out_of_range("tuple index out of range");
        if (gname == "getattr" && args.size() == 2 && args[1].is_string() && is_plain_name(args[1].as_string())) {
          std::string r(node_repr(&node));
          emit(r + ann + " = " + format_target(arg_repr(args[0]), args[1].as_string()));
          return;
        }
        if (fx2_) {
          // torch.fx 2.x formats a call's arguments before the node's own name (which decides
          // who keeps a name that two nodes share, or a node used before its definition).
          args_text_.clear();
          format_args_to(args_text_, args, 0, node.kwargs(), node);
          std::string& out = begin_assignment(node, ann);
          out += gname;
          out += '(';
          out += args_text_;
          out += ')';
        } else {
          std::string& out = begin_assignment(node, ann);
          out += gname;
          out += '(';
          format_args_to(out, args, 0, node.kwargs(), node);
          out += ')';
        }
        end_piece();
        if (o_.hooks.is_wrapped && o_.hooks.is_wrapped(node)) {
          bool seen = false;
          for (auto& w : wrapped_) seen = seen || w == gname;
          if (!seen) wrapped_.push_back(gname);
        }
        return;
      }
      case Op::CallModule: {
        std::string& out = begin_assignment(node, ann);
        format_target_into(out, o_.root_module, node.target().str().get());
        out += '(';
        format_args_to(out, args, 0, node.kwargs(), node);
        out += ')';
        end_piece();
        return;
      }
      case Op::GetAttr: {
        std::string& out = begin_assignment(node, ann);
        format_target_into(out, o_.root_module, node.target().str().get());
        end_piece();
        return;
      }
      case Op::Output: {
        if (node.type()) maybe_return_annotation_ = " -> " + type_repr(node.type());
        // torch.fx generates from `node.args[0]`: an output without args raises IndexError.
        if (args.empty()) throw std::out_of_range("tuple index out of range");
        const Argument& out = args[0];
        if (o_.hooks.generate_output) {
          emit(o_.hooks.generate_output(out, [this](const Argument& a) { return repr(a); }));
          return;
        }
        if (fx2_ && o_.expanded_def && o_.hooks.descs &&
            (out.kind() == ArgKind::Tuple || out.kind() == ArgKind::List)) {
          // One described item per line (items without a description are left out, as
          // torch.fx 2.x's zip leaves them).
          std::optional<std::vector<std::string>> d = o_.hooks.descs(node);
          if (d) {
            const bool tuple = out.kind() == ArgKind::Tuple;
            std::string text = tuple ? "return (\n" : "return [\n";
            const auto& items = out.items();
            for (size_t i = 0; i < items.size() && i < d->size(); ++i)
              text += "    " + arg_repr(items[i]) + ",  # " + (*d)[i] + "\n";
            text += tuple ? ")" : "]";
            emit(std::move(text));
            return;
          }
        }
        emit("return " + arg_repr(out));
        return;
      }
      case Op::Root: return;
    }
  }

  // Note [Strings in generated code]: the first string that cannot be
  // written; thrown once all nodes are generated.
  void refuse(const Node& node, const std::string& what, const std::string& text) {
    if (!refusal_) refusal_ = refusal_text(node, what, text);
  }
  std::optional<std::string> refusal_;

  const Graph& g_;
  const PythonCodeOptions& o_;
  Namespace ns_;
  bool fast_names_ = false;  // Note [Codegen naming fast path]
  std::vector<std::pair<std::string, Object>> globals_;
  std::unordered_map<std::string, size_t> global_index_;
  std::vector<std::string> free_vars_;
  std::vector<std::string> body_;   // lines, when keep_lines_
  std::string body_text_;           // the body, when !keep_lines_
  bool keep_lines_ = false;
  void emit(std::string&& p) {
    if (keep_lines_) {
      body_.push_back(std::move(p));
      return;
    }
    piece_start_ = body_text_.size();
    body_text_ += p;
    indent_piece();
  }
  void emit(const char* p) { emit(std::string(p)); }
  // A body piece written in place: the body buffer itself, or (when a
  // body_transformer wants the pieces) a scratch string pushed by end_piece().
  std::string& piece() {
    if (!keep_lines_) {
      piece_start_ = body_text_.size();
      return body_text_;
    }
    piece_.clear();
    return piece_;
  }
  void end_piece() {
    if (keep_lines_) body_.push_back(piece_);
    else indent_piece();
  }
  // Without a body_transformer the body is indented as it is written: each
  // newline of the piece just appended (usually only its last character) is
  // followed by four spaces.
  void indent_piece() {
    size_t nl = body_text_.find('\n', piece_start_);
    if (nl == std::string::npos) return;
    if (nl + 1 == body_text_.size()) {
      body_text_ += "    ";
      return;
    }
    std::string tail = body_text_.substr(piece_start_);
    body_text_.resize(piece_start_);
    for (char c : tail) {
      body_text_ += c;
      if (c == '\n') body_text_ += "    ";
    }
  }
  size_t piece_start_ = 0;
  // Newlines written to the body so far, counted incrementally (O(text) in
  // all). Note [Line numbers of generated code].
  size_t body_newlines() {
    if (keep_lines_) {
      for (; counted_pieces_ < body_.size(); ++counted_pieces_)
        newlines_ += static_cast<size_t>(std::count(body_[counted_pieces_].begin(), body_[counted_pieces_].end(), '\n'));
    } else {
      newlines_ += static_cast<size_t>(std::count(body_text_.begin() + static_cast<std::ptrdiff_t>(counted_upto_),
                                                  body_text_.end(), '\n'));
      counted_upto_ = body_text_.size();
    }
    return newlines_;
  }
  size_t newlines_ = 0;
  size_t counted_upto_ = 0;
  size_t counted_pieces_ = 0;
  size_t stripped_lines_ = 0;
  // Starts the piece "<repr(node)><annotation> = " (the node is named first,
  // as torch.fx's f-strings do) and returns the buffer to continue it in.
  std::string& begin_assignment(const Node& node, const std::string& ann) {
    std::string_view r = node_repr(&node);
    std::string& out = piece();
    out += r;
    out += ann;
    out += " = ";
    return out;
  }
  std::string piece_;
  std::string scratch_;
  std::string args_text_;  // a call_function's arguments, formatted first in Dialect::fx_2
  NodeNameFn node_name_fn_ = [this](const Node* n) { return node_repr(n); };

  // Per call_function target: its infix template, if any, and its global
  // name once computed. Targets are alive for the whole run (the graph holds
  // them), so their addresses are stable keys; this saves re-asking the
  // object (a Python call in the bindings) at every node.
  struct FunctionInfo {
    const char* magic = nullptr;
    size_t magic_fields = 0;  // "{}" fields in magic
    const char* inplace = nullptr;
    bool have_global = false;
    std::string global;
  };
  std::unordered_map<const void*, FunctionInfo> fn_info_;
  FunctionInfo& function_info(const Object& fn) {
    auto it = fn_info_.find(fn.get());
    if (it != fn_info_.end()) return it->second;
    FunctionInfo fi;
    std::string opname = fn.iface()->operator_name(fn.get());
    if (!opname.empty()) {
      fi.magic = find_fmt(kMagic, sizeof(kMagic) / sizeof(kMagic[0]), opname);
      if (fi.magic) fi.magic_fields = count_fields(fi.magic);
      if (!fi.magic) fi.inplace = find_fmt(kInplace, sizeof(kInplace) / sizeof(kInplace[0]), opname);
    }
    return fn_info_.emplace(fn.get(), std::move(fi)).first->second;
  }
  // add_global(qualified_name, fn), asked once per target: later calls would
  // return the same name (the namespace remembers the object).
  const std::string& global_for(const Object& fn, FunctionInfo& fi) {
    if (!fi.have_global) {
      fi.global = add_global(fn.qualified_name(), fn);
      fi.have_global = true;
    }
    return fi.global;
  }
  static size_t count_fields(const char* fmt) {
    size_t k = 0;
    for (const char* p = fmt; *p; ++p)
      if (p[0] == '{' && p[1] == '}') ++k, ++p;
    return k;
  }
  std::vector<std::string> wrapped_;
  LastUses last_uses_;                  // Note [Freeing values in generated code]
  const bool fx2_ = dialect() == Dialect::fx_2;  // Note [Dialect], read once per run
  const bool colored_ = fx2_ && o_.colored;
  std::vector<const char*> names_;      // codegen name (NameRef text) by node index
  std::string maybe_return_annotation_;
  std::optional<std::string> prev_stacktrace_;
};

}  // namespace

void format_target_into(std::string& out, std::string_view base, std::string_view target) {
  // Each non-identifier component wraps everything before it in getattr(...),
  // so the wrappers are opened up front and closed in component order.
  auto for_each_component = [&target](auto&& fn) {
    for (size_t start = 0;;) {
      size_t dot = target.find('.', start);
      fn(target.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
      if (dot == std::string_view::npos) return;
      start = dot + 1;
    }
  };
  // Note [Strings in generated code]: a component that is not a plain name
  // is a string literal.
  for_each_component([&out](std::string_view e) {
    if (!is_plain_name(e)) out += "getattr(";
  });
  out += base;
  for_each_component([&out](std::string_view e) {
    if (is_plain_name(e)) {
      out += '.';
      out += e;
    } else {
      out += ", ";
      append_string_literal(out, e);
      out += ')';
    }
  });
}

std::string format_target(const std::string& base, const std::string& target) {
  std::string out;
  format_target_into(out, base, target);
  return out;
}

PythonCode python_code(const Graph& g, const PythonCodeOptions& opts) {
  Graph::BusyScope busy(g);  // Note [Busy graphs]
  Generator gen(g, opts);
  return gen.run();
}

std::string ObjectInterface::annotation(void* p, const AddGlobalFn& add_global) const {
  return add_global(type_repr(p), Object::borrow(this, p));
}

std::string ObjectInterface::code_repr(void* p, const AddGlobalFn&,
                                       const std::function<std::string(std::string)>& paint) const {
  return paint(repr(p));
}

}  // namespace fxcpp
