// The operator policy for loaded files (Note [What a file may make the runtime
// do] in fxcpp/torch/policy.h) and the name checks of Note [Names a file may
// use] (src/torch/load.cpp): crafted files that would write files, read heap
// memory or corrupt it are refused unless trusted; the allow-list and the hard
// refusals agree; the opt-in loads and runs a harmless refused operator.
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <algorithm>
#include <set>

#include "archive_records.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/policy.h"

namespace fxcpp::torch {
namespace {

const std::string kFixture = std::string(FXCPP_TORCH_FIXTURE_DIR) + "/small_v1.fxpt";

Argument N(Node* n) { return Argument::node(n); }
Argument I(int64_t v) { return Argument::integer(v); }
Argument L(std::vector<Argument> items) { return Argument::list(std::move(items)); }

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "fxcpp_policy_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    EXPECT_NE(::mkdtemp(buf.data()), nullptr);
    path = buf.data();
  }
  ~TempDir() {
    for (const char* f : {"/marker", "/data.bin", "/model.fxpt"}) std::remove((path + f).c_str());
    ::rmdir(path.c_str());
  }
};

// The file's bytes, or its FormatError ("" when it loads).
std::string load_error(const std::string& bytes, LoadOptions options = {}) {
  try {
    Module m = load_from_buffer(bytes.data(), bytes.size(), options);
    return "";
  } catch (const FormatError& e) {
    return e.what();
  }
}

void expect_refused(const std::string& bytes, const std::string& op, const std::string& why) {
  std::string err = load_error(bytes);
  ASSERT_FALSE(err.empty()) << op << " loaded";
  EXPECT_NE(err.find("calls " + op + ", which a file from an untrusted source may not call (" + why), std::string::npos)
      << err;
  EXPECT_NE(err.find("load it with trusted=True (C++: LoadOptions::trusted = true)"), std::string::npos) << err;
}

// x -> copy_(from_file(marker, shared=True, 4), x): writes x into `marker`.
std::string from_file_writer(const std::string& marker) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* f = g.call_function(aten_op("aten::from_file"), {Argument::string(marker), Argument::boolean(true), I(4)});
  Node* c = g.call_function(aten_op("aten::copy_"), {N(f), N(x)});
  g.output(N(c));
  return save_to_buffer(g, {});
}

TEST(Policy, FromFileWriterIsRefusedAndWritesNothing) {
  TempDir dir;
  std::string marker = dir.path + "/marker";
  std::string bytes = from_file_writer(marker);
  expect_refused(bytes, "aten::from_file", "it reads or writes files");
  // From a path and through read_file too.
  std::string path = dir.path + "/model.fxpt";
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_THROW(load(path), FormatError);
  EXPECT_THROW(read_file(path), FormatError);
  EXPECT_FALSE(exists(marker));
}

TEST(Policy, AsStridedLoadsAndItsGuardRefusesAHugeOffset) {
  // as_strided is allowed (core-ATen exports of convnext and swin call it); its
  // argument guard keeps the view inside the elements of its input, so a file
  // with an offset of 2^62 loads and its call is refused (Note [Argument guards]).
  Graph g;
  Node* x = g.placeholder("x");
  Node* v = g.call_function(aten_op("aten::as_strided"), {N(x), L({I(4)}), L({I(1)}), I(int64_t(1) << 62)});
  g.output(N(v));
  const std::string bytes = save_to_buffer(g, {});
  Module m = load_from_buffer(bytes.data(), bytes.size());
  try {
    m.forward({at::randn({6})});
    ADD_FAILURE() << "an as_strided view outside its input ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reaches outside the elements of its input"), std::string::npos) << e.what();
  }
  EXPECT_NE(argument_guard(*as_aten_op(aten_op("aten::as_strided"))), nullptr);
  EXPECT_FALSE(hard_refusal(as_aten_op(aten_op("aten::as_strided_"))->handle.schema()).empty());
}

