// The .pt2 reader (Note [Reading .pt2 archives] in fxcpp/torch/pt2.h): the
// committed fixtures torch.export.save wrote (tests/cpp_torch/fixtures/pt2),
// run and compared with the outputs torch eager gave when they were made;
// crafted archives for each refusal; and a fuzz of truncated, flipped and
// structurally mutated archives (the .fxpt fuzz's mutators and judge,
// tests/fuzz/fxpt_harness.h). No Python: this passes on the 1.13.1 LibTorch
// build too, which has no torch.export.
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../../src/torch/zip_reader.h"
#include "../fuzz/fxpt_harness.h"
#include "../fuzz/fxpt_mutators.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/pt2.h"
#include "zip_builder.h"

namespace fxcpp::torch {
namespace {

using Json = nlohmann::ordered_json;
using ziptest::ZipRecord;

const std::string kDir = std::string(FXCPP_TORCH_FIXTURE_DIR) + "/pt2";

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// ---- cases.bin (make_pt2_fixtures.py) ---------------------------------------------------

struct Case {
  std::vector<at::Tensor> inputs, outputs;
};

class Bytes {
 public:
  explicit Bytes(std::string b) : b_(std::move(b)) {}
  template <typename T>
  T get() {
    T v;
    if (at_ + sizeof(T) > b_.size()) throw std::runtime_error("cases.bin is truncated");
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  void copy(void* dst, size_t n) {
    if (at_ + n > b_.size()) throw std::runtime_error("cases.bin is truncated");
    std::memcpy(dst, b_.data() + at_, n);
    at_ += n;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  std::string b_;
  size_t at_ = 0;
};

std::vector<at::Tensor> read_tensors(Bytes& in) {
  static const c10::ScalarType kTypes[] = {at::kFloat, at::kDouble, at::kLong, at::kBool};
  std::vector<at::Tensor> out;
  for (uint32_t n = in.get<uint32_t>(); n > 0; --n) {
    uint32_t code = in.get<uint32_t>(), ndim = in.get<uint32_t>();
    if (code >= 4 || ndim > 16) throw std::runtime_error("cases.bin: bad tensor header");
    std::vector<int64_t> sizes;
    for (uint32_t d = 0; d < ndim; ++d) sizes.push_back(in.get<int64_t>());
    at::Tensor t = at::full(sizes, 0, at::TensorOptions().dtype(kTypes[code]));
    in.copy(t.data_ptr(), t.nbytes());
    out.push_back(t);
  }
  return out;
}

std::vector<Case> read_cases(const std::string& name) {
  Bytes in(read_bytes(kDir + "/" + name + ".cases.bin"));
  char magic[8];
  in.copy(magic, 8);
  if (std::memcmp(magic, "FXPT2CAS", 8) != 0) throw std::runtime_error("not a cases.bin file");
  std::vector<Case> cases(in.get<uint32_t>());
  for (Case& c : cases) {
    c.inputs = read_tensors(in);
    c.outputs = read_tensors(in);
  }
  EXPECT_TRUE(in.done());
  return cases;
}

// The tensors of a result in pytree order (tuples, lists, dict values in order).
void leaves(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& x : v.toTupleRef().elements()) leaves(x, out);
  } else if (v.isList()) {
    for (const c10::IValue& x : v.toListRef()) leaves(x, out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) leaves(kv.value(), out);
  } else {
    ADD_FAILURE() << "a non-tensor leaf: " << v.tagKind();
  }
}

void expect_case(const Module& m, const Case& c, const std::string& what) {
  std::vector<c10::IValue> in(c.inputs.begin(), c.inputs.end());
  std::vector<at::Tensor> got;
  leaves(m.forward(in), got);
  ASSERT_EQ(got.size(), c.outputs.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sizes(), c.outputs[i].sizes()) << what << " output " << i;
    EXPECT_EQ(got[i].scalar_type(), c.outputs[i].scalar_type()) << what << " output " << i;
    if (got[i].sizes() == c.outputs[i].sizes() && got[i].scalar_type() == c.outputs[i].scalar_type()) {
      EXPECT_TRUE(got[i].is_floating_point() ? at::allclose(got[i], c.outputs[i], 1e-4, 1e-4)
                                             : at::equal(got[i], c.outputs[i]))
          << what << " output " << i;
    }
  }
}

std::string fixture(const std::string& name) { return kDir + "/" + name + ".pt2"; }

TEST(Pt2, FixturesMatchEager) {
  for (const char* name : {"convnet", "functional"})
    for (bool plan : {true, false}) {
      LoadOptions o;
      o.plan_memory = plan;
      Module m = load(fixture(name), o);
      auto cases = read_cases(name);
      ASSERT_EQ(cases.size(), 2u);
      // Cases in order on one module: a buffer the model mutates carries over.
      for (size_t i = 0; i < cases.size(); ++i)
        expect_case(m, cases[i], std::string(name) + (plan ? " planned" : " unplanned") + " case " + std::to_string(i));
    }
}

TEST(Pt2, ConvNetStructure) {
  Module m = load(fixture("convnet"));
  EXPECT_EQ(m.input_names(), std::vector<std::string>{"x"});
  // Lifted parameters, buffers and the tensor constant, under their own names.
  std::map<std::string, NamedTensor::Kind> kinds;
  for (const NamedTensor& t : m.named_tensors()) kinds[t.name] = t.kind;
  EXPECT_EQ(kinds.at("conv.weight"), NamedTensor::Kind::Parameter);
  EXPECT_EQ(kinds.at("bn.running_mean"), NamedTensor::Kind::Buffer);
  EXPECT_EQ(kinds.at("scale"), NamedTensor::Kind::Constant);
  // The out_spec: {'logits': ..., 'stats': (..., ...)}.
  auto cases = read_cases("convnet");
  c10::IValue out = m.forward({cases[0].inputs[0]});
  ASSERT_TRUE(out.isGenericDict());
  auto d = out.toGenericDict();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.begin()->key().toStringRef(), "logits");
  EXPECT_TRUE(d.at("stats").isTuple());
}

