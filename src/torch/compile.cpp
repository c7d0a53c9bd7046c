// The runtime's compiler: a Graph into a Plan (plan.h), with the memory
// planner (Note [Memory planning]). Note [Runtime plan] in fxcpp/torch/module.h.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <string_view>
#include <unordered_map>

#include "fxcpp/core/last_uses.h"
#include "plan.h"

namespace fxcpp::torch {

namespace {

using Operand = Plan::Operand;
using Instr = Plan::Instr;
using Input = Plan::Input;
using Attr = Plan::Attr;
using TensorTensorScalarOut = Plan::TensorTensorScalarOut;
using TensorTensorOut = Plan::TensorTensorOut;
using TensorScalarOut = Plan::TensorScalarOut;

class Compiler {
 public:
  // Note [Exported input checks] in pt2.cpp: meta["input_spec"] into Input::dims.
  void input_spec(const Argument& spec, Input& in, size_t index, const Node* n) {
    auto bad = [&](const char* what) { throw FormatError(where(n) + "malformed input_spec: " + what); };
    if (spec.kind() != ArgKind::Dict) bad("not a dict");
    for (const auto& kv : spec.pairs()) {
      if (!kv.first.is_string()) bad("a key is not a string");
      if (kv.first.as_string() == "dtype") {
        const TorchConstant* c = kv.second.kind() == ArgKind::Foreign ? as_torch_constant(kv.second.as_object()) : nullptr;
        if (!c || c->kind != TorchConstant::Kind::Dtype) bad("dtype is not a dtype");
        in.dtype = static_cast<c10::ScalarType>(c->value.toInt());
      } else if (kv.first.as_string() == "sizes") {
        if (!kv.second.is_sequence()) bad("sizes is not a sequence");
        for (const Argument& d : kv.second.items()) {
          Plan::DimCheck dc;
          if (d.kind() == ArgKind::Int) {
            dc.size = d.as_int();
          } else if (d.kind() == ArgKind::Tuple) {
            const auto& t = d.items();
            if (t.size() != 3 || !t[0].is_string()) bad("a symbol is not (name, min, max)");
            dc.kind = Plan::DimCheck::Kind::Symbol;
            dc.sym = symbol(std::string(t[0].as_string()), index, in.dims.size(), &dc.first);
            dc.min = t[1].kind() == ArgKind::Int ? t[1].as_int() : 0;
            dc.max = t[2].kind() == ArgKind::Int ? t[2].as_int() : -1;
          } else if (d.kind() == ArgKind::List) {
            dc.kind = Plan::DimCheck::Kind::Poly;
            for (const Argument& m : d.items()) {
              if (m.kind() != ArgKind::Tuple || m.items().size() != 2 || m.items()[0].kind() != ArgKind::Int ||
                  !m.items()[1].is_sequence())
                bad("a monomial is not (coefficient, symbols)");
              std::vector<int32_t> syms;
              for (const Argument& x : m.items()[1].items()) {
                if (!x.is_string()) bad("a symbol name is not a string");
                auto it = symbol_index_.find(std::string(x.as_string()));
                if (it == symbol_index_.end()) {
                  syms.clear();
                  dc.kind = Plan::DimCheck::Kind::Static;
                  dc.size = -1;  // a symbol no input binds: not checked
                  break;
                }
                syms.push_back(it->second);
              }
              if (dc.kind != Plan::DimCheck::Kind::Poly) break;
              dc.poly.emplace_back(m.items()[0].as_int(), std::move(syms));
            }
          } else {
            dc.size = -1;  // not checked
          }
          in.dims.push_back(std::move(dc));
        }
      }
    }
    in.has_spec = true;
  }

