// The operator policy for loaded files: Note [What a file may make the runtime
// do] in include/fxcpp/torch/policy.h.
#include "fxcpp/torch/policy.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/api/include/torch/version.h>

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
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
  // as_strided itself is allowed: its guard keeps the view inside its input (guard_view).
  for (const char* p : {"as_strided", "unsafe", "from_blob", "storage", "data_ptr"})
    if (contains(base, p) && base != "as_strided")
      return "it takes raw storages, pointers or offsets without checking them";
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
// as_strided and as_strided_ (on the allow-list: core-ATen exports of convnext and swin call as_strided) keep
// to the elements self spans, [the lowest, the highest element offset of self], not its whole storage: the
// storage may be a planned buffer that held another value of this call or of an earlier one (Note [Memory
// planning]), so a view past self's own elements would read what the program never computed in this call.
template <bool kWithinSelf>
void guard_view(const std::vector<c10::IValue>& s) {
  if (s.size() < 3 || !s[0].isTensor()) return;
  const at::Tensor& self = s[0].toTensor();
  if (!self.defined() || !self.has_storage() || self.is_quantized() || self.layout() != c10::Layout::Strided) return;
  std::vector<int64_t> sizes, strides;
  if (!int_list(s[1], &sizes) || !int_list(s[2], &strides) || sizes.size() != strides.size()) return;
  int64_t offset = self.storage_offset();
  if (s.size() > 3 && s[3].isInt()) offset = s[3].toInt();
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const size_t itemsize = self.dtype().itemsize();
  if (!kWithinSelf) {
    check_view_extent("the view", offset, sizes, strides, itemsize, impl->unsafe_storage().nbytes());
    return;
  }
  // self's span: the loaded and computed tensors' extents are checked (offset >= 0, strides >= 0, inside
  // their storage), so these sums do not overflow.
  int64_t lo = self.storage_offset(), span = self.numel() == 0 ? 0 : 1;
  for (int64_t d = 0; span && d < self.dim(); ++d) span += (self.size(d) - 1) * std::max<int64_t>(self.stride(d), 0);
  int64_t rel = 0;
  if (__builtin_sub_overflow(offset, lo, &rel)) rel = -1;
  check_view_extent("the view", rel, sizes, strides, itemsize, static_cast<size_t>(span) * itemsize,
                    "the elements of its input");
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

// ---- windows: kernel sizes, strides, paddings, dilations ------------------------------
// Kernels compute output extents from these in int64 without overflow checks
// and some then loop in int32 (col2im with padding 2^31 passes its own size
// check and writes out of bounds; max_pool1d with kernel_size 2^62 + 2 loops
// for ever). A window no tensor could need is refused: every value within
// [lo, 2^31), and the dilated kernel and padded size too.
constexpr int64_t kMaxWindow = int64_t(1) << 31;

[[noreturn]] void window_fail(const char* op, const char* arg, const std::string& why) {
  throw Error(std::string(op) + ": argument '" + arg + "' " + why + " (Note [Argument guards])");
}

// The ints of window argument `v` (an int or int list), each in [lo, kMaxWindow);
// `allow_empty`: an empty list (stride=[], meaning kernel_size) is accepted.
std::vector<int64_t> window_ints(const char* op, const char* arg, const c10::IValue& v, int64_t lo, size_t rank,
                                 bool allow_empty = false) {
  std::vector<int64_t> out;
  if (v.isInt()) {
    out.assign(rank, v.toInt());
  } else if (!int_list(v, &out)) {
    window_fail(op, arg, "is not a list of ints");
  }
  if (out.empty() && allow_empty) return out;
  if (out.size() != rank && out.size() != 1)
    window_fail(op, arg, "has " + std::to_string(out.size()) + " values, expected " + std::to_string(rank));
  for (int64_t x : out)
    if (x < lo || x >= kMaxWindow)
      window_fail(op, arg, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", 2^31)");
  return out;
}

// (kernel - 1) * dilation + 1 and size + 2 * padding, each below 2^31 (the values
// are below 2^31 already, so int64 holds the products).
void check_window_extent(const char* op, int64_t kernel, int64_t dilation, int64_t padding, int64_t size) {
  if ((kernel - 1) * dilation + 1 >= kMaxWindow)
    window_fail(op, "dilation", "times kernel_size reaches 2^31 (" + std::to_string(kernel) + " x " +
                                    std::to_string(dilation) + ")");
  if (size + 2 * padding >= kMaxWindow)
    window_fail(op, "padding", "makes the padded size reach 2^31 (" + std::to_string(size) + " + 2 x " +
                                   std::to_string(padding) + ")");
}

// col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride)
void guard_col2im(const std::vector<c10::IValue>& s) {
  if (s.size() < 6) return;
  const char* op = "col2im";
  auto out = window_ints(op, "output_size", s[1], 0, 2), kernel = window_ints(op, "kernel_size", s[2], 1, 2),
       dil = window_ints(op, "dilation", s[3], 1, 2), pad = window_ints(op, "padding", s[4], 0, 2);
  window_ints(op, "stride", s[5], 1, 2);
  for (size_t d = 0; d < 2; ++d)
    check_window_extent(op, kernel[d % kernel.size()], dil[d % dil.size()], pad[d % pad.size()], out[d % out.size()]);
}

// max_pool1d[_with_indices](Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0],
// int[1] dilation=[1], bool ceil_mode=False)
void guard_max_pool1d(const std::vector<c10::IValue>& s) {
  if (s.size() < 5 || !s[0].isTensor()) return;
  const char* op = "max_pool1d";
  const at::Tensor& self = s[0].toTensor();
  auto kernel = window_ints(op, "kernel_size", s[1], 1, 1), pad = window_ints(op, "padding", s[3], 0, 1),
       dil = window_ints(op, "dilation", s[4], 1, 1);
  window_ints(op, "stride", s[2], 1, 1, /*allow_empty=*/true);
  const int64_t length = self.dim() > 0 ? self.size(-1) : 0;
  check_window_extent(op, kernel[0], dil[0], pad[0], std::min<int64_t>(length, kMaxWindow));
}

// ---- group norm -----------------------------------------------------------------------
// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group,
// float eps) reads input as N x C x HxW elements: its own check compares N * C * HxW with input.numel() after
// the product wrapped (HxW = 2 + 2^62 passes with 8 elements), and N = 0 with a non-empty input returns
// uninitialised memory. The guard wants N, C, HxW >= 0, group >= 1 dividing C, the product (overflow-checked)
// equal to input's elements, the input contiguous, and weight and bias, when given, contiguous C-vectors.
void guard_native_group_norm(const std::vector<c10::IValue>& s) {
  if (s.size() < 7 || !s[0].isTensor() || !s[3].isInt() || !s[4].isInt() || !s[5].isInt() || !s[6].isInt()) return;
  const at::Tensor& input = s[0].toTensor();
  if (!input.defined()) return;
  const int64_t n = s[3].toInt(), c = s[4].toInt(), hxw = s[5].toInt(), group = s[6].toInt();
  auto fail = [&](const std::string& why) {
    throw Error("native_group_norm: " + why + " (N = " + std::to_string(n) + ", C = " + std::to_string(c) +
                ", HxW = " + std::to_string(hxw) + ", group = " + std::to_string(group) + ", input of shape " +
                shape_of(input) + "; Note [Argument guards])");
  };
  if (n < 0 || c < 0 || hxw < 0) fail("N, C and HxW must not be negative");
  if (group < 1 || (c % group) != 0) fail("group must be positive and divide C");
  int64_t nc = 0, total = 0;
  if (__builtin_mul_overflow(n, c, &nc) || __builtin_mul_overflow(nc, hxw, &total) || total != input.numel())
    fail("N x C x HxW must equal the input's number of elements");
  if (!input.is_contiguous()) fail("the input must be contiguous");
  const char* names[] = {"weight", "bias"};
  for (int i = 0; i < 2; ++i) {
    const c10::IValue& v = s[1 + i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    if (t.numel() != c || !t.is_contiguous())
      fail(std::string("argument '") + names[i] + "' of shape " + shape_of(t) +
           " must be a contiguous tensor of C elements");
  }
}

// ---- weight norm ----------------------------------------------------------------------
// _weight_norm(Tensor v, Tensor g, int dim=0) (wav2vec2, HuBERT: the positional convolution's
// weight): for dim 0 or the last one, its CPU kernel reads g as v.size(dim) contiguous elements,
// unchecked (a one-element g is read out of bounds, an empty one is a SIGSEGV), and divides by
// the elements per slice (an empty v is a SIGFPE). The guard wants v with elements, dim in range,
// and g a contiguous tensor of v.size(dim) elements.
void guard_weight_norm(const std::vector<c10::IValue>& s) {
  if (s.size() < 3 || !s[0].isTensor() || !s[1].isTensor() || !s[2].isInt()) return;
  const at::Tensor &v = s[0].toTensor(), &g = s[1].toTensor();
  if (!v.defined() || !g.defined()) return;
  auto fail = [&](const std::string& why) {
    throw Error("_weight_norm: " + why + " (v of shape " + shape_of(v) + ", g of shape " + shape_of(g) +
                ", dim = " + std::to_string(s[2].toInt()) + "; Note [Argument guards])");
  };
  const int64_t nd = v.dim();
  int64_t dim = s[2].toInt();
  if (nd < 1 || dim < -nd || dim >= nd) fail("dim must name a dimension of v");
  dim = dim < 0 ? dim + nd : dim;
  if (v.numel() == 0) fail("v must have elements");
  if (g.numel() != v.size(dim) || !g.is_contiguous()) fail("g must be a contiguous tensor of v.size(dim) elements");
}

// ---- recurrent layers -----------------------------------------------------------------
// lstm, gru, rnn_tanh and rnn_relu (.input and .data) trust the shapes of their initial states and weights:
// a state of the wrong batch or hidden size, a one-element or empty weight, empty or strided batch_sizes
// corrupt the heap or read out of bounds. The guard checks every shape the stacked layers imply, from the
// first layer's input-hidden weight (gates x hidden, features): for each layer and direction w_ih
// [G*H, in], w_hh [G*H, P], b_ih and b_hh [G*H], w_hr [P, H] (LSTM projections); the states [L*D, B, P]
// (and the LSTM cell [L*D, B, H]); packed data [sum(batch_sizes), features] with batch_sizes a contiguous
// 1-D int64 CPU tensor, positive and non-increasing.
std::string list_shapes(const std::vector<at::Tensor>& ts) {
  std::string out;
  for (const at::Tensor& t : ts) out += (out.empty() ? "" : ", ") + (t.defined() ? shape_of(t) : "None");
  return "[" + out + "]";
}

// The tensors of a list argument (typed or generic), or false.
bool tensor_list(const c10::IValue& v, std::vector<at::Tensor>* out) {
  if (!v.isList()) return false;
  for (const c10::IValue& t : v.toListRef()) {
    if (!t.isTensor()) return false;
    out->push_back(t.toTensor());
  }
  return true;
}

template <int64_t kGates, bool kData>
void guard_rnn(const std::vector<c10::IValue>& s) {
  const char* op = kGates == 4 ? "lstm" : kGates == 3 ? "gru" : "rnn";
  const size_t base = kData ? 1 : 0;  // .data has batch_sizes after its data
  if (s.size() < base + 8 || !s[0].isTensor()) return;
  auto fail = [&](const std::string& why) {
    throw Error(std::string(op) + ": " + why + " (Note [Argument guards])");
  };
  const at::Tensor& input = s[0].toTensor();
  std::vector<at::Tensor> hx, params;
  const c10::IValue& hv = s[base + 1];
  if (hv.isTensor()) hx.push_back(hv.toTensor());
  else if (!tensor_list(hv, &hx)) fail("hx is not a tensor or a list of tensors");
  if (!tensor_list(s[base + 2], &params)) fail("params is not a list of tensors");
  if (!s[base + 3].isBool() || !s[base + 4].isInt() || !s[base + 7].isBool()) return;  // the schema binding refuses
  const bool biases = s[base + 3].toBool(), bidirectional = s[base + 7].toBool();
  const int64_t layers = s[base + 4].toInt(), dirs = bidirectional ? 2 : 1;
  // Bounded before layers * dirs * per below can overflow.
  if (layers < 1 || layers > (int64_t(1) << 20))
    fail("num_layers is " + std::to_string(layers) + ", it must be in [1, 2^20]");
  if (!input.defined()) fail("the input is None");
  const auto dtype = input.scalar_type();
  int64_t batch = 0, features = 0;
  if constexpr (kData) {
    if (input.dim() != 2) fail("packed data must have 2 dimensions, not shape " + shape_of(input));
    features = input.size(1);
    if (!s[1].isTensor()) fail("batch_sizes is not a tensor");
    const at::Tensor& bs = s[1].toTensor();
    if (!bs.defined() || bs.dim() != 1 || bs.scalar_type() != c10::kLong || !bs.is_cpu() ||
        !bs.is_contiguous() || bs.numel() < 1)
      fail("batch_sizes must be a non-empty contiguous 1-D int64 CPU tensor");
    const int64_t* b = bs.data_ptr<int64_t>();  // const_data_ptr is 2.1+
    int64_t total = 0;
    for (int64_t i = 0; i < bs.numel(); ++i) {
      if (b[i] < 1 || (i > 0 && b[i] > b[i - 1]))
        fail("batch_sizes must be positive and non-increasing (entry " + std::to_string(i) + " is " +
             std::to_string(b[i]) + ")");
      if (__builtin_add_overflow(total, b[i], &total)) fail("batch_sizes overflow");
    }
    if (total != input.size(0))
      fail("batch_sizes add up to " + std::to_string(total) + ", but the data has " + std::to_string(input.size(0)) +
           " rows");
    batch = b[0];
  } else {
    if (input.dim() != 3) fail("the input must have 3 dimensions, not shape " + shape_of(input));
    if (!s[base + 8].isBool()) return;
    batch = s[base + 8].toBool() ? input.size(0) : input.size(1);
    features = input.size(2);
  }
  const int64_t per = biases ? 4 : 2;
  const size_t plain = static_cast<size_t>(layers * dirs * per);
  const bool proj = kGates == 4 && params.size() == static_cast<size_t>(layers * dirs * (per + 1));
  if (params.size() != plain && !proj)
    fail("params has " + std::to_string(params.size()) + " tensors; " + std::to_string(layers) + " layer(s), " +
         std::to_string(dirs) + " direction(s) and has_biases=" + (biases ? "True" : "False") + " need " +
         std::to_string(plain));
  const int64_t stride = proj ? per + 1 : per;
  for (const at::Tensor& t : params)
    if (!t.defined() || t.scalar_type() != dtype || t.device() != input.device() ||
        t.layout() != c10::Layout::Strided)
      fail("every weight must be a dense tensor of the input's dtype and device");
  const at::Tensor& w0 = params[0];
  if (w0.dim() != 2 || w0.size(0) < kGates || w0.size(0) % kGates != 0)
    fail("the first weight has shape " + shape_of(w0) + "; it must be [" + std::to_string(kGates) +
         " x hidden_size, input_size]");
  const int64_t hidden = w0.size(0) / kGates;
  const int64_t out = proj ? params[static_cast<size_t>(per)].size(0) : hidden;
  auto expect = [&](const at::Tensor& t, std::vector<int64_t> shape, const std::string& what) {
    if (t.sizes() != c10::IntArrayRef(shape)) {
      std::string want = "[";
      for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
      fail(what + " has shape " + shape_of(t) + ", expected " + want + "]");
    }
  };
  if (proj && (out < 1 || out >= hidden)) fail("the projection size must be in [1, hidden_size)");
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t i = static_cast<size_t>((l * dirs + d) * stride);
      const std::string where = "layer " + std::to_string(l) + (d ? " (reverse)" : "") + " ";
      const int64_t in = l == 0 ? features : dirs * out;
      expect(params[i], {kGates * hidden, in}, where + "w_ih");
      expect(params[i + 1], {kGates * hidden, out}, where + "w_hh");
      if (biases) {
        expect(params[i + 2], {kGates * hidden}, where + "b_ih");
        expect(params[i + 3], {kGates * hidden}, where + "b_hh");
      }
      if (proj) expect(params[i + static_cast<size_t>(per)], {out, hidden}, where + "w_hr");
    }
  const size_t states = kGates == 4 ? 2 : 1;
  if (hx.size() != states)
    fail("hx has " + std::to_string(hx.size()) + " tensors " + list_shapes(hx) + ", expected " +
         std::to_string(states));
  for (const at::Tensor& h : hx)
    if (!h.defined() || h.scalar_type() != dtype || h.device() != input.device() ||
        h.layout() != c10::Layout::Strided)
      fail("every initial state must be a dense tensor of the input's dtype and device");
  expect(hx[0], {layers * dirs, batch, out}, "the initial hidden state");
  if (states == 2) expect(hx[1], {layers * dirs, batch, hidden}, "the initial cell state");
}

}  // namespace

