// The CPython 3.11 backend: direct bytecode for generated forward functions.
//
// Note [Direct bytecode]
// ~~~~~~~~~~~~~~~~~~~~~~
// Constructing a GraphModule and calling it once is dominated by CPython's
// `compile()` of the generated source (about 8 us per node here, against
// about 0.3 us for generating the text).  The source fxcpp's codegen writes
// is a tiny, fixed subset of Python: one `def` of straight-line statements
// (`name = expr`, `a = b = None`, `return expr`) over names, literals,
// attribute loads, calls, infix and unary operators, subscripts and
// tuple/list/dict displays.  `assemble_function` compiles exactly that
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
//    arguments, big dicts, ...), is refused with a `Refusal` code and a text,
//    and the caller falls back to `compile()`;
//  * the Python layer checks the contract: its test suite compares every
//    assembled code object with `compile()`'s (`==`, which covers the
//    instructions, tables and location table, plus stack size), and the first
//    use in each process compares a probe program (python/fxcpp/
//    _forward_builder.py), disabling the fast path if they differ.
//
// This is a backend, not part of the core: it knows one interpreter's
// bytecode, so it lives outside the installed, interpreter-neutral
// `fxcpp_core` library (static library `fxcpp_cpython311`, used by the
// extension and the C++ tests; not installed).  It needs no Python headers;
// the bindings build the code object, and only when running on CPython 3.11.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fxcpp::cpython311 {

/// A constant of the subset: what `co_consts` holds.  Plain value type.
struct Constant {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, Ellipsis, Tuple };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0.0;
  std::string text;             ///< Str: the UTF-8 value
  std::vector<Constant> items;  ///< Tuple: the elements
};

/// One parameter of the assembled function.  `annotation` and
/// `default_value` are source texts (empty when absent); the caller evaluates
/// them in the function's globals, as executing the `def` would.
struct Parameter {
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
  std::string name;                ///< co_name and co_qualname
  int first_line = 0;              ///< co_firstlineno: the `def` line
  std::vector<Parameter> params;   ///< co_argcount = params.size()
  std::string return_annotation;   ///< source text, empty when absent
  std::string code;                ///< co_code
  std::string linetable;           ///< co_linetable (3.11 format)
  std::vector<Constant> consts;    ///< co_consts
  std::vector<std::string> names;  ///< co_names
  std::vector<std::string> varnames;  ///< co_varnames (parameters first)
  int stacksize = 0;               ///< co_stacksize
};

/// Why a source is handed back to `compile()`.  Stable small integers: the
/// bindings expose them (with `refusal_name`) and the Python layer
/// dispatches on them, never on the accompanying text.
enum class Refusal : uint8_t {
  kNone = 0,                 ///< assembled
  kUnsupportedInterpreter,   ///< not CPython 3.11 (set by the bindings only)
  kNoFunction,               ///< no `def` in the source
  kImportsBeforeDef,         ///< an import before the `def` (changes how attribute calls compile)
  kPrologue,                 ///< other module-level code before the `def` the subset does not take
  kBodyShape,                ///< not one flat, equally indented body (nested blocks, two defs, ...)
  kNoReturn,                 ///< the body does not end in `return`
  kCodeAfterReturn,          ///< statements after `return` (CPython drops them)
  kWhitespace,               ///< tab, carriage return or form feed in the source
  kStarArgs,                 ///< `*`, `**` or `/` in the parameters or the arguments of a call
  kBadParameters,            ///< duplicate or keyword parameter names, misordered defaults
  kLiteral,                  ///< a number or string literal form the subset does not parse
  kConstruct,                ///< valid Python outside the subset: augmented assignment, slices,
                             ///< chained comparisons, boolean operators, other statements
  kSyntax,                   ///< a token the subset's grammar does not expect (possibly a
                             ///< syntax error, which compile() must be the one to report)
  kFoldedConstant,           ///< CPython's AST optimizer would fold or drop a constant expression
  kTooManyCallArgs,          ///< a call CPython compiles with CALL_FUNCTION_EX
  kDictTooLarge,             ///< a dict display beyond the 30-item stack guideline
};
/// Number of Refusal values (kNone included).
inline constexpr int kRefusalCount = static_cast<int>(Refusal::kDictTooLarge) + 1;

/// The snake_case name of `r` ("star_args"): stable, for bindings and tests.
const char* refusal_name(Refusal r);

/// Compiles `src`, a module holding exactly one `def` of straight-line code
/// (see Note [Direct bytecode]), into `out`.  Returns Refusal::kNone on
/// success; otherwise the reason, with a human-readable `*detail` when given
/// (`out` is then unspecified).  Linear in the length of `src`; no Python
/// involved.
Refusal assemble_function(std::string_view src, AssembledFunction& out, std::string* detail = nullptr);

}  // namespace fxcpp::cpython311
