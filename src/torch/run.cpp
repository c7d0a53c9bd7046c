// The runtime's executor: runs a Plan (plan.h) on pooled frames, with the
// primitives' Python semantics (Note [Primitive semantics]). Note [Runtime plan]
// in fxcpp/torch/module.h.
#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "plan.h"

namespace fxcpp::torch {

namespace {

// The type of every input, recursively (Note [Memory planning]): a tensor's
// dtype, or a tag for each other kind; sequences add their kind and length.
void input_signature(const c10::IValue& v, std::vector<int64_t>& sig, int depth = 0) {
  enum : int64_t { kNone = 1000, kInt, kDouble, kBool, kComplex, kString, kTuple, kList, kEnd, kOther, kDeep };
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    sig.push_back(t.defined() ? static_cast<int64_t>(t.scalar_type()) : kNone);
  } else if (v.isNone()) {
    sig.push_back(kNone);
  } else if (v.isInt()) {
    sig.push_back(kInt);
  } else if (v.isDouble()) {
    sig.push_back(kDouble);
  } else if (v.isBool()) {
    sig.push_back(kBool);
  } else if (v.isComplexDouble()) {
    sig.push_back(kComplex);
  } else if (v.isString()) {
    sig.push_back(kString);
  } else if (v.isTuple() || v.isList()) {
    if (depth > 64) {
      sig.push_back(kDeep);
      return;
    }
    c10::ArrayRef<c10::IValue> items = v.isTuple() ? v.toTupleRef().elements() : v.toListRef();
    sig.push_back(v.isTuple() ? kTuple : kList);
    sig.push_back(static_cast<int64_t>(items.size()));
    for (auto& i : items) input_signature(i, sig, depth + 1);
    sig.push_back(kEnd);
  } else {
    sig.push_back(kOther);
  }
}

// `v` with every tensor whose storage is one of `planned` replaced by a copy.
c10::IValue copy_out_of(const c10::IValue& v, const std::vector<const void*>& planned, int depth = 0) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) return v;
    const void* s = t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    for (const void* p : planned)
      if (p == s) return t.clone();
    return v;
  }
  if (depth > 64) return v;
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (auto& i : v.toTupleRef().elements()) items.push_back(copy_out_of(i, planned, depth + 1));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isList()) {
    std::vector<c10::IValue> items;
    for (auto& i : v.toListRef()) items.push_back(copy_out_of(i, planned, depth + 1));
    return make_list(std::move(items));
  }
  if (v.isGenericDict()) {
    c10::impl::GenericDict d(v.toGenericDict().keyType(), v.toGenericDict().valueType());
    for (auto& kv : v.toGenericDict()) d.insert_or_assign(kv.key(), copy_out_of(kv.value(), planned, depth + 1));
    return d;
  }
  return v;
}

// Note [Views stay inside their storage]: an op's result may be a view
// whose offset, sizes and strides come from the file (as_strided,
// _reshape_alias, ...), and some ATen bounds checks overflow or are missing.
// Every tensor an op returns is checked, before any later op reads it, to
// reach only bytes of its own storage; a result that does not is an Error.
// The views whose geometry is an argument (as_strided, as_strided_,
// _reshape_alias) are checked the same way before their kernel runs, by
// their argument guard (Note [Argument guards]), so the refusal is fxcpp's
// whatever checks the LibTorch's kernel makes (2.x's as_strided refuses an
// overflowing offset itself, 1.13's does not).
void check_extent(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.is_quantized() || t.layout() != c10::Layout::Strided) return;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->numel() == 0) return;
  check_view_extent("the result", impl->storage_offset(), impl->sizes(), impl->strides(), t.dtype().itemsize(),
                    impl->unsafe_storage().nbytes());
}

void check_extents(const c10::IValue& v, int depth = 0) {
  if (v.isTensor()) {
    check_extent(v.toTensor());
  } else if ((v.isTuple() || v.isList()) && depth < 64) {
    for (auto& i : v.isTuple() ? v.toTupleRef().elements() : v.toListRef()) check_extents(i, depth + 1);
  }
}

// The storages of the tensors in `v` (tensors, lists and tuples of them).
void collect_storages(const c10::IValue& v, std::vector<const void*>& out, int depth = 0) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.has_storage()) out.push_back(t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl());
  } else if ((v.isTuple() || v.isList()) && depth < 64) {
    for (auto& i : v.isTuple() ? v.toTupleRef().elements() : v.toListRef()) collect_storages(i, out, depth + 1);
  } else if (v.isGenericDict() && depth < 64) {
    for (auto& kv : v.toGenericDict()) collect_storages(kv.value(), out, depth + 1);
  }
}

