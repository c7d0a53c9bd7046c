// The operator policy for loaded files: Note [What a file may make the runtime
// do] in include/fxcpp/torch/policy.h.
#include "fxcpp/torch/policy.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <set>

namespace fxcpp::torch {

namespace {

// The committed list, one entry per line (src/torch/allowed_ops.inc).
const char* const kAllowList[] = {
#include "allowed_ops.inc"
};

const std::set<std::string>& allow_set() {
  static const std::set<std::string> set(std::begin(kAllowList), std::end(kAllowList));
  return set;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The hard refusals by name: `base` is the operator's name without namespace
// or overload ("from_file"). Each returns its category's clause.
std::string refusal_by_name(const std::string& base) {
  for (const char* p : {"file", "save", "load", "mmap"})
    if (contains(base, p)) return "it reads or writes files";
  for (const char* p : {"as_strided", "unsafe", "from_blob", "storage", "data_ptr"})
    if (contains(base, p)) return "it takes raw storages, pointers or offsets without checking them";
  if (base == "set" || base == "set_" || starts_with(base, "set_") || starts_with(base, "_set_") ||
      starts_with(base, "_make_"))
    return "it takes raw storages, pointers or offsets without checking them";
  for (const char* p : {"sparse", "quantiz", "_coo", "csr", "csc", "bsr", "bsc", "coalesce", "mkldnn", "nested",
                        "fbgemm", "int_repr", "to_padded", "per_channel", "per_tensor", "qscheme"})
    if (contains(base, p)) return "it builds or reads sparse, quantized or opaque tensors without checking their invariants";
  if (starts_with(base, "q_") || starts_with(base, "_q_"))
    return "it builds or reads sparse, quantized or opaque tensors without checking their invariants";
  for (const char* n : {"indices", "values", "_indices", "_values", "crow_indices", "col_indices", "ccol_indices",
                        "row_indices", "_nnz", "dense_dim", "sparse_dim", "_dimI", "_dimV"})
    if (base == n) return "it builds or reads sparse, quantized or opaque tensors without checking their invariants";
  for (const char* p : {"empty", "resize"})
    if (contains(base, p)) return "it returns uninitialised memory";
  if (contains(base, "backward")) return "it is a backward kernel, which trusts its index and shape arguments";
  return {};
}

bool is_storage(const c10::TypePtr& t) {
  if (!t) return false;
  if (t->kind() == c10::TypeKind::StorageType) return true;
  for (const auto& c : t->containedTypes())
    if (is_storage(c)) return true;
  return false;
}

// ---- Note [Argument guards] -----------------------------------------------------------

[[noreturn]] void guard_fail(const std::string& what) {
  throw Error(what + ": the result would exceed " + std::to_string(kMaxResultBytes >> 40) +
              " TiB (the runtime's bound on a tensor, Note [Argument guards])");
}

// `count` elements of `like`'s dtype, times `rest`, within kMaxResultBytes.
void check_result_size(uint64_t count, uint64_t rest, const at::Tensor& like, const char* what) {
  uint64_t n, bytes;
  if (__builtin_mul_overflow(count, rest, &n) ||
      __builtin_mul_overflow(n, static_cast<uint64_t>(like.element_size()), &bytes) || bytes > kMaxResultBytes)
    guard_fail(std::string("repeat_interleave: ") + what);
}

// The sum of a 1-D integer `repeats` tensor, each entry non-negative; refuses
// sums that leave uint64.
uint64_t sum_of_repeats(const at::Tensor& repeats) {
  if (repeats.dim() > 1 || !c10::isIntegralType(repeats.scalar_type(), /*includeBool=*/false))
    return 0;  // the kernel refuses these itself
  uint64_t total = 0;
  const int64_t n = repeats.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = repeats.dim() == 0 ? repeats.item<int64_t>() : repeats[i].item<int64_t>();
    if (r < 0) return 0;  // "repeats can not be negative", raised by the kernel
    if (__builtin_add_overflow(total, static_cast<uint64_t>(r), &total)) guard_fail("repeat_interleave: repeats");
  }
  return total;
}

// How many elements of `self` a repeat_interleave over `dim` (None: flattened)
// takes per repeat unit: the product of the other dimensions.
uint64_t others(const at::Tensor& self, const c10::IValue& dim, uint64_t* along) {
  if (dim.isNone() || self.dim() == 0) {
    *along = static_cast<uint64_t>(self.numel());
    return 1;
  }
  int64_t d = dim.toInt(), nd = self.dim();
  if (d < -nd || d >= nd) {
    *along = 0;  // the kernel raises for a bad dim
    return 0;
  }
  d = d < 0 ? d + nd : d;
  *along = static_cast<uint64_t>(self.size(d));
  return *along == 0 ? 0 : static_cast<uint64_t>(self.numel()) / *along;
}

// repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None)
void guard_repeat_interleave_self_int(const std::vector<c10::IValue>& s) {
  if (s.size() < 3 || !s[0].isTensor() || !s[1].isInt()) return;
  const at::Tensor& self = s[0].toTensor();
  int64_t r = s[1].toInt();
  if (r < 0) return;  // raised by the kernel
  uint64_t along, rest = others(self, s[2], &along), total;
  if (__builtin_mul_overflow(along, static_cast<uint64_t>(r), &total)) guard_fail("repeat_interleave: repeats");
  check_result_size(total, rest, self, "repeats");
}

// repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None)
void guard_repeat_interleave_self_tensor(const std::vector<c10::IValue>& s) {
  if (s.size() < 3 || !s[0].isTensor() || !s[1].isTensor()) return;
  const at::Tensor& self = s[0].toTensor();
  const at::Tensor& reps = s[1].toTensor();
  uint64_t along, rest = others(self, s[2], &along), total = sum_of_repeats(reps);
  if (reps.numel() == 1 && __builtin_mul_overflow(total, along, &total)) guard_fail("repeat_interleave: repeats");
  check_result_size(total, rest, self, "repeats");
}

// repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None)
void guard_repeat_interleave_tensor(const std::vector<c10::IValue>& s) {
  if (s.empty() || !s[0].isTensor()) return;
  const at::Tensor& reps = s[0].toTensor();
  check_result_size(sum_of_repeats(reps), 1, reps, "repeats");
}

// The ints of an int list argument (a SymInt[] boxes as one when its values
// are concrete); false for anything else, which the kernel judges.
bool int_list(const c10::IValue& v, std::vector<int64_t>* out) {
  if (!v.isList()) return false;
  out->clear();
  for (const c10::IValue& i : v.toListRef()) {
    if (!i.isInt()) return false;
    out->push_back(i.toInt());
  }
  return true;
}

// as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None), as_strided_ and
// _reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride): the view they return must stay inside
// self's storage. Arguments the kernel refuses on its own (ranks that differ, a non-tensor) are left to it.
void guard_view(const std::vector<c10::IValue>& s) {
  if (s.size() < 3 || !s[0].isTensor()) return;
  const at::Tensor& self = s[0].toTensor();
  if (!self.defined() || !self.has_storage() || self.is_quantized() || self.layout() != c10::Layout::Strided) return;
  std::vector<int64_t> sizes, strides;
  if (!int_list(s[1], &sizes) || !int_list(s[2], &strides) || sizes.size() != strides.size()) return;
  int64_t offset = self.storage_offset();
  if (s.size() > 3 && s[3].isInt()) offset = s[3].toInt();
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  check_view_extent("the view", offset, sizes, strides, self.dtype().itemsize(), impl->unsafe_storage().nbytes());
}

// The batch-norm kernels (native_batch_norm, _native_batch_norm_legit and its
// no_stats overload, _native_batch_norm_legit_no_training, their out= forms;
// probed in forked processes on torch 1.13.1 and 2.14.1) read weight, bias,
// running_mean and running_var as input.size(1) elements each through a raw
// pointer, unchecked: a short or empty one is read out of bounds (SIGSEGV
// for an empty one with 65536 channels), a stride-0 one too (wrong results).
// In evaluation (training=False) they read the running statistics whether
// given or not: native_batch_norm with None for them, and
// _native_batch_norm_legit.no_stats with training=False, are a SIGSEGV.
// They check dtypes, and an input with fewer than 2 dims, themselves (an
// IndexError; a 0-d input is a ValueError on 2.14). 1.13's divide by the
// elements per channel: an empty input is a SIGFPE. The guard wants the input
// to have 2 dims or more, each of the four that is given to be a 1-D tensor of
// input.size(1) elements laid out contiguously, and both statistics given in
// evaluation, and on LibTorch 1.13 an input with elements; the composite
// batch_norm checks sizes itself and needs none.
std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

[[noreturn]] void batch_norm_fail(const char* name, const std::string& why, int64_t channels) {
  throw Error(std::string("batch norm: argument '") + name + "' " + why + "; it must be a contiguous 1-D tensor of " +
              std::to_string(channels) + " elements, one per channel of the input (input.size(1) = " +
              std::to_string(channels) + ")");
}

// Whether the argument is given (a defined tensor); throws unless it is a
// contiguous 1-D tensor of `channels` elements.
bool check_channel_vector(const c10::IValue& v, const char* name, int64_t channels) {
  if (!v.isTensor() || !v.toTensor().defined()) return false;  // None: the kernel does without it
  const at::Tensor& t = v.toTensor();
  if (t.dim() != 1 || t.size(0) != channels) batch_norm_fail(name, "has shape " + shape_of(t), channels);
  if (channels > 1 && t.stride(0) != 1)
    batch_norm_fail(name, "has stride " + std::to_string(t.stride(0)) + " (the kernel reads it as contiguous)",
                    channels);
  return true;
}

// kStats: the overload takes running_mean and running_var (arguments 3 and 4);
// kTraining: the index of its `training` argument, or -1 (evaluation only).
template <bool kStats, int kTraining>
void guard_batch_norm(const std::vector<c10::IValue>& s) {
  const size_t needed = std::max<size_t>(kStats ? 5 : 3, kTraining + 1);
  if (s.size() < needed || !s[0].isTensor()) return;  // the runtime's schema binding refuses these
  const at::Tensor& input = s[0].toTensor();
  if (!input.defined()) return;
  if (input.dim() < 2)
    throw Error("batch norm: argument 'input' has shape " + shape_of(input) +
                "; it needs at least 2 dimensions (batch, channels, ...)");
  const int64_t channels = input.size(1);
#if TORCH_VERSION_MAJOR < 2
  // LibTorch 1.13's kernel divides by the elements per channel: SIGFPE.
  if (input.numel() == 0)
    throw Error("batch norm: argument 'input' has shape " + shape_of(input) +
                ", no elements, which this LibTorch's kernel divides by (torch 2 returns an empty result)");
#endif
  check_channel_vector(s[1], "weight", channels);
  check_channel_vector(s[2], "bias", channels);
  bool training = false;
  if constexpr (kTraining >= 0) training = s[kTraining].isBool() && s[kTraining].toBool();
  if (!kStats) {
    if (!training)
      throw Error("batch norm: argument 'training' is False, but this overload takes no running statistics, "
                  "which evaluation reads (use an overload with running_mean and running_var)");
    return;
  }
  const char* names[] = {"running_mean", "running_var"};
  for (int i = 0; i < 2; ++i)
    if (!check_channel_vector(s[3 + i], names[i], channels) && !training)
      batch_norm_fail(names[i], "is None, but evaluation (training=False) reads it", channels);
}

}  // namespace

void check_view_extent(const char* what, int64_t offset, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                       size_t itemsize, size_t storage_bytes) {
  bool empty = false;
  bool ok = offset >= 0 && sizes.size() == strides.size();
  for (size_t d = 0; ok && d < sizes.size(); ++d) {
    ok = sizes[d] >= 0;
    empty = empty || sizes[d] == 0;
  }
  if (ok && empty) return;  // no element: nothing is read
  int64_t last = offset;
  for (size_t d = 0; ok && d < sizes.size(); ++d) {
    int64_t step = 0;
    ok = strides[d] >= 0 && !__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) &&
         !__builtin_add_overflow(last, step, &last);
  }
  int64_t bytes = 0;
  ok = ok && !__builtin_add_overflow(last, int64_t(1), &last) &&
       !__builtin_mul_overflow(last, static_cast<int64_t>(itemsize), &bytes) &&
       static_cast<uint64_t>(bytes) <= storage_bytes;
  if (ok) return;
  std::string shape;
  for (size_t d = 0; d < sizes.size() || d < strides.size(); ++d)
    shape += (d ? ", " : "") + (d < sizes.size() ? std::to_string(sizes[d]) : std::string("?")) + ":" +
             (d < strides.size() ? std::to_string(strides[d]) : std::string("?"));
  throw Error(std::string(what) + " (offset " + std::to_string(offset) + ", size:stride " + shape +
              ") reaches outside its storage of " + std::to_string(storage_bytes) +
              " bytes; the runtime refuses views that read or write other memory");
}

