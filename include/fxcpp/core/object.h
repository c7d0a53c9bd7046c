// fxcpp core: opaque foreign objects.
//
// Note [Opaque objects]
// ~~~~~~~~~~~~~~~~~~~~~
// The core never sees Python (or torch). Anything it cannot represent natively
// -- a call_function target, a type annotation, a dtype, a tensor, Ellipsis, an
// arbitrary user object -- is an `Object`: a (interface, pointer) pair. The
// interface is implemented once per kind of foreign world (the Python bindings
// implement one for PyObject*; C++ users may implement their own, e.g. for
// native functions). The core only ever retains/releases, prints, compares and
// asks naming questions through it. Objects are reference counted by their
// owner's scheme (Py_INCREF for Python); `Object` is an RAII handle.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace fxcpp {

class Object;

/// Callback used by codegen to register a global: (name hint, object) -> the
/// identifier the generated code must use to refer to `object`.
using AddGlobalFn = std::function<std::string(const std::string&, const Object&)>;

/// Behaviour of one family of foreign objects. Implementations are stateless
/// singletons that outlive every Object referring to them.
class ObjectInterface {
 public:
  virtual ~ObjectInterface() = default;
  /// Adds / drops one owning reference to `p`.
  virtual void retain(void* p) const = 0;
  virtual void release(void* p) const = 0;
  /// Python `repr(p)`: used inside generated code and in containers.
  virtual std::string repr(void* p) const = 0;
  /// Python `str(p)`: used by graph printing (torch.fx's _format_arg).
  virtual std::string str(void* p) const { return repr(p); }
  /// Equality used by argument comparison (pattern matching). Default: identity.
  virtual bool equals(void* a, void* b) const { return a == b; }
  /// `__name__` of a callable target: the basis of its node's auto name.
  virtual std::string name(void* p) const { return repr(p); }
  /// torch.fx `_get_qualified_name`: e.g. "torch.relu", "getattr", "mymod.fn".
  virtual std::string qualified_name(void* p) const { return name(p); }
  /// torch.fx `Node._pretty_print_target` for call_function targets.
  virtual std::string pretty_target(void* p) const { return qualified_name(p); }
  /// If the object is one of Python's `operator` functions (module `_operator`),
  /// its `__name__` ("add", "getitem", ...); empty otherwise. Drives infix codegen.
  virtual std::string operator_name(void*) const { return {}; }
  /// When non-empty, codegen refers to the object by this dotted name instead of
  /// registering a global (torch.fx: objects "from torch" other than torch.device).
  virtual std::string qualified_reference(void*) const { return {}; }
  /// True when `p` *is* the builtin called `builtin_name` (so a generated
  /// name may shadow it). Default: never.
  virtual bool is_builtin(void*, const std::string&) const { return false; }
  /// torch.fx `_type_repr` for printing a type annotation in str(graph).
  virtual std::string type_repr(void* p) const { return repr(p); }
  /// Python truthiness (str(graph) prints a type annotation `if self.type`:
  /// an empty tuple is not printed). Default: true.
  virtual bool truthy(void*) const { return true; }
  /// Codegen form of a type annotation; may register globals (typing generics).
  virtual std::string annotation(void* p, const AddGlobalFn& add_global) const;
  /// Field names when `p` is a NamedTuple class (repr of its instances).
  virtual std::vector<std::string> tuple_fields(void*) const { return {}; }
  /// True for objects that, when used as node.target, count as side-effectful.
  virtual bool is_impure_target(void*) const { return false; }
  /// Dialect::fx_2 generated-code form of the object as a constant argument
  /// (torch.fx 2.x `_get_repr`; Note [Constants in generated code] in
  /// codegen.cpp): may register globals through `add_global`; `paint` colors
  /// the text of a plain constant (identity unless colored code is asked
  /// for). Default: paint(repr(p)).
  virtual std::string code_repr(void* p, const AddGlobalFn& add_global,
                                const std::function<std::string(std::string)>& paint) const;
};

/// An owning handle to a foreign object. 16 bytes; copying retains.
/// Invariant: `iface_ == nullptr` iff `ptr_ == nullptr` (the null object).
class Object {
 public:
  Object() = default;
  /// Takes a *new* reference (the caller transfers one retain to us).
  static Object steal(const ObjectInterface* iface, void* p) { Object o; o.iface_ = iface; o.ptr_ = p; return o; }
  /// Borrows: retains `p`.
  static Object borrow(const ObjectInterface* iface, void* p) {
    if (iface && p) iface->retain(p);
    return steal(iface, p);
  }
  Object(const Object& o) : iface_(o.iface_), ptr_(o.ptr_) { if (ptr_) iface_->retain(ptr_); }
  Object(Object&& o) noexcept : iface_(o.iface_), ptr_(o.ptr_) { o.iface_ = nullptr; o.ptr_ = nullptr; }
  Object& operator=(Object o) noexcept { std::swap(iface_, o.iface_); std::swap(ptr_, o.ptr_); return *this; }
  ~Object() { if (ptr_) iface_->release(ptr_); }

  explicit operator bool() const { return ptr_ != nullptr; }
  void* get() const { return ptr_; }
  const ObjectInterface* iface() const { return iface_; }
  /// Gives up ownership without releasing.
  void* release() { void* p = ptr_; ptr_ = nullptr; iface_ = nullptr; return p; }

  std::string repr() const { return ptr_ ? iface_->repr(ptr_) : "None"; }
  std::string str() const { return ptr_ ? iface_->str(ptr_) : "None"; }
  std::string name() const { return ptr_ ? iface_->name(ptr_) : ""; }
  std::string qualified_name() const { return ptr_ ? iface_->qualified_name(ptr_) : ""; }
  /// Identity of the underlying object (not of the handle).
  bool is(const Object& o) const { return ptr_ == o.ptr_; }
  bool equals(const Object& o) const {
    if (ptr_ == o.ptr_) return true;
    if (!ptr_ || !o.ptr_ || iface_ != o.iface_) return false;
    return iface_->equals(ptr_, o.ptr_);
  }

 private:
  const ObjectInterface* iface_ = nullptr;
  void* ptr_ = nullptr;
};

/// A ready-made interface for C++ users: a named native object (e.g. a function
/// registered with the C++ runtime). `p` points to a NamedNative with static
/// storage duration; retain/release are no-ops.
struct NamedNative {
  std::string name;            ///< __name__: basis of node names
  std::string qualified_name;  ///< e.g. "torch.relu", "operator.add", "mymod.fn"
  std::string operator_name;   ///< non-empty for operator.* targets (infix codegen)
  /// true: generated code spells `qualified_name` as is (it must be importable
  /// from the generated module's globals, like torch.*); false: the object is
  /// bound to a global named after `qualified_name`.
  bool by_reference = false;
  /// true: the object is the Python builtin called `name` (len, getattr, ...).
  bool is_builtin = false;
};
/// The interface for NamedNative objects. Singleton.
const ObjectInterface* named_native_interface();
/// Makes an Object for a NamedNative that must outlive all graphs using it.
inline Object native_object(const NamedNative* n) {
  return Object::steal(named_native_interface(), const_cast<NamedNative*>(n));
}

}  // namespace fxcpp