  int32_t symbol(const std::string& name, size_t input, size_t dim, bool* first) {
    auto [it, added] = symbol_index_.emplace(name, static_cast<int32_t>(plan_.symbols.size()));
    if (added) plan_.symbols.push_back({name, input, dim});
    *first = added;
    return it->second;
  }

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
          Input in;
          in.slot = new_slot(n);
          in.name = std::string(n->name());
          if (!n->args().empty()) {
            in.has_default = true;
            in.default_value = untyped(n->args().front(), n);
            if (in.default_value.isNone() && !n->args().front().is_none())
              throw FormatError(where(n) + "a placeholder default must be a constant");
          }
          if (n->has_meta())
            for (auto& kv : n->meta()) {
              if (kv.first == "tensor_meta") in.meta = &kv.second;
              if (kv.first == "input_spec") input_spec(kv.second, in, plan_.inputs.size(), n);
            }
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
      for (const c10::Argument& ret : schema.returns()) annotated |= !alias_sets(ret.alias_info()).empty();
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
        // Note [Alias sets of container returns]: `Tensor(a)[]` (split_with_sizes, unbind,
        // chunk, ...) carries its set on the list's element, not on the list: the sets are
        // collected through contained types, on both sides.
        const std::vector<c10::Symbol> ret_sets = alias_sets(ret.alias_info());
        if (ret_sets.empty()) continue;
        for (size_t a = 0; a < schema.arguments().size() && a < in.operands.size(); ++a) {
          const std::vector<c10::Symbol> arg_sets = alias_sets(schema.arguments()[a].alias_info());
          if (arg_sets.empty()) continue;
          bool shares = false;
          for (auto& r : ret_sets)
            for (auto& g : arg_sets) shares |= r == g || is_wildcard(r) || is_wildcard(g);
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

  // The alias sets an argument or return is annotated with ("a" in `Tensor(a)`, "*"), its own
  // and its contained types' (`Tensor(a)[]`: the set is on the element). Empty: no annotation.
  static std::vector<c10::Symbol> alias_sets(const c10::AliasInfo* info) {
    std::vector<c10::Symbol> out;
    auto rec = [&](const c10::AliasInfo& ai, auto&& self) -> void {
      for (const c10::Symbol& sym : ai.beforeSets()) out.push_back(sym);
      for (const c10::AliasInfo& c : ai.containedTypes()) self(c, self);
    };
    if (info) rec(*info, rec);
    return out;
  }
  static bool is_wildcard(const c10::Symbol& sym) { return sym.toUnqualString() == std::string("*"); }

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
      if (o.kind == Operand::Kind::Slot && base->kind() == K::TensorType) {
        o.kind = Operand::Kind::SlotToTensor;
        const AtenOp* op = as_aten_op(n->target().fn());
        o.wrap_numbers = !op || op->numbers_as_tensors;  // Note [Numbers as tensors]
      }
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
        // treats like a Python scalar) for the operators of Note [Numbers as
        // tensors]; so does the runtime, once, here, and refuses it elsewhere.
        if (a.kind() == ArgKind::Int || a.kind() == ArgKind::Double || a.kind() == ArgKind::Bool) {
          const AtenOp* op = as_aten_op(n->target().fn());
          if (op && !op->numbers_as_tensors)
            throw FormatError(where(n) + "passes a number as '" + pname + "', which has type Tensor, to " +
                              op->qualified + ", which takes no number for a tensor (nor does torch's Python "
                              "binding): pass a tensor, or call an overload that takes a Scalar");
          o.value = Plan::wrapped_number(a);
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
      o.value = Plan::build_list(o, [](const Operand& i) { return i.value; });
      o.kind = Operand::Kind::Const;
      o.items.clear();
    }
    return o;
  }

 private:
  std::unordered_map<std::string, int32_t> symbol_index_;
  const Graph& graph_;
  Plan& plan_;
  std::vector<uint32_t> slots_;
  std::vector<const Node*> slot_nodes_;  ///< by slot
  uint32_t next_slot_ = 0;
  std::unordered_map<std::string, const at::Tensor*> tensors_;
};

}  // namespace

// Note [Plans are built from real tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Compiling a plan makes tensors through the dispatcher (numbers that an
// ATen overload takes as Tensors become wrapped-number tensors, once). The
// caller's thread may have Python dispatch modes active: torch.compile calls
// its backends under a FakeTensorMode, and a TorchDispatchMode or
// functionalization may be on. Those would intercept the calls and hand back
// fake tensors with no data, which the plan would keep as constants and fail
// on ("data is not allocated yet") at the first run. So compiling excludes
// the keys through which such modes see calls: a plan's constants are real
// CPU tensors whatever the caller's modes. Running a plan leaves the caller's
// modes as they are: the ops then dispatch as eager ones would.
std::unique_ptr<Plan> Plan::compile(const Graph& graph, const std::vector<NamedTensor>& tensors,
                                    const ModuleOptions& options) {
  c10::impl::ExcludeDispatchKeyGuard no_modes(c10::DispatchKeySet({
      c10::DispatchKey::Python,
      c10::DispatchKey::PythonTLSSnapshot,
      c10::DispatchKey::Functionalize,
      c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
      c10::DispatchKey::FuncTorchDynamicLayerBackMode,
  }));
  auto plan = std::make_unique<Plan>();
  Compiler(graph, tensors, *plan).compile(options);
  return plan;
}

}  // namespace fxcpp::torch