ArgumentGuard argument_guard(const AtenOp& op) {
  const c10::OperatorName& name = op.handle.schema().operator_name();
  if ((name.name == "aten::as_strided" || name.name == "aten::as_strided_" || name.name == "aten::_reshape_alias") &&
      name.overload_name.empty())
    return guard_view;
  if (name.name == "aten::native_batch_norm" || name.name == "aten::_native_batch_norm_legit" ||
      name.name == "aten::_native_batch_norm_legit_no_training" ||
      name.name == "aten::_native_batch_norm_legit_functional") {
    // Every overload takes (input, weight, bias, ...); those with statistics
    // name them next (the no_stats overloads do not), then `training`
    // (_native_batch_norm_legit_no_training has none).
    const auto& args = op.handle.schema().arguments();
    const bool stats = args.size() > 4 && args[3].name() == "running_mean" && args[4].name() == "running_var";
    int training = -1;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].name() == "training") training = static_cast<int>(i);
    if (stats && training == 5) return guard_batch_norm<true, 5>;
    if (stats && training == -1) return guard_batch_norm<true, -1>;
    if (!stats && training == 3) return guard_batch_norm<false, 3>;
    // A layout no LibTorch has had: the strictest reading (evaluation, statistics required).
    return stats ? guard_batch_norm<true, -1> : guard_batch_norm<false, -1>;
  }
  if (name.name != "aten::repeat_interleave") return nullptr;
  if (name.overload_name == "self_int") return guard_repeat_interleave_self_int;
  if (name.overload_name == "self_Tensor") return guard_repeat_interleave_self_tensor;
  if (name.overload_name == "Tensor") return guard_repeat_interleave_tensor;
  return nullptr;
}

