// Runtime targets: operator lookup, primitives and constants (Note [Runtime targets]).
#include <gtest/gtest.h>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/graph.h"
#include "fxcpp/torch/ops.h"

namespace fxcpp::torch {
namespace {

TEST(AtenOp, ResolvesOverloadsAndPrintsLikeTorchFx) {
  Object add = aten_op("aten::add.Tensor");
  const AtenOp* op = as_aten_op(add);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->qualified, "aten::add.Tensor");
  EXPECT_EQ(op->python, "torch.ops.aten.add.Tensor");
  EXPECT_EQ(op->handle.schema().name(), "aten::add");
  EXPECT_EQ(op->handle.schema().overload_name(), "Tensor");
  // The default overload has three spellings, one object.
  EXPECT_TRUE(aten_op("aten::relu").is(aten_op("aten::relu.default")));
  EXPECT_EQ(as_aten_op(aten_op("aten::relu"))->python, "torch.ops.aten.relu.default");
  EXPECT_TRUE(add.is(aten_op("aten::add.Tensor")));
}

TEST(AtenOp, UnknownOperatorsAndMalformedNamesAreFormatErrors) {
  EXPECT_THROW(aten_op("aten::no_such_op"), FormatError);
  EXPECT_THROW(aten_op("aten::add.NoSuchOverload"), FormatError);
  for (const char* bad : {"", "::", "aten::", "add", "aten::add.", "aten::a b", "aten::add..x", "a-b::add"})
    EXPECT_THROW(aten_op(bad), FormatError) << bad;
  try {
    aten_op("aten::no_such_op");
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("aten::no_such_op"), std::string::npos);
  }
}

TEST(Primitive, ClosedSet) {
  Primitive p;
  EXPECT_TRUE(as_primitive(primitive("operator.getitem"), &p));
  EXPECT_EQ(p, Primitive::GetItem);
  EXPECT_TRUE(as_primitive(primitive("getattr"), &p));
  EXPECT_EQ(p, Primitive::GetAttr);
  EXPECT_TRUE(as_primitive(primitive("builtins.getattr"), &p));
  EXPECT_TRUE(as_primitive(primitive("operator.floordiv"), &p));
  EXPECT_EQ(p, Primitive::FloorDiv);
  EXPECT_THROW(primitive("os.system"), FormatError);
  EXPECT_THROW(primitive("operator.setitem"), FormatError);
  EXPECT_FALSE(as_primitive(aten_op("aten::relu"), &p));
}

TEST(TorchConstant, NamesRoundTrip) {
  for (const char* n : {"float32", "float64", "int64", "bool", "uint8", "bfloat16"})
    EXPECT_EQ(dtype_name(dtype_from_name(n)), n);
  EXPECT_THROW(dtype_from_name("float33"), FormatError);
  const TorchConstant* c = as_torch_constant(torch_constant(TorchConstant::Kind::Dtype, "float64"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->value.toInt(), static_cast<int64_t>(c10::ScalarType::Double));
  EXPECT_TRUE(as_torch_constant(torch_constant(TorchConstant::Kind::Device, "cpu"))->value.isDevice());
  EXPECT_THROW(torch_constant(TorchConstant::Kind::Device, "nonsense"), FormatError);
  EXPECT_THROW(torch_constant(TorchConstant::Kind::Layout, "jagged"), FormatError);
}

TEST(AtenOp, GraphsWithOperatorTargetsPrintAndGenerateCodeLikeTorchFx) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(aten_op("aten::add.Tensor"), {Argument::node(x), Argument::node(x)});
  Node* s = g.call_function(aten_op("aten::size.int"), {Argument::node(a), Argument::integer(0)});
  Node* m = g.call_function(primitive("operator.mul"), {Argument::node(s), Argument::integer(2)});
  g.output(Argument::tuple({Argument::node(a), Argument::node(m)}));
  // torch.fx 1.13 prints and generates this for the same graph built with
  // torch.ops.aten.* and operator.mul (tests/python/test_aten_runtime.py
  // checks the Python side against torch.fx).
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [num_users=1] = placeholder[target=x]\n"
            "    %add_tensor : [num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%x, %x), kwargs = {})\n"
            "    %size_int : [num_users=1] = call_function[target=torch.ops.aten.size.int](args = (%add_tensor, 0), kwargs = {})\n"
            "    %mul : [num_users=1] = call_function[target=operator.mul](args = (%size_int, 2), kwargs = {})\n"
            "    return (add_tensor, mul)");
  std::string src = python_code(g).src;
  EXPECT_NE(src.find("add_tensor = torch.ops.aten.add.Tensor(x, x);  x = None"), std::string::npos) << src;
  EXPECT_NE(src.find("mul = size_int * 2;  size_int = None"), std::string::npos) << src;
}

}  // namespace
}  // namespace fxcpp::torch