const Argument* find_key(const Argument& dict, const char* key) {
  for (auto& kv : dict.pairs())
    if (kv.first.is_string() && kv.first.as_string() == key) return &kv.second;
  return nullptr;
}

// ---- Note [Primitive semantics] ------------------------------------------------------
// The primitives compute as Python does on the values a file or a caller can
// give them (ints are int64: files store 64-bit ints, inputs must fit), and
// never with undefined behaviour:
// * bool operands are ints (True + True == 2, -True == -1).
// * int + - * neg // %: exact, with Python's floor rounding and the sign of %
//   following the divisor. Where Python's result leaves int64 (it would be a
//   big integer: INT64_MIN // -1, -INT64_MIN, products past 2**63) the runtime
//   raises Error saying so instead of wrapping. INT64_MIN % -1 is 0, as in
//   Python; // and % by zero raise.
// * int / int: correctly rounded, as Python's int true division is (not the
//   double-rounded double(a) / double(b) when an operand exceeds 2**53).
// * An int with a float is converted to the nearest float first (exact for
//   |x| <= 2**53), then float semantics: IEEE + - * /, / by zero raises;
//   // and % as Python's float_floor_div/float_rem (floor of the quotient
//   recomputed from fmod, -0.0 kept where Python keeps it, % takes the
//   divisor's sign, inf and nan propagate), by zero raises.
// * Slices adjust their bounds as CPython's PySlice_Unpack and
//   PySlice_AdjustIndices do (clamping, step limited to -INT64_MAX), compute
//   the result length first and index start + i * step, which stays in range.
[[noreturn]] void int_overflow(Primitive p, int64_t x, int64_t y, bool unary = false) {
  throw Error(std::string("integer overflow: ") + primitive_name(p) + " of " + std::to_string(x) +
              (unary ? "" : " and " + std::to_string(y)) +
              " does not fit in 64 bits (Python would give a big integer; the runtime computes on int64)");
}

int64_t int_arith(Primitive p, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (p) {
    case Primitive::Add:
      if (__builtin_add_overflow(x, y, &r)) int_overflow(p, x, y);
      return r;
    case Primitive::Sub:
      if (__builtin_sub_overflow(x, y, &r)) int_overflow(p, x, y);
      return r;
    case Primitive::Mul:
      if (__builtin_mul_overflow(x, y, &r)) int_overflow(p, x, y);
      return r;
    case Primitive::FloorDiv: {
      if (y == 0) throw Error("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) int_overflow(p, x, y);
      int64_t q = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) --q;
      return q;
    }
    case Primitive::Mod: {
      if (y == 0) throw Error("integer division or modulo by zero");
      if (y == -1) return 0;  // INT64_MIN % -1 is undefined in C++
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;  // |m| < |y|: no overflow
      return m;
    }
    default:
      throw Error(std::string(primitive_name(p)) + " is not an integer operation");
  }
}

