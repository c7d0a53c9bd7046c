// The process-wide torch.fx dialect (Note [Dialect]).
#include "fxcpp/core/dialect.h"

#include <atomic>

namespace fxcpp {

namespace {
std::atomic<Dialect>& current() {
  static std::atomic<Dialect> d{Dialect::fx_2};
  return d;
}
}  // namespace

Dialect dialect() { return current().load(std::memory_order_relaxed); }

void set_dialect(Dialect d) { current().store(d, std::memory_order_relaxed); }

const char* dialect_name(Dialect d) { return d == Dialect::fx_1_13 ? "1.13" : "2"; }

}  // namespace fxcpp
