// The runtime's plan (Note [Runtime plan] in fxcpp/torch/module.h): what the
// compiler (compile.cpp) builds from a Graph and the executor (run.cpp) runs.
// Internal to the torch layer; not installed.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fxcpp/torch/module.h"
#include "fxcpp/torch/policy.h"

namespace fxcpp::torch {

/// A compiled graph: instructions over the value slots of a frame. Built once
/// by Plan::compile (compile.cpp), then only read: run() is thread-safe, each
/// call taking a frame of its own from the pool (run.cpp).
class Plan {
 public:
  /// How one value is produced when an instruction runs.
  struct Operand {
    enum class Kind : uint8_t {
      Const,          ///< value
      Slot,           ///< frame slot `slot`
      SlotToDouble,   ///< frame slot, an int or bool widened to float (schema type float)
      SlotToInt,      ///< frame slot, a bool as an int (schema type int); anything else an Error
      SlotToBool,     ///< frame slot that must hold a bool (schema type bool)
      SlotToNumber,   ///< frame slot that must hold an int, float or bool (schema type Scalar)
      SlotToTensor,   ///< frame slot; a number becomes a wrapped-number tensor where wrap_numbers (schema type Tensor)
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
    bool wrap_numbers = true;  ///< SlotToTensor: the operator takes numbers for tensors (Note [Numbers as tensors])
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
    const ArgumentGuard* guard = nullptr;
  };

  using TensorTensorScalarOut = at::Tensor&(const at::Tensor&, const at::Tensor&, const c10::Scalar&, at::Tensor&);
  using TensorTensorOut = at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&);
  using TensorScalarOut = at::Tensor&(const at::Tensor&, const c10::Scalar&, at::Tensor&);

  /// One dimension of an exported input's spec (Note [Exported input checks] in pt2.cpp).
  struct DimCheck {
    enum class Kind : uint8_t { Static, Symbol, Poly } kind = Kind::Static;
    int64_t size = 0;     ///< Static: the size
    int32_t sym = -1;     ///< Symbol: its index in Plan::symbols
    bool first = false;   ///< Symbol: its first occurrence (binds it; later ones compare)
    int64_t min = 0;      ///< Symbol: its minimum (not enforced when <= 2)
    int64_t max = -1;     ///< Symbol: its maximum, -1 when unbounded
    std::vector<std::pair<int64_t, std::vector<int32_t>>> poly;  ///< Poly: sum of coef * product of symbols
  };

  struct Input {
    uint32_t slot;
    std::string name;
    bool has_default = false;
    c10::IValue default_value;
    const Argument* meta = nullptr;  ///< the placeholder's tensor_meta, if recorded
    bool has_spec = false;           ///< meta["input_spec"]: dtype and sizes it was exported for
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    std::vector<DimCheck> dims;
  };

  struct Frame {
    std::vector<c10::IValue> slots;
    std::vector<c10::IValue> stack;
    std::vector<at::Tensor> outs;       ///< by Instr::managed; undefined until learned
    WrittenGeometry written;            ///< the current call's written tensors (policy.h), empty between calls
    std::vector<c10::Storage> buffers;  ///< by Instr::buffer
    std::vector<int64_t> signature;     ///< input types the outs were learned for (input_signature)
    /// An op's result shared storage with an argument although the planner
    /// assumed it would not: this frame runs unplanned until the input types change.
    bool unplanned = false;
    std::vector<const void*> arg_storages, result_storages;  ///< scratch of the storage checks
    std::vector<int64_t> scratch_signature;
  };

  std::vector<Instr> instrs;
  std::vector<Input> inputs;
  /// The symbols of the inputs' specs, where each first occurs (input, dim).
  struct Symbol {
    std::string name;
    size_t input = 0, dim = 0;
  };
  std::vector<Symbol> symbols;
  Operand output;
  uint32_t num_slots = 0;
  uint32_t num_managed = 0;  ///< instructions writing into planned buffers
  uint32_t num_buffers = 0;  ///< storages they share

  /// Compiles `graph` (Note [Runtime plan], Note [Memory planning] in
  /// compile.cpp). `graph` must outlive the plan (instructions point at its
  /// nodes and metadata); the tensors are shared, not copied. Throws FormatError
  /// naming the node for what the runtime cannot run. O(nodes + argument size).
  static std::unique_ptr<Plan> compile(const Graph& graph, const std::vector<NamedTensor>& tensors,
                                       const ModuleOptions& options);

  /// Runs the plan on `args` (moved from). run.cpp.
  c10::IValue run(std::vector<c10::IValue>& args) const;

  /// "a Tensor", "an int", ...: a value's kind for error messages.
  static std::string describe(const c10::IValue& v);
  /// A number as the 0-dim wrapped-number tensor Python's arithmetic makes
  /// (an int, float or bool; the schema wants a Tensor).
  static at::Tensor wrapped_number(const c10::IValue& v);
  static at::Tensor wrapped_number(const Argument& a);

  /// The typed list of a list operand (IntList ... OptTensorList), its items
  /// produced by `eval`; an Error naming the item's kind when one does not fit.
  /// The compiler folds constant lists with it, the executor builds the rest.
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
  c10::IValue eval(const Operand& o, Frame& f) const;
  void run_primitive(const Instr& in, Frame& f) const;
  void check_inputs(const std::vector<c10::IValue>& args) const;
  void check_exported_inputs(const std::vector<c10::IValue>& args) const;
  void learn_out(const Instr& in, Frame& f, const c10::IValue& result) const;
  bool run_fast(const Instr& in, Frame& f) const;
  const at::Tensor* tensor_operand(const Operand& o, Frame& f) const;
  std::unique_ptr<Frame> take_frame() const;
  void give_frame(std::unique_ptr<Frame> f) const;

  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Frame>> pool_;
};

}  // namespace fxcpp::torch