TEST(Pt2, BufferMutationIsWrittenBack) {
  Module m = load(fixture("functional"));
  const at::Tensor* calls = m.find_tensor("calls");
  ASSERT_NE(calls, nullptr);
  EXPECT_TRUE(at::equal(*calls, at::full({4}, 0.0f)));
  auto cases = read_cases("functional");
  std::vector<c10::IValue> in(cases[0].inputs.begin(), cases[0].inputs.end());
  m.forward(in);
  m.forward(in);
  EXPECT_TRUE(at::equal(*calls, at::full({4}, 2.0f)));
}

TEST(Pt2, ToldByContentFromBuffer) {
  std::string bytes = read_bytes(fixture("convnet"));
  Module m = load_from_buffer(bytes.data(), bytes.size());
  auto cases = read_cases("convnet");
  expect_case(m, cases[0], "from a buffer");
  // graph_json gives the .fxpt graph document of the program.
  Json doc = Json::parse(graph_json_from_buffer(bytes.data(), bytes.size()));
  EXPECT_EQ(doc["format"], "fxcpp-aten");
  EXPECT_GT(doc["nodes"].size(), 10u);
}

// ---- crafted archives ----------------------------------------------------------------------

// The records of an archive, with their full names, read with fxcpp's own reader.
std::vector<ZipRecord> records_of(const std::string& bytes) {
  zip::Reader r(std::make_shared<zip::MemorySource>(bytes.data(), bytes.size()));
  std::vector<ZipRecord> out;
  for (const zip::Entry& e : r.entries()) {
    ZipRecord z;
    z.name = e.name;
    z.data.resize(static_cast<size_t>(e.size));
    r.read(e, z.data.data());
    out.push_back(std::move(z));
  }
  return out;
}

