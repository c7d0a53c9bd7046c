// fxcpp torch layer: which operators a loaded file may call.
//
// Note [What a file may make the runtime do]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A .fxpt file names its operators as strings ("aten::conv2d"), and the c10
// dispatcher registers thousands of them, some of which read and write files
// (aten::from_file), address memory at an offset they do not check
// (aten::as_strided with a storage offset near 2^62 overflows the bounds
// check), or build tensors whose invariants nothing checks
// (aten::_sparse_coo_tensor_unsafe, then to_dense, writes outside the heap
// buffer). So a file from an untrusted source may make the runtime do only
// this:
//   * call the primitives of Note [Runtime targets] (closed, checked set);
//   * call the operators of the committed allow-list, src/torch/allowed_ops.inc:
//     the core ATen operator set (torch 2.x tags it `core`) plus the public
//     functional composites that fxcpp.aten.lower emits for real models
//     (conv2d, linear, batch_norm, dropout, ...). They compute on their
//     tensor arguments only: pure or writing only into tensors the graph
//     passes them, with bounds-checked indexing. Private operators (a leading
//     underscore) are on it only one by one, checked (aten::_softmax,
//     aten::_to_copy, ...). Operators that misbehaved when probed with
//     hostile arguments are left off, each with what it did (grid_sampler_2d
//     returns uninitialised memory for a bad mode, reflection_pad2d crashes
//     on an empty padding list, ...), or are on it behind an argument guard
//     (Note [Argument guards]: native_batch_norm would read short statistics
//     out of bounds). scripts/gen_allowed_ops.py derives the list,
//     documents each exclusion and checks the list against a torch.
// Whatever the list says, these are refused (hard refusals, from the name and
// the schema; refusal_reason() below):
//   * operators outside the `aten` namespace;
//   * any operator with a Storage argument or return;
//   * operators that read or write files (from_file, save, load, mmap);
//   * operators that take raw storages or offsets unchecked (as_strided_*,
//     set_, *unsafe*, from_blob, *storage*, _make_*; as_strided itself is
//     allowed behind a guard that keeps the view inside its input's elements);
//   * constructors and accessors of sparse, quantized, mkldnn and nested
//     tensors (sparse*, *quantiz*, q_*, indices/values, coalesce, csr/csc/bsr/
//     bsc, ...): their invariants are not checked when they are built;
//   * operators that return uninitialised memory (empty*, new_empty*,
//     resize*): they would leak heap contents into the outputs;
//   * backward kernels (*backward*): they trust their index and shape
//     arguments, and inference never needs them.
// Arguments the schema types as a dtype, layout or memory format must be
// values of that enumeration (kernels index tables with them unchecked), and
// unless the file is trusted, computed ones may only be a dtype read with
// getattr(tensor, "dtype") (Note [Enumerations from a file] in load.cpp).
// A file that calls anything else is refused at load with a FormatError that
// names the node, the operator, why, and the opt-in. The opt-in,
// LoadOptions::trusted (Python: trusted=True), is for files the user made: it
// lifts the list, the hard refusals and the rule on computed enumerations
// (their operators resolve against the whole dispatcher); enumeration
// constants and names are checked for every file.
// Strings a file holds are checked too (Note [Names a file may use] in
// src/torch/load.cpp). A Module built in C++ from a Graph is the caller's own
// program: no policy applies there; the policy is about loading files.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

#include "fxcpp/torch/ops.h"

