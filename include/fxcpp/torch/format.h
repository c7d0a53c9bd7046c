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
#include <optional>
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
  /// The requires_grad flag a file records for the tensor (read by the
  /// reader, written by the writer). Unset: save() writes
  /// tensor.requires_grad(), or true for a floating or complex Parameter (as
  /// nn.Parameter makes them).
  std::optional<bool> requires_grad;
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
  /// Map a file's records instead of reading them (Note [Memory-mapped
  /// weights] in src/torch/zip_reader.cpp): tensors view the file, pages are
  /// read when first used, and modules loaded from one file share them. The
  /// file must then not be changed or truncated while they live (truncating
  /// it makes a read of a weight raise SIGBUS): turn it off for files another
  /// process may change. Bytes in memory are always copied.
  bool mmap = true;
};

/// The formats save() writes.
enum class SaveFormat : uint8_t {
  /// save(): Pt2 for a path ending in ".pt2", else Fxpt; save_to_buffer(): Fxpt.
  Auto,
  /// fxcpp's .fxpt file (docs/fxpt_format.md).
  Fxpt,
  /// torch.export's .pt2 archive, which torch.export.load reads
  /// (docs/pt2_format.md, "Writing"; Note [Writing .pt2 archives] in
  /// src/torch/pt2_writer.cpp).
  Pt2,
};

/// How save() writes a file.
struct SaveOptions {
  /// The class name the file records (Python's load names the GraphModule's
  /// class after it). Must be an ASCII Python identifier that is not a keyword.
  /// A .pt2 archive records none.
  std::string class_name = "GraphModule";
  /// Which format to write.
  SaveFormat format = SaveFormat::Auto;
};

/// Reads a file written by `fxcpp.aten.save` (Python). Runs
/// no code from it. Throws FormatError saying what is wrong (not a zip
/// archive, missing record, newer version, unknown operator, an operator a
/// file may not call unless `options.trusted`, a name that is not an
/// identifier, bad tensor extent, ...). Tensors view the file through a
/// shared mapping (LoadOptions::mmap) or are read into memory once; either
/// way the Module owns them (and keeps the mapping alive).
Module load(const std::string& path, const LoadOptions& options = {});
/// The same from bytes in memory (the whole file).
Module load_from_buffer(const void* data, size_t size, const LoadOptions& options = {});

/// Writes `graph` and the tensors its get_attr nodes read to `path` in the
/// format `fxcpp.aten.save` writes (docs/fxpt_format.md, kFormatVersion; with
/// SaveFormat::Pt2, or SaveFormat::Auto and a path ending in ".pt2", the .pt2
/// archive torch.export.load reads, whose own rules and refusals are Note
/// [Writing .pt2 archives] in src/torch/pt2_writer.cpp), so
/// the file loads with load() and with `fxcpp.aten.load` in Python. Only the
/// tensors some get_attr names are written, in first-use order; a storage
/// shared by several of them is written once; tensors not on the CPU (or
/// conjugated, negated, not strided) are written as contiguous CPU copies.
/// meta["tensor_meta"] (as load() and trace() store it) is kept, and each
/// tensor's requires_grad (NamedTensor::requires_grad). Throws
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
void save(const Graph& graph, const std::vector<NamedTensor>& tensors, const std::string& path,
          const SaveOptions& options = {});
/// save(module.graph(), module.named_tensors(), path).
void save(const Module& module, const std::string& path);
/// Writes `size` bytes at `data` to `path` by the same rules as save() (Note
/// [Atomic saving]): the target holds its old content or the complete new one;
/// a device or fifo is written directly; a directory is refused. The one file
/// writer of fxcpp: Python's fxcpp.aten.save and the CLI's .pt2 export write
/// through it (fxcpp._C_torch.write_file). Throws FileError (path, step,
/// errno). O(size) plus one fsync.
void write_bytes(const std::string& path, const void* data, size_t size);
/// The same file's bytes, in memory.
std::string save_to_buffer(const Graph& graph, const std::vector<NamedTensor>& tensors,
                           const SaveOptions& options = {});

/// The graph and tensors of a file, without compiling a plan (for tools).
/// Checks the file as load() does (`options.plan_memory` is unused).
std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read_file(const std::string& path,
                                                                      const LoadOptions& options = {});

/// Everything a file holds, as read_buffer() and read_contents() return it.
struct FileContents {
  /// The graph: call_function targets are aten_op()/primitive() objects,
  /// dtypes and the like torch_constant() objects, meta["tensor_meta"] as
  /// load() stores it.
  std::unique_ptr<Graph> graph;
  /// The tensors, in file order, each with the requires_grad flag the file records.
  std::vector<NamedTensor> tensors;
  /// The class name the file records ("GraphModule" when it records none).
  std::string class_name;
};
/// read_file() of a file's bytes in memory, with the class name: what
/// `fxcpp.aten.load(..., runtime="python")` builds its GraphModule from, the
/// file parsed once (Note [Graph handover] in src/bindings/handover.h).
FileContents read_buffer(const void* data, size_t size, const LoadOptions& options = {});

/// read_file() with the class name (the file mapped as LoadOptions::mmap says).
FileContents read_contents(const std::string& path, const LoadOptions& options = {});

/// The JSON text of a file's graph record, pretty-printed (for tools).
std::string graph_json(const std::string& path);
/// The same from the file's bytes in memory.
std::string graph_json_from_buffer(const void* data, size_t size);

}  // namespace fxcpp::torch
