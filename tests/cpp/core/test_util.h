// Shared helpers for core tests: native stand-ins for Python callables.
#pragma once

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/graph.h"

namespace fxcpp::testing {

inline const NamedNative kAdd{"add", "operator.add", "add"};
inline const NamedNative kMul{"mul", "operator.mul", "mul"};
inline const NamedNative kNeg{"neg", "operator.neg", "neg"};
inline const NamedNative kGetitem{"getitem", "operator.getitem", "getitem"};
inline const NamedNative kRelu{"relu", "torch.relu", ""};
inline const NamedNative kCat{"cat", "torch.cat", ""};
inline const NamedNative kSum{"sum", "sum", ""};          // a builtin: global "sum"
inline const NamedNative kGetattr{"getattr", "getattr", ""};
inline const NamedNative kMyFn{"myFunc", "mymod.myFunc", ""};

inline Argument N(Node* n) { return Argument::node(n); }
inline Argument I(int64_t i) { return Argument::integer(i); }
inline Argument S(const std::string& s) { return Argument::string(s); }

}  // namespace fxcpp::testing