std::string hard_refusal(const c10::FunctionSchema& schema) {
  const std::string& qualified = schema.name();
  size_t sep = qualified.find("::");
  if (sep == std::string::npos || qualified.compare(0, sep, "aten") != 0)
    return "it is not in the aten namespace";
  for (const auto& a : schema.arguments())
    if (is_storage(a.type())) return "it takes a raw Storage";
  for (const auto& r : schema.returns())
    if (is_storage(r.type())) return "it returns a raw Storage";
  return refusal_by_name(qualified.substr(sep + 2));
}

bool on_allow_list(const c10::OperatorName& name) {
  const auto& set = allow_set();
  if (set.count(name.name)) return true;
  return set.count(name.name + "." + (name.overload_name.empty() ? std::string("default") : name.overload_name)) > 0;
}

std::string refusal_reason(const AtenOp& op) {
  const c10::FunctionSchema& schema = op.handle.schema();
  std::string hard = hard_refusal(schema);
  if (!hard.empty()) return hard;
  if (!on_allow_list(schema.operator_name()))
    return "it is not on the list of operators that are pure and bounds-checked, src/torch/allowed_ops.inc";
  return {};
}

const std::vector<std::string>& allow_list_entries() {
  static const std::vector<std::string> entries(std::begin(kAllowList), std::end(kAllowList));
  return entries;
}

std::vector<std::string> allowed_operators() {
  std::vector<std::string> out;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (!on_allow_list(name)) continue;
    auto handle = dispatcher.findSchema(name);
    if (!handle || !hard_refusal(handle->schema()).empty()) continue;
    out.push_back(name.name + (name.overload_name.empty() ? "" : "." + name.overload_name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fxcpp::torch
