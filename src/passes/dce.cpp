#include "fxcpp/passes/dce.h"

#include "fxcpp/passes/lint.h"

namespace fxcpp {

bool eliminate_dead_code(Graph& g, const DceOptions& opts) {
  if (opts.lint_first) lint(g);
  bool changed = false;
  for (Node* n : g.nodes().reversed()) {
    // torch.fx asks is_impure() before looking at the users: a callback that
    // throws (a call_module without an owning module) stops at the same node,
    // after the same erasures.
    if (opts.is_impure && opts.is_impure(*n)) continue;
    if (n->num_users() != 0) continue;
    if (n->is_impure()) continue;
    g.erase_node(n);
    changed = true;
  }
  return changed;
}

}  // namespace fxcpp
