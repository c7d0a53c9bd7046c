// One fuzz case of the loader: bytes in, outcome class out (Note [Loader
// fuzzing] in tests/cpp_torch/load_test.cpp). Shared by the libFuzzer target
// (fxpt_fuzzer.cpp), the corpus replay and the structure-aware fuzz of the
// C++ tests. Header-only; needs fxcpp_torch.
//
// A case loads the bytes with load_from_buffer (default options: an untrusted
// file) and runs the module on inputs made from its placeholders'
// tensor_meta. Every outcome must be one of:
// * Refused: load threw FormatError with a message (a malformed file, a
//   refused operator);
// * Failed: load succeeded, forward threw fxcpp::torch::Error (InputError, a
//   kernel refusing its arguments) with a message;
// * Ran: forward returned, twice (the second call takes the planned path),
//   and both results equal the unplanned runtime's (plan_memory = false)
//   unless the graph calls an operator whose result is not a function of its
//   inputs (random, uninitialised memory).
// Anything else (another exception type, an empty message, a disagreement)
// is reported as a Finding; a crash or a sanitizer report ends the process.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <string>
#include <vector>

#include "fxcpp/torch/module.h"

namespace fxcpp::torch::fuzz {

enum class Outcome { Refused, Failed, Ran };

/// The outcome of one case and its message (the error text, or "").
struct Result {
  Outcome outcome;
  std::string message;
};

/// Something no file may cause: an exception other than fxcpp::torch::Error,
/// an error without a message, results that disagree.
struct Finding : std::logic_error {
  using std::logic_error::logic_error;
};

inline const char* outcome_name(Outcome o) {
  return o == Outcome::Refused ? "refused" : o == Outcome::Failed ? "failed" : "ran";
}

// A small deterministic tensor of `sizes` and `dtype` (no random generator).
inline at::Tensor make_input(std::vector<int64_t> sizes, c10::ScalarType dtype) {
  int64_t numel = 1;
  bool small = true;
  for (int64_t s : sizes) {
    if (s < 0 || s > (int64_t(1) << 20)) small = false;
    else if (small && (numel *= s) > (int64_t(1) << 16)) small = false;
  }
  if (!small)  // keep the rank, not the size: the graph may then refuse it
    for (int64_t& s : sizes) s = s < 0 ? 1 : std::min<int64_t>(s, 4);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  at::Tensor base = (at::remainder(at::arange(n, at::kDouble), 7) - 3) / 4;
  if (dtype == c10::ScalarType::Bool) return at::remainder(at::arange(n, at::kLong), 2).to(at::kBool).reshape(sizes);
  if (c10::isIntegralType(dtype, false)) return at::remainder(at::arange(n, at::kLong), 5).to(dtype).reshape(sizes);
  if (c10::isFloatingType(dtype) || c10::isComplexType(dtype)) return base.to(dtype).reshape(sizes);
  return base.to(at::kFloat).reshape(sizes);
}

/// Inputs for `m`'s placeholders, from their tensor_meta (shape and dtype);
/// a placeholder without one gets a 1-element float tensor.
inline std::vector<c10::IValue> inputs_for(const Module& m) {
  std::vector<c10::IValue> out;
  for (Node* n : m.graph().nodes()) {
    if (n->op() != Op::Placeholder) continue;
    std::vector<int64_t> shape = {1};
    c10::ScalarType dtype = c10::ScalarType::Float;
    if (n->has_meta())
      for (auto& kv : n->meta()) {
        if (kv.first != "tensor_meta" || kv.second.kind() != ArgKind::Dict) continue;
        for (auto& [k, v] : kv.second.pairs()) {
          if (!k.is_string()) continue;
          if (k.as_string() == "shape" && v.is_sequence()) {
            shape.clear();
            for (auto& d : v.items()) shape.push_back(d.kind() == ArgKind::Int ? d.as_int() : 1);
          } else if (k.as_string() == "dtype" && v.kind() == ArgKind::Foreign) {
            if (const TorchConstant* c = as_torch_constant(v.as_object()))
              if (c->kind == TorchConstant::Kind::Dtype && c->value.isInt())
                dtype = static_cast<c10::ScalarType>(c->value.toInt());
          }
        }
      }
    out.push_back(make_input(shape, dtype));
  }
  return out;
}

// Exact equality of two results (NaN equals NaN; dtypes, shapes, structure).
inline bool same(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor &x = a.toTensor(), &y = b.toTensor();
    if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes()) return false;
    if (x.is_floating_point() || x.is_complex()) {
      at::Tensor both_nan = at::logical_and(at::isnan(x), at::isnan(y));
      return at::equal(at::where(both_nan, at::zeros_like(x), x), at::where(both_nan, at::zeros_like(y), y));
    }
    return at::equal(x, y);
  }
  if (a.isTuple() && b.isTuple()) {
    auto &p = a.toTupleRef().elements(), &q = b.toTupleRef().elements();
    if (p.size() != q.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
      if (!same(p[i], q[i])) return false;
    return true;
  }
  if (a.isList() && b.isList()) {
    auto p = a.toListRef(), q = b.toListRef();
    if (p.size() != q.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
      if (!same(p[i], q[i])) return false;
    return true;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto p = a.toGenericDict(), q = b.toGenericDict();
    if (p.size() != q.size()) return false;
    for (auto it = p.begin(), jt = q.begin(); it != p.end(); ++it, ++jt)
      if (!(it->key() == jt->key()) || !same(it->value(), jt->value())) return false;
    return true;
  }
  if (a.isDouble() && b.isDouble()) {
    double x = a.toDouble(), y = b.toDouble();
    return x == y || (x != x && y != y);
  }
  return a == b;
}

// Whether a result of `m` may differ between two runs on equal inputs.
inline bool nondeterministic(const Module& m) {
  static const char* const kWords[] = {"rand", "dropout", "bernoulli", "normal", "multinomial", "uniform",
                                       "poisson", "exponential", "geometric", "cauchy", "empty", "rrelu"};
  for (Node* n : m.graph().nodes()) {
    if (n->op() != Op::CallFunction) continue;
    const AtenOp* op = as_aten_op(n->target().fn());
    if (!op) continue;
    for (const char* w : kWords)
      if (op->qualified.find(w) != std::string::npos) return true;
  }
  return false;
}

/// Runs one case. Throws Finding for what no file may cause.
inline Result run_case(const void* data, size_t size) {
  auto message = [](const char* what, const std::string& text) {
    if (text.empty()) throw Finding(std::string(what) + " without a message");
    return text;
  };
  std::unique_ptr<Module> m;
  try {
    m = std::make_unique<Module>(load_from_buffer(data, size));
  } catch (const FormatError& e) {
    return {Outcome::Refused, message("FormatError", e.what())};
  } catch (const Error& e) {
    throw Finding(std::string("load threw an Error that is not a FormatError: ") + e.what());
  } catch (const std::exception& e) {
    throw Finding(std::string("load threw a non-fxcpp exception: ") + e.what());
  }
  std::vector<c10::IValue> in;
  c10::IValue first;
  try {
    in = inputs_for(*m);
    first = m->forward(in);
  } catch (const Error& e) {
    return {Outcome::Failed, message("Error", e.what())};
  } catch (const std::exception& e) {
    throw Finding(std::string("forward threw a non-fxcpp exception: ") + e.what());
  }
  if (nondeterministic(*m)) {
    try {
      m->forward(in);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      throw Finding(std::string("forward threw a non-fxcpp exception: ") + e.what());
    }
    return {Outcome::Ran, ""};
  }
  // The first call ran: the planned second call and the unplanned runtime
  // must give the same results.
  try {
    c10::IValue second = m->forward(in);
    LoadOptions eager;
    eager.plan_memory = false;
    Module u = load_from_buffer(data, size, eager);
    c10::IValue want = u.forward(in);
    if (!same(first, want) || !same(second, want))
      throw Finding("the planned runtime's results differ from the unplanned runtime's");
  } catch (const Finding&) {
    throw;
  } catch (const std::exception& e) {
    throw Finding(std::string("a forward that ran once failed on the planned path or unplanned: ") + e.what());
  }
  return {Outcome::Ran, ""};
}

}  // namespace fxcpp::torch::fuzz