void check_view_extent(const char* what, int64_t offset, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                       size_t itemsize, size_t storage_bytes, const char* within) {
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
              ") reaches outside " + within + " (" + std::to_string(storage_bytes) +
              " bytes); the runtime refuses views that read or write other memory");
}

namespace {

// The hand-written check of `op`, or null (Note [Argument guards]).
ArgumentGuard::Check hand_written_check(const AtenOp& op) {
  const c10::OperatorName& name = op.handle.schema().operator_name();
  if ((name.name == "aten::as_strided" || name.name == "aten::as_strided_") && name.overload_name.empty())
    return guard_view<true>;
  if (name.name == "aten::_reshape_alias" && name.overload_name.empty()) return guard_view<false>;
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
  if (name.name == "aten::native_group_norm") return guard_native_group_norm;
  if (name.name == "aten::col2im") return guard_col2im;
  if (name.name == "aten::_weight_norm") return guard_weight_norm;
  if (name.name == "aten::max_pool1d" || name.name == "aten::max_pool1d_with_indices") return guard_max_pool1d;
  const bool data = name.overload_name == "data";
  if (name.overload_name == "input" || data) {
    if (name.name == "aten::lstm") return data ? guard_rnn<4, true> : guard_rnn<4, false>;
    if (name.name == "aten::gru") return data ? guard_rnn<3, true> : guard_rnn<3, false>;
    if (name.name == "aten::rnn_tanh" || name.name == "aten::rnn_relu")
      return data ? guard_rnn<1, true> : guard_rnn<1, false>;
  }
  if (name.name != "aten::repeat_interleave") return nullptr;
  if (name.overload_name == "self_int") return guard_repeat_interleave_self_int;
  if (name.overload_name == "self_Tensor") return guard_repeat_interleave_self_tensor;
  if (name.overload_name == "Tensor") return guard_repeat_interleave_tensor;
  return nullptr;
}

// ---- Note [Guards the schema implies] -------------------------------------------------

// The argument names whose ints are window or padding geometry.
bool is_window_name(const std::string& n) {
  for (const char* w : {"kernel_size", "stride", "padding", "dilation", "output_padding", "output_size", "groups",
                        "pad"})
    if (n == w) return true;
  return false;
}

// An int, SymInt, int[] or SymInt[] argument, optional or not.
bool is_int_or_int_list(c10::TypePtr t) {
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedTypes().at(0);
  if (t->kind() == c10::TypeKind::IntType || t->kind() == c10::TypeKind::SymIntType) return true;
  if (t->kind() != c10::TypeKind::ListType) return false;
  const auto e = t->containedTypes().at(0)->kind();
  return e == c10::TypeKind::IntType || e == c10::TypeKind::SymIntType;
}

// Calls `fn` on the tensor `v` holds, or on each tensor of the list it holds.
template <typename F>
void for_each_tensor(const c10::IValue& v, F&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) fn(e.toTensor());
  }
}