namespace fxcpp::torch {

/// Why a file from an untrusted source may not call the operator with
/// `schema`, from the hard refusals alone (namespace, Storage arguments,
/// dangerous names); empty when none applies. The allow-list cannot override
/// these. O(schema size + name length).
std::string hard_refusal(const c10::FunctionSchema& schema);

/// Whether the committed allow-list (src/torch/allowed_ops.inc) names
/// `name` ("aten::add" and overload "Tensor"; "" for the default overload),
/// as an overload or through its base name. O(log list size).
bool on_allow_list(const c10::OperatorName& name);

/// Why a file from an untrusted source may not call `op` (a short clause,
/// "it reads or writes files"); empty when it may: on the allow-list and not
/// hit by a hard refusal. O(schema size + log list size).
std::string refusal_reason(const AtenOp& op);

/// The allow-list's entries as written ("aten::add.Tensor", "aten::relu.default"
/// for a default overload, "aten::conv2d" for every overload of a base name).
const std::vector<std::string>& allow_list_entries();

/// The qualified names of every overload registered with this process's
/// dispatcher that a file may call, as files spell them ("aten::add.Tensor",
/// "aten::relu" for a default overload), sorted. O(registered operators).
std::vector<std::string> allowed_operators();

// Note [Argument guards]
// ~~~~~~~~~~~~~~~~~~~~~~
// A few allow-listed kernels crash instead of raising on some arguments: the
// size of their result overflows int64 before any check sees it
// (repeat_interleave with repeats near 2^62 is a SIGSEGV in torch 1.13), or
// they read an argument as as many elements as another says, unchecked (the
// batch-norm kernels, native_batch_norm, _native_batch_norm_legit[.no_stats]
// and _native_batch_norm_legit_no_training, read weight, bias, running_mean
// and running_var as input.size(1) elements each, and in evaluation the
// running statistics even when they are None: a short, empty or stride-0 one
// is read out of bounds; the guard wants each that is given to be a
// contiguous 1-D tensor of input.size(1) elements, both statistics given when
// training is False, and the input to have 2 dims or more). The
// runtime resolves a guard for such an operator once, when it compiles the
// instruction, and calls it on the boxed arguments before every call of the
// kernel (planned or not, trusted file or not: it only refuses what would
// crash). A guard throws Error saying which argument is out of range; the
// runtime adds the node. Results are bounded like loaded tensors: at most
// kMaxResultBytes bytes, the bound the loader puts on a file's tensors.
// The views that take their offset, sizes and strides as arguments
// (as_strided, as_strided_, _reshape_alias) are guarded too: the view must
// stay inside its storage (Note [Views stay inside their storage] in
// src/torch/run.cpp), which is then fxcpp's refusal on every LibTorch
// (1.13's as_strided lets an overflowing offset through, 2.x refuses it with
// its own message, _reshape_alias checks nothing).
// Found by probing every allowed overload with boundary arguments (issue 35;
// tests/python/test_guard_sweep.py keeps probing) and guarded since:
//   * native_group_norm: N x C x HxW must equal the input's elements without
//     wrapping (its own check compares after the product wrapped), N, C, HxW
//     >= 0, group >= 1 dividing C, weight and bias contiguous C-vectors;
//   * lstm, gru, rnn_tanh, rnn_relu (.input and .data): every weight, bias,
//     projection and initial state has the shape the stacked layers imply,
//     packed batch sizes are positive, non-increasing and add up to the data;
//   * col2im and max_pool1d[_with_indices]: window arguments (kernel size,
//     stride, padding, dilation, output size) within [lo, 2^31), and the
//     dilated kernel and the padded size too (col2im with padding 2^31 wrote
//     out of bounds, max_pool1d with kernel 2^62 + 2 looped for ever).
//
// Note [Guards the schema implies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The sweep kept finding kernels of one kind, so two rules are derived from
// every overload's schema rather than picked by hand (argument_guard()):
//   * window and padding arguments: an int or int-list argument named
//     kernel_size, stride, padding, dilation, output_padding, output_size,
//     groups or pad has every value within (-2^31, 2^31). Kernels compute
//     output sizes from them in int64 or int32 without overflow checks:
//     conv2d and _convolution with padding 2^64 / 5 + 1 corrupt the heap,
//     conv3d with stride 2^62 returns uninitialised memory, replication_pad2d
//     and 3d with INT64_MAX pads, and reflection_pad3d with INT64_MIN ones
//     read out of bounds. No real model needs a window or a pad of 2^31.
//   * written tensors: a tensor argument the schema marks as written (an
//     out= tensor, an in-place self) may not overlap itself (a stride-0
//     dimension over several elements): adaptive_avg_pool2d.out and 3d.out
//     into an expanded out tensor corrupt the heap. ATen's TensorIterator
//     kernels refuse such a tensor themselves, with the same meaning.
// Both hold for trusted files too: they only refuse what would crash.
//
// Note [A failed call leaves its written tensors as they were]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An out= kernel resizes its out tensor to the result's sizes, and ATen's
// resize sets the new sizes before it grows the storage. When growing fails
// (a loaded weight's storage is the file's record and cannot grow; an
// allocation too large), the call throws and leaves the tensor claiming more
// elements than its storage has: the next call that reads or writes it goes
// past the buffer (the structured fuzzer's `linear.out` into a bias: heap
// corruption, both runtimes). So both runtimes take the geometry (sizes,
// strides, offset) of every tensor a call writes before the kernel runs, and
// put it back if the call throws (ArgumentGuard::save_written,
// WrittenGeometry::restore). The storage keeps what the kernel wrote into it
// (a failed program's values); only the geometry, which memory safety rests
// on, is restored. Every overload that writes a tensor has a guard (the
// overlap rule above), so this costs nothing elsewhere.

/// The largest tensor, in bytes, a guarded operator may produce (2^48, as the
/// loader bounds a file's tensors).
constexpr uint64_t kMaxResultBytes = uint64_t(1) << 48;

/// What runs before one overload's kernel (Note [Argument guards]): the checks
/// its schema implies (Note [Guards the schema implies]) and, for the few
/// operators that need one, a hand-written check. One per overload, built on
/// the first argument_guard() call for it and alive for the process (callers
/// hold a plain pointer). Calling it is O(arguments + the bounded lists).
/// The geometry of the tensors one call writes, taken before the kernel runs
/// (Note [A failed call leaves its written tensors as they were]). Holds a
/// reference to each tensor until cleared. Reused across calls (clear()
/// keeps the capacity).
class WrittenGeometry {
 public:
  /// Puts every saved tensor's sizes, strides and offset back. Never throws.
  void restore() noexcept;
  void clear() { entries_.clear(); }
  bool empty() const { return entries_.empty(); }