int bit_length(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

// x / y correctly rounded to double (y != 0), as Python's int true division.
double int_truediv(int64_t x, int64_t y) {
  const uint64_t ax = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const uint64_t ay = y < 0 ? 0 - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
  constexpr uint64_t kExact = uint64_t(1) << 53;
  if (ax <= kExact && ay <= kExact) return static_cast<double>(x) / static_cast<double>(y);  // both exact: one rounding
  if (ax == 0) return (y < 0) ? -0.0 : 0.0;
  // Scale so that the integer quotient has at least 56 bits, then fold the
  // remainder into a sticky bit below the rounding position: converting that
  // quotient rounds once, exactly as the real quotient would.
  int shift = 57 + bit_length(ay) - bit_length(ax);
  if (shift < 0) shift = 0;
  unsigned __int128 num = static_cast<unsigned __int128>(ax) << shift;  // < 2**(64+57+1)
  unsigned __int128 q = num / ay, r = num % ay;
  if (r != 0) q |= 1;
  // q has 57 to 64 bits; were it wider, halving with the sticky bit kept
  // would still round once.
  int drop = 0;
  while ((q >> 64) != 0) {
    q = (q >> 1) | (q & 1);
    ++drop;
  }
  double d = std::ldexp(static_cast<double>(static_cast<uint64_t>(q)), drop - shift);
  return ((x < 0) != (y < 0)) ? -d : d;
}

// Python's float // and % (float_floor_div / float_rem), y != 0.
double float_mod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0) {
    if ((y < 0) != (m < 0)) m += y;
  } else {
    m = std::copysign(0.0, y);
  }
  return m;
}
double float_floordiv(double x, double y) {
  double m = std::fmod(x, y);
  double div = (x - m) / y;
  if (m != 0 && ((y < 0) != (m < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}

// Note [Indexing a tensor]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// operator.getitem of a tensor with an int, a bool or a slice is what
// Tensor.__getitem__ does in Python (the Python runtime's code indexes the
// tensor itself): at::indexing::get_item, the LibTorch implementation of
// Python's indexing that torch's binding shares. An int selects along the
// first dimension (negative from the end, out of range an IndexError), a bool
// adds a dimension (True) or an empty one (False), a slice is a view with
// Python's bounds (clamped; a step below 1 is an error). The result aliases the
// tensor, as getitem results join their container's alias set in the planner
// (Note [Memory planning]).
template <typename T>
c10::optional<T> slice_bound(c10::optional<int64_t> v) {
  return v ? c10::optional<T>(T(*v)) : c10::optional<T>();
}

c10::IValue tensor_getitem(const at::Tensor& t, c10::optional<int64_t> start, c10::optional<int64_t> stop,
                           c10::optional<int64_t> step) {
  using Bound = std::decay_t<decltype(std::declval<at::indexing::Slice>().start())>;  // int64_t or SymInt
  return at::indexing::get_item(
      t, {at::indexing::Slice(slice_bound<Bound>(start), slice_bound<Bound>(stop), slice_bound<Bound>(step))});
}

c10::IValue tensor_getitem(const at::Tensor& t, const c10::IValue& index) {
  return index.isBool() ? at::indexing::get_item(t, {at::indexing::TensorIndex(index.toBool())})
                        : at::indexing::get_item(t, {at::indexing::TensorIndex(index.toInt())});
}

// CPython's slice adjustment for a sequence of `size` items. Returns the
// number of items picked; start and step index them (start + i * step).
int64_t adjust_slice(int64_t size, c10::optional<int64_t> ostart, c10::optional<int64_t> ostop,
                     c10::optional<int64_t> ostep, int64_t* start_out, int64_t* step_out) {
  int64_t step = ostep ? *ostep : 1;
  if (step == 0) throw Error("slice step cannot be zero");
  if (step < -INT64_MAX) step = -INT64_MAX;  // so that -step exists
  int64_t start = ostart ? *ostart : (step < 0 ? INT64_MAX : 0);
  int64_t stop = ostop ? *ostop : (step < 0 ? INT64_MIN : INT64_MAX);
  auto adjust = [&](int64_t& v) {
    if (v < 0) {
      v += size;  // v < 0 <= size: no overflow
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= size) {
      v = step < 0 ? size - 1 : size;
    }
  };
  adjust(start);
  adjust(stop);
  *start_out = start;
  *step_out = step;
  // start, stop in [-1, size]: the differences fit.
  if (step < 0) return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
  return start < stop ? (stop - start - 1) / step + 1 : 0;
}

}  // namespace

std::string Plan::describe(const c10::IValue& v) {
  if (v.isTensor()) return "a Tensor";
  if (v.isNone()) return "None";
  if (v.isInt()) return "an int";
  if (v.isDouble()) return "a float";
  if (v.isBool()) return "a bool";
  if (v.isString()) return "a str";
  if (v.isTuple()) return "a tuple";
  if (v.isList()) return "a list";
  return std::string("a ") + v.tagKind();
}

at::Tensor Plan::wrapped_number(const c10::IValue& v) {
  if (v.isInt()) return wrapped_number(Argument::integer(v.toInt()));
  if (v.isDouble()) return wrapped_number(Argument::real(v.toDouble()));
  return wrapped_number(Argument::boolean(v.toBool()));
}
at::Tensor Plan::wrapped_number(const Argument& a) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::scalar_tensor", "");
  std::vector<c10::IValue> stack;
  c10::ScalarType dtype = a.kind() == ArgKind::Int      ? c10::ScalarType::Long
                          : a.kind() == ArgKind::Double ? c10::ScalarType::Double
                                                        : c10::ScalarType::Bool;
  stack.emplace_back(a.kind() == ArgKind::Int      ? c10::IValue(a.as_int())
                     : a.kind() == ArgKind::Double ? c10::IValue(a.as_double())
                                                   : c10::IValue(a.as_bool()));
  stack.emplace_back(static_cast<int64_t>(dtype));
  stack.emplace_back();
  stack.emplace_back();
  stack.emplace_back();
  op.callBoxed(&stack);
  at::Tensor t = stack[0].toTensor();
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

c10::IValue Plan::eval(const Operand& o, Frame& f) const {
  using K = Operand::Kind;
  switch (o.kind) {
    case K::Const: return o.value;
    case K::Slot: return f.slots[o.slot];
    // A value of the wrong type never reaches a kernel (whose unboxing
    // would fail an internal assert): Python's conversions, or an Error.
    case K::SlotToDouble: {
      const c10::IValue& v = f.slots[o.slot];
      if (v.isDouble() || (v.isNone() && o.optional)) return v;
      if (v.isInt()) return static_cast<double>(v.toInt());
      if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
      throw Error("fxcpp::torch: an argument of type float got " + describe(v));
    }
    case K::SlotToInt: {
      const c10::IValue& v = f.slots[o.slot];
      if (v.isInt() || (v.isNone() && o.optional)) return v;
      if (v.isBool()) return static_cast<int64_t>(v.toBool());
      throw Error("fxcpp::torch: an argument of type int got " + describe(v));
    }
    case K::SlotToBool: {
      const c10::IValue& v = f.slots[o.slot];
      if (v.isBool() || (v.isNone() && o.optional)) return v;
      throw Error("fxcpp::torch: an argument of type bool got " + describe(v));
    }
    case K::SlotToNumber: {
      const c10::IValue& v = f.slots[o.slot];
      if (v.isInt() || v.isDouble() || v.isBool() || v.isComplexDouble() || (v.isNone() && o.optional)) return v;
      throw Error("fxcpp::torch: an argument of type Scalar got " + describe(v));
    }
    case K::SlotToTensor: {
      const c10::IValue& v = f.slots[o.slot];
      if (v.isTensor() || (v.isNone() && o.optional)) return v;
      if ((v.isInt() || v.isDouble() || v.isBool()) && o.wrap_numbers) return wrapped_number(v);
      throw Error("fxcpp::torch: an argument of type Tensor got " + describe(v) +
                  (o.wrap_numbers ? "" : " (this operator takes no number for a tensor: Note [Numbers as tensors])"));
    }
    case K::Tuple: {
      std::vector<c10::IValue> items;
      items.reserve(o.items.size());
      for (auto& i : o.items) items.push_back(eval(i, f));
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case K::GenericList: {
      std::vector<c10::IValue> items;
      items.reserve(o.items.size());
      for (auto& i : o.items) items.push_back(eval(i, f));
      return make_list(std::move(items));
    }
    case K::Dict: {
      c10::impl::GenericDict d(o.key_type, c10::AnyType::get());
      for (size_t i = 0; i + 1 < o.items.size(); i += 2) d.insert_or_assign(eval(o.items[i], f), eval(o.items[i + 1], f));
      return d;
    }
    case K::Slice:
      throw Error("fxcpp::torch: a slice is only valid as a getitem index");
    default:
      return build_list(o, [&](const Operand& i) { return eval(i, f); });
  }
}

void Plan::run_primitive(const Instr& in, Frame& f) const {
  c10::IValue& out = f.slots[in.out];
  if (in.prim == Primitive::GetAttr) {
    c10::IValue v = eval(in.operands[0], f);
    if (!v.isTensor()) throw Error("getattr of " + describe(v) + ": the runtime reads attributes of tensors only");
    const at::Tensor& t = v.toTensor();
    switch (in.attr) {
      case Attr::Shape: out = c10::List<int64_t>(t.sizes()); break;
      case Attr::Dtype: out = static_cast<int64_t>(t.scalar_type()); break;
      case Attr::Device: out = t.device(); break;
      case Attr::Ndim: out = static_cast<int64_t>(t.dim()); break;
    }
    return;
  }
  if (in.prim == Primitive::GetItem) {
    c10::IValue seq = eval(in.operands[0], f);
    const Operand& idx = in.operands[1];
    // Python's ints for indexes: bools are 0 and 1.
    auto as_index = [](const c10::IValue& v, int64_t* out) {
      if (v.isInt()) *out = v.toInt();
      else if (v.isBool()) *out = v.toBool();
      else return false;
      return true;
    };
    auto part = [&](size_t k) -> c10::optional<int64_t> {
      c10::IValue v = eval(idx.items[k], f);
      if (v.isNone()) return c10::nullopt;
      int64_t x = 0;
      if (!as_index(v, &x)) throw Error("slice bounds must be ints or None, got " + describe(v));
      return x;
    };
    if (seq.isTensor()) {  // Note [Indexing a tensor]
      if (idx.kind == Operand::Kind::Slice) {
        c10::optional<int64_t> ostart = part(0), ostop = part(1), ostep = part(2);
        out = tensor_getitem(seq.toTensor(), ostart, ostop, ostep);
      } else {
        c10::IValue iv = eval(idx, f);
        if (!iv.isInt() && !iv.isBool())
          throw Error("getitem index must be an int or a slice, got " + describe(iv));
        out = tensor_getitem(seq.toTensor(), iv);
      }
      return;
    }
    c10::ArrayRef<c10::IValue> items;
    if (seq.isTuple()) items = seq.toTupleRef().elements();
    else if (seq.isList()) items = seq.toListRef();
    else throw Error("getitem of " + describe(seq) + ": the runtime indexes tensors, tuples and lists only");
    const int64_t size = static_cast<int64_t>(items.size());
    if (idx.kind == Operand::Kind::Slice) {
      c10::optional<int64_t> ostart = part(0), ostop = part(1), ostep = part(2);
      int64_t start = 0, step = 1;
      const int64_t count = adjust_slice(size, ostart, ostop, ostep, &start, &step);
      std::vector<c10::IValue> picked;
      picked.reserve(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) picked.push_back(items[static_cast<size_t>(start + i * step)]);
      if (seq.isTuple()) {
        out = c10::ivalue::Tuple::create(std::move(picked));
      } else {
        c10::impl::GenericList l(seq.toList().elementType());
        for (auto& v : picked) l.push_back(std::move(v));
        out = l;
      }
      return;
    }
    c10::IValue iv = eval(idx, f);
    int64_t i = 0;
    if (!as_index(iv, &i)) throw Error("getitem index must be an int or a slice, got " + describe(iv));
    const int64_t given = i;
    if (i < 0) i += size;  // i < 0 <= size: no overflow
    if (i < 0 || i >= size)
      throw Error("getitem index " + std::to_string(given) + " is out of range for " + std::to_string(size) + " items");
    out = items[static_cast<size_t>(i)];
    return;
  }
  // Note [Primitive semantics].
  c10::IValue a = eval(in.operands[0], f);
  if (in.prim == Primitive::Neg) {
    if (a.isInt() || a.isBool()) {
      int64_t x = a.isBool() ? a.toBool() : a.toInt();
      if (x == INT64_MIN) int_overflow(in.prim, x, 0, /*unary=*/true);
      out = -x;
    } else if (a.isDouble()) {
      out = -a.toDouble();
    } else {
      throw Error(std::string("operator.neg of ") + describe(a));
    }
    return;
  }
  c10::IValue b = eval(in.operands[1], f);
  if (in.prim == Primitive::Add && (a.isList() || a.isTuple()) && (b.isList() || b.isTuple())) {
    // A shape (a list here, a torch.Size tuple in Python) concatenates with tuples and lists.
    std::vector<c10::IValue> all;
    for (auto* s : {&a, &b})
      for (auto& v : s->isTuple() ? s->toTupleRef().elements() : s->toListRef()) all.push_back(v);
    if (a.isTuple()) {
      out = c10::ivalue::Tuple::create(std::move(all));
    } else {
      c10::impl::GenericList l(a.toList().elementType());
      for (auto& v : all) l.push_back(std::move(v));
      out = l;
    }
    return;
  }
  auto is_int = [](const c10::IValue& v) { return v.isInt() || v.isBool(); };
  bool ints = is_int(a) && is_int(b);
  if (!ints && !((is_int(a) || a.isDouble()) && (is_int(b) || b.isDouble())))
    throw Error(std::string(primitive_name(in.prim)) + " of " + describe(a) + " and " + describe(b) +
                ": primitives compute on ints, bools and floats only");
  if (ints) {
    int64_t x = a.isBool() ? a.toBool() : a.toInt(), y = b.isBool() ? b.toBool() : b.toInt();
    if (in.prim == Primitive::TrueDiv) {
      if (y == 0) throw Error("division by zero");
      out = int_truediv(x, y);
    } else {
      out = int_arith(in.prim, x, y);
    }
    return;
  }
  auto to_double = [](const c10::IValue& v) {
    return v.isDouble() ? v.toDouble() : v.isBool() ? double(v.toBool()) : static_cast<double>(v.toInt());
  };
  double x = to_double(a), y = to_double(b);
  switch (in.prim) {
    case Primitive::Add: out = x + y; return;
    case Primitive::Sub: out = x - y; return;
    case Primitive::Mul: out = x * y; return;
    case Primitive::FloorDiv:
      if (y == 0) throw Error("float floor division by zero");
      out = float_floordiv(x, y);
      return;
    case Primitive::Mod:
      if (y == 0) throw Error("float modulo by zero");
      out = float_mod(x, y);
      return;
    case Primitive::TrueDiv:
      if (y == 0) throw Error("float division by zero");
      out = x / y;
      return;
    default:
      throw Error(std::string(primitive_name(in.prim)) + " is not an arithmetic primitive");
  }
}

void Plan::check_inputs(const std::vector<c10::IValue>& args) const {
  size_t required = 0;
  for (auto& in : inputs) required += in.has_default ? 0 : 1;
  if (args.size() < required || args.size() > inputs.size()) {
    std::string names;
    for (auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
    throw InputError("fxcpp::torch: forward expects " +
                     (required == inputs.size() ? std::to_string(required)
                                                : std::to_string(required) + " to " + std::to_string(inputs.size())) +
                     " inputs (" + names + "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Input& in = inputs[i];
    if (!in.meta) continue;
    std::string who = "fxcpp::torch: input " + std::to_string(i) + " ('" + in.name + "'): ";
    const c10::IValue& v = args[i];
    if (in.meta->kind() == ArgKind::Dict) {
      if (!v.isTensor()) throw InputError(who + "expected a Tensor, got " + describe(v));
      const Argument* shape = find_key(*in.meta, "shape");
      if (shape && shape->is_sequence() && static_cast<int64_t>(shape->items().size()) != v.toTensor().dim())
        throw InputError(who + "expected a " + std::to_string(shape->items().size()) +
                         "-dimensional tensor, got one with " + std::to_string(v.toTensor().dim()) + " dimensions");
    } else if (in.meta->is_sequence()) {
      size_t want = in.meta->items().size();
      if (!v.isList() && !v.isTuple())
        throw InputError(who + "expected a sequence of " + std::to_string(want) + " values, got " + describe(v));
    }
  }
  if (!symbols.empty() || std::any_of(inputs.begin(), inputs.end(), [](const Input& in) { return in.has_spec; }))
    check_exported_inputs(args);
}

// Note [Exported input checks] in pt2.cpp: the dtypes, static sizes, symbol
// ranges and relations an exported program's inputs had, in torch's words.
void Plan::check_exported_inputs(const std::vector<c10::IValue>& args) const {
  c10::SmallVector<int64_t, 8> bound(symbols.size(), -1);
  auto at = [&](size_t i, size_t d) { return inputs[i].name + ".shape[" + std::to_string(d) + "]"; };
  auto fail = [&](size_t i, const std::string& what) {
    throw InputError("fxcpp::torch: input " + std::to_string(i) + " ('" + inputs[i].name + "'): " + what);
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < args.size(); ++i) {
      const Input& in = inputs[i];
      if (!in.has_spec) continue;
      if (!args[i].isTensor()) fail(i, "expected a Tensor, got " + describe(args[i]));
      const at::Tensor& t = args[i].toTensor();
      if (pass == 0) {
        if (in.dtype != c10::ScalarType::Undefined && t.scalar_type() != in.dtype)
          fail(i, "Expected input at " + in.name + " to have dtype " + dtype_name(in.dtype) +
                      " (the program was exported for it), but got " + dtype_name(t.scalar_type()));
        if (static_cast<size_t>(t.dim()) != in.dims.size())
          fail(i, "Expected input at " + in.name + " to have " + std::to_string(in.dims.size()) +
                      " dimensions, but got " + std::to_string(t.dim()));
      }
      for (size_t d = 0; d < in.dims.size(); ++d) {
        const DimCheck& dc = in.dims[d];
        const int64_t got = t.size(static_cast<int64_t>(d));
        switch (dc.kind) {
          case DimCheck::Kind::Static:
            if (pass == 0 && dc.size >= 0 && got != dc.size)
              fail(i, "Expected input at " + at(i, d) + " to be equal to " + std::to_string(dc.size) + ", but got " +
                          std::to_string(got) + " (the program was exported with that size static)");
            break;
          case DimCheck::Kind::Symbol:
            if (pass != 0) break;
            if (dc.min > 2 && got < dc.min)
              fail(i, "Expected input at " + at(i, d) + " to be >= " + std::to_string(dc.min) + ", but got " +
                          std::to_string(got) + " (the range of " + symbols[dc.sym].name + " it was exported with)");
            if (dc.max >= 0 && got > dc.max)
              fail(i, "Expected input at " + at(i, d) + " to be <= " + std::to_string(dc.max) + ", but got " +
                          std::to_string(got) + " (the range of " + symbols[dc.sym].name + " it was exported with)");
            if (bound[dc.sym] < 0) {
              bound[dc.sym] = got;
            } else if (bound[dc.sym] != got) {
              const Symbol& s = symbols[dc.sym];
              fail(i, "Expected input at " + at(i, d) + " to be equal to " + at(s.input, s.dim) + " (" +
                          std::to_string(bound[dc.sym]) + "), but got " + std::to_string(got) +
                          " (both are the size " + s.name + " in the exported program)");
            }
            break;
          case DimCheck::Kind::Poly: {
            if (pass != 1) break;
            int64_t want = 0;
            bool ok = true;
            std::string expr;
            for (const auto& [coef, syms] : dc.poly) {
              int64_t m = coef;
              // "2*x.shape[0] - 1": the coefficient's sign joins the terms, a 1 is left out.
              const uint64_t mag = coef < 0 ? uint64_t(0) - uint64_t(coef) : uint64_t(coef);
              std::string term = mag == 1 && !syms.empty() ? "" : std::to_string(mag);
              for (int32_t s : syms) {
                ok = ok && bound[s] >= 0 && !__builtin_mul_overflow(m, bound[s], &m);
                term += (term.empty() ? "" : "*") + at(symbols[s].input, symbols[s].dim);
              }
              ok = ok && !__builtin_add_overflow(want, m, &want);
              expr += expr.empty() ? (coef < 0 ? "-" : "") + term : (coef < 0 ? " - " : " + ") + term;
            }
            if (ok && got != want)
              fail(i, "Expected input at " + at(i, d) + " to be equal to " + expr + " (" + std::to_string(want) +
                          "), but got " + std::to_string(got));
            break;
          }
        }
      }
    }
  }
}

// A tensor operand without copying its IValue; null when it is not a tensor.
const at::Tensor* Plan::tensor_operand(const Operand& o, Frame& f) const {
  const c10::IValue* v = o.kind == Operand::Kind::Const ? &o.value
                         : o.kind == Operand::Kind::Slot || o.kind == Operand::Kind::SlotToTensor ? &f.slots[o.slot]
                                                                                                   : nullptr;
  return v && v->isTensor() ? &v->toTensor() : nullptr;
}

// Note [Unboxed out calls]. False: take the boxed path.
bool Plan::run_fast(const Instr& in, Frame& f) const {
  const auto& ops = in.out_operands;
  at::Tensor& out = f.outs[in.managed];
  const at::Tensor* a = tensor_operand(ops[0], f);
  if (!a) return false;
  switch (in.fast) {
    case Instr::Fast::TensorTensorScalar: {
      const at::Tensor* b = tensor_operand(ops[1], f);
      if (!b || ops[2].kind != Operand::Kind::Const || !ops[2].value.isScalar()) return false;
      in.out_op->handle.typed<TensorTensorScalarOut>().call(*a, *b, ops[2].value.toScalar(), out);
      break;
    }
    case Instr::Fast::TensorTensor: {
      const at::Tensor* b = tensor_operand(ops[1], f);
      if (!b) return false;
      in.out_op->handle.typed<TensorTensorOut>().call(*a, *b, out);
      break;
    }
    case Instr::Fast::TensorScalar:
      if (ops[1].kind != Operand::Kind::Const || !ops[1].value.isScalar()) return false;
      in.out_op->handle.typed<TensorScalarOut>().call(*a, ops[1].value.toScalar(), out);
      break;
    case Instr::Fast::None:
      return false;
  }
  f.slots[in.out] = out;
  return true;
}

// The out tensor a managed instruction writes into from the next forward on:
// empty, of the functional result's dtype and dispatch keys, over the frame's
// shared buffer (Note [Memory planning]).
void Plan::learn_out(const Instr& in, Frame& f, const c10::IValue& result) const {
  if (!result.isTensor()) return;
  const at::Tensor& r = result.toTensor();
  if (r.device().type() != c10::DeviceType::CPU || r.layout() != c10::Layout::Strided || r.is_quantized()) return;
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(f.buffers[in.buffer]), r.key_set(), r.dtype());
  impl->set_sizes_contiguous({0});
  f.outs[in.managed] = at::Tensor(std::move(impl));
}

std::unique_ptr<Plan::Frame> Plan::take_frame() const {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto f = std::move(pool_.back());
      pool_.pop_back();
      return f;
    }
  }
  auto f = std::make_unique<Frame>();
  f->slots.resize(num_slots);
  f->stack.reserve(32);
  f->outs.resize(num_managed);
  for (uint32_t b = 0; b < num_buffers; ++b)
    f->buffers.emplace_back(c10::Storage::use_byte_size_t(), 0, c10::GetCPUAllocator(), /*resizable=*/true);
  return f;
}

void Plan::give_frame(std::unique_ptr<Frame> f) const {
  for (auto& s : f->slots) s = c10::IValue();  // a pooled frame keeps no caller-visible tensor alive
  f->stack.clear();
  // Planned out tensors keep their storage but not their shape (Note [Memory planning]).
  for (auto& t : f->outs)
    if (t.defined()) t.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < 64) pool_.push_back(std::move(f));
}

