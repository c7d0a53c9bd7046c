// fxcpp core: which torch.fx release the printouts, generated code and names follow.
//
// Note [Dialect]
// ~~~~~~~~~~~~~~
// torch.fx changed what it writes between releases: 1.13.1 prints
// `[#users=N]` in str(graph), frees only values that something uses in
// generated code, separates verbose-code comments with a blank line and a
// trailing space, names a value by searching base_1, base_2, ... from 1, and
// fails on an empty name; 2.x (checked against 2.14.1) prints
// `[num_users=N]`, also frees a value nobody uses right after it is computed
// (`y = f(x);  x = y = None`), writes verbose comments without the blank line
// before the first one or the trailing space and summarizes a stack trace by
// its innermost frame (`# File: path:line in fn, code: ...`), names a value
// with a per-base counter (the largest suffix last taken for that base, not
// the first free one; `add_01` is kept as written) and names an empty
// candidate `_unnamed`. fxcpp writes what the installed torch.fx writes, so
// that a user who swaps torch.fx for fxcpp sees the same text.
//
// The choice is one process-wide value, read by the printer (printer.cpp),
// code generation (codegen.cpp) and naming (namespace.cpp) and by nothing
// else: the text of a graph is a property of the process, not of a graph,
// just as it is in torch.fx, where it is the installed release. The Python
// package sets it once, when it is imported, from the installed torch
// (python/fxcpp/_torch_compat.py, the one place for torch-version
// differences). C++ users choose it with set_dialect(); the default is
// Dialect::fx_2, what today's torch.fx writes (every torch since 2.0 -- a
// program written now pairs with a current torch, and torch 1.13 is only
// kept working). Tests that pin a release's text set it explicitly
// (ScopedDialect) so they hold whatever the default is.
//
// The value is an atomic: reading it is a relaxed load, cheap enough for
// once per printout or code generation. Changing it while another thread
// prints or generates code gives that thread either text, never a mix within
// one call (each call reads it once).
#pragma once

#include <cstdint>

namespace fxcpp {

/// The torch.fx release whose text fxcpp reproduces (Note [Dialect]).
enum class Dialect : uint8_t {
  fx_1_13,  ///< torch.fx 1.13.1
  fx_2,     ///< torch.fx 2.x (checked against 2.14.1)
};

/// The dialect in force for this process (default: Dialect::fx_2). O(1).
Dialect dialect();
/// Sets the process-wide dialect (Note [Dialect]); the Python package calls
/// it once at import. O(1).
void set_dialect(Dialect d);
/// "1.13" or "2" (for messages and the Python side).
const char* dialect_name(Dialect d);

/// Sets the dialect for a scope and restores the previous one (tests).
class ScopedDialect {
 public:
  explicit ScopedDialect(Dialect d) : saved_(dialect()) { set_dialect(d); }
  ~ScopedDialect() { set_dialect(saved_); }
  ScopedDialect(const ScopedDialect&) = delete;
  ScopedDialect& operator=(const ScopedDialect&) = delete;

 private:
  Dialect saved_;
};

}  // namespace fxcpp
