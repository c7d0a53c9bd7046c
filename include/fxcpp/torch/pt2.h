// fxcpp torch layer: reading the .pt2 archives torch.export.save writes.
//
//   auto m = fxcpp::torch::load("model.pt2");   // the same load() as .fxpt files
//   c10::IValue y = m.forward({x});             // == ep.module()(x)
//
// Note [Reading .pt2 archives]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// load(), load_from_buffer() and read_file() tell the two formats apart by
// content, not by file name: an archive with an `archive_format` record
// saying "pt2" and no graph.json is read as a .pt2 archive (src/torch/pt2.cpp,
// docs/pt2_format.md), anything else as .fxpt. A .pt2 archive becomes the same
// core Graph and NamedTensors a .fxpt file does, so it runs in the same
// memory-planned runtime and the same rules hold (Note [Loading untrusted
// files] in load.cpp): the strict zip reader, the operator allow-list unless
// LoadOptions::trusted, names checked (Note [Names a file may use]), extents
// of tensors checked against their records. What is read:
// * `models/model.json` (the ExportedProgram as JSON, torch's serde schema):
//   its schema version (major kPt2SchemaMajor, any minor), its graph, its
//   signature and the pytree specs of the root module's call;
// * `data/weights/model_weights_config.json` and
//   `data/constants/model_constants_config.json`: for each tensor the graph
//   signature lifts to an input (parameters, buffers, tensor constants) its
//   raw record (an untyped storage's bytes), dtype, sizes, strides and storage
//   offset;
// * `archive_format`, `byteorder` (little-endian only).
// Nothing is unpickled, ever: `data/sample_inputs/*.pt` is never opened, and
// a tensor stored pickled (use_pickle: a tensor subclass), a TorchBind or
// opaque object input, effect tokens and higher-order operators (subgraph
// arguments) are refused with a FormatError naming them and the reason.
// The graph maps onto a core Graph as follows: lifted inputs become get_attr
// nodes of their fully qualified names ("layer1.0.conv1.weight"), user inputs
// placeholders (in order), `torch.ops.aten.<op>.<overload>` targets aten_op()
// handles, `_operator.*` targets primitives, aten.sym_size.int
// getattr(x, "shape")[dim] (no dispatcher call for shape arithmetic), each
// multi-value result an operator.getitem node per named value; buffer,
// parameter and user-input mutations the signature lists become an
// aten::copy_ into that tensor before the output (as ep.module() does); the
// outputs are arranged as the out_spec says (tuples, lists, dicts of string
// keys, a single value). Inputs: a flat tuple of positional values, no
// keyword inputs. Symbolic sizes stay symbolic: shape arithmetic is computed
// from the inputs at run time; inputs are checked against the dtypes, static
// sizes and symbolic ranges the program was exported for (Note [Exported
// input checks] in src/torch/pt2.cpp).
// Each value keeps its serialized metadata as JSON text in meta["pt2_value"]
// and the output node the range constraints in meta["pt2_range_constraints"],
// which the .pt2 writer gives back (Note [Writing .pt2 archives] in
// src/torch/pt2_writer.cpp).
#pragma once

namespace fxcpp::torch {

/// The major schema version of torch.export's serialized ExportedProgram
/// (torch/_export/serde/schema.py SCHEMA_VERSION) this build reads; files of
/// any minor version of it load, a newer or older major is refused naming
/// both versions.
constexpr int kPt2SchemaMajor = 8;
/// The minor version of the torch this reader was written against (2.14.1);
/// newer minors load (minor versions only add optional fields).
constexpr int kPt2SchemaMinor = 20;

}  // namespace fxcpp::torch
