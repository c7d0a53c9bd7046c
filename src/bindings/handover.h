// fxcpp bindings: what fxcpp._C lends fxcpp._C_torch, so that graphs cross
// between the two extensions in memory.
//
// Note [Graph handover]
// ~~~~~~~~~~~~~~~~~~~~~
// Both extensions link the one libfxcpp_core (Note [One core in the process]
// in CMakeLists.txt), so a core Graph built by one is a valid Graph for the
// other. What only fxcpp._C knows is the Python object model: which
// ObjectInterface stands for PyObject* targets and constants, which Python
// Graph owns a core Graph, and where a node's `meta` dict lives. _C publishes
// exactly that as a capsule, `fxcpp._C._handover_api` (the way NumPy and
// datetime publish their C APIs); _C_torch imports it once.
//
// With it the .fxpt codec stays one C++ reader and one C++ writer
// (src/torch/load.cpp, save.cpp), and Python calls them:
// * reading (`fxcpp.aten.load(..., runtime="python")`): the C++ reader parses
//   the file once into a core Graph whose targets are LibTorch objects
//   (aten_op, primitive, torch_constant); the target bridge
//   (src/bindings/torch/file_bindings.cpp) appends the same nodes to an empty
//   Python Graph with the Python objects those stand for (OpOverload,
//   operator.*, torch.float32, TensorMetadata), in one C++ pass;
// * writing (`fxcpp.aten.save`, `aten.compile`): the bridge copies the Python
//   Graph's core graph into a LibTorch one the other way round and the C++
//   writer encodes it.
// Nothing crosses as text or through a file.
#pragma once

#include <Python.h>

#include <cstdint>

#include "fxcpp/core/graph.h"
#include "fxcpp/core/object.h"

namespace fxcpp::py {

/// The table fxcpp._C publishes. Plain function pointers: no C++ object
/// crosses the boundary but the core's own types. Valid while fxcpp._C is
/// imported (it never unloads).
struct HandoverApi {
  /// kHandoverVersion of the _C that filled the table.
  uint32_t version;
  /// The interface of Objects that hold a PyObject* (one owning reference).
  const ObjectInterface* (*py_interface)();
  /// The core Graph of fxcpp Graph `graph` (borrowed; owned by `graph`), or
  /// null with TypeError set when `graph` is not one.
  Graph* (*graph_of)(PyObject* graph);
  /// The `meta` dict of node `n`'s Python wrapper (new reference), creating
  /// the wrapper and the dict on first use; null with an exception set on
  /// failure. `n` must belong to a Graph owned by a Python Graph.
  PyObject* (*node_meta)(Node* n);
  /// The `meta` dict of `n`'s wrapper if it has one (borrowed), else null
  /// (no exception set): reading never creates wrappers.
  PyObject* (*node_meta_if_any)(const Node* n);
};

/// Bumped whenever HandoverApi changes; _C_torch refuses another version.
constexpr uint32_t kHandoverVersion = 1;
/// The capsule's name, as PyCapsule_Import takes it.
constexpr const char* kHandoverCapsule = "fxcpp._C._handover_api";

/// Adds the capsule to module `m` (fxcpp._C). Returns 0, or -1 with an
/// exception set.
int init_handover(PyObject* m);

}  // namespace fxcpp::py
