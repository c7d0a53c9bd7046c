#include "fxcpp/core/last_uses.h"

#include <algorithm>

namespace fxcpp {

LastUses last_uses(const Graph& g, bool include_foreign) {
  std::vector<const Node*> foreign;  // inputs of another graph already listed (lint-invalid graphs only)
  LastUses r;
  r.slots_.resize(g.node_capacity());
  // Each value is freed at most once, so g.size() entries never reallocate.
  r.freed_.reserve(g.size());
  for (Node* user : g.nodes().reversed()) {
    // Input use records are the unique inputs in first-appearance order over
    // args then kwargs (Note [Use lists]), exactly torch.fx's map_arg order.
    const auto first = static_cast<uint32_t>(r.freed_.size());
    for (size_t i = 0, n = user->num_inputs(); i < n; ++i) {
      Node* value = user->input_use(i).value();
      if (value->graph() != &g) {
        if (!include_foreign || std::find(foreign.begin(), foreign.end(), value) != foreign.end()) continue;
        foreign.push_back(value);
        r.freed_.push_back(value);
        continue;
      }
      LastUses::Slot& s = r.slots_[value->index()];
      if (s.last_user) continue;
      s.last_user = user;
      r.freed_.push_back(value);
    }
    LastUses::Slot& u = r.slots_[user->index()];
    u.first_freed = first;
    u.num_freed = static_cast<uint32_t>(r.freed_.size()) - first;
  }
  return r;
}

}  // namespace fxcpp
