// fxcpp core: Python source generation (torch.fx CodeGen._gen_python_code).
//
// Note [Codegen namespace]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// As in torch.fx, generated code uses a fresh Namespace holding both globals
// and node values. Custom builtins are registered first; each node's name is
// created lazily at its first mention, in exactly torch.fx's evaluation order
// (a call_function registers its target's global before naming the node), so
// collisions between globals and values resolve identically.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"
#include "fxcpp/core/printer.h"  // repr_argument: generated code prints arguments

namespace fxcpp {

/// Renders an Argument the way Python's repr() would inside generated code.
using ArgReprFn = std::function<std::string(const Argument&)>;

/// Customization points mirroring a torch.fx CodeGen subclass. Empty members
/// use torch.fx's default behaviour.
struct CodegenHooks {
  /// node.meta.get('is_wrapped') -- emits `wrap("name")` lines.
  std::function<bool(const Node&)> is_wrapped;
  /// node.stack_trace (verbose mode only).
  std::function<std::optional<std::string>(const Node&)> stack_trace;
  /// CodeGen.gen_fn_def(free_vars, maybe_return_annotation).
  std::function<std::string(std::vector<std::string>&, const std::string&)> gen_fn_def;
  /// CodeGen.generate_output(output_args); the repr function names nodes in
  /// the codegen namespace.
  std::function<std::string(const Argument&, const ArgReprFn&)> generate_output;
  /// CodeGen._body_transformer(body lines).
  std::function<std::vector<std::string>(std::vector<std::string>)> body_transformer;
  /// CodeGen.additional_globals().
  std::function<std::vector<std::pair<std::string, Object>>()> additional_globals;
  /// The object bound to `wrap` in the globals when wrapped functions occur.
  Object wrap_fn;
  /// Verbose code, Dialect::fx_2 (Note [Verbose annotations]): the annotation
  /// torch.fx writes from the node's metadata (its "val", "tensor_meta" or
  /// "example_value"), the text between the quotes of `name: "f32[2, 4]"`,
  /// colored already when PythonCodeOptions::colored is set; nullopt: none
  /// (the node keeps its type annotation).
  std::function<std::optional<std::string>(const Node&)> meta_annotation;
  /// Verbose code, Dialect::fx_2: the parts of a node's comment besides its
  /// stack trace summary, (prefix, middle) in
  /// `<prefix>#<middle> <stack trace summary>`: "# key: value " for the
  /// additional_meta keys it has, and " Annotation: {...}" / recompute
  /// information from its metadata; empty strings when none.
  std::function<std::pair<std::string, std::string>(const Node&)> comment_parts;
  /// expanded_def, Dialect::fx_2: the text of node.meta["desc"], nullopt when
  /// it has none: one entry for a placeholder (its parameter's comment), one
  /// per described item for the output (the comments of a list or tuple
  /// returned one item per line).
  std::function<std::optional<std::vector<std::string>>(const Node&)> descs;
};

struct PythonCodeOptions {
  std::string root_module = "self";
  bool verbose = false;
  /// Dialect::fx_2 only (torch.fx 2.x's python_code options; Note [Verbose
  /// annotations]): ANSI colors (constants blue, freed values and comments
  /// dim; annotation colors come from hooks.meta_annotation), one parameter
  /// per line in the default `def forward(` header, and profiler
  /// record_function markers around the graph and each call.
  bool colored = false;
  bool expanded_def = false;
  bool record_func = false;
  CodegenHooks hooks;
};

/// Generated source and the globals it must be executed with.
struct PythonCode {
  std::string src;
  std::vector<std::pair<std::string, Object>> globals;
  /// Note [Line numbers of generated code]: torch.fx 2.x's PythonCode
  /// `_lineno_map` ({line: node position or None}) and `_prologue_start`, kept
  /// compactly (4 bytes a node) and expanded only when asked for:
  /// `node_lines[i]` is the body line (0-based, torch.fx's count) from which
  /// the i-th node's code runs; body line v has key `prologue_lines + v` and
  /// maps to the last node whose line is <= v (none before the first).
  /// Empty node_lines when a body_transformer hook rewrote the body.
  std::vector<uint32_t> node_lines;
  /// With a body_transformer (torch.fx 2.x): per body line v (key
  /// `prologue_lines + v`), the node position the last "# COUNTER: i" marker
  /// before it names, or -1 for none (Note [Line numbers of generated code]).
  std::vector<int64_t> line_nodes;
  uint32_t body_lines = 0;      ///< body lines torch.fx's map covers
  uint32_t prologue_lines = 1;  ///< lines of the `def forward(...)` header
  uint32_t prologue_start = 0;  ///< 1-based line of `def forward(` in src
};

/// torch.fx Graph.python_code(root_module). O(graph size + text size).
PythonCode python_code(const Graph& g, const PythonCodeOptions& opts = {});

/// torch.fx `_format_target(base, target)`: "self.a.b" or getattr(...) chains.
std::string format_target(const std::string& base, const std::string& target);
/// format_target, appended to `out`. O(|base| + |target|).
void format_target_into(std::string& out, std::string_view base, std::string_view target);

}  // namespace fxcpp