TEST(Policy, AFailedOutCallLeavesItsWrittenTensorAsItWas) {
  // Note [A failed call leaves its written tensors as they were]: linear.out
  // into a loaded bias resizes it to the result's [2, 3] before growing its
  // storage, which cannot grow (the file's record): the call throws, and the
  // bias must keep its [3] so that the next call reads inside its storage (it
  // used to read and write past it: heap corruption). Mapped and read.
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("lin.weight");
  Node* b = g.get_attr("lin.bias");
  Node* y = g.call_function(aten_op("aten::linear.out"), {N(x), N(w), N(b)}, {{"out", N(b)}});
  Node* z = g.call_function(aten_op("aten::add.Tensor"), {N(y), N(b)});
  g.output(N(z));
  std::vector<NamedTensor> tensors(2);
  tensors[0].name = "lin.weight";
  tensors[0].tensor = at::randn({3, 4});
  tensors[1].name = "lin.bias";
  tensors[1].tensor = at::randn({3});
  const std::string bytes = save_to_buffer(g, tensors);
  TempDir dir;
  const std::string path = dir.path + "/model.fxpt";
  std::ofstream(path, std::ios::binary) << bytes;
  for (bool mmap : {true, false}) {
    LoadOptions options;
    options.mmap = mmap;
    Module m = load(path, options);
    for (int call = 0; call < 3; ++call) {
      EXPECT_THROW(m.forward({at::randn({2, 4})}), Error) << "call " << call << (mmap ? ", mapped" : ", read");
      const at::Tensor* found = m.find_tensor("lin.bias");
      ASSERT_NE(found, nullptr);
      const at::Tensor& bias = *found;
      ASSERT_EQ(bias.sizes(), c10::IntArrayRef({3})) << "call " << call;
      EXPECT_LE(static_cast<size_t>(bias.numel() * bias.element_size()), bias.storage().nbytes());
    }
  }
}

TEST(Policy, UncheckedSparseTensorIsRefused) {
  Graph g;
  Node* idx = g.placeholder("indices");
  Node* val = g.placeholder("values");
  Node* s = g.call_function(aten_op("aten::_sparse_coo_tensor_unsafe"), {N(idx), N(val), L({I(2)})});
  Node* d = g.call_function(aten_op("aten::to_dense"), {N(s)});
  g.output(N(d));
  expect_refused(save_to_buffer(g, {}), "aten::_sparse_coo_tensor_unsafe", "it takes raw storages");
}

TEST(Policy, UninitialisedMemoryAndUnlistedOperatorsAreRefused) {
  Graph g;
  Node* e = g.call_function(aten_op("aten::empty.memory_format"), {L({I(2), I(3)})});
  g.output(N(e));
  expect_refused(save_to_buffer(g, {}), "aten::empty.memory_format", "it returns uninitialised memory");
  Graph h;
  Node* x = h.placeholder("x");
  Node* y = h.call_function(aten_op("aten::to_dense"), {N(x)});
  h.output(N(y));
  expect_refused(save_to_buffer(h, {}), "aten::to_dense", "it is not on the list");
}

TEST(Policy, TrustedFilesMayCallAnything) {
  TempDir dir;
  // from_file reading a file we wrote (not shared: nothing is written).
  std::string data = dir.path + "/data.bin";
  float values[4] = {1.5f, -2.f, 3.25f, 0.f};
  std::ofstream(data, std::ios::binary).write(reinterpret_cast<const char*>(values), sizeof values);
  Graph g;
  Node* f = g.call_function(aten_op("aten::from_file"), {Argument::string(data), Argument::boolean(false), I(4)});
  Node* e = g.call_function(aten_op("aten::empty.memory_format"), {L({I(2), I(3)})});
  Node* s = g.call_function(aten_op("aten::size.int"), {N(e), I(1)});
  g.output(Argument::tuple({N(f), N(s)}));
  std::string bytes = save_to_buffer(g, {});
  EXPECT_FALSE(load_error(bytes).empty());
  LoadOptions trusted;
  trusted.trusted = true;
  for (bool plan : {true, false}) {
    trusted.plan_memory = plan;
    Module m = load_from_buffer(bytes.data(), bytes.size(), trusted);
    for (int rep = 0; rep < 2; ++rep) {
      auto out = m.forward({}).toTupleRef().elements();
      EXPECT_TRUE(at::equal(out[0].toTensor(), at::from_blob(values, {4}, at::kFloat)));
      EXPECT_EQ(out[1].toInt(), 3);
    }
  }
}

