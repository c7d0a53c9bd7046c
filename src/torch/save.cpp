// Writing the .fxpt file format (docs/fxpt_format.md) from C++: the same
// archive python/fxcpp/aten/_format.py writes (PyTorch's zip container,
// graph.json, one raw record per storage), so a graph captured or edited in
// C++ loads in both runtimes and in Python.
#include <ATen/core/Tensor.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/api/include/torch/version.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "fxcpp/core/namespace.h"
#include "fxcpp/torch/format.h"
#include "fxcpp/torch/module.h"  // save(const Module&, ...)
#include "names.h"
#include "pt2_writer.h"

namespace fxcpp::torch {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;

[[noreturn]] void refuse(const Node* n, const std::string& what) {
  throw FormatError("fxcpp::torch::save: cannot save node '" + std::string(n->name()) + "': " + what);
}

const char* kind_tag(TorchConstant::Kind k) {
  switch (k) {
    case TorchConstant::Kind::Dtype: return "dtype";
    case TorchConstant::Kind::Device: return "device";
    case TorchConstant::Kind::Layout: return "layout";
    case TorchConstant::Kind::MemoryFormat: return "memory_format";
  }
  return "";
}

Json encode_float(double d) {
  if (std::isnan(d)) return Json{{"float", "nan"}};
  if (std::isinf(d)) return Json{{"float", d > 0 ? "inf" : "-inf"}};
  return Json{{"float", d}};
}

// One argument value, tagged as docs/fxpt_format.md says.
Json encode(const Argument& a, const Node* n, int depth = 0) {
  if (depth > kMaxDepth) refuse(n, "its arguments are nested more than " + std::to_string(kMaxDepth) + " deep");
  switch (a.kind()) {
    case ArgKind::None: return nullptr;
    case ArgKind::Bool: return a.as_bool();
    case ArgKind::Int: return a.as_int();
    case ArgKind::Double: return encode_float(a.as_double());
    case ArgKind::String: return a.as_string();
    case ArgKind::NodeRef: return Json{{"node", std::string(a.as_node()->name())}};
    case ArgKind::Tuple:
    case ArgKind::List: {
      if (a.kind() == ArgKind::Tuple && a.tuple_type())
        refuse(n, "a named tuple argument has no encoding in the file format");
      Json items = Json::array();
      for (const Argument& x : a.items()) items.push_back(encode(x, n, depth + 1));
      return Json{{a.kind() == ArgKind::Tuple ? "tuple" : "list", std::move(items)}};
    }
    case ArgKind::Dict: {
      Json items = Json::array();
      for (const auto& kv : a.pairs()) items.push_back(Json::array({encode(kv.first, n, depth + 1), encode(kv.second, n, depth + 1)}));
      return Json{{"dict", std::move(items)}};
    }
    case ArgKind::Slice:
      return Json{{"slice", Json::array({encode(a.slice_start(), n, depth + 1), encode(a.slice_stop(), n, depth + 1),
                                         encode(a.slice_step(), n, depth + 1)})}};
    case ArgKind::Foreign:
      if (const TorchConstant* c = as_torch_constant(a.as_object())) return Json{{kind_tag(c->kind), c->name}};
      refuse(n, "the argument " + a.as_object().qualified_name() +
                    " has no encoding in the file format (tensors must be get_attr nodes)");
  }
  refuse(n, "an argument of unknown kind");
}

// A TensorMetadata as the loader stores it: a dict with exactly these keys.
bool is_tensor_meta(const Argument& a) {
  static const char* keys[] = {"shape", "dtype", "requires_grad", "stride", "memory_format", "is_quantized"};
  if (a.kind() != ArgKind::Dict || a.pairs().size() != 6) return false;
  for (size_t i = 0; i < 6; ++i)
    if (!a.pairs()[i].first.is_string() || a.pairs()[i].first.as_string() != keys[i]) return false;
  return true;
}

// meta["tensor_meta"], as _format.py's _encode_meta: a TensorMetadata, or
// lists/tuples/dicts of them; anything else is null (not saved at top level).
Json encode_meta(const Argument& a, const Node* n, int depth = 0) {
  if (depth > kMaxDepth) return nullptr;
  if (is_tensor_meta(a)) {
    const ArgPairs& p = a.pairs();
    auto ints = [](const Argument& seq) {
      Json out = Json::array();
      if (seq.is_sequence())
        for (const Argument& x : seq.items()) out.push_back(x.as_int());
      return out;
    };
    const Argument& dtype = p[1].second;
    const TorchConstant* dt = dtype.kind() == ArgKind::Foreign ? as_torch_constant(dtype.as_object()) : nullptr;
    if (!dt || !p[0].second.is_sequence() || !p[3].second.is_sequence()) return nullptr;
    const Argument& mf = p[4].second;
    const TorchConstant* mfc = mf.kind() == ArgKind::Foreign ? as_torch_constant(mf.as_object()) : nullptr;
    Json tm = Json::object();
    tm["shape"] = ints(p[0].second);
    tm["dtype"] = dt->name;
    tm["requires_grad"] = p[2].second.kind() == ArgKind::Bool && p[2].second.as_bool();
    tm["stride"] = ints(p[3].second);
    tm["memory_format"] = mfc ? Json(mfc->name) : Json(nullptr);
    tm["is_quantized"] = p[5].second.kind() == ArgKind::Bool && p[5].second.as_bool();
    return Json{{"tensor_meta", std::move(tm)}};
  }
  if (a.is_sequence()) {
    Json items = Json::array();
    for (const Argument& x : a.items()) items.push_back(encode_meta(x, n, depth + 1));
    return Json{{a.kind() == ArgKind::List ? "list" : "tuple", std::move(items)}};
  }
  if (a.kind() == ArgKind::Dict) {
    Json items = Json::array();
    for (const auto& kv : a.pairs())
      items.push_back(Json::array({encode(kv.first, n, depth + 1), encode_meta(kv.second, n, depth + 1)}));
    return Json{{"dict", std::move(items)}};
  }
  return nullptr;
}

std::string target_name(const Node* n) {
  const Object& fn = n->target().fn();
  if (const AtenOp* op = as_aten_op(fn)) return op->qualified;
  Primitive p;
  if (as_primitive(fn, &p)) return primitive_name(p);
  refuse(n, "its target " + fn.qualified_name() +
                " is neither an ATen operator overload (aten_op) nor a runtime primitive (primitive)");
}

const char* kind_name(NamedTensor::Kind k) {
  switch (k) {
    case NamedTensor::Kind::Parameter: return "parameter";
    case NamedTensor::Kind::Buffer: return "buffer";
    case NamedTensor::Kind::Constant: return "constant";
  }
  return "constant";
}

// The archive's content, built (and checked) before anything is written, so a
// refused graph leaves no partial file behind.
struct Prepared {
  std::string text;                                          // graph.json
  std::vector<std::pair<std::string, at::Tensor>> payloads;  // record, a tensor holding its storage
};

// The class name a file may record: what the loader accepts (Note [Names a
// file may use] in names.h).
void check_class_name(const std::string& name) {
  if (!names::is_identifier(name))
    throw FormatError("fxcpp::torch::save: the class name '" + name +
                      "' is not an ASCII Python identifier (letters, digits and '_', not a keyword), which the "
                      "loader requires; save with another class name");
}

Prepared prepare(const Graph& graph, const std::vector<NamedTensor>& tensors, const SaveOptions& options) {
  check_class_name(options.class_name);
  std::unordered_map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name.emplace(t.name, &t);

  Json storages = Json::array(), tensor_entries = Json::array(), nodes = Json::array();
  // (storage, dtype) -> index, as _format.py keys storages.
  std::map<std::pair<const void*, int>, size_t> storage_index;
  Prepared out;
  auto& payloads = out.payloads;
  std::unordered_set<std::string> saved;

  for (Node* n : graph.nodes()) {
    Json entry = Json::object();
    entry["op"] = op_name(n->op());
    entry["name"] = std::string(n->name());
    // What the loader would refuse is refused here (Note [Names a file may use]).
    if (!names::is_identifier(n->name()))
      refuse(n, "its name is not an ASCII Python identifier, which the loader requires; rename the node");
    if (n->op() == Op::GetAttr && !names::is_module_path(n->target().str().c_str()))
      refuse(n, "its target is not a module path (dotted parts of letters, digits, '_' and '-'), which the loader "
                "requires");
    switch (n->op()) {
      case Op::CallFunction: entry["target"] = target_name(n); break;
      case Op::Placeholder:
      case Op::GetAttr: entry["target"] = n->target().str().c_str(); break;
      case Op::Output: entry["target"] = "output"; break;
      default:
        refuse(n, std::string("it is a ") + op_name(n->op()) +
                      " node; the file format holds lowered graphs (placeholder, get_attr, call_function, output)");
    }
    Json args = Json::array();
    for (const Argument& a : n->args()) args.push_back(encode(a, n));
    entry["args"] = std::move(args);
    Json kwargs = Json::object();
    for (const auto& kv : n->kwargs()) kwargs[kv.first] = encode(kv.second, n);
    entry["kwargs"] = std::move(kwargs);
    if (n->has_meta()) {
      for (const auto& kv : n->meta()) {
        if (kv.first != "tensor_meta") continue;
        Json tm = encode_meta(kv.second, n);
        if (!tm.is_null()) entry["meta"] = Json{{"tensor_meta", std::move(tm)}};
        break;
      }
    }
    nodes.push_back(std::move(entry));

    if (n->op() != Op::GetAttr) continue;
    std::string name = n->target().str().c_str();
    if (!saved.insert(name).second) continue;
    auto it = by_name.find(name);
    if (it == by_name.end()) refuse(n, "get_attr of '" + name + "', which is not among the tensors");
    const at::Tensor& t = it->second->tensor;
    if (!t.defined()) refuse(n, "get_attr of '" + name + "', an undefined tensor");
    std::string dtype;
    try {
      dtype = dtype_name(t.scalar_type());
    } catch (const FormatError&) {
      refuse(n, "tensor '" + name + "' has a dtype the file format does not support");
    }
    at::Tensor data = t.detach();
    if (!data.device().is_cpu() || data.is_conj() || data.is_neg() || data.layout() != c10::kStrided ||
        !data.has_storage())
      data = data.cpu().resolve_conj().resolve_neg().contiguous();
    const c10::Storage& storage = data.storage();
    auto key = std::make_pair(static_cast<const void*>(storage.unsafeGetStorageImpl()),
                              static_cast<int>(data.scalar_type()));
    auto si = storage_index.find(key);
    if (si == storage_index.end()) {
      std::string record = "data/" + std::to_string(storages.size());
      si = storage_index.emplace(key, storages.size()).first;
      storages.push_back(Json{{"record", record}, {"nbytes", storage.nbytes()}});
      payloads.emplace_back(record, data);
    }
    Json te = Json::object();
    te["name"] = name;
    te["kind"] = kind_name(it->second->kind);
    te["dtype"] = dtype;
    te["storage"] = si->second;
    te["offset"] = data.storage_offset();
    te["sizes"] = data.sizes().vec();
    te["strides"] = data.strides().vec();
    // The C++ loader makes plain (inference) tensors: a parameter is written
    // as requiring grad, as nn.Parameter does, unless it cannot.
    te["requires_grad"] = it->second->requires_grad.value_or(
        t.requires_grad() ||
        (it->second->kind == NamedTensor::Kind::Parameter && (t.is_floating_point() || t.is_complex())));
    tensor_entries.push_back(std::move(te));
  }

  Json doc = Json::object();
  doc["format"] = "fxcpp-aten";
  doc["version"] = kFormatVersion;
  doc["producer"] = Json{{"fxcpp", "0.1.0"}, {"torch", TORCH_VERSION}};
  doc["class_name"] = options.class_name;
  doc["storages"] = std::move(storages);
  doc["tensors"] = std::move(tensor_entries);
  doc["nodes"] = std::move(nodes);
  out.text = doc.dump();
  return out;
}

void emit(const Prepared& p, caffe2::serialize::PyTorchStreamWriter& writer) {
  try {
    writer.writeRecord("graph.json", p.text.data(), p.text.size());
    for (auto& [record, data] : p.payloads) {
      const c10::Storage& s = data.storage();
      writer.writeRecord(record, s.data(), s.nbytes());
    }
    writer.writeEndOfFile();
  } catch (const c10::Error& e) {
    throw Error(std::string("fxcpp::torch::save: cannot write the archive (") + e.what_without_backtrace() + ")");
  }
}

// Note [Atomic saving]
// ~~~~~~~~~~~~~~~~~~~~
// A save leaves either the complete file at the target or, with an
// exception, the target as it was. PyTorch's archive writer cannot do that
// by itself: it throws from its destructor when its output fails (a full
// disk ends the process in std::terminate), and its file stream reports the
// errors of its last, buffered bytes nowhere. So the writer gets a sink that
// never fails: FdSink writes to a file descriptor, remembers the first error
// and swallows the rest; the error is raised once the writer has finished.
// A new or regular target is written as a temporary file in its directory
// (same file system), fsync'ed, closed (each checked) and renamed over the
// target; on any error the temporary file is removed. The file gets the
// mode of the file it replaces, or 0666 minus the umask. A symbolic link is
// followed: the file it names is replaced, the link stays. A target that
// exists and is neither a regular file nor a directory (/dev/null,
// /dev/full, a fifo) cannot be replaced by renaming: it is opened without
// creating or truncating anything (a fifo without a reader is an error, not
// a hang) and written directly; any error is raised, but what the bytes
// already written did cannot be undone. A directory is refused.
// write_bytes() is the same writer for bytes made elsewhere (fxcpp.aten.save's,
// the CLI's torch.export archives): fxcpp has no other file writer.
class FdSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  /// Writes all `n` bytes, or records the first error; always "succeeds".
  size_t write(const void* data, size_t n) noexcept {
    const char* p = static_cast<const char*>(data);
    size_t left = n;
    while (left > 0 && err_ == 0) {
      ssize_t w = ::write(fd_, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        err_ = errno;
      } else if (w == 0) {
        err_ = EIO;
      } else {
        p += w;
        left -= static_cast<size_t>(w);
      }
    }
    return n;
  }
  /// The first errno seen, 0 if none.
  int error() const { return err_; }

