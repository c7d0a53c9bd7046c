// The runtime: compiles a Graph into a flat plan and runs it (Note [Runtime plan]
// in module.h).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "fxcpp/passes/last_uses.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/policy.h"

namespace fxcpp::torch {

namespace {

/// How one value is produced when an instruction runs.
struct Operand {
  enum class Kind : uint8_t {
    Const,          ///< value
    Slot,           ///< frame slot `slot`
    SlotToDouble,   ///< frame slot, an int or bool widened to float (schema type float)
    SlotToInt,      ///< frame slot, a bool as an int (schema type int); anything else an Error
    SlotToBool,     ///< frame slot that must hold a bool (schema type bool)
    SlotToNumber,   ///< frame slot that must hold an int, float or bool (schema type Scalar)
    SlotToTensor,   ///< frame slot; a number becomes a wrapped-number tensor (schema type Tensor)
    IntList,        ///< typed lists built from `items`
    DoubleList,
    BoolList,
    TensorList,
    OptTensorList,
    GenericList,
    Tuple,
    Dict,           ///< items: key, value, key, value, ...
    Slice,          ///< items: start, stop, step (getitem only)
  };
  Kind kind = Kind::Const;
  bool optional = false;  ///< SlotTo*: the schema type is optional (None passes)
  uint32_t slot = 0;
  c10::IValue value;
  std::vector<Operand> items;
  c10::TypePtr key_type;  ///< Dict
};

enum class Attr : uint8_t { Shape, Dtype, Device, Ndim };

struct Instr {
  const AtenOp* op = nullptr;  ///< null: a primitive
  Primitive prim = Primitive::GetItem;
  Attr attr = Attr::Shape;
  uint32_t num_returns = 1;
  uint32_t out = 0;
  std::vector<Operand> operands;
  std::vector<uint32_t> frees;
  const Node* node = nullptr;
  // Memory planning (Note [Memory planning]): a managed instruction writes
  // into the frame's out tensor `managed` through `out_op`, whose operands
  // are `out_operands` followed by that tensor. `buffer` is the storage the
  // out tensor shares with the values whose lifetimes do not overlap its own.
  int32_t managed = -1;
  uint32_t buffer = 0;
  const AtenOp* out_op = nullptr;
  std::vector<Operand> out_operands;
  /// Note [Unboxed out calls]: the commonest out= overloads are called
  /// through typed handles, skipping the IValue stack and the boxing
  /// wrappers; anything unexpected at run time takes the boxed path.
  enum class Fast : uint8_t { None, TensorTensorScalar, TensorTensor, TensorScalar } fast = Fast::None;
  /// The planner assumed this op's results share no storage with its
  /// arguments (no alias annotation, a CPU kernel of its own): a planning
  /// frame checks that on each call (Note [Memory planning]).
  bool fresh = false;
  /// Checks the arguments before the kernel runs (Note [Argument guards] in
  /// policy.h); null for most operators.
  ArgumentGuard guard = nullptr;
};

using TensorTensorScalarOut = at::Tensor&(const at::Tensor&, const at::Tensor&, const c10::Scalar&, at::Tensor&);
using TensorTensorOut = at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&);
using TensorScalarOut = at::Tensor&(const at::Tensor&, const c10::Scalar&, at::Tensor&);

struct Input {
  uint32_t slot;
  std::string name;
  bool has_default = false;
  c10::IValue default_value;
  const Argument* meta = nullptr;  ///< the placeholder's tensor_meta, if recorded
};

struct Frame {
  std::vector<c10::IValue> slots;
  std::vector<c10::IValue> stack;
  std::vector<at::Tensor> outs;       ///< by Instr::managed; undefined until learned
  std::vector<c10::Storage> buffers;  ///< by Instr::buffer
  std::vector<int64_t> signature;     ///< input types the outs were learned for (input_signature)
  /// An op's result shared storage with an argument although the planner
  /// assumed it would not: this frame runs unplanned until the input types change.
  bool unplanned = false;
  std::vector<const void*> arg_storages, result_storages;  ///< scratch of the storage checks
  std::vector<int64_t> scratch_signature;
};

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

std::string describe(const c10::IValue& v) {
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

class Plan {
 public:
  std::vector<Instr> instrs;
  std::vector<Input> inputs;
  Operand output;
  uint32_t num_slots = 0;
  uint32_t num_managed = 0;  ///< instructions writing into planned buffers
  uint32_t num_buffers = 0;  ///< storages they share

  c10::IValue run(std::vector<c10::IValue>& args) const;

 private:
  c10::IValue eval(const Operand& o, Frame& f) const;
  void run_primitive(const Instr& in, Frame& f) const;
  void check_inputs(const std::vector<c10::IValue>& args) const;
  void learn_out(const Instr& in, Frame& f, const c10::IValue& result) const;
  bool run_fast(const Instr& in, Frame& f) const;
  const at::Tensor* tensor_operand(const Operand& o, Frame& f) const;
  std::unique_ptr<Frame> take_frame() const;
  void give_frame(std::unique_ptr<Frame> f) const;

  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Frame>> pool_;
};

// ---- compiling --------------------------------------------------------------------

namespace {

class Compiler {
 public:
  Compiler(const Graph& g, const std::vector<NamedTensor>& tensors, Plan& plan)
      : graph_(g), plan_(plan), slots_(g.node_capacity(), kNoSlot) {
    for (auto& t : tensors) tensors_.emplace(t.name, &t.tensor);
  }

  void compile(const ModuleOptions& options) {
    LastUses lu = last_uses(graph_);
    bool seen_output = false;
    for (Node* n : graph_.nodes()) {
      switch (n->op()) {
        case Op::Placeholder: {
          Input in{new_slot(n), std::string(n->name()), false, {}, nullptr};
          if (!n->args().empty()) {
            in.has_default = true;
            in.default_value = untyped(n->args().front(), n);
            if (in.default_value.isNone() && !n->args().front().is_none())
              throw FormatError(where(n) + "a placeholder default must be a constant");
          }
          if (n->has_meta())
            for (auto& kv : n->meta())
              if (kv.first == "tensor_meta") in.meta = &kv.second;
          plan_.inputs.push_back(std::move(in));
          break;
        }
        case Op::GetAttr: {
          auto it = tensors_.find(n->target().str().get());
          if (it == tensors_.end())
            throw FormatError(where(n) + "get_attr of '" + n->target().str().get() +
                              "', which is not one of the module's tensors");
          break;  // read as a constant by its users
        }
        case Op::CallFunction:
          plan_.instrs.push_back(compile_call(n));
          for (Node* dead : lu.freed_after(*n))
            if (slots_[dead->index()] != kNoSlot) plan_.instrs.back().frees.push_back(slots_[dead->index()]);
          break;
        case Op::Output:
          if (seen_output) throw FormatError(where(n) + "a graph has one output node");
          seen_output = true;
          if (n->args().size() != 1) throw FormatError(where(n) + "output takes one argument");
          plan_.output = operand(n->args().front(), nullptr, 0, n);
          break;
        case Op::CallMethod:
        case Op::CallModule:
          throw FormatError(where(n) + "is a " + op_name(n->op()) +
                            " node; the runtime runs lowered graphs (ATen operators and primitives only): "
                            "lower the model with fxcpp.aten.lower first");
        case Op::Root:
          break;
      }
    }
    if (!seen_output) throw FormatError("fxcpp::torch: the graph has no output node");
    plan_.num_slots = next_slot_;
    if (options.plan_memory) plan_memory(lu);
  }

 private:
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  static std::string where(const Node* n) { return "fxcpp::torch: node '" + std::string(n->name()) + "' "; }

  uint32_t new_slot(const Node* n) {
    slot_nodes_.push_back(n);
    return slots_[n->index()] = next_slot_++;
  }

  // ---- Note [Memory planning] ---------------------------------------------------------
  // Like PyTorch's Static Runtime, a forward writes most intermediate tensors
  // into storage the frame keeps from one call to the next, through the ops'
  // out= overloads, instead of allocating a tensor per op. The rule above all:
  // a planned buffer is never written while a value that may share its
  // storage is still alive, and never reaches the caller.
  // * Alias sets. A return the schema marks as aliasing an argument
  //   (`Tensor(a) self -> Tensor(a)`: views, in-place ops) joins that
  //   argument's set; getitem and list concatenation join their container's.
  //   The results of an op with no alias annotation and no CPU kernel of its
  //   own (a composite) join the sets of all its tensor arguments: composites
  //   may return an argument or a view of one without saying so (type_as,
  //   atleast_1d/2d, einsum, broadcast_tensors, to_dense, conj_physical,
  //   sum_to_size, ...). A set that holds a graph input or reaches the graph
  //   output is never planned: the caller never receives a planned buffer.
  // * Candidates. A call with one Tensor return that aliases nothing, whose
  //   op has a CPU kernel of its own (not a composite: their out= overloads
  //   may decompose differently and round differently) and an out= overload
  //   taking the same arguments (found by schema: `add.Tensor` -> `add.out`,
  //   `sum.dim_IntList` -> `sum.IntList_out`; relu -> clamp_min.out(self, 0))
  //   with a C++ Meta kernel (Note [C++ Meta kernels]): a structured
  //   kernel, which sizes its output before writing (not every out= kernel
  //   resizes `out`; rrelu_with_noise.out would write past the planned
  //   buffer). A short list of out= kernels that compute something else
  //   than their functional form is never used (attach_out_variant);
  //   tests/python/test_planner_fuzz.py looks for more.
  // * Lifetimes. A candidate's value lives from its instruction to the last
  //   reader of any member of its alias set (a view keeps its base alive).
  //   Values whose lifetimes do not overlap share one storage, assigned by a
  //   greedy interval colouring in program order; a value never shares with
  //   one that its own instruction reads.
  // * Learning. A frame's first forward calls the functional ops and keeps
  //   an empty out tensor of each result's dtype over the shared storage;
  //   later forwards call the out= overloads, which resize into it (storage
  //   grows to the largest value it holds, then stays). The out tensors are
  //   reset to size 0 after each forward, so a new input shape resizes
  //   quietly, and are re-learned when the type of any input changes (a
  //   tensor's dtype; int, float, bool, complex, str, None; tuples and lists
  //   by length and items: input_signature), since result dtypes follow them.
  // * Checks at run time. The static rules trust schemas; a planning frame
  //   also checks, on every forward, that the result of each op assumed
  //   fresh (own kernel, no annotation: Instr::fresh) shares no storage with
  //   its arguments, and that no out= call fails. Either way the frame stops
  //   planning (Frame::unplanned, until the input types change) before any
  //   later instruction writes into a buffer, and the forward copies any
  //   output tensor whose storage is a planned buffer.
  void plan_memory(const LastUses& lu) {
    const uint32_t n = next_slot_;
    std::vector<uint32_t> parent(n);
    for (uint32_t i = 0; i < n; ++i) parent[i] = i;
    auto find = [&](uint32_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    auto unite = [&](uint32_t a, uint32_t b) { parent[find(a)] = find(b); };
    auto each_slot = [&](const Operand& o, auto&& fn) {
      auto rec = [&](const Operand& x, auto&& self) -> void {
        if (x.kind == Operand::Kind::Slot || x.kind == Operand::Kind::SlotToTensor) fn(x.slot);
        for (auto& i : x.items) self(i, self);
      };
      rec(o, rec);
    };

    std::vector<uint32_t> instr_of_slot(n, UINT32_MAX);
    for (uint32_t k = 0; k < plan_.instrs.size(); ++k) instr_of_slot[plan_.instrs[k].out] = k;

    for (Instr& in : plan_.instrs) {
      if (!in.op) {
        if (in.prim == Primitive::GetItem || in.prim == Primitive::Add)
          for (auto& o : in.operands) each_slot(o, [&](uint32_t s) { unite(in.out, s); });
        continue;
      }
      const auto& schema = in.op->handle.schema();
      bool annotated = false;
      for (const c10::Argument& ret : schema.returns()) annotated |= ret.alias_info() != nullptr;
      if (!annotated && !in.op->handle.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
        // A composite may return an argument, or a view of one, with no
        // annotation saying so (type_as, atleast_1d, einsum, conj_physical on
        // real tensors, sum_to_size to the same size, ...): its results join
        // the sets of all its tensor arguments.
        for (size_t a = 0; a < schema.arguments().size() && a < in.operands.size(); ++a)
          if (schema.arguments()[a].type()->str().find("Tensor") != std::string::npos)
            each_slot(in.operands[a], [&](uint32_t s) { unite(in.out, s); });
        continue;
      }
      // Its own kernel, no annotation: results are assumed fresh, and checked.
      in.fresh = !annotated;
      for (const c10::Argument& ret : schema.returns()) {
        if (!ret.alias_info()) continue;
        for (size_t a = 0; a < schema.arguments().size() && a < in.operands.size(); ++a) {
          const c10::AliasInfo* ai = schema.arguments()[a].alias_info();
          if (!ai) continue;
          bool shares = false;
          for (auto& sym : ret.alias_info()->beforeSets()) shares |= ai->beforeSets().count(sym) > 0;
          for (auto& sym : ai->beforeSets()) shares |= sym.toUnqualString() == std::string("*");
          for (auto& sym : ret.alias_info()->beforeSets()) shares |= sym.toUnqualString() == std::string("*");
          if (shares) each_slot(in.operands[a], [&](uint32_t s) { unite(in.out, s); });
        }
      }
    }

    std::vector<char> escapes(n, 0);
    for (auto& in : plan_.inputs) escapes[find(in.slot)] = 1;
    each_slot(plan_.output, [&](uint32_t s) { escapes[find(s)] = 1; });

    // The last instruction that reads any member of each set.
    std::vector<uint32_t> set_end(n, 0);
    for (uint32_t s = 0; s < n; ++s) {
      Node* last = lu.last_user(*slot_nodes_[s]);
      uint32_t end = instr_of_slot[s] == UINT32_MAX ? 0 : instr_of_slot[s];
      if (last) {
        uint32_t ls = slots_[last->index()];
        if (last->op() == Op::Output) escapes[find(s)] = 1;
        else if (ls != kNoSlot && instr_of_slot[ls] != UINT32_MAX) end = std::max(end, instr_of_slot[ls]);
      }
      uint32_t r = find(s);
      set_end[r] = std::max(set_end[r], end);
    }

    // Greedy interval colouring in program order.
    std::vector<uint32_t> buffer_end;  // by buffer: the last instruction reading its current value
    for (uint32_t k = 0; k < plan_.instrs.size(); ++k) {
      Instr& in = plan_.instrs[k];
      if (!in.op || in.num_returns != 1 || escapes[find(in.out)]) continue;
      const auto& ret = in.op->handle.schema().returns()[0];
      if (ret.alias_info() || ret.type()->kind() != c10::TypeKind::TensorType) continue;
      // Only ops with their own CPU kernel: a composite op's out= overload can
      // take another path than its functional form (matmul.out does not fold
      // batch dimensions into one GEMM as matmul does) and round differently.
      if (!in.op->handle.hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
      if (!attach_out_variant(in)) continue;
      uint32_t end = set_end[find(in.out)];
      uint32_t b = 0;
      while (b < buffer_end.size() && buffer_end[b] >= k) ++b;
      if (b == buffer_end.size()) buffer_end.push_back(end);
      else buffer_end[b] = end;
      in.buffer = b;
      in.managed = static_cast<int32_t>(plan_.num_managed++);
    }
    plan_.num_buffers = static_cast<uint32_t>(buffer_end.size());
  }

  // Note [C++ Meta kernels]
  // ~~~~~~~~~~~~~~~~~~~~~~~
  // The planner takes a Meta kernel on an out= overload as the mark of a
  // structured kernel, which sizes `out` before writing. Only a Meta kernel
  // registered from C++ says that: `import torch` registers Python Meta
  // kernels (torch/_meta_registrations.py) for 29 out= overloads on 1.13
  // (abs.out, ...) and about 480 on 2.x (rrelu_with_noise.out, whose CPU
  // kernel writes past an unsized `out`), overriding C++ ones, so the plan
  // would depend on whether Python is in the process and write out of
  // bounds on 2.x. The dispatcher has no query for where a kernel came from
  // on both LibTorch versions; its dump (OperatorHandle::dumpState, the same
  // format on 1.13 and 2.x) lists every Meta registration, active or
  // "(inactive)", and C++ kernels with a typed signature are "[ boxed
  // unboxed ]" while Python's are "(none) [ boxed ]". This is the one place
  // that reads it.
  static bool has_cpp_meta_kernel(const c10::OperatorHandle& h) {
    if (!h.hasKernelForDispatchKey(c10::DispatchKey::Meta)) return false;
    const std::string dump = h.dumpState();
    for (size_t pos = 0; pos < dump.size();) {
      size_t end = dump.find('\n', pos);
      if (end == std::string::npos) end = dump.size();
      const std::string_view line(dump.data() + pos, end - pos);
      if ((line.rfind("Meta: ", 0) == 0 || line.rfind("Meta (inactive): ", 0) == 0) &&
          line.find("unboxed ]") != std::string_view::npos)
        return true;
      pos = end + 1;
    }
    return false;
  }

  // Which typed signature (Note [Unboxed out calls]) an out= schema has.
  // The C++ signature is checked here, once: a kernel registered with another
  // one stays on the boxed path.
  static Instr::Fast fast_kind(const c10::OperatorHandle& h) {
    using K = c10::TypeKind;
    std::vector<K> kinds;
    for (auto& a : h.schema().arguments()) kinds.push_back(a.type()->kind());
    try {
      if (kinds == std::vector<K>{K::TensorType, K::TensorType, K::NumberType, K::TensorType}) {
        h.typed<TensorTensorScalarOut>();
        return Instr::Fast::TensorTensorScalar;
      }
      if (kinds == std::vector<K>{K::TensorType, K::TensorType, K::TensorType}) {
        h.typed<TensorTensorOut>();
        return Instr::Fast::TensorTensor;
      }
      if (kinds == std::vector<K>{K::TensorType, K::NumberType, K::TensorType}) {
        h.typed<TensorScalarOut>();
        return Instr::Fast::TensorScalar;
      }
    } catch (const c10::Error&) {
    }
    return Instr::Fast::None;
  }

  // Finds the out= overload taking the same arguments as `in.op`, and sets
  // the operands it is called with. False when there is none.
  static bool attach_out_variant(Instr& in) {
    const c10::FunctionSchema& fn = in.op->handle.schema();
    if (in.op->qualified == "aten::relu") {
      in.out_op = as_aten_op(aten_op("aten::clamp_min.out"));
      in.out_operands = {in.operands[0], Operand{}};
      in.out_operands[1].value = int64_t(0);
      in.fast = fast_kind(in.out_op->handle);
      return true;
    }
    // out= kernels that compute something else than their functional form
    // into an empty `out` (found by tests/python/test_planner_fuzz.py):
    // binary_cross_entropy.out leaves `out` empty or nan for 0-dim inputs and
    // fails for others. rrelu_with_noise.out writes input.numel() elements
    // into `out` without resizing it; the Meta check below does not catch it
    // where Python registered a Meta kernel for it (torch 2.x's
    // torch._meta_registrations does, in any process that imports torch).
    static const char* const kBrokenOut[] = {"binary_cross_entropy", "rrelu_with_noise"};
    for (const char* name : kBrokenOut)
      if (fn.name() == std::string("aten::") + name) return false;
    const std::string& ov = fn.overload_name();
    std::vector<std::string> candidates;
    if (!ov.empty()) candidates.push_back(ov + "_out");
    candidates.push_back("out");
    for (const std::string& c : candidates) {
      auto h = c10::Dispatcher::singleton().findSchema({fn.name(), c});
      if (!h) continue;
      const c10::FunctionSchema& os = h->schema();
      const auto& oa = os.arguments();
      if (oa.size() != fn.arguments().size() + 1 || os.returns().size() != 1) continue;
      const c10::Argument& last = oa.back();
      if (!last.kwarg_only() || !last.alias_info() || !last.alias_info()->isWrite() ||
          last.type()->kind() != c10::TypeKind::TensorType)
        continue;
      bool same = true;
      for (size_t i = 0; i < fn.arguments().size() && same; ++i)
        same = oa[i].name() == fn.arguments()[i].name() && oa[i].type()->str() == fn.arguments()[i].type()->str() &&
               oa[i].kwarg_only() == fn.arguments()[i].kwarg_only();
      if (!same) continue;
      // Only out= kernels that size their output before writing to it: a
      // C++ Meta kernel means a structured kernel (shape computed, output
      // resized, then the kernel). rrelu_with_noise.out, for one, writes
      // input.numel() elements into `out` without resizing it.
      if (!has_cpp_meta_kernel(*h)) continue;
      in.out_op = as_aten_op(aten_op(fn.name() + "." + c));
      in.out_operands = in.operands;
      in.fast = fast_kind(*h);
      return true;
    }
    return false;
  }


  Instr compile_call(Node* n) {
    Instr in;
    in.node = n;
    const Object& fn = n->target().fn();
    if (const AtenOp* op = as_aten_op(fn)) {
      in.op = op;
      in.guard = argument_guard(*op);
      bind_schema(n, op, in);
      in.num_returns = static_cast<uint32_t>(op->handle.schema().returns().size());
    } else if (as_primitive(fn, &in.prim)) {
      compile_primitive(n, in);
    } else {
      throw FormatError(where(n) + "calls " + n->target().fn().repr() +
                        ", which the runtime cannot run: targets must be aten_op(...) or primitive(...)");
    }
    in.out = new_slot(n);
    return in;
  }

  // Binds args/kwargs to the schema's arguments as Python would, filling
  // defaults, and converts each to the schema's type.
  void bind_schema(Node* n, const AtenOp* op, Instr& in) {
    const c10::FunctionSchema& schema = op->handle.schema();
    const auto& params = schema.arguments();
    auto args = n->args();
    const KwArgs& kwargs = n->kwargs();
    size_t positional = 0;
    while (positional < params.size() && !params[positional].kwarg_only()) ++positional;
    if (args.size() > positional)
      throw FormatError(where(n) + "passes " + std::to_string(args.size()) + " positional arguments to " +
                        op->qualified + ", which takes at most " + std::to_string(positional) + ": " +
                        schema_text(schema));
    std::vector<const Argument*> bound(params.size(), nullptr);
    for (size_t i = 0; i < args.size(); ++i) bound[i] = &args.data()[i];
    for (auto& kv : kwargs) {
      size_t i = 0;
      while (i < params.size() && params[i].name() != kv.first) ++i;
      if (i == params.size())
        throw FormatError(where(n) + "passes keyword '" + kv.first + "', which " + op->qualified +
                          " does not take: " + schema_text(schema));
      if (bound[i]) throw FormatError(where(n) + "passes '" + kv.first + "' twice");
      bound[i] = &kv.second;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const c10::Argument& p = params[i];
      if (p.alias_info() && p.alias_info()->isWrite() && p.kwarg_only() && !bound[i])
        throw FormatError(where(n) + "calls the out= overload " + op->qualified + " without '" + p.name() + "'");
      if (bound[i]) {
        in.operands.push_back(operand(*bound[i], &p, 0, n));
      } else if (p.default_value()) {
        Operand c;
        c.value = *p.default_value();
        in.operands.push_back(std::move(c));
      } else {
        throw FormatError(where(n) + "does not pass '" + p.name() + "', which " + op->qualified +
                          " requires: " + schema_text(schema));
      }
    }
  }

  static std::string schema_text(const c10::FunctionSchema& s) {
    std::ostringstream os;
    os << s;
    return os.str();
  }

  void compile_primitive(Node* n, Instr& in) {
    auto args = n->args();
    size_t want = in.prim == Primitive::Neg ? 1 : 2;
    if (args.size() != want || !n->kwargs().empty())
      throw FormatError(where(n) + primitive_name(in.prim) + " takes " + std::to_string(want) +
                        " positional arguments");
    if (in.prim == Primitive::GetAttr) {
      if (!args.data()[1].is_string())
        throw FormatError(where(n) + "getattr needs a constant attribute name");
      const std::string& a = args.data()[1].as_string();
      if (a == "shape") in.attr = Attr::Shape;
      else if (a == "dtype") in.attr = Attr::Dtype;
      else if (a == "device") in.attr = Attr::Device;
      else if (a == "ndim") in.attr = Attr::Ndim;
      else throw FormatError(where(n) + "getattr of '" + a + "': the runtime reads shape, dtype, device and ndim");
      in.operands.push_back(operand(args.data()[0], nullptr, 0, n));
      return;
    }
    for (const Argument& a : args) in.operands.push_back(operand(a, nullptr, 0, n));
  }

  // An Argument as an operand. `param` (may be null: untyped) gives the
  // schema type the value must have.
  Operand operand(const Argument& a, const c10::Argument* param, int depth, const Node* n) {
    if (depth > 64) throw FormatError(where(n) + "has arguments nested too deeply");
    return param ? typed(a, param->type(), param->N(), depth, n, param->name())
                 : untyped_operand(a, depth, n);
  }

  Operand node_operand(Node* v, const Node* n) {
    Operand o;
    if (v->graph() != &graph_) throw FormatError(where(n) + "uses a node of another graph");
    if (v->op() == Op::GetAttr) {
      o.value = *tensors_.at(v->target().str().get());
      return o;
    }
    uint32_t s = slots_[v->index()];
    if (s == kNoSlot)
      throw FormatError(where(n) + "uses '" + std::string(v->name()) + "', which produces no value (or comes later)");
    o.kind = Operand::Kind::Slot;
    o.slot = s;
    return o;
  }

  Operand untyped_operand(const Argument& a, int depth, const Node* n) {
    Operand o;
    switch (a.kind()) {
      case ArgKind::NodeRef:
        return node_operand(a.as_node(), n);
      case ArgKind::Tuple:
      case ArgKind::List: {
        bool all_const = true;
        for (auto& item : a.items()) {
          o.items.push_back(operand(item, nullptr, depth + 1, n));
          all_const &= o.items.back().kind == Operand::Kind::Const;
        }
        o.kind = a.kind() == ArgKind::Tuple ? Operand::Kind::Tuple : Operand::Kind::GenericList;
        if (all_const) {
          o.value = eval_static(o);
          o.kind = Operand::Kind::Const;
          o.items.clear();
        }
        return o;
      }
      case ArgKind::Dict: {
        o.kind = Operand::Kind::Dict;
        for (auto& kv : a.pairs()) {
          if (!kv.first.is_string() && kv.first.kind() != ArgKind::Int)
            throw FormatError(where(n) + "has a dict whose keys are not str or int");
          o.items.push_back(operand(kv.first, nullptr, depth + 1, n));
          o.items.push_back(operand(kv.second, nullptr, depth + 1, n));
        }
        o.key_type = !a.pairs().empty() && a.pairs().front().first.kind() == ArgKind::Int
                         ? c10::TypePtr(c10::IntType::get())
                         : c10::TypePtr(c10::StringType::get());
        for (auto& kv : a.pairs())
          if ((kv.first.kind() == ArgKind::Int) != (o.key_type->kind() == c10::TypeKind::IntType))
            throw FormatError(where(n) + "has a dict with keys of mixed types");
        return o;
      }
      case ArgKind::Slice:
        o.kind = Operand::Kind::Slice;
        o.items.push_back(operand(a.slice_start(), nullptr, depth + 1, n));
        o.items.push_back(operand(a.slice_stop(), nullptr, depth + 1, n));
        o.items.push_back(operand(a.slice_step(), nullptr, depth + 1, n));
        return o;
      default:
        o.value = untyped(a, n);
        return o;
    }
  }

  // A scalar constant with no schema to follow.
  c10::IValue untyped(const Argument& a, const Node* n) {
    switch (a.kind()) {
      case ArgKind::None: return {};
      case ArgKind::Bool: return a.as_bool();
      case ArgKind::Int: return a.as_int();
      case ArgKind::Double: return a.as_double();
      case ArgKind::String: return a.as_string();
      case ArgKind::Foreign:
        if (const TorchConstant* c = as_torch_constant(a.as_object())) return c->value;
        throw FormatError(where(n) + "has an argument the runtime cannot represent: " + a.as_object().repr());
      default:
        return {};
    }
  }

  static c10::IValue eval_static(const Operand& o) {
    std::vector<c10::IValue> items;
    for (auto& i : o.items) items.push_back(i.value);
    if (o.kind == Operand::Kind::Tuple) return c10::ivalue::Tuple::create(std::move(items));
    c10::impl::GenericList l(c10::AnyType::get());
    for (auto& i : items) l.push_back(i);
    return l;
  }

 public:
  static at::Tensor wrapped_number(const c10::IValue& v) {
    if (v.isInt()) return wrapped_number(Argument::integer(v.toInt()));
    if (v.isDouble()) return wrapped_number(Argument::real(v.toDouble()));
    return wrapped_number(Argument::boolean(v.toBool()));
  }
  static at::Tensor wrapped_number(const Argument& a) {
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

  [[noreturn]] void type_error(const Argument& a, const c10::TypePtr& t, const Node* n, const std::string& pname) {
    std::string got;
    switch (a.kind()) {
      case ArgKind::None: got = "None"; break;
      case ArgKind::Bool: got = "a bool"; break;
      case ArgKind::Int: got = "an int"; break;
      case ArgKind::Double: got = "a float"; break;
      case ArgKind::String: got = "a str"; break;
      case ArgKind::Tuple: got = "a tuple"; break;
      case ArgKind::List: got = "a list"; break;
      case ArgKind::Dict: got = "a dict"; break;
      case ArgKind::Slice: got = "a slice"; break;
      case ArgKind::NodeRef: got = "a node"; break;
      case ArgKind::Foreign: got = a.as_object().repr(); break;
    }
    throw FormatError(where(n) + "passes " + got + " as '" + pname + "', which has type " + t->str());
  }

  Operand typed(const Argument& a, const c10::TypePtr& t, c10::optional<int32_t> N, int depth, const Node* n,
                const std::string& pname) {
    using K = c10::TypeKind;
    Operand o;
    if (a.is_node()) {
      o = node_operand(a.as_node(), n);
      c10::TypePtr base = t->kind() == K::OptionalType ? t->containedType(0) : t;
      o.optional = t->kind() == K::OptionalType;
      if (o.kind == Operand::Kind::Slot && base->kind() == K::FloatType) o.kind = Operand::Kind::SlotToDouble;
      if (o.kind == Operand::Kind::Slot && (base->kind() == K::IntType || base->kind() == K::SymIntType))
        o.kind = Operand::Kind::SlotToInt;
      if (o.kind == Operand::Kind::Slot && base->kind() == K::BoolType) o.kind = Operand::Kind::SlotToBool;
      if (o.kind == Operand::Kind::Slot && base->kind() == K::NumberType) o.kind = Operand::Kind::SlotToNumber;
      if (o.kind == Operand::Kind::Slot && base->kind() == K::TensorType) o.kind = Operand::Kind::SlotToTensor;
      return o;
    }
    switch (t->kind()) {
      case K::OptionalType:
        if (a.is_none()) return o;
        return typed(a, t->containedType(0), N, depth, n, pname);
      case K::AnyType:
        return untyped_operand(a, depth, n);
      case K::IntType:
      case K::SymIntType:
        if (a.kind() == ArgKind::Int) o.value = a.as_int();
        else if (a.kind() == ArgKind::Bool) o.value = static_cast<int64_t>(a.as_bool());
        else if (a.kind() == ArgKind::Foreign && as_torch_constant(a.as_object()) &&
                 as_torch_constant(a.as_object())->kind != TorchConstant::Kind::Device)
          o.value = as_torch_constant(a.as_object())->value;
        else type_error(a, t, n, pname);
        return o;
      case K::FloatType:
        if (a.kind() == ArgKind::Double) o.value = a.as_double();
        else if (a.kind() == ArgKind::Int) o.value = static_cast<double>(a.as_int());
        else type_error(a, t, n, pname);
        return o;
      case K::BoolType:
        if (a.kind() == ArgKind::Bool) o.value = a.as_bool();
        else if (a.kind() == ArgKind::Int && (a.as_int() == 0 || a.as_int() == 1)) o.value = a.as_int() == 1;
        else type_error(a, t, n, pname);
        return o;
      case K::NumberType:
        if (a.kind() == ArgKind::Int) o.value = a.as_int();
        else if (a.kind() == ArgKind::Double) o.value = a.as_double();
        else if (a.kind() == ArgKind::Bool) o.value = a.as_bool();
        else type_error(a, t, n, pname);
        return o;
      case K::StringType:
        if (!a.is_string()) type_error(a, t, n, pname);
        o.value = a.as_string();
        return o;
      case K::DeviceObjType:
        if (a.kind() == ArgKind::Foreign && as_torch_constant(a.as_object()) &&
            as_torch_constant(a.as_object())->kind == TorchConstant::Kind::Device)
          o.value = as_torch_constant(a.as_object())->value;
        else if (a.is_string())
          o.value = as_torch_constant(torch_constant(TorchConstant::Kind::Device, a.as_string()))->value;
        else type_error(a, t, n, pname);
        return o;
      case K::ListType:
        return typed_list(a, t, N, depth, n, pname);
      case K::TensorType:
        // A number where the schema takes a Tensor: torch's Python binding
        // wraps it in a 0-dim "wrapped number" tensor (which type promotion
        // treats like a Python scalar); so does the runtime, once, here.
        if (a.kind() == ArgKind::Int || a.kind() == ArgKind::Double || a.kind() == ArgKind::Bool) {
          o.value = wrapped_number(a);
          return o;
        }
        type_error(a, t, n, pname);
      default:
        if (t->kind() == K::TensorType) type_error(a, t, n, pname);
        throw FormatError(where(n) + "passes '" + pname + "' of type " + t->str() +
                          ", which the runtime does not support yet");
    }
  }

  Operand typed_list(const Argument& a, const c10::TypePtr& t, c10::optional<int32_t> N, int depth, const Node* n,
                     const std::string& pname) {
    using K = c10::TypeKind;
    const c10::TypePtr& elem = t->containedType(0);
    std::vector<Argument> items;
    if (a.is_sequence()) {
      items = a.items();
    } else if (N && (a.kind() == ArgKind::Int || a.kind() == ArgKind::Bool || a.kind() == ArgKind::Double)) {
      items.assign(static_cast<size_t>(*N), a);  // int[2] given as one int, as torch's parser broadcasts
    } else {
      type_error(a, t, n, pname);
    }
    Operand o;
    bool all_const = true;
    for (auto& item : items) {
      o.items.push_back(typed(item, elem, c10::nullopt, depth + 1, n, pname));
      all_const &= o.items.back().kind == Operand::Kind::Const;
    }
    c10::TypePtr base = elem->kind() == K::OptionalType ? elem->containedType(0) : elem;
    bool optional = elem->kind() == K::OptionalType;
    switch (base->kind()) {
      case K::IntType:
      case K::SymIntType: o.kind = Operand::Kind::IntList; break;
      case K::FloatType: o.kind = Operand::Kind::DoubleList; break;
      case K::BoolType: o.kind = Operand::Kind::BoolList; break;
      case K::TensorType: o.kind = optional ? Operand::Kind::OptTensorList : Operand::Kind::TensorList; break;
      default:
        throw FormatError(where(n) + "passes '" + pname + "' of type " + t->str() +
                          ", which the runtime does not support yet");
    }
    if (optional && o.kind != Operand::Kind::OptTensorList)
      throw FormatError(where(n) + "passes '" + pname + "' of type " + t->str() +
                        ", which the runtime does not support yet");
    if (all_const) {
      o.value = build_list(o, [](const Operand& i) { return i.value; });
      o.kind = Operand::Kind::Const;
      o.items.clear();
    }
    return o;
  }

 public:
  template <typename Eval>
  static c10::IValue build_list(const Operand& o, Eval&& eval) {
    auto bad = [](const c10::IValue& v, const char* want) {
      return Error(std::string("fxcpp::torch: a list item is ") + describe(v) + ", expected " + want);
    };
    switch (o.kind) {
      case Operand::Kind::IntList: {
        c10::List<int64_t> l;
        l.reserve(o.items.size());
        for (auto& i : o.items) {
          c10::IValue v = eval(i);
          if (!v.isInt()) throw bad(v, "an int");
          l.push_back(v.toInt());
        }
        return l;
      }
      case Operand::Kind::DoubleList: {
        c10::List<double> l;
        for (auto& i : o.items) {
          c10::IValue v = eval(i);
          if (v.isInt()) l.push_back(static_cast<double>(v.toInt()));
          else if (v.isDouble()) l.push_back(v.toDouble());
          else throw bad(v, "a float");
        }
        return l;
      }
      case Operand::Kind::BoolList: {
        c10::List<bool> l;
        for (auto& i : o.items) {
          c10::IValue v = eval(i);
          if (!v.isBool()) throw bad(v, "a bool");
          l.push_back(v.toBool());
        }
        return l;
      }
      case Operand::Kind::TensorList: {
        c10::List<at::Tensor> l;
        l.reserve(o.items.size());
        for (auto& i : o.items) {
          c10::IValue v = eval(i);
          if (!v.isTensor()) throw bad(v, "a Tensor");
          l.push_back(v.toTensor());
        }
        return l;
      }
      case Operand::Kind::OptTensorList: {
        c10::List<c10::optional<at::Tensor>> l;
        for (auto& i : o.items) {
          c10::IValue v = eval(i);
          if (v.isNone()) l.push_back(c10::nullopt);
          else if (v.isTensor()) l.push_back(v.toTensor());
          else throw bad(v, "a Tensor or None");
        }
        return l;
      }
      default:
        return {};
    }
  }

 private:
  const Graph& graph_;
  Plan& plan_;
  std::vector<uint32_t> slots_;
  std::vector<const Node*> slot_nodes_;  ///< by slot
  uint32_t next_slot_ = 0;
  std::unordered_map<std::string, const at::Tensor*> tensors_;
};

}  // namespace

// ---- running ----------------------------------------------------------------------

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
      if (v.isInt() || v.isDouble() || v.isBool()) return Compiler::wrapped_number(v);
      throw Error("fxcpp::torch: an argument of type Tensor got " + describe(v));
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
      return Compiler::build_list(o, [&](const Operand& i) { return eval(i, f); });
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
    c10::ArrayRef<c10::IValue> items;
    if (seq.isTuple()) items = seq.toTupleRef().elements();
    else if (seq.isList()) items = seq.toListRef();
    else throw Error("getitem of " + describe(seq) + ": the runtime indexes tuples and lists only");
    const int64_t size = static_cast<int64_t>(items.size());
    const Operand& idx = in.operands[1];
    // Python's ints for indexes: bools are 0 and 1.
    auto as_index = [](const c10::IValue& v, int64_t* out) {
      if (v.isInt()) *out = v.toInt();
      else if (v.isBool()) *out = v.toBool();
      else return false;
      return true;
    };
    if (idx.kind == Operand::Kind::Slice) {
      auto part = [&](size_t k) -> c10::optional<int64_t> {
        c10::IValue v = eval(idx.items[k], f);
        if (v.isNone()) return c10::nullopt;
        int64_t x = 0;
        if (!as_index(v, &x)) throw Error("slice bounds must be ints or None, got " + describe(v));
        return x;
      };
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

std::unique_ptr<Frame> Plan::take_frame() const {
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
            if (in.guard) in.guard(stack);
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
        if (in.guard) in.guard(stack);
        const bool check = in.fresh && num_managed && !f.unplanned;
        if (check) {
          f.arg_storages.clear();
          for (auto& v : stack) collect_storages(v, f.arg_storages);
        }
        in.op->handle.callBoxed(&stack);
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

// ---- Module -----------------------------------------------------------------------

c10::IValue make_list(std::vector<c10::IValue> items) {
  bool tensors = !items.empty();
  for (auto& v : items) tensors &= v.isTensor();
  if (tensors) {
    c10::List<at::Tensor> l;
    l.reserve(items.size());
    for (auto& v : items) l.push_back(v.toTensor());
    return l;
  }
  c10::impl::GenericList l(c10::AnyType::get());
  l.reserve(items.size());
  for (auto& v : items) l.push_back(std::move(v));
  return l;
}

Module::Module(std::unique_ptr<Graph> graph, std::vector<NamedTensor> tensors, ModuleOptions options)
    : graph_(std::move(graph)), tensors_(std::move(tensors)), plan_(std::make_unique<Plan>()) {
  if (!graph_) throw FormatError("fxcpp::torch: Module needs a graph");
  Compiler(*graph_, tensors_, *plan_).compile(options);
}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

c10::IValue Module::forward(std::vector<c10::IValue> inputs) const { return plan_->run(inputs); }

const at::Tensor* Module::find_tensor(const std::string& name) const {
  for (auto& t : tensors_)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

std::vector<std::string> Module::input_names() const {
  std::vector<std::string> names;
  for (auto& in : plan_->inputs) names.push_back(in.name);
  return names;
}

size_t Module::num_instructions() const { return plan_->instrs.size(); }

Module::PlanStats Module::plan_stats() const {
  return {plan_->instrs.size(), plan_->num_managed, plan_->num_buffers};
}

}  // namespace fxcpp::torch
