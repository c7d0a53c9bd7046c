#include "fxcpp/core/object.h"

namespace fxcpp {

namespace {
class NamedNativeInterface final : public ObjectInterface {
 public:
  static const NamedNative* nn(void* p) { return static_cast<const NamedNative*>(p); }
  void retain(void*) const override {}
  void release(void*) const override {}
  std::string repr(void* p) const override { return "<native function " + nn(p)->qualified_name + ">"; }
  std::string name(void* p) const override { return nn(p)->name; }
  std::string qualified_name(void* p) const override { return nn(p)->qualified_name; }
  std::string operator_name(void* p) const override { return nn(p)->operator_name; }
  std::string qualified_reference(void* p) const override {
    return nn(p)->by_reference ? nn(p)->qualified_name : std::string();
  }
  bool is_builtin(void* p, const std::string& name) const override {
    return nn(p)->is_builtin && nn(p)->name == name;
  }
  std::string pretty_target(void* p) const override {
    if (!nn(p)->operator_name.empty()) return "operator." + nn(p)->operator_name;
    if (nn(p)->is_builtin) return "builtins." + nn(p)->name;
    return nn(p)->qualified_name;
  }
};
}  // namespace

const ObjectInterface* named_native_interface() {
  static const NamedNativeInterface iface;
  return &iface;
}

}  // namespace fxcpp