ZipRecord& record(std::vector<ZipRecord>& rs, const std::string& suffix) {
  for (ZipRecord& r : rs)
    if (r.name.size() >= suffix.size() && r.name.compare(r.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return r;
  throw std::runtime_error("no record " + suffix);
}

// The error loading the fixture with `edit` applied to its records ("" if it loaded).
std::string error_after(const std::string& name, const std::function<void(std::vector<ZipRecord>&)>& edit,
                        bool trusted = false) {
  auto rs = records_of(read_bytes(fixture(name)));
  edit(rs);
  std::string bytes = ziptest::build_zip(rs);
  try {
    LoadOptions o;
    o.trusted = trusted;
    Module m = load_from_buffer(bytes.data(), bytes.size(), o);
    return "";
  } catch (const FormatError& e) {
    return e.what();
  }
}

// The same, editing models/<name>.json as JSON.
std::string error_after_model(const std::string& name, const std::function<void(Json&)>& edit, bool trusted = false) {
  return error_after(
      name,
      [&](std::vector<ZipRecord>& rs) {
        ZipRecord& m = record(rs, "/models/model.json");
        Json doc = Json::parse(m.data);
        edit(doc);
        m.data = doc.dump();
      },
      trusted);
}

Json& node_with_target(Json& doc, const std::string& target) {
  for (Json& n : doc["graph_module"]["graph"]["nodes"])
    if (n["target"] == target) return n;
  throw std::runtime_error("no node calls " + target);
}

TEST(Pt2, RoundTripOfTheRecordsLoads) {
  // The crafting itself changes nothing: rebuilt by the test's zip writer, the archive loads.
  EXPECT_EQ(error_after("convnet", [](auto&) {}), "");
}

TEST(Pt2, SchemaVersions) {
  std::string ours = std::to_string(kPt2SchemaMajor) + "." + std::to_string(kPt2SchemaMinor);
  std::string e = error_after_model("convnet", [](Json& d) { d["schema_version"] = {{"major", 99}, {"minor", 3}}; });
  EXPECT_NE(e.find("99.3"), std::string::npos) << e;
  EXPECT_NE(e.find(ours), std::string::npos) << e;
  EXPECT_NE(e.find("newer"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) { d["schema_version"]["major"] = kPt2SchemaMajor - 1; });
  EXPECT_NE(e.find("older"), std::string::npos) << e;
  // A newer minor of the same major loads (minor versions only add fields).
  EXPECT_EQ(error_after_model("convnet", [](Json& d) { d["schema_version"]["minor"] = 999; }), "");
  e = error_after_model("convnet", [](Json& d) { d["schema_version"]["major"] = "8"; });
  EXPECT_NE(e.find("schema_version.major is not an integer"), std::string::npos) << e;
}

TEST(Pt2, Operators) {
  std::string e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["target"] = "torch.ops.aten.no_such_op.default";
  });
  EXPECT_NE(e.find("unknown operator 'aten::no_such_op.default'"), std::string::npos) << e;
  // On the dispatcher but off the allow-list: refused naming the opt-in.
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["target"] = "torch.ops.aten.from_file.default";
  });
  EXPECT_NE(e.find("aten::from_file"), std::string::npos) << e;
  EXPECT_NE(e.find("trusted"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["target"] = "torch.ops.higher_order.cond";
  });
  EXPECT_NE(e.find("higher-order"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["target"] = "builtins.eval";
  });
  EXPECT_NE(e.find("does not run"), std::string::npos) << e;
}

TEST(Pt2, ExportsMetadataAssertionsAreDroppedAfterTheirArgumentsAreChecked) {
  auto with_assert = [](int dtype) {
    return [dtype](Json& d) {
      Json n = {{"target", "torch.ops.aten._assert_tensor_metadata.default"},
                {"inputs", Json::array({{{"name", "a"}, {"arg", {{"as_tensor", {{"name", "x"}}}}}, {"kind", 1}},
                                        {{"name", "dtype"}, {"arg", {{"as_scalar_type", dtype}}}, {"kind", 2}}})},
                {"outputs", Json::array()},
                {"metadata", Json::object()}};
      Json& nodes = d["graph_module"]["graph"]["nodes"];
      nodes.insert(nodes.begin(), n);
    };
  };
  EXPECT_EQ(error_after_model("convnet", with_assert(7)), "");  // float32
  std::string e = error_after_model("convnet", with_assert(200));
  EXPECT_NE(e.find("is not a dtype"), std::string::npos) << e;
}

