// fxcpp torch layer: call_function targets that the LibTorch runtime executes.
//
// Note [Runtime targets]
// ~~~~~~~~~~~~~~~~~~~~~~
// A graph the runtime runs holds two kinds of call_function target, both
// opaque core `Object`s (Note [Opaque objects]) whose interfaces live here:
// * ATen operator overloads (`aten_op("aten::add.Tensor")`): a c10
//   OperatorHandle resolved once, when the target is made. They print as
//   torch.fx prints `torch.ops.aten.add.Tensor`, so a loaded graph reads like
//   the lowered Python one.
// * Primitives (`primitive("operator.getitem")`): the closed set that shape
//   arithmetic needs (Primitive below). They print as operator.* / getattr.
// Both are interned for the process: an Object is a plain pointer to an
// entry that is never freed, so retain/release cost nothing and identity
// compares targets. Other constants that appear in arguments (dtypes,
// devices, layouts, memory formats) are `torch_constant` objects.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "fxcpp/core/object.h"

namespace fxcpp::torch {

/// Every error of the torch layer (bad files, unknown operators, bad inputs,
/// failing kernels) is an Error or a subclass; `what()` says what to do.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A file or graph the runtime cannot accept (corrupt, unknown operator,
/// wrong argument types, newer format).
struct FormatError : Error {
  using Error::Error;
};
/// forward() was called with inputs the graph cannot take.
struct InputError : Error {
  using Error::Error;
};
/// A file could not be written (or opened): `what()` names the path, the step
/// and the OS's reason; code() is the errno value (Python sees an OSError of
/// that errno, e.g. IsADirectoryError for EISDIR).
class FileError : public Error {
 public:
  FileError(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

/// The primitives a lowered graph may use besides ATen operators (the closed
/// set documented in docs/fxpt_format.md).
enum class Primitive : uint8_t {
  GetItem,   ///< operator.getitem(tuple | list | tensor, int | slice); a tensor as Tensor.__getitem__
  Add,       ///< operator.add on ints/floats (or list concatenation)
  Sub,       ///< operator.sub
  Mul,       ///< operator.mul
  FloorDiv,  ///< operator.floordiv (Python semantics: rounds toward -inf)
  TrueDiv,   ///< operator.truediv (always a float)
  Mod,       ///< operator.mod (Python semantics: sign of the divisor)
  Neg,       ///< operator.neg
  GetAttr,   ///< getattr(tensor, "shape" | "dtype" | "device" | "ndim")
};

/// A resolved ATen overload. Interned: lives until the process ends.
struct AtenOp {
  c10::OperatorHandle handle;
  std::string qualified;  ///< "aten::add.Tensor" ("aten::relu" for the default overload)
  std::string python;     ///< "torch.ops.aten.add.Tensor" (".default" spelled out)
  std::string name;       ///< "add.Tensor": the __name__ torch.fx names nodes after
  /// A number may stand for a Tensor argument (becoming a wrapped-number
  /// tensor), as torch's Python binding lets it for this operator only (Note
  /// [Numbers as tensors] in ops.cpp); elsewhere the runtime refuses it.
  bool numbers_as_tensors = false;
};

/// The target for operator `qualified` ("aten::conv2d", "aten::add.Tensor",
/// "aten::relu.default"; any registered namespace). Resolved through the c10
/// dispatcher once per process, then a table lookup. Throws FormatError
/// naming the operator when no such schema is registered.
Object aten_op(const std::string& qualified);
/// The AtenOp behind `target`, or null when it is not an aten_op object.
const AtenOp* as_aten_op(const Object& target);

/// The target for a primitive, by its Python name ("operator.getitem",
/// "operator.add", ..., "getattr"). Throws FormatError for other names.
Object primitive(const std::string& python_name);
/// The primitive behind `target`, or false when it is not one.
bool as_primitive(const Object& target, Primitive* out);
/// The Python name of a primitive ("operator.getitem", "getattr").
const char* primitive_name(Primitive p);

/// A dtype, device, layout or memory format used as an argument.
struct TorchConstant {
  enum class Kind : uint8_t { Dtype, Device, Layout, MemoryFormat };
  Kind kind;
  c10::IValue value;  ///< ScalarType/Layout/MemoryFormat as int (as the schemas take them), Device as Device
  std::string name;   ///< "float32", "cpu", "strided", "contiguous_format"
};
/// An interned constant object for `kind` and its name as torch spells it
/// after "torch." ("float32", "channels_last"; devices as "cpu" or "cuda:0").
/// Throws FormatError for unknown names.
Object torch_constant(TorchConstant::Kind kind, const std::string& name);
/// The constant behind `o`, or null.
const TorchConstant* as_torch_constant(const Object& o);
/// The name of a scalar type as torch spells it ("float32"); FormatError if it has none.
std::string dtype_name(c10::ScalarType t);
/// The scalar type called `name`; FormatError if unknown.
c10::ScalarType dtype_from_name(const std::string& name);

}  // namespace fxcpp::torch