TEST(Policy, EnumerationsMustBeValuesOfTheirEnumeration) {
  // view.dtype(-5) kills the process with SIGFPE; scalar_tensor(dtype=200) reads past a table.
  Graph a;
  Node* x = a.placeholder("x");
  a.output(N(a.call_function(aten_op("aten::view.dtype"), {N(x), I(-5)})));
  LoadOptions trusted;
  trusted.trusted = true;
  for (const LoadOptions& o : {LoadOptions{}, trusted}) {
    std::string err = load_error(save_to_buffer(a, {}), o);
    EXPECT_NE(err.find("argument 'dtype' of aten::view.dtype is -5, which is not a ScalarType"), std::string::npos)
        << err;
  }
  Graph b;
  b.output(N(b.call_function(aten_op("aten::scalar_tensor"), {Argument::real(1.0)}, {{"dtype", I(200)}})));
  EXPECT_NE(load_error(save_to_buffer(b, {})).find("is 200, which is not a ScalarType"), std::string::npos);
  // A constant of another enumeration is refused (float64 is 7, which 2.x also numbers Layout::Jagged).
  Graph c;
  c.output(N(c.call_function(aten_op("aten::zeros"), {L({I(2)})},
                             {{"layout", Argument::foreign(torch_constant(TorchConstant::Kind::Dtype, "float64"))}})));
  EXPECT_NE(load_error(save_to_buffer(c, {})).find("is the float64 constant, which is not a Layout"), std::string::npos);
  Graph c2;  // strided is 0, also uint8's number
  c2.output(N(c2.call_function(aten_op("aten::scalar_tensor"), {Argument::real(1.0)},
                               {{"dtype", Argument::foreign(torch_constant(TorchConstant::Kind::Layout, "strided"))}})));
  EXPECT_NE(load_error(save_to_buffer(c2, {}), trusted).find("is the strided constant, which is not a ScalarType"),
            std::string::npos);
  // A dtype the graph computes: only from getattr(tensor, 'dtype') unless trusted.
  Graph d;
  Node* y = d.placeholder("y");
  Node* k = d.call_function(primitive("operator.add"), {I(2), I(3)});
  d.output(N(d.call_function(aten_op("aten::to.dtype"), {N(y), N(k)})));
  std::string bytes = save_to_buffer(d, {});
  EXPECT_NE(load_error(bytes).find("is computed by node 'add'"), std::string::npos) << load_error(bytes);
  EXPECT_EQ(load_error(bytes, trusted), "");
  // What files legitimately hold loads and runs: a valid int, a tagged constant, a dtype from getattr.
  Graph e;
  Node* z = e.placeholder("z");
  Node* dt = e.call_function(primitive("getattr"), {N(z), Argument::string("dtype")});
  Node* v1 = e.call_function(aten_op("aten::to.dtype"), {N(z), I(static_cast<int64_t>(at::kDouble))});
  Node* v2 = e.call_function(aten_op("aten::to.dtype"), {N(v1), N(dt)});
  Node* v3 = e.call_function(aten_op("aten::zeros"), {L({I(2)})},
                             {{"dtype", Argument::foreign(torch_constant(TorchConstant::Kind::Dtype, "int64"))}});
  e.output(Argument::tuple({N(v2), N(v3)}));
  bytes = save_to_buffer(e, {});
  ASSERT_EQ(load_error(bytes), "");
  Module m = load_from_buffer(bytes.data(), bytes.size());
  auto out = m.forward({at::arange(3, at::kFloat)}).toTupleRef().elements();
  EXPECT_EQ(out[0].toTensor().scalar_type(), at::kFloat);
  EXPECT_EQ(out[1].toTensor().scalar_type(), at::kLong);
}

TEST(Policy, FixtureLoadsByDefault) {
  Module m = load(kFixture);
  EXPECT_GT(m.num_instructions(), 0u);
  auto [graph, tensors] = read_file(kFixture);
  EXPECT_EQ(tensors.size(), 5u);
}