TEST(Pt2, ValuesAndNames) {
  std::string e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["outputs"][0]["as_tensor"]["name"] = "x; import os";
  });
  EXPECT_NE(e.find("is not a Python identifier"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["inputs"][0]["arg"]["as_tensor"]["name"] = "later";
  });
  EXPECT_NE(e.find("used before it is defined"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["inputs"][0]["arg"] = {{"as_graph", {{"name", "g"}}}};
  });
  EXPECT_NE(e.find("subgraph"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    node_with_target(d, "torch.ops.aten.relu_.default")["inputs"][0]["arg"] = {
        {"as_custom_obj", {{"name", "obj"}, {"class_fqn", "__torch__.Evil"}}}};
  });
  EXPECT_NE(e.find("never unpickles"), std::string::npos) << e;
  // An enumeration out of range, spelled as a constant of the wrong kind.
  e = error_after_model("functional", [](Json& d) {
    node_with_target(d, "torch.ops.aten.max.dim")["inputs"].push_back(
        {{"name", "keepdim"}, {"arg", {{"as_scalar_type", 200}}}, {"kind", 2}});
  });
  EXPECT_NE(e.find("is not a dtype"), std::string::npos) << e;
}

TEST(Pt2, SignatureAndSpecs) {
  std::string e = error_after_model("convnet", [](Json& d) {
    d["graph_module"]["signature"]["input_specs"][0] = {
        {"custom_obj", {{"arg", {{"name", "obj"}, {"class_fqn", "x"}}}, {"custom_obj_name", "obj"}}}};
  });
  EXPECT_NE(e.find("TorchBind"), std::string::npos) << e;
  e = error_after_model("functional", [](Json& d) {
    d["graph_module"]["signature"]["output_specs"][0] = {{"loss_output", {{"arg", {{"name", "add"}}}}}};
  });
  EXPECT_NE(e.find("training program"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    for (Json& entry : d["graph_module"]["module_call_graph"])
      if (entry["fqn"] == "") {
        std::string spec = entry["signature"]["in_spec"];
        entry["signature"]["in_spec"] = spec.replace(spec.find("builtins.dict"), 13, "builtins.set");
      }
  });
  EXPECT_NE(e.find("keyword inputs"), std::string::npos) << e;
  e = error_after_model("convnet", [](Json& d) {
    for (Json& entry : d["graph_module"]["module_call_graph"])
      if (entry["fqn"] == "") {
        std::string spec = entry["signature"]["out_spec"];
        entry["signature"]["out_spec"] = spec.replace(spec.find("builtins.dict"), 13, "collections.OrderedDict");
      }
  });
  EXPECT_NE(e.find("collections.OrderedDict"), std::string::npos) << e;
}

TEST(Pt2, Tensors) {
  auto edit_weight = [](const std::function<void(Json&)>& fn) {
    return [fn](std::vector<ZipRecord>& rs) {
      ZipRecord& c = record(rs, "/data/weights/model_weights_config.json");
      Json doc = Json::parse(c.data);
      fn(doc["config"]["fc.weight"]);
      c.data = doc.dump();
    };
  };
  std::string e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["sizes"][0]["as_int"] = int64_t(1) << 40; }));
  EXPECT_NE(e.find("extends past its record"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["strides"][0]["as_int"] = -1; }));
  EXPECT_NE(e.find("negative"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["storage_offset"]["as_int"] = INT64_MAX; }));
  EXPECT_NE(e.find("storage offset 9223372036854775807 lies past its record"), std::string::npos) << e;
  // An offset past the record is refused even when the tensor has no element
  // (data_ptr() would add it to the record's address).
  e = error_after("convnet", edit_weight([](Json& w) {
    w["tensor_meta"]["sizes"][0]["as_int"] = 0;
    w["tensor_meta"]["storage_offset"]["as_int"] = int64_t(1) << 62;
  }));
  EXPECT_NE(e.find("storage offset 4611686018427387904 lies past its record"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["strides"][0]["as_int"] = INT64_MAX; }));
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) {
    w["tensor_meta"]["sizes"][0]["as_int"] = int64_t(1) << 50;
    w["tensor_meta"]["strides"][0]["as_int"] = 0;  // 4 bytes may back any number of elements: bounded apart
  }));
  EXPECT_NE(e.find("more than the"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["dtype"] = 99; }));
  EXPECT_NE(e.find("not a dtype"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["tensor_meta"]["layout"] = 1; }));
  EXPECT_NE(e.find("only strided"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["path_name"] = "../../etc/passwd"; }));
  EXPECT_NE(e.find("is not a record name"), std::string::npos) << e;
  e = error_after("convnet", edit_weight([](Json& w) { w["path_name"] = "weight_999"; }));
  EXPECT_NE(e.find("no record"), std::string::npos) << e;
  // A pickled tensor: refused, trusted or not (there is no unpickler to run).
  for (bool trusted : {false, true}) {
    e = error_after("convnet", edit_weight([](Json& w) { w["use_pickle"] = true; }), trusted);
    EXPECT_NE(e.find("never unpickles"), std::string::npos) << e;
  }
}