constexpr int64_t kMaxGeometry = int64_t(1) << 31;

void check_geometry(const std::string& op, const char* arg, int64_t v) {
  if (v > -kMaxGeometry && v < kMaxGeometry) return;
  throw Error(op + ": argument '" + arg + "' is " + std::to_string(v) +
              ", outside (-2^31, 2^31) (window and padding sizes; Note [Guards the schema implies])");
}

}  // namespace

bool writes_tensor(const c10::AliasInfo* info) {
  if (!info) return false;
  if (info->isWrite()) return true;
  for (const c10::AliasInfo& c : info->containedTypes())
    if (writes_tensor(&c)) return true;
  return false;
}

void ArgumentGuard::operator()(const std::vector<c10::IValue>& s) const {
  if (check_) check_(s);  // first: its messages are the more specific
  for (const Arg& a : bounded_) {
    if (a.index >= s.size()) continue;
    const c10::IValue& v = s[a.index];
    if (v.isInt()) {
      check_geometry(op_, a.name, v.toInt());
    } else if (v.isList()) {
      for (const c10::IValue& i : v.toListRef())
        if (i.isInt()) check_geometry(op_, a.name, i.toInt());
    }
  }
  for (const Arg& a : written_) {
    if (a.index >= s.size()) continue;
    for_each_tensor(s[a.index], [&](const at::Tensor& t) {
      if (t.defined() && t.layout() == c10::Layout::Strided && at::has_internal_overlap(t) == at::MemOverlap::Yes)
        throw Error(op_ + ": argument '" + a.name + "' of shape " + shape_of(t) +
                    " is written and overlaps itself (a stride-0 dimension); write into a tensor whose elements "
                    "are distinct, e.g. x.contiguous() (Note [Guards the schema implies])");
    });
  }
}

