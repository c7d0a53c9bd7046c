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
  std::string pretty_target(void* p) const override {
    return nn(p)->operator_name.empty() ? nn(p)->qualified_name : "operator." + nn(p)->operator_name;
  }
  std::string operator_name(void* p) const override { return nn(p)->operator_name; }
  std::string qualified_reference(void* p) const override {
    // Dotted names are referenced as written (e.g. torch.relu); bare ones
    // become globals.
    return nn(p)->qualified_name.find('.') != std::string::npos && nn(p)->operator_name.empty()
               ? nn(p)->qualified_name
               : std::string();
  }
};
}  // namespace

const ObjectInterface* named_native_interface() {
  static const NamedNativeInterface iface;
  return &iface;
}

}  // namespace fxcpp