TEST(Pt2, ArchiveRecords) {
  std::string e = error_after("convnet", [](auto& rs) { record(rs, "/byteorder").data = "big"; });
  EXPECT_NE(e.find("little-endian"), std::string::npos) << e;
  e = error_after("convnet", [](auto& rs) { record(rs, "/archive_format").data = "pt3"; });
  EXPECT_NE(e.find("archive_format"), std::string::npos) << e;
  e = error_after("convnet", [](auto& rs) { record(rs, "/models/model.json").name += ".bak"; });
  EXPECT_NE(e.find("no models/<name>.json"), std::string::npos) << e;
  e = error_after("convnet", [](auto& rs) { record(rs, "/models/model.json").data = "{\"a\": [[[[[[[[[[" + std::string(2000, '[') ; });
  EXPECT_NE(e.find("malformed .pt2 archive"), std::string::npos) << e;
  // The pickled sample inputs are never read: garbage there changes nothing.
  EXPECT_EQ(error_after("convnet", [](auto& rs) { record(rs, "/sample_inputs/model.pt").data = "\x80\x04garbage"; }), "");
}

// ---- fuzz ----------------------------------------------------------------------------------------

struct Tally {
  std::map<fuzz::Outcome, int> count;
  void run(const std::string& bytes, const std::string& what) {
    try {
      count[fuzz::run_case(bytes.data(), bytes.size()).outcome]++;
    } catch (const fuzz::Finding& f) {
      ADD_FAILURE() << what << ": " << f.what();
    }
  }
};

TEST(Pt2, FuzzedArchivesFailCleanly) {
  using namespace fxpt_mutators;
  std::mt19937_64 rng(2514);
  Tally bytes, zipm, json;
  // The judge runs a module three times and compares the runs: the stateless
  // fixture (functional.pt2 updates a buffer on each call).
  for (const char* name : {"convnet"}) {
    const std::string good = read_bytes(fixture(name));
    for (size_t cut = 0; cut < good.size(); cut += (cut + 300 > good.size()) ? 7 : 211)
      bytes.run(good.substr(0, cut), std::string(name) + " truncated at " + std::to_string(cut));
    for (int i = 0; i < 100; ++i) {
      std::string bad = good;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      bytes.run(bad, std::string(name) + " flips #" + std::to_string(i));
    }
    const auto base = records_of(good);
    for (int i = 0; i < 100; ++i) {
      std::string what = std::string(name) + " zip mutant #" + std::to_string(i) + ":";
      zipm.run(mutate_zip(base, rng, what), what);
    }
    for (int i = 0; i < 250; ++i) {
      auto rs = base;
      // model.json, or one of the tensor configs.
      ZipRecord& r = record(rs, i % 4 == 3 ? "/data/weights/model_weights_config.json" : "/models/model.json");
      std::string what = std::string(name) + " json mutant #" + std::to_string(i) + ":";
      r.data = mutate_json(r.data, rng, what);
      json.run(ziptest::build_zip(rs), what);
    }
  }
  for (auto& [what, t] : std::initializer_list<std::pair<const char*, Tally*>>{{"bytes", &bytes}, {"zip", &zipm}, {"json", &json}})
    std::printf("pt2 %s mutants: %d refused, %d failed in forward, %d ran\n", what, t->count[fuzz::Outcome::Refused],
                t->count[fuzz::Outcome::Failed], t->count[fuzz::Outcome::Ran]);
  EXPECT_GT(bytes.count[fuzz::Outcome::Refused], 100);
  EXPECT_GT(zipm.count[fuzz::Outcome::Refused], 50);
  EXPECT_GT(json.count[fuzz::Outcome::Refused], 100);
  EXPECT_GT(json.count[fuzz::Outcome::Ran], 10);
}