c10::IValue Plan::run(std::vector<c10::IValue>& args) const {
  check_inputs(args);
  c10::InferenceMode guard;
  std::unique_ptr<Frame> frame = take_frame();
  struct Return {
    const Plan* p;
    std::unique_ptr<Frame>& f;
    ~Return() { p->give_frame(std::move(f)); }
  } give_back{this, frame};
  Frame& f = *frame;
  if (num_managed) {
    // Out tensors were learned for particular input types (an int input on
    // one call and a float on the next change result dtypes); others re-learn them.
    std::vector<int64_t>& sig = f.scratch_signature;
    sig.clear();
    for (auto& a : args) input_signature(a, sig);
    if (sig != f.signature) {
      f.signature.swap(sig);
      for (auto& t : f.outs) t = at::Tensor();
      f.unplanned = false;
    }
  }
  bool unplanned_now = false;  // the storage check turned planning off in this forward
  for (size_t i = 0; i < inputs.size(); ++i)
    f.slots[inputs[i].slot] = i < args.size() ? std::move(args[i]) : inputs[i].default_value;
  for (const Instr& in : instrs) {
    try {
      bool done = false;
      if (in.managed >= 0 && !f.unplanned && f.outs[in.managed].defined()) {
        try {
          if (in.fast == Instr::Fast::None || in.guard || !run_fast(in, f)) {
            auto& stack = f.stack;
            for (const Operand& o : in.out_operands) stack.push_back(eval(o, f));
            stack.emplace_back(f.outs[in.managed]);
            if (in.guard) (*in.guard)(stack);
            in.out_op->handle.callBoxed(&stack);
            f.slots[in.out] = std::move(stack[0]);
            stack.clear();
          }
          done = true;
        } catch (const c10::Error&) {
          // An out= kernel that fails where its functional form may not
          // (normal.Tensor_float.out does not size an empty `out`): the
          // functional call below decides, and this frame stops planning.
          f.stack.clear();
          f.unplanned = unplanned_now = true;
        }
      }
      if (done) {
      } else if (in.op) {
        auto& stack = f.stack;
        for (const Operand& o : in.operands) stack.push_back(eval(o, f));
        const bool writes = in.guard && in.guard->writes();
        if (in.guard) (*in.guard)(stack);
        if (writes) in.guard->save_written(stack, f.written);
        const bool check = in.fresh && num_managed && !f.unplanned;
        if (check) {
          f.arg_storages.clear();
          for (auto& v : stack) collect_storages(v, f.arg_storages);
        }
        if (writes) {
          try {
            in.op->handle.callBoxed(&stack);
          } catch (...) {
            f.written.restore();  // Note [A failed call leaves its written tensors as they were] in policy.h
            throw;
          }
          f.written.clear();
        } else {
          in.op->handle.callBoxed(&stack);
        }
        if (check && !f.arg_storages.empty()) {
          // A result that shares storage with an argument, against what the
          // planner assumed: stop writing into planned buffers (the argument
          // may live in one) for this frame (Note [Memory planning]).
          std::vector<const void*>& results = f.result_storages;
          results.clear();
          for (auto& v : stack) collect_storages(v, results);
          for (const void* r : results)
            for (const void* a : f.arg_storages)
              if (r == a) f.unplanned = unplanned_now = true;
        }
        for (auto& v : stack) check_extents(v);  // Note [Views stay inside their storage]
        if (in.managed >= 0 && !f.unplanned) learn_out(in, f, stack[0]);
        if (in.num_returns == 1) {
          f.slots[in.out] = std::move(stack[0]);
        } else if (in.num_returns == 0) {
          f.slots[in.out] = c10::IValue();
        } else {
          f.slots[in.out] = c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.begin(), stack.end()));
        }
        stack.clear();
      } else {
        run_primitive(in, f);
      }
    } catch (const c10::Error& e) {
      f.stack.clear();
      throw Error("fxcpp::torch: node '" + std::string(in.node->name()) + "' (" +
                  (in.op ? in.op->qualified : std::string(primitive_name(in.prim))) +
                  ") failed: " + e.what_without_backtrace());
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      f.stack.clear();
      throw Error("fxcpp::torch: node '" + std::string(in.node->name()) + "' (" +
                  (in.op ? in.op->qualified : std::string(primitive_name(in.prim))) + ") failed: " + e.what());
    } catch (const std::bad_alloc&) {
      f.stack.clear();
      throw;
    } catch (const std::exception& e) {
      // Kernels that throw something else (view's size inference throws
      // std::runtime_error, oneDNN its own errors): still the node's failure.
      f.stack.clear();
      throw Error("fxcpp::torch: node '" + std::string(in.node->name()) + "' (" +
                  (in.op ? in.op->qualified : std::string(primitive_name(in.prim))) + ") failed: " + e.what());
    }
    for (uint32_t s : in.frees) f.slots[s] = c10::IValue();
  }
  if (!unplanned_now) return eval(output, f);
  // Values computed into planned buffers before the check fired may reach
  // the output through the unexpected alias: copy those out of the frame.
  std::vector<const void*> planned;
  for (auto& b : f.buffers) planned.push_back(b.unsafeGetStorageImpl());
  for (auto& t : f.outs)
    if (t.defined()) planned.push_back(t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl());
  return copy_out_of(eval(output, f), planned);
}

}  // namespace fxcpp::torch
