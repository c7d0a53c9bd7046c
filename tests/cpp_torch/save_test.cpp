// fxcpp::torch::save: the C++ writer of the .fxpt format. The committed
// fixture (written by Python's fxcpp.aten.save) round-trips through C++
// load -> save -> load with the same graph.json, graph text and outputs;
// captured graphs (trace, from_torchscript) save, reload and run; graphs the
// format cannot hold are refused before anything is written.
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/remainder.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fxcpp/torch/capture.h"
#include "fxcpp/torch/module.h"

namespace fxcpp::torch {
namespace {

using Json = nlohmann::ordered_json;
const std::string kFixtures = FXCPP_TORCH_FIXTURE_DIR;

at::Tensor small_input(int64_t n) {
  return (at::remainder(at::arange(n * 3 * 8 * 8, at::kFloat).reshape({n, 3, 8, 8}), 7) - 3) / 4;
}

// A path in the temporary directory, removed when the test ends.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& stem)
      : path(::testing::TempDir() + "fxcpp_save_" + stem + "_" + std::to_string(::getpid()) + ".fxpt") {
    std::remove(path.c_str());
  }
  ~TempPath() { std::remove(path.c_str()); }
  bool exists() const { return std::ifstream(path).good(); }
};

Json document(const std::string& path) {
  Json j = Json::parse(graph_json(path));
  j.erase("producer");
  return j;
}

at::Tensor out_tensor(const c10::IValue& v) {
  if (v.isGenericDict()) return v.toGenericDict().at("out").toTensor();
  return v.toTensor();
}

TEST(Save, FixtureRoundTripsThroughCpp) {
  const std::string fixture = kFixtures + "/small_v1.fxpt";
  auto [graph, tensors] = read_file(fixture);
  TempPath out("fixture");
  save(*graph, tensors, out.path);

  // The same document Python wrote (but the producer), so the same graph
  // text and tensors after loading.
  EXPECT_EQ(document(out.path), document(fixture));
  Module a = load(fixture), b = load(out.path);
  EXPECT_EQ(a.graph().to_string(), b.graph().to_string());
  ASSERT_EQ(a.named_tensors().size(), b.named_tensors().size());
  for (size_t i = 0; i < a.named_tensors().size(); ++i) {
    EXPECT_EQ(a.named_tensors()[i].name, b.named_tensors()[i].name);
    EXPECT_EQ(a.named_tensors()[i].kind, b.named_tensors()[i].kind);
    EXPECT_TRUE(a.named_tensors()[i].tensor.equal(b.named_tensors()[i].tensor));
  }
  for (int64_t n : {1, 3})
    EXPECT_TRUE(out_tensor(a.forward({small_input(n)})).equal(out_tensor(b.forward({small_input(n)}))));

  // Module overload and the in-memory form write the same archive content.
  TempPath again("fixture_module");
  save(a, again.path);
  EXPECT_EQ(document(again.path), document(fixture));
  std::string bytes = save_to_buffer(*graph, tensors);
  Module c = load_from_buffer(bytes.data(), bytes.size());
  EXPECT_EQ(c.graph().to_string(), a.graph().to_string());
}

TEST(Save, CapturedGraphSavesReloadsAndRuns) {
  at::manual_seed(0);
  // Two parameters that share one storage (a tied weight and a view of it),
  // a constant made outside the function, a tuple output.
  at::Tensor w = at::randn({4, 3, 3, 3});
  at::Tensor w_view = w.view({4, 27});
  at::Tensor c = at::randn({4});
  TraceOptions opts;
  opts.named_tensors = {NamedTensor{"conv.weight", NamedTensor::Kind::Parameter, w, std::nullopt},
                        NamedTensor{"conv.weight_flat", NamedTensor::Kind::Buffer, w_view, std::nullopt}};
  auto fn = [&](const std::vector<at::Tensor>& in) {
    at::Tensor y = at::relu(at::conv2d(in[0], w, {}, 1, 1)) + c.view({1, 4, 1, 1});
    at::Tensor s = w_view.sum() * 2;
    return c10::IValue(std::make_tuple(y, s));
  };
  at::Tensor x = small_input(2);
  Traced t = trace(fn, {x}, opts);
  TempPath out("captured");
  save(*t.graph, t.tensors, out.path);

  Json doc = document(out.path);
  EXPECT_EQ(doc["storages"].size(), 2u) << doc["storages"].dump();  // w and w_view share one
  EXPECT_EQ(doc["tensors"].size(), 3u);
  EXPECT_EQ(doc["nodes"][0]["meta"]["tensor_meta"]["tensor_meta"]["shape"], Json::array({2, 3, 8, 8}));

  Module m = load(out.path);
  EXPECT_EQ(m.graph().to_string(), t.graph->to_string());
  auto want = fn({small_input(2)}).toTuple();
  auto got = m.forward({small_input(2)}).toTuple();
  EXPECT_TRUE(at::allclose(got->elements()[0].toTensor(), want->elements()[0].toTensor()));
  EXPECT_TRUE(at::allclose(got->elements()[1].toTensor(), want->elements()[1].toTensor()));
}

TEST(Save, FromTorchScriptSavesReloadsAndRuns) {
  at::manual_seed(0);
  ::torch::jit::Module script("M");
  script.register_parameter("weight", at::randn({3, 5}), false);
  script.register_buffer("shift", at::randn({5}));
  script.define(R"JIT(
def forward(self, x, y):
    h = torch.relu(torch.matmul(x, self.weight) + self.shift)
    return h.reshape(x.size(0), -1) * y.sum()
)JIT");
  at::Tensor x = at::randn({2, 3}), y = at::randn({4});
  Traced t = from_torchscript(script, {x, y});
  std::string text = t.graph->to_string();
  EXPECT_NE(text.find("get_attr[target=weight]"), std::string::npos) << text;
  EXPECT_NE(text.find("get_attr[target=shift]"), std::string::npos) << text;
  EXPECT_NE(text.find("torch.ops.aten.matmul.default"), std::string::npos) << text;

  TempPath out("script");
  save(*t.graph, t.tensors, out.path);
  Module m = load(out.path);
  for (int i = 0; i < 2; ++i) {
    at::Tensor a = at::randn({2, 3}), b = at::randn({4});
    at::Tensor want = script.forward({a, b}).toTensor();
    EXPECT_TRUE(at::allclose(m.forward({a, b}).toTensor(), want, 1e-5, 1e-6));
  }
  Json doc = document(out.path);
  EXPECT_EQ(doc["tensors"][0]["kind"], "parameter");
  EXPECT_EQ(doc["tensors"][1]["kind"], "buffer");
}

TEST(Save, RefusesWhatTheFormatCannotHold) {
  auto expect_refused = [](const Graph& g, const std::vector<NamedTensor>& tensors, const std::string& what) {
    TempPath out("refused");
    try {
      save(g, tensors, out.path);
      ADD_FAILURE() << "saved, expected a refusal: " << what;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(out.exists()) << "a refused graph left a file behind";
  };
  {
    Graph g;
    Node* x = g.placeholder("x");
    Node* y = g.call_module("sub", {Argument::node(x)});
    g.output(Argument::node(y));
    expect_refused(g, {}, "call_module");
  }
  {
    Graph g;
    Node* x = g.placeholder("x");
    Node* y = g.create_node(Op::CallMethod, Target("relu"), {Argument::node(x)});
    g.output(Argument::node(y));
    expect_refused(g, {}, "call_method");
  }
  {
    Graph g;
    Node* w = g.get_attr("w");
    g.output(Argument::node(w));
    expect_refused(g, {}, "'w', which is not among the tensors");
  }
  {
    // An operator object as an argument: not a value the format encodes.
    Graph g;
    Node* x = g.placeholder("x");
    Node* y = g.call_function(primitive("operator.getitem"),
                              {Argument::node(x), Argument::foreign(aten_op("aten::relu"))});
    g.output(Argument::node(y));
    expect_refused(g, {}, "has no encoding");
  }
}

// Note [Atomic saving]: a failed save throws Error and leaves the target as
// it was; it never ends the process (PyTorch's writer used to throw from its
// destructor: std::terminate) and never reports success for bytes that were
// not written.

// A graph reading one tensor of `floats` float32 values.
struct GraphAndTensors {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::vector<NamedTensor> tensors;
};
GraphAndTensors graph_with_tensor(int64_t floats) {
  GraphAndTensors out;
  Graph& g = *out.graph;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* y = g.call_function(aten_op("aten::add.Tensor"), {Argument::node(x), Argument::node(w)});
  g.output(Argument::node(y));
  out.tensors.push_back(NamedTensor{"w", NamedTensor::Kind::Buffer, at::arange(floats, at::kFloat), std::nullopt});
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Names in `dir` that start with `prefix` (left-over temporary files).
std::vector<std::string> entries(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

TEST(SaveAtomic, DevFullThrowsInsteadOfAborting) {
  auto gt = graph_with_tensor(4096);
  EXPECT_THROW(save(*gt.graph, gt.tensors, "/dev/full"), Error);
  // Without tensors too (the writer used to report success having written nothing).
  Graph empty;
  Node* x = empty.placeholder("x");
  empty.output(Argument::node(x));
  try {
    save(empty, {}, "/dev/full");
    ADD_FAILURE() << "saving to /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
}

// write_bytes: the same writer for bytes made elsewhere; its errors carry the errno.
TEST(SaveAtomic, WriteBytesReplacesWhollyAndReportsTheErrno) {
  TempPath file("bytes.bin");
  { std::ofstream(file.path) << "old content"; }
  ::chmod(file.path.c_str(), 0640);
  const std::string data(100000, 'x');
  write_bytes(file.path, data.data(), data.size());
  std::ifstream in(file.path, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, data);
  struct stat st;
  ASSERT_EQ(::stat(file.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);  // the replaced file's mode
  auto code_of = [](const std::string& path) {
    try {
      write_bytes(path, "abc", 3);
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(path.empty() ? "empty" : path), std::string::npos) << e.what();
      return e.code();
    }
    return 0;
  };
  EXPECT_EQ(code_of(::testing::TempDir()), EISDIR);
  EXPECT_EQ(code_of("/dev/full"), ENOSPC);
  EXPECT_EQ(code_of("/nonexistent-fxcpp-dir/x.bin"), ENOENT);
  EXPECT_EQ(code_of(""), ENOENT);
}

TEST(SaveAtomic, UnwritableDirectoryThrows) {
  auto gt = graph_with_tensor(16);
  EXPECT_THROW(save(*gt.graph, gt.tensors, "/nonexistent-fxcpp-dir/sub/model.fxpt"), Error);
  // A file where the directory should be (root ignores permissions, not this).
  TempPath file("not_a_dir");
  { std::ofstream(file.path) << "x"; }
  EXPECT_THROW(save(*gt.graph, gt.tensors, file.path + "/model.fxpt"), Error);
  // A directory as the target.
  EXPECT_THROW(save(*gt.graph, gt.tensors, ::testing::TempDir()), Error);
}

TEST(SaveAtomic, FailedWriteLeavesTheOldFileUntouched) {
  TempPath out("atomic");
  { std::ofstream(out.path, std::ios::binary) << "the old content"; }
  auto gt = graph_with_tensor(1 << 16);  // 256 KiB
  // The file size limit makes write() fail with EFBIG part-way (SIGXFSZ ignored).
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    save(*gt.graph, gt.tensors, out.path);
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find(out.path), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_all(out.path), "the old content");
  std::string base = out.path.substr(out.path.rfind('/') + 1);
  EXPECT_TRUE(entries(::testing::TempDir(), "." + base).empty()) << "a temporary file was left behind";

  // Without the limit the same save replaces the file, keeping its mode.
  ASSERT_EQ(::chmod(out.path.c_str(), 0640), 0);
  save(*gt.graph, gt.tensors, out.path);
  struct stat st;
  ASSERT_EQ(::stat(out.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  Module m = load(out.path);
  at::Tensor x = at::ones({1 << 16});
  EXPECT_TRUE(m.forward({x}).toTensor().equal(x + gt.tensors[0].tensor));
}

TEST(SaveAtomic, GraphWithoutTensorsRoundTrips) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.call_function(aten_op("aten::relu"), {Argument::node(x)});
  g.output(Argument::node(y));
  TempPath out("no_tensors");
  save(g, {}, out.path);
  ASSERT_TRUE(out.exists());
  Module m = load(out.path);
  at::Tensor in = at::randn({3, 4});
  EXPECT_TRUE(m.forward({in}).toTensor().equal(at::relu(in)));
  EXPECT_EQ(m.graph().to_string(), g.to_string());
}

TEST(SaveAtomic, DevNullIsWrittenDirectly) {
  // A device cannot be replaced by renaming: it is written as it is.
  auto gt = graph_with_tensor(16);
  EXPECT_NO_THROW(save(*gt.graph, gt.tensors, "/dev/null"));
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

}  // namespace
}  // namespace fxcpp::torch