// ---- writing (Note [Writing .pt2 archives] in src/torch/pt2_writer.cpp) ----------------------

// A fixture read, written back as .pt2 by fxcpp and read again runs as the
// original did (each value's metadata survives: meta["pt2_value"]).
TEST(Pt2, WrittenArchivesReadBackAndRunAsTheOriginal) {
  for (const char* name : {"convnet", "functional"}) {
    std::string bytes = read_bytes(fixture(name));
    FileContents file = read_buffer(bytes.data(), bytes.size());
    SaveOptions so;
    so.format = SaveFormat::Pt2;
    std::string written = save_to_buffer(*file.graph, file.tensors, so);
    // The archive torch.export.save writes: a model, no pickle.
    zip::Reader z(std::make_shared<zip::MemorySource>(written.data(), written.size()));
    EXPECT_NE(z.find("archive_format"), nullptr) << name;
    const zip::Entry* sample = z.find("data/sample_inputs/model.pt");
    ASSERT_NE(sample, nullptr) << name;
    EXPECT_EQ(sample->size, 0u) << name;
    Module m = load_from_buffer(written.data(), written.size());
    auto cases = read_cases(name);
    for (size_t i = 0; i < cases.size(); ++i) expect_case(m, cases[i], std::string(name) + " written case " + std::to_string(i));
    // And again: writing what was read from a written archive gives the same records.
    FileContents again = read_buffer(written.data(), written.size());
    std::string rewritten = save_to_buffer(*again.graph, again.tensors, so);
    zip::Reader z2(std::make_shared<zip::MemorySource>(rewritten.data(), rewritten.size()));
    std::string a(z.find("models/model.json")->size, '\0'), b(z2.find("models/model.json")->size, '\0');
    z.read(*z.find("models/model.json"), a.data());
    z2.read(*z2.find("models/model.json"), b.data());
    EXPECT_EQ(a, b) << name;
  }
}

TEST(Pt2, WriterRefusesWhatAProgramCannotExpress) {
  std::string bytes = read_bytes(fixture("convnet"));
  FileContents file = read_buffer(bytes.data(), bytes.size());
  SaveOptions so;
  so.format = SaveFormat::Pt2;
  // A node without metadata (meta cleared): named, with what to do.
  Graph& g = *file.graph;
  for (Node* n : g.nodes())
    if (n->op() == Op::CallFunction && n->has_meta()) {
      n->meta().clear();
      break;
    }
  try {
    save_to_buffer(g, file.tensors, so);
    ADD_FAILURE() << "a value without metadata was written";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("meta['pt2_value']"), std::string::npos) << e.what();
  }
  // A call_module node.
  Graph h;
  Node* x = h.placeholder("x");
  Node* c = h.create_node(Op::CallModule, Target("sub"), {Argument::node(x)}, {}, "sub");
  h.output(Argument::node(c));
  try {
    save_to_buffer(h, {}, so);
    ADD_FAILURE() << "a call_module node was written";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("call_module"), std::string::npos) << e.what();
  }
}

// ---- Note [Exported input checks] ------------------------------------------------------------

// The InputError text of m.forward(inputs), "" when it ran (or failed otherwise).
std::string input_error(const Module& m, std::vector<c10::IValue> inputs) {
  try {
    m.forward(std::move(inputs));
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception&) {
  }
  return "";
}

Module load_edited(const std::string& name, const std::function<void(Json&)>& edit) {
  auto rs = records_of(read_bytes(fixture(name)));
  ZipRecord& r = record(rs, "/models/model.json");
  Json doc = Json::parse(r.data);
  edit(doc);
  r.data = doc.dump();
  std::string bytes = ziptest::build_zip(rs);
  return load_from_buffer(bytes.data(), bytes.size());
}

at::Tensor filled(std::vector<int64_t> sizes, c10::ScalarType t = at::kFloat) {
  return at::full(sizes, 0.5, at::TensorOptions().dtype(t));
}