 private:
  int fd_;
  int err_ = 0;
};

[[noreturn]] void write_error(const std::string& what, const std::string& path, int err) {
  throw FileError("fxcpp::torch::save: cannot " + what + " '" + path + "' (" + std::strerror(err) + ")", err);
}

// The process's umask, read without changing it (umask() would, for every thread).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
}

// Writes what `produce` gives the sink to `path` (Note [Atomic saving]).
void write_file(const std::string& path, const std::function<void(FdSink&)>& produce) {
  if (path.empty()) throw FileError("fxcpp::torch::save: the path is empty", ENOENT);
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved)) target = resolved;
  }
  bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) write_error("write", path, EISDIR);
  if (exists && !S_ISREG(st.st_mode)) {
    int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) write_error("open", path, errno);
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FdSink sink(fd);
    try {
      produce(sink);
    } catch (...) {
      ::close(fd);
      throw;
    }
    int err = sink.error();
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) write_error("write", path, err);
    return;
  }

  size_t slash = target.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string tmp = (dir == "/" ? "" : dir) + "/." + base + ".tmp-XXXXXX";
  int fd = ::mkostemp(&tmp[0], O_CLOEXEC);
  if (fd < 0) write_error("create a temporary file for", path, errno);
  int err = 0;
  try {
    mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
    if (::fchmod(fd, mode) != 0) err = errno;
    FdSink sink(fd);
    if (err == 0) produce(sink);
    if (err == 0) err = sink.error();
    if (err == 0 && ::fsync(fd) != 0) err = errno;
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    write_error("write", path, err);
  }
  // The rename is durable once the directory is: best effort.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// The records of either format, ready to emit.
