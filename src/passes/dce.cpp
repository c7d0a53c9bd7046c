#include "fxcpp/passes/dce.h"

#include "fxcpp/passes/lint.h"

namespace fxcpp {

bool eliminate_dead_code(Graph& g, const DceOptions& opts) {
  if (opts.lint_first) lint(g);
  bool changed = false;
  for (Node* n : g.nodes().reversed()) {
    bool unused = n->num_users() == 0;
    // torch.fx evaluates `not node.is_impure() and len(node.users) == 0`:
    // impurity first. Only the call_module hook can be observed (it may
    // raise), so other used nodes skip the decision.
    if (!unused && n->op() != Op::CallModule) continue;
    if (n->is_impure(opts.module_is_impure) || !unused) continue;
    g.erase_node(n);
    changed = true;
  }
  return changed;
}

}  // namespace fxcpp