TEST(Pt2, InputsAreCheckedAgainstTheExport) {
  // convnet: x is [batch, 3, 8, 8] with a symbolic batch, float32.
  Module m = load(fixture("convnet"));
  for (int64_t n : {1, 2, 5}) EXPECT_EQ(input_error(m, {filled({n, 3, 8, 8})}), "") << n;  // a minimum of 2 is not enforced
  std::string e = input_error(m, {filled({2, 3, 9, 8})});
  EXPECT_NE(e.find("input 0 ('x'): Expected input at x.shape[2] to be equal to 8, but got 9"), std::string::npos) << e;
  e = input_error(m, {filled({2, 3, 8, 8}, at::kDouble)});
  EXPECT_NE(e.find("Expected input at x to have dtype float32"), std::string::npos) << e;
  EXPECT_NE(e.find("but got float64"), std::string::npos) << e;
  e = input_error(m, {filled({3, 8, 8})});
  EXPECT_NE(e.find("dimensional tensor, got one with 3"), std::string::npos) << e;  // the rank check, first

  // The batch's range: [3, 4].
  Module r = load_edited("convnet", [](Json& d) {
    ASSERT_EQ(d["range_constraints"].size(), 1u);
    for (auto& kv : d["range_constraints"].items()) kv.value() = {{"min_val", 3}, {"max_val", 4}};
  });
  EXPECT_EQ(input_error(r, {filled({3, 3, 8, 8})}), "");
  EXPECT_EQ(input_error(r, {filled({4, 3, 8, 8})}), "");
  e = input_error(r, {filled({5, 3, 8, 8})});
  EXPECT_NE(e.find("Expected input at x.shape[0] to be <= 4, but got 5"), std::string::npos) << e;
  e = input_error(r, {filled({2, 3, 8, 8})});
  EXPECT_NE(e.find("Expected input at x.shape[0] to be >= 3, but got 2"), std::string::npos) << e;

  // functional: x [3, 4], y [3, 2], static; made to share a symbol, then to derive y's from it.
  Module f = load(fixture("functional"));
  e = input_error(f, {filled({4, 4}), filled({3, 2})});
  EXPECT_NE(e.find("Expected input at x.shape[0] to be equal to 3, but got 4"), std::string::npos) << e;
  auto symbolic = [](const std::string& expr) {
    return Json{{"as_expr", {{"expr_str", expr}, {"hint", {{"as_int", 3}}}}}};
  };
  const std::string s0 = "Symbol('s0', positive=True, integer=True)";
  Module shared = load_edited("functional", [&](Json& d) {
    auto& tv = d["graph_module"]["graph"]["tensor_values"];
    tv["x"]["sizes"][0] = symbolic(s0);
    tv["y"]["sizes"][0] = symbolic(s0);
  });
  EXPECT_EQ(input_error(shared, {filled({5, 4}), filled({5, 2})}), "");
  e = input_error(shared, {filled({3, 4}), filled({4, 2})});
  EXPECT_NE(e.find("input 1 ('y'): Expected input at y.shape[0] to be equal to x.shape[0] (3), but got 4"),
            std::string::npos)
      << e;
  Module derived = load_edited("functional", [&](Json& d) {
    auto& tv = d["graph_module"]["graph"]["tensor_values"];
    tv["x"]["sizes"][0] = symbolic(s0);
    tv["y"]["sizes"][0] = symbolic("Add(Mul(Integer(2), " + s0 + "), Integer(-1))");
  });
  e = input_error(derived, {filled({3, 4}), filled({4, 2})});
  EXPECT_NE(e.find("Expected input at y.shape[0] to be equal to 2*x.shape[0] - 1 (5), but got 4"), std::string::npos)
      << e;
  // An expression the check does not read (FloorDiv) is left to the kernels.
  Module other = load_edited("functional", [&](Json& d) {
    d["graph_module"]["graph"]["tensor_values"]["y"]["sizes"][0] = symbolic("FloorDiv(" + s0 + ", Integer(2))");
  });
  EXPECT_EQ(input_error(other, {filled({3, 4}), filled({3, 2})}), "");
}

}  // namespace
}  // namespace fxcpp::torch
