// Bindings for tooling (DOT export and other product features).
#include "bindings.h"

namespace fxcpp::py {

int init_tools(PyObject* m) {
  (void)m;
  return 0;
}

}  // namespace fxcpp::py
