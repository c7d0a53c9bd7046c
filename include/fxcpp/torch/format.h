// fxcpp torch layer: the .fxpt file format (docs/fxpt_format.md), its reader
// (src/torch/load.cpp, over src/torch/zip_reader.cpp) and writer
// (src/torch/save.cpp). No Python.
//
// The reader produces a Graph and the tensors its get_attr nodes read
// (read_file), or compiles them into a Module at once (load); the writer
// takes the same pair. Module, the runtime, is fxcpp/torch/module.h, which
// includes this header: include that one to call load() and forward().
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp::torch {

/// A named tensor the graph reads with get_attr.
struct NamedTensor {
  std::string name;  ///< qualified attribute name ("layer1.0.conv1.weight")
  enum class Kind : uint8_t { Parameter, Buffer, Constant } kind = Kind::Constant;
  at::Tensor tensor;
};

class Module;

/// The newest file format version this build writes and reads.
constexpr int kFormatVersion = 1;

/// How a file is loaded.
struct LoadOptions {
  /// Plan memory (ModuleOptions::plan_memory).
  bool plan_memory = true;
  /// The file is the user's own: its operators resolve against the whole
  /// dispatcher. Off (the default), a file may call only the allow-listed
  /// operators (Note [What a file may make the runtime do] in
  /// fxcpp/torch/policy.h). Names are checked either way.
  bool trusted = false;
};

/// Reads a file written by `fxcpp.aten.save` (Python). Runs
/// no code from it. Throws FormatError saying what is wrong (not a zip
/// archive, missing record, newer version, unknown operator, an operator a
/// file may not call unless `options.trusted`, a name that is not an
/// identifier, bad tensor extent, ...). Tensors are read into memory once and
/// owned by the Module.
Module load(const std::string& path, const LoadOptions& options = {});
/// The same from bytes in memory (the whole file).
Module load_from_buffer(const void* data, size_t size, const LoadOptions& options = {});

/// Writes `graph` and the tensors its get_attr nodes read to `path` in the
/// format `fxcpp.aten.save` writes (docs/fxpt_format.md, kFormatVersion), so
/// the file loads with load() and with `fxcpp.aten.load` in Python. Only the
/// tensors some get_attr names are written, in first-use order; a storage
/// shared by several of them is written once; tensors not on the CPU (or
/// conjugated, negated, not strided) are written as contiguous CPU copies.
/// meta["tensor_meta"] (as load() and trace() store it) is kept. Parameters
/// of a floating or complex dtype are written as requiring grad (the loader
/// keeps no such flag; Python's load makes them nn.Parameters). Throws
/// FormatError naming the node, before anything is written, for what the
/// format cannot hold: call_module/call_method nodes, call_function targets
/// other than aten_op()/primitive(), arguments other than constants, node
/// references and torch_constant objects, get_attr of a name not in `tensors`,
/// unsupported dtypes. Writes atomically (Note [Atomic saving] in
/// src/torch/save.cpp): a temporary file in the target's directory, fsync'ed
/// and renamed over `path`, so the target holds the old file or the complete
/// new one; a target that is not a regular file (a device, a fifo) is written
/// directly. Throws Error (saying why, with the OS's reason) when the file
/// cannot be written, leaving no partial file. O(nodes + argument size +
/// tensor bytes).
void save(const Graph& graph, const std::vector<NamedTensor>& tensors, const std::string& path);
/// save(module.graph(), module.named_tensors(), path).
void save(const Module& module, const std::string& path);
/// The same file's bytes, in memory.
std::string save_to_buffer(const Graph& graph, const std::vector<NamedTensor>& tensors);

/// The graph and tensors of a file, without compiling a plan (for tools).
/// Checks the file as load() does (`options.plan_memory` is unused).
std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read_file(const std::string& path,
                                                                      const LoadOptions& options = {});

/// The JSON text of a file's graph record, pretty-printed (for tools and for
/// `fxcpp.aten.load(..., runtime="python")`).
std::string graph_json(const std::string& path);
/// The same from the file's bytes in memory.
std::string graph_json_from_buffer(const void* data, size_t size);

}  // namespace fxcpp::torch
