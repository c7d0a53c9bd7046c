#include "fxcpp/core/interned.h"

#include <mutex>
#include <unordered_set>

namespace fxcpp {

namespace {
struct Pool {
  std::mutex mu;
  std::unordered_set<std::string> strings;
};
Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: interned strings outlive every graph
  return *p;
}
const std::string* empty_string() {
  static const std::string* e = &*pool().strings.insert(std::string()).first;
  return e;
}
}  // namespace

InternedString::InternedString() : p_(empty_string()) {}

InternedString::InternedString(std::string_view s) {
  if (s.empty()) {
    p_ = empty_string();
    return;
  }
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p_ = &*p.strings.emplace(s).first;
}

}  // namespace fxcpp
