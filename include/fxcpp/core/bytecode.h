// Direct CPython 3.11 bytecode for generated forward functions.
//
// Note [Direct bytecode]
// ~~~~~~~~~~~~~~~~~~~~~~
// Constructing a GraphModule and calling it once is dominated by CPython's
// `compile()` of the generated source (about 8 us per node here, against
// about 0.3 us for generating the text).  The source fxcpp's codegen writes
// is a tiny, fixed subset of Python: one `def` of straight-line statements
// (`name = expr`, `a = b = None`, `return expr`) over names, literals,
// attribute loads, calls, infix and unary operators, subscripts and
// tuple/list/dict displays.  `assemble_py311_function` compiles exactly that
// subset to the code object CPython 3.11's own compiler produces: the same
// instructions (with inline caches and EXTENDED_ARG), the same constant,
// name and local tables in the same order, the same stack size and the same
// location table (line and column of every instruction, so tracebacks point
// at the same characters).
//
// Equality with `compile()` is the contract, not an approximation of it:
//  * it mirrors CPython 3.11's AST optimizer (folding of unary operators on
//    numbers and of constant tuples) and the code generator's choices
//    (LOAD_METHOD for attribute calls, PUSH_NULL folded into LOAD_GLOBAL,
//    BUILD_CONST_KEY_MAP, LIST_EXTEND for constant lists, the 30-item stack
//    guideline);
//  * any construct outside the subset, or one where CPython would choose a
//    different shape (folding two constants, chained comparisons, starred
//    arguments, big dicts, ...), is refused with a reason, and the caller
//    falls back to `compile()`;
//  * the Python layer checks the contract: its test suite compares every
//    assembled code object with `compile()`'s (`==`, which covers the
//    instructions, tables and location table, plus stack size), and the first
//    use in each process compares a probe program, disabling the fast path if
//    they differ.
// The bindings build the code object only when running on CPython 3.11.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fxcpp {

/// A constant of the subset: what `co_consts` holds.  Plain value type.
struct BytecodeConstant {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, Ellipsis, Tuple };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0.0;
  std::string text;                      ///< Str: the UTF-8 value
  std::vector<BytecodeConstant> items;   ///< Tuple: the elements
};

/// One parameter of the assembled function.  `annotation` and
/// `default_value` are source texts (empty when absent); the caller evaluates
/// them in the function's globals, as executing the `def` would.
struct FunctionParameter {
  std::string name;
  std::string annotation;
  std::string default_value;
};

/// Everything needed to build the function's code object (CPython 3.11
/// `PyCode_NewWithPosOnlyArgs`): flags are always CO_OPTIMIZED|CO_NEWLOCALS,
/// there are no free or cell variables and the exception table is empty.
struct AssembledFunction {
  /// Module-level statements before the `def` (codegen writes `wrap(...)`
  /// calls there), as source text through the line before the `def`; empty
  /// when those lines are blank.  The caller executes them first.  They may
  /// not import anything: an import would change how CPython compiles
  /// attribute calls on the imported name.
  std::string prologue;
  std::string name;                      ///< co_name and co_qualname
  int first_line = 0;                    ///< co_firstlineno: the `def` line
  std::vector<FunctionParameter> params; ///< co_argcount = params.size()
  std::string return_annotation;         ///< source text, empty when absent
  std::string code;                      ///< co_code
  std::string linetable;                 ///< co_linetable (3.11 format)
  std::vector<BytecodeConstant> consts;  ///< co_consts
  std::vector<std::string> names;        ///< co_names
  std::vector<std::string> varnames;     ///< co_varnames (parameters first)
  int stacksize = 0;                     ///< co_stacksize
};

/// Compiles `src`, a module holding exactly one `def` of straight-line code
/// (see Note [Direct bytecode]), into `out`.  Returns false, with the reason
/// in `*why` when given, for anything outside the subset; `out` is then
/// unspecified.  Linear in the length of `src`; no Python involved.
bool assemble_py311_function(std::string_view src, AssembledFunction& out, std::string* why = nullptr);

}  // namespace fxcpp
