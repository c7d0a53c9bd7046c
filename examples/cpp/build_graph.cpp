// Build, edit, print and code-generate a graph with the native C++ API.
#include <iostream>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/graph.h"
#include "fxcpp/passes/dce.h"
#include "fxcpp/passes/lint.h"

int main() {
  using namespace fxcpp;
  static const NamedNative add{"add", "operator.add", "add"};
  static const NamedNative mul{"mul", "operator.mul", "mul"};
  static const NamedNative relu{"relu", "torch.relu", "", true};

  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(native_object(&add), {Argument::node(x), Argument::node(y)});
  Node* dead = g.call_function(native_object(&mul), {Argument::node(a), Argument::real(2.0)});
  Node* r = g.call_function(native_object(&relu), {Argument::node(a)});
  g.output(Argument::node(r));
  (void)dead;
  std::cout << "== built\n" << g << "\n\n";

  // Edit: insert x * y before relu and feed it to relu instead of x + y.
  {
    InsertGuard at = g.inserting_before(r);
    Node* m = g.call_function(native_object(&mul), {Argument::node(x), Argument::node(y)});
    r->replace_input_with(a, Argument::node(m));
  }
  bool changed = eliminate_dead_code(g);
  lint(g);
  std::cout << "== edited (dce changed=" << (changed ? "true" : "false") << ")\n" << g << "\n";
  std::cout << "== python code" << python_code(g).src << "\n";
  return 0;
}