TEST(Policy, ListAndHardRefusalsAgree) {
  auto& dispatcher = c10::Dispatcher::singleton();
  size_t listed = 0;
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    auto handle = dispatcher.findSchema(name);
    if (!handle) continue;
    bool on_list = on_allow_list(name);
    std::string hard = hard_refusal(handle->schema());
    // Nothing the list names is hit by a hard refusal: the list was derived
    // with them (scripts/gen_allowed_ops.py mirrors them).
    EXPECT_TRUE(!on_list || hard.empty()) << name << " is allow-listed but refused: " << hard;
    listed += on_list;
    // A private operator is allowed only by an explicit entry.
    const std::string base = name.name.substr(name.name.find("::") + 2);
    if (on_list && base[0] == '_') {
      const auto& entries = allow_list_entries();
      EXPECT_TRUE(std::find(entries.begin(), entries.end(), name.name) != entries.end() ||
                  std::find(entries.begin(), entries.end(),
                            name.name + "." + (name.overload_name.empty() ? "default" : name.overload_name)) !=
                      entries.end())
          << name;
    }
  }
  EXPECT_GT(listed, 150u);
  for (const std::string& e : allow_list_entries()) EXPECT_EQ(e.rfind("aten::", 0), 0u) << e;
  // The hard refusals hold whatever the list says.
  for (const char* op : {"aten::from_file", "aten::as_strided_", "aten::as_strided_scatter",
                         "aten::set_.source_Storage_storage_offset", "aten::set_.source_Storage",
                         "aten::_sparse_coo_tensor_unsafe", "aten::sparse_coo_tensor.indices", "aten::to_sparse",
                         "aten::_indices", "aten::quantize_per_tensor", "aten::empty.memory_format",
                         "aten::empty_strided", "aten::new_empty", "aten::empty_like", "aten::resize_",
                         "aten::max_pool2d_with_indices_backward"}) {
    const AtenOp* a = as_aten_op(aten_op(op));
    ASSERT_NE(a, nullptr);
    EXPECT_FALSE(hard_refusal(a->handle.schema()).empty()) << op;
    EXPECT_FALSE(refusal_reason(*a).empty()) << op;
  }
  // Storage arguments are refused by type, whatever the name.
  size_t storage_ops = 0;
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    auto handle = dispatcher.findSchema(name);
    if (!handle) continue;
    for (const auto& arg : handle->schema().arguments())
      if (arg.type()->kind() == c10::TypeKind::StorageType) {
        EXPECT_FALSE(hard_refusal(handle->schema()).empty()) << name;
        ++storage_ops;
      }
  }
  EXPECT_GT(storage_ops, 0u);
  c10::FunctionSchema renamed("aten::harmless_name", "", {c10::Argument("s", c10::StorageType::get())},
                              {c10::Argument("r", c10::TensorType::get())});
  EXPECT_EQ(hard_refusal(renamed), "it takes a raw Storage");
}

TEST(Policy, AllowedOperatorsAreWhatFilesMayCall) {
  std::vector<std::string> ops = allowed_operators();
  std::set<std::string> set(ops.begin(), ops.end());
  EXPECT_EQ(set.size(), ops.size());
  for (const char* want : {"aten::conv2d", "aten::add.Tensor", "aten::relu", "aten::linear", "aten::_softmax",
                           "aten::max_pool2d_with_indices", "aten::size.int"})
    EXPECT_TRUE(set.count(want)) << want;
  // Off the list: what a refusal hits, what nothing lowers to, and what misbehaved when probed
  // (scripts/gen_allowed_ops.py, EXCLUDED).
  EXPECT_TRUE(set.count("aten::as_strided"));  // behind its view guard
  for (const char* refused : {"aten::from_file", "aten::as_strided_", "aten::empty.memory_format", "aten::copy_",
                              "aten::_sparse_coo_tensor_unsafe", "aten::to_dense", "aten::grid_sampler_2d",
                              "aten::_local_scalar_dense", "aten::_embedding_bag",
                              "aten::reflection_pad1d", "aten::reflection_pad2d"})
    EXPECT_FALSE(set.count(refused)) << refused;
  // Each resolves, and a file calling it passes the policy.
  for (const std::string& q : ops) {
    const AtenOp* a = as_aten_op(aten_op(q));
    ASSERT_NE(a, nullptr) << q;
    EXPECT_EQ(a->qualified, q);
    EXPECT_EQ(refusal_reason(*a), "") << q;
  }
}

