// Bindings for the transformation toolkit (interpreter loop, subgraph matcher).
#include "bindings.h"

namespace fxcpp::py {

int init_transform(PyObject* m) {
  (void)m;
  return 0;
}

}  // namespace fxcpp::py