 private:
  friend class ArgumentGuard;
  void save(const at::Tensor& t);
  struct Entry {
    at::Tensor tensor;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  std::vector<Entry> entries_;
};

class ArgumentGuard {
 public:
  /// A hand-written check over the call's boxed arguments.
  using Check = void (*)(const std::vector<c10::IValue>& stack);

  /// Checks the leading arguments of a call on `stack` (in schema order; an
  /// out= tensor may follow). Throws Error when the kernel would crash.
  void operator()(const std::vector<c10::IValue>& stack) const;

  /// Whether the kernel writes a tensor argument (out=, in-place).
  bool writes() const { return !written_.empty(); }

  /// Appends the geometry of the tensors the call on `stack` writes to
  /// `into`, for WrittenGeometry::restore if the call throws. O(written dims).
  void save_written(const std::vector<c10::IValue>& stack, WrittenGeometry& into) const;

  /// Whether anything is checked at all (argument_guard() returns null otherwise).
  bool empty() const { return check_ == nullptr && bounded_.empty() && written_.empty(); }

 private:
  friend const ArgumentGuard* argument_guard(const AtenOp& op);
  struct Arg {
    uint32_t index;    ///< position in the schema
    const char* name;  ///< the schema's name for it (owned by the schema, which outlives the guard)
  };
  std::string op_;             ///< "conv2d": the operator's base name, for messages
  Check check_ = nullptr;      ///< the hand-written check, or null
  std::vector<Arg> bounded_;   ///< window and padding ints: each value within (-2^31, 2^31)
  std::vector<Arg> written_;   ///< tensors and tensor lists the kernel writes (out=, in-place): none may overlap itself
};

/// Whether an argument annotated `info` may be written (`Tensor(a!)`, or a
/// list or optional of them). O(annotation depth).
bool writes_tensor(const c10::AliasInfo* info);

/// The guard of `op`, or null when its kernel needs none. O(1) after the
/// first call per overload (a table lookup under a lock).
const ArgumentGuard* argument_guard(const AtenOp& op);

/// Throws Error unless a strided view of `itemsize`-byte elements at
/// `offset` with `sizes` and `strides` reaches only the `storage_bytes`
/// bytes of its storage (Note [Views stay inside their storage] in
/// src/torch/run.cpp). `what` starts the message ("the result"), `within`
/// names the bytes ("its storage"). O(dim).
void check_view_extent(const char* what, int64_t offset, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                       size_t itemsize, size_t storage_bytes, const char* within = "its storage");

}  // namespace fxcpp::torch