TEST(Policy, BatchNormKernelsRunUntrustedBehindTheirGuard) {
  // Note [Argument guards]: the batch-norm kernels read weight, bias and the
  // running statistics as input.size(1) elements each, unchecked. A file from
  // an untrusted source may call them (core-ATen exports do), and the guard
  // refuses every argument the kernel would read out of bounds, naming it,
  // before the kernel runs, planned or not; valid calls give what the
  // batch_norm composite (which checks sizes) gives.
  struct Variant {
    const char* op;
    bool stats, training, has_training_arg;
  };
  const std::vector<Variant> variants = {
      {"aten::native_batch_norm", true, false, true},
      {"aten::_native_batch_norm_legit", true, false, true},
      {"aten::_native_batch_norm_legit.no_stats", false, true, true},
      {"aten::_native_batch_norm_legit_no_training", true, false, false},
  };
  size_t ran = 0;
  for (const Variant& v : variants) {
    std::string qualified = v.op, base = qualified.substr(0, qualified.find('.'));
    std::string overload = qualified.find('.') == std::string::npos ? "" : qualified.substr(qualified.find('.') + 1);
    if (!c10::Dispatcher::singleton().findSchema({base, overload})) continue;  // not on LibTorch 1.13
    ++ran;
    Graph g;
    Node* x = g.placeholder("x");
    Node* w = g.placeholder("w");
    Node* b = g.placeholder("b");
    std::vector<Argument> args = {N(x), N(w), N(b)};
    if (v.stats) {
      args.push_back(N(g.placeholder("m")));
      args.push_back(N(g.placeholder("v")));
    }
    if (v.has_training_arg) args.push_back(Argument::boolean(v.training));
    args.push_back(Argument::real(0.1));
    args.push_back(Argument::real(1e-5));
    g.output(N(g.call_function(aten_op(qualified), std::move(args))));
    std::string bytes = save_to_buffer(g, {});
    ASSERT_EQ(load_error(bytes), "") << qualified;
    for (bool plan : {true, false}) {
      LoadOptions options;
      options.plan_memory = plan;
      Module m = load_from_buffer(bytes.data(), bytes.size(), options);
      auto run = [&](at::Tensor input, at::Tensor wt, at::Tensor bs, at::Tensor mean, at::Tensor var) {
        std::vector<c10::IValue> in = {input, wt, bs};
        if (v.stats) {
          in.push_back(mean);
          in.push_back(var);
        }
        return m.forward(in).toTupleRef().elements()[0].toTensor();
      };
      auto vec = [](int64_t n) { return at::rand({n}) + 0.5; };
      at::Tensor x4 = at::randn({2, 4, 3, 3});
      for (int i = 0; i < 2; ++i) {
        at::Tensor wt = vec(4), bs = vec(4), mean = vec(4), var = vec(4);
        at::Tensor want = v.stats ? at::batch_norm(x4, wt, bs, mean, var, false, 0.1, 1e-5, false)
                                  : at::batch_norm(x4, wt, bs, {}, {}, true, 0.1, 1e-5, false);
        EXPECT_TRUE(at::allclose(run(x4, wt, bs, mean, var), want, 1e-5, 1e-5)) << qualified << " plan " << plan;
      }
      struct Bad {
        const char* arg;
        at::Tensor x, w, b, m, v;
        const char* says;
      };
      at::Tensor ok = vec(4);
      std::vector<Bad> bad = {
          {"weight", x4, vec(1), ok, ok, ok, "has shape [1]"},
          {"weight", x4, vec(7), ok, ok, ok, "has shape [7]"},
          {"bias", x4, ok, vec(0), ok, ok, "has shape [0]"},
          {"weight", x4, vec(4).reshape({4, 1}), ok, ok, ok, "has shape [4, 1]"},
          {"weight", at::randn({2, 1 << 16, 1}), at::ones({1}).expand({1 << 16}), vec(1 << 16), vec(1 << 16),
           vec(1 << 16), "has stride 0"},
          {"input", at::randn({4}), ok, ok, ok, ok, "has shape [4]"},
      };
      if (v.stats) {
        bad.push_back({"running_mean", x4, ok, ok, vec(2), ok, "has shape [2]"});
        bad.push_back({"running_var", at::randn({2, 1 << 16, 1}), vec(1 << 16), vec(1 << 16), vec(1 << 16), vec(0),
                       "has shape [0]"});
        bad.push_back({"running_var", x4, ok, ok, ok, vec(8).slice(0, 0, 8, 2), "has stride 2"});
      }
      for (const Bad& c : bad) {
        for (int i = 0; i < 2; ++i) {
          try {
            run(c.x, c.w, c.b, c.m, c.v);
            ADD_FAILURE() << qualified << ": " << c.arg << " " << c.says << " ran";
          } catch (const Error& e) {
            std::string what = e.what();
            EXPECT_NE(what.find("argument '" + std::string(c.arg) + "' " + c.says), std::string::npos) << what;
            EXPECT_NE(what.find(std::string(c.arg) == "input" ? "at least 2 dimensions" : "1-D tensor of "),
                      std::string::npos)
                << what;
            EXPECT_NE(what.find(base), std::string::npos) << what;  // the node and its operator
          }
        }
      }
    }
  }
  EXPECT_GE(ran, 1u);
}