void ArgumentGuard::save_written(const std::vector<c10::IValue>& s, WrittenGeometry& into) const {
  for (const Arg& a : written_)
    if (a.index < s.size()) for_each_tensor(s[a.index], [&](const at::Tensor& t) { into.save(t); });
}

void WrittenGeometry::save(const at::Tensor& t) {
  if (!t.defined() || t.layout() != c10::Layout::Strided) return;
  Entry& e = entries_.emplace_back();
  e.tensor = t;
  e.sizes.assign(t.sizes().begin(), t.sizes().end());
  e.strides.assign(t.strides().begin(), t.strides().end());
  e.offset = t.storage_offset();
}

void WrittenGeometry::restore() noexcept {
  for (Entry& e : entries_) {
    c10::TensorImpl* impl = e.tensor.unsafeGetTensorImpl();
    if (impl->sizes().equals(e.sizes) && impl->strides().equals(e.strides) && impl->storage_offset() == e.offset)
      continue;
    try {
      impl->set_sizes_and_strides(e.sizes, e.strides, e.offset);
    } catch (...) {
      // A tensor whose metadata may not change (from .data or .detach()) was
      // not resized either: nothing to put back.
    }
  }
  entries_.clear();
}

const ArgumentGuard* argument_guard(const AtenOp& op) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ArgumentGuard>> table;  // null entries: no guard
  std::lock_guard<std::mutex> lock(mutex);
  auto it = table.find(op.qualified);
  if (it != table.end()) return it->second.get();
  auto guard = std::make_unique<ArgumentGuard>();
  const c10::FunctionSchema& schema = op.handle.schema();
  const std::string& qualified = schema.name();
  guard->op_ = qualified.substr(qualified.find("::") == std::string::npos ? 0 : qualified.find("::") + 2);
  guard->check_ = hand_written_check(op);
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::Argument& a = args[i];
    if (is_window_name(a.name()) && is_int_or_int_list(a.type()))
      guard->bounded_.push_back({static_cast<uint32_t>(i), a.name().c_str()});
    c10::TypePtr t = a.type();
    if (t->kind() == c10::TypeKind::OptionalType) t = t->containedTypes().at(0);
    if (t->kind() == c10::TypeKind::ListType) t = t->containedTypes().at(0);
    if (t->kind() == c10::TypeKind::OptionalType) t = t->containedTypes().at(0);
    if (writes_tensor(a.alias_info()) && t->kind() == c10::TypeKind::TensorType)
      guard->written_.push_back({static_cast<uint32_t>(i), a.name().c_str()});
  }
  if (guard->empty()) guard.reset();
  return table.emplace(op.qualified, std::move(guard)).first->second.get();
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