struct Records {
  std::optional<Prepared> fxpt;
  std::optional<pt2::Archive> pt2;
};

bool ends_with_pt2(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".pt2") == 0;
}

Records prepare_records(const Graph& graph, const std::vector<NamedTensor>& tensors, const SaveOptions& options,
                        bool pt2_default) {
  Records r;
  bool pt2 = options.format == SaveFormat::Pt2 || (options.format == SaveFormat::Auto && pt2_default);
  if (pt2) r.pt2 = pt2::prepare(graph, tensors);
  else r.fxpt = prepare(graph, tensors, options);
  return r;
}

void emit_records(const Records& r, caffe2::serialize::PyTorchStreamWriter& writer) {
  if (r.fxpt) return emit(*r.fxpt, writer);
  try {
    for (auto& [record, text] : r.pt2->texts) writer.writeRecord(record, text.data(), text.size());
    for (auto& [record, data] : r.pt2->payloads) {
      const c10::Storage& s = data.storage();
      writer.writeRecord(record, s.data(), s.nbytes());
    }
    writer.writeEndOfFile();
  } catch (const c10::Error& e) {
    throw Error(std::string("fxcpp::torch::save: cannot write the archive (") + e.what_without_backtrace() + ")");
  }
}

// The archive, streamed into `sink` by a writer that never sees a failed
// write (so it never throws from its destructor).
void write_archive(const Records& r, FdSink& sink) {
  caffe2::serialize::PyTorchStreamWriter writer([&sink](const void* data, size_t n) { return sink.write(data, n); });
  emit_records(r, writer);
}

}  // namespace

void save(const Graph& graph, const std::vector<NamedTensor>& tensors, const std::string& path,
          const SaveOptions& options) {
  Records r = prepare_records(graph, tensors, options, ends_with_pt2(path));
  write_file(path, [&r](FdSink& sink) { write_archive(r, sink); });
}

std::string save_to_buffer(const Graph& graph, const std::vector<NamedTensor>& tensors, const SaveOptions& options) {
  Records r = prepare_records(graph, tensors, options, false);
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  emit_records(r, writer);
  return out;
}

void save(const Module& module, const std::string& path) { save(module.graph(), module.named_tensors(), path); }

void write_bytes(const std::string& path, const void* data, size_t size) {
  write_file(path, [data, size](FdSink& sink) { sink.write(data, size); });
}

}  // namespace fxcpp::torch