// ---- names (Note [Names a file may use]) ----------------------------------------------

using test_archive::Records;
using test_archive::read_records;
using test_archive::write_archive;

// The fixture with every `from` in graph.json replaced by `to`.
std::string edited_fixture(const std::string& from, const std::string& to) {
  Records r = read_records(kFixture);
  for (auto& kv : r.items) {
    if (kv.first != "graph.json") continue;
    std::string& s = kv.second;
    size_t pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    for (; pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
  }
  return write_archive(r);
}

TEST(Names, StringsThatWouldBecomePythonSourceAreRefused) {
  const std::string inject = "x=__import__('os').system('touch /tmp/fxcpp_pwned')";
  struct Case {
    const char* what;
    std::string from, to, error;
  };
  std::vector<Case> cases = {
      {"placeholder target", "\"target\":\"x\"", "\"target\":\"" + inject + "\"",
       "placeholder target 'x=__import__(\\x27os\\x27).system(\\x27touch /tmp/fxcpp_pwned\\x27)' is not a Python identifier"},
      {"placeholder keyword", "\"target\":\"x\"", "\"target\":\"lambda\"", "placeholder target 'lambda' is not"},
      {"node name", "\"name\":\"relu_default\"", "\"name\":\"relu default\"", "node name 'relu default' is not"},
      {"tensor name", "conv.weight", "conv.weight\\\")+exec(\\\"1", "is not a module path"},
      {"tensor name with an empty part", "conv.weight", "conv..weight", "is not a module path"},
      {"class name", "\"class_name\":\"GraphModule\"", "\"class_name\":\"G(M)\"", "class_name 'G(M)' is not"},
      {"kwargs key", "\"kwargs\":{}", "\"kwargs\":{\"a b\":1}", "kwargs key 'a b' is not"},
      {"invalid UTF-8", "\"class_name\":\"GraphModule\"", "\"class_name\":\"G\xff\"", "malformed graph.json"},
  };
  for (auto& c : cases) {
    std::string err = load_error(edited_fixture(c.from, c.to));
    EXPECT_NE(err.find(c.error), std::string::npos) << c.what << ": got '" << err << "'";
    // Trusting a file does not lift the name checks.
    LoadOptions trusted;
    trusted.trusted = true;
    EXPECT_FALSE(load_error(edited_fixture(c.from, c.to), trusted).empty()) << c.what;
  }
  // What fxcpp writes passes: numeric path parts, leading underscores, starred placeholders,
  // and module names with '-' (torchvision's regnets: "trunk_output.block1-0").
  EXPECT_EQ(load_error(edited_fixture("conv.weight", "block1-0.weight")), "");
  EXPECT_EQ(load_error(edited_fixture("\"target\":\"x\"", "\"target\":\"*args\"")), "");
  EXPECT_EQ(load_error(edited_fixture("conv.weight", "layers.0._conv.weight")), "");
}

}  // namespace
}  // namespace fxcpp::torch
