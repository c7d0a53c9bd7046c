#include "fxcpp/core/node.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "fxcpp/core/graph.h"

namespace fxcpp {

const char* op_name(Op op) {
  switch (op) {
    case Op::Placeholder: return "placeholder";
    case Op::GetAttr: return "get_attr";
    case Op::CallFunction: return "call_function";
    case Op::CallMethod: return "call_method";
    case Op::CallModule: return "call_module";
    case Op::Output: return "output";
    case Op::Root: return "root";
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view s) {
  if (s == "placeholder") return Op::Placeholder;
  if (s == "get_attr") return Op::GetAttr;
  if (s == "call_function") return Op::CallFunction;
  if (s == "call_method") return Op::CallMethod;
  if (s == "call_module") return Op::CallModule;
  if (s == "output") return Op::Output;
  return std::nullopt;
}

// ------------------------------------------------------------------ Target

namespace {
// String targets are Objects of this interface: the pointer is the interned
// string's storage, which lives for the process (retain/release are no-ops).
class InternedStringInterface final : public ObjectInterface {
 public:
  void retain(void*) const override {}
  void release(void*) const override {}
  std::string repr(void* p) const override { return py_repr_string(*static_cast<const std::string*>(p)); }
  std::string str(void* p) const override { return *static_cast<const std::string*>(p); }
  std::string name(void* p) const override { return *static_cast<const std::string*>(p); }
};
}  // namespace

const ObjectInterface* Target::string_interface() {
  static const InternedStringInterface iface;
  return &iface;
}

const Object& Target::null_object() {
  static const Object none;
  return none;
}

Target::Target(InternedString s)
    : obj_(Object::steal(string_interface(), const_cast<void*>(s.id()))) {}

Target::Target(Object f) : obj_(std::move(f)) {
  if (!obj_) obj_ = Object::steal(string_interface(), const_cast<void*>(InternedString().id()));
}

// -------------------------------------------------------------------- Node

static_assert(sizeof(Use) == 24, "Use records are 24 bytes (Note [Compact nodes])");
static_assert(sizeof(Node) == 160, "Note [Compact nodes]: keep the node at 160 bytes");

size_t Node::uses_offset() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  return offsetof(Node, uses_store_);
#pragma GCC diagnostic pop
}

Node* Use::user() const {
  if (bits_ & 1) return reinterpret_cast<const Node::HeapUse*>(this)->user;
  size_t idx = (bits_ >> 1) & 1;
  return reinterpret_cast<Node*>(const_cast<char*>(reinterpret_cast<const char*>(this)) - Node::uses_offset() -
                                 idx * sizeof(Use));
}

Node::Node(Op op, NameRef name, Target target)
    : name_(name), target_(std::move(target)), n_args_(0), op_(static_cast<uint32_t>(op)), n_inputs_(0), erased_(0) {}

Node::~Node() {
  unlink_uses();
  clear_args();
  delete cold_;
}

void Node::set_binding(NodeBinding* b) {
  auto* h = const_cast<detail::SlabHeader*>(detail::slab_of(this));
  if (!h->bindings) {
    if (!b) return;
    h->bindings = new NodeBinding*[detail::kNodesPerSlab]();
  }
  h->bindings[detail::slot_in_slab(this, h)] = b;
}

void Node::set_name(std::string_view n) {
  graph()->check_not_busy();
  name_ = graph()->intern_name(n);
  mark_dirty(NodeBinding::kAttrs);
}

const KwArgs& Node::kwargs() const {
  static const KwArgs empty;
  return cold_ ? cold_->kwargs : empty;
}

Node::Cold& Node::cold() {
  if (!cold_) cold_ = new Cold();
  return *cold_;
}

const Object& Node::type() const {
  static const Object none;
  return cold_ ? cold_->type : none;
}

void Node::set_type(Object t) {
  graph()->check_not_busy();
  if (!cold_ && !t) return;
  cold().type = std::move(t);
  mark_dirty(NodeBinding::kAttrs);
}

void Node::set_target(Target t) {
  Graph* g = graph();
  g->check_not_busy();
  bool indexed = !erased_ && op() != Op::Root;
  if (indexed) g->bucket_remove(this);
  target_ = std::move(t);
  if (indexed) g->bucket_add(this);
  mark_dirty(NodeBinding::kAttrs);
}

void Node::clear_args() {
  if (n_args_ <= kInlineArgs) {
    Argument* a = reinterpret_cast<Argument*>(args_store_);
    for (uint32_t i = 0; i < n_args_; ++i) a[i].~Argument();
  } else {
    Argument* a = args_heap();
    for (uint32_t i = 0; i < n_args_; ++i) a[i].~Argument();
    ::operator delete(a);
  }
  n_args_ = 0;
}

void Node::assign_args(std::vector<Argument>&& args) {
  if (args.size() > kMaxArgs) throw std::length_error("too many arguments for one node");
  clear_args();
  Argument* dst;
  if (args.size() <= kInlineArgs) {
    dst = reinterpret_cast<Argument*>(args_store_);
  } else {
    dst = static_cast<Argument*>(::operator new(args.size() * sizeof(Argument)));
    std::memcpy(args_store_, &dst, sizeof(dst));
  }
  for (size_t i = 0; i < args.size(); ++i) new (dst + i) Argument(std::move(args[i]));
  n_args_ = static_cast<uint32_t>(args.size());
}

// Note [Use lists]: use lists change only through these two (set_args_kwargs and
// Note [In-place rewiring] call them).
void Node::unlink_use(Use& u) {
  Node* v = u.value();
  Use* head = v->users_head_;
  if (&u == head) {
    v->users_head_ = u.next;
    if (u.next) u.next->prev = u.prev;  // new head inherits the tail link
  } else {
    u.prev->next = u.next;
    if (u.next) u.next->prev = u.prev;
    else head->prev = u.prev;  // u was the tail
  }
  v->mark_dirty(NodeBinding::kUsers);
}

void Node::append_use(Use& u, Node* v) {
  u.next = nullptr;
  Use* head = v->users_head_;
  if (!head) {
    u.prev = &u;
    v->users_head_ = &u;
  } else {
    Use* tail = head->prev;
    tail->next = &u;
    u.prev = tail;
    head->prev = &u;
  }
  v->mark_dirty(NodeBinding::kUsers);
}

void Node::unlink_uses() {
  for (uint32_t i = 0; i < n_inputs_; ++i) unlink_use(const_cast<Use&>(use_at(i)));
  drop_uses();
}

void Node::drop_uses() {
  if (n_inputs_ > kInlineUses) ::operator delete(uses_heap());
  n_inputs_ = 0;
}

namespace {
// Unique input nodes of (args, kwargs) in first-appearance order. Throws for
// erased nodes before anything is modified.
std::vector<Node*> collect_inputs(ArgSpan args, const KwArgs& kwargs) {
  std::vector<Node*> uniq;
  std::unordered_set<Node*> seen;
  bool big = false;
  auto add = [&](Node* n) {
    if (n->erased())
      throw std::invalid_argument("Node '" + std::string(n->name()) +
                                  "' was erased from its graph and cannot be used as an argument");
    if (!big && uniq.size() >= 16) {
      big = true;
      seen.insert(uniq.begin(), uniq.end());
    }
    if (big) {
      if (seen.insert(n).second) uniq.push_back(n);
      return;
    }
    for (Node* m : uniq)
      if (m == n) return;
    uniq.push_back(n);
  };
  for (auto& a : args) a.for_each_node(add);
  for (auto& kv : kwargs) kv.second.for_each_node(add);
  return uniq;
}
}  // namespace

void Node::link_uses() { link_uses(collect_inputs(args(), kwargs())); }

void Node::link_uses(const std::vector<Node*>& uniq) {
  // precondition: n_inputs_ == 0 (unlink_uses ran)
  size_t n = uniq.size();
  if (n > (1u << 31) - 1) throw std::length_error("too many inputs for one node");
  Use* inl = uses_inline();
  HeapUse* heap = nullptr;
  if (n > kInlineUses) {
    heap = static_cast<HeapUse*>(::operator new(n * sizeof(HeapUse)));
    std::memcpy(uses_store_, &heap, sizeof(heap));
  }
  n_inputs_ = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    Node* v = uniq[i];
    Use* u;
    if (heap) {
      HeapUse* h = new (heap + i) HeapUse();
      h->user = this;
      u = &h->use;
      u->bits_ = reinterpret_cast<uintptr_t>(v) | 1;
    } else {
      u = new (inl + i) Use();
      u->bits_ = reinterpret_cast<uintptr_t>(v) | (i << 1);
    }
    append_use(*u, v);
  }
}

void Node::set_args_kwargs(std::vector<Argument> args, KwArgs kwargs) {
  graph()->check_not_busy();
  std::vector<Node*> uniq = collect_inputs(ArgSpan(args.data(), args.size()), kwargs);  // may throw
  if (args.size() > kMaxArgs) throw std::length_error("too many arguments for one node");
  unlink_uses();
  assign_args(std::move(args));
  if (kwargs.empty()) {
    if (cold_) cold_->kwargs.clear();
  } else {
    cold().kwargs = std::move(kwargs);
  }
  link_uses(uniq);
  mark_dirty(NodeBinding::kArgs | NodeBinding::kKwargs);
}

void Node::update_arg(size_t idx, Argument arg) {
  if (idx >= n_args_) throw std::out_of_range("list assignment index out of range");
  std::vector<Argument> a = args().to_vector();
  a[idx] = std::move(arg);
  set_args(std::move(a));
}

void Node::update_kwarg(const std::string& key, Argument arg) {
  KwArgs k = kwargs();
  bool found = false;
  for (auto& kv : k)
    if (kv.first == key) {
      kv.second = std::move(arg);
      found = true;
      break;
    }
  if (!found) k.emplace_back(key, std::move(arg));
  set_kwargs(std::move(k));
}

std::vector<Node*> Node::all_input_nodes() const {
  std::vector<Node*> out;
  out.reserve(n_inputs_);
  for (uint32_t i = 0; i < n_inputs_; ++i) out.push_back(use_at(i).value());
  return out;
}

size_t Node::num_users() const {
  size_t n = 0;
  for (const Use* u = users_head_; u; u = u->next) ++n;
  return n;
}

std::vector<Node*> Node::users_vector() const {
  std::vector<Node*> out;
  for (Node* u : users()) out.push_back(u);
  return out;
}

KwArgs& Node::meta() {
  Cold& c = cold();
  if (!c.meta) c.meta = std::make_unique<KwArgs>();
  return *c.meta;
}

void Node::prepend(Node* x) {
  graph()->check_not_busy();
  if (x->graph() != graph()) throw std::invalid_argument("Attempting to move a Node into a different Graph");
  if (x->op() == Op::Root) throw std::invalid_argument("The graph's root node cannot be moved");
  if (x == this) return;
  if (x->erased_) throw std::invalid_argument("Attempting to move an erased Node");
  Graph* g = graph();
  g->unlink(x);
  g->link_before(this, x);
}

void Node::append(Node* x) {
  if (x->graph() != graph()) throw std::invalid_argument("Attempting to move a Node into a different Graph");
  if (x->op() == Op::Root) throw std::invalid_argument("The graph's root node cannot be moved");
  if (x == this) return;
  if (x->erased_) throw std::invalid_argument("Attempting to move an erased Node");
  // torch.fx: self._next.prepend(x), with _next the raw successor.
  Node* nx = next_;
  if (nx == x) return;  // already right after us
  nx->prepend(x);
}

std::pair<std::vector<Argument>, KwArgs> Node::mapped_args_kwargs(const std::function<Argument(Node*)>& fn) const {
  std::vector<Argument> na;
  na.reserve(n_args_);
  for (auto& a : args()) na.push_back(a.map_nodes(fn));
  KwArgs nk;
  nk.reserve(kwargs().size());
  for (auto& kv : kwargs()) nk.emplace_back(kv.first, kv.second.map_nodes(fn));
  return {std::move(na), std::move(nk)};
}

void Node::map_args_kwargs(const std::function<Argument(Node*)>& fn) {
  auto mapped = mapped_args_kwargs(fn);
  set_args_kwargs(std::move(mapped.first), std::move(mapped.second));
}

// Note [In-place rewiring]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// replace_all_uses_with(node) is the edit rewriting passes make most. Rebuilding each
// user's arguments through set_args_kwargs costs two vectors, a kwargs copy, a copy of
// every container holding the node and a fresh use block per user; for the output node
// of a wide graph that is the whole result tuple per replaced node (quadratic). Where a
// user does not already read `with` (its records would merge) and every container on a
// path to this node in its args/kwargs is its own (unshared:
// Argument::can_replace_node_in_place), the references are re-pointed at `with` in place
// and so is the user's use record for this node. The user's unique inputs keep their
// first-appearance order (`with` takes this node's place), and each of the user's records
// that is not already the tail of its value's users list is unlinked and re-appended, so
// every list ends exactly as set_args_kwargs leaves it (Note [Use lists]: the user moves
// to the tail of each of its inputs' lists, as in torch.fx). Other users, and an erased
// `with` (set_args_kwargs names it in the error), take the general path.
bool Node::rewire_in_place(Node* user, Node* with) {
  if (with->erased_ || with == this) return false;
  for (uint32_t i = 0; i < user->n_inputs_; ++i)
    if (user->use_at(i).value() == with) return false;
  for (const Argument& a : user->args())
    if (!a.can_replace_node_in_place(this)) return false;
  for (const auto& kv : user->kwargs())
    if (!kv.second.can_replace_node_in_place(this)) return false;
  user->graph()->check_not_busy();
  Argument* args = const_cast<Argument*>(user->args_data());
  for (uint32_t k = 0; k < user->n_args_; ++k) args[k].replace_node_in_place(this, with);
  if (user->cold_)
    for (auto& kv : user->cold_->kwargs) kv.second.replace_node_in_place(this, with);
  for (uint32_t i = 0; i < user->n_inputs_; ++i) {
    Use& u = const_cast<Use&>(user->use_at(i));
    Node* v = u.value();
    if (v != this && u.next == nullptr) continue;  // already the tail: re-appending changes nothing
    unlink_use(u);
    if (v == this) {
      u.bits_ = reinterpret_cast<uintptr_t>(with) | (u.bits_ & uintptr_t(7));
      v = with;
    }
    append_use(u, v);
  }
  user->mark_dirty(NodeBinding::kArgs | NodeBinding::kKwargs);
  return true;
}

std::vector<Node*> Node::replace_all_uses_with(const Argument& with, const std::function<bool(Node*)>& filter) {
  std::vector<Node*> to_process = users_vector();
  std::vector<Node*> changed;
  changed.reserve(to_process.size());
  auto repl = [&](Node* n) -> Argument { return n == this ? with : Argument::node(n); };
  Node* with_node = with.is_node() ? with.as_node() : nullptr;
  for (Node* u : to_process) {
    if (filter && !filter(u)) continue;
    // The filter may edit the graph (torch.fx lets it): a user it erased is
    // reported but not rewired. (The caller keeps such users alive, see the
    // header.)
    if (!u->erased() && !(with_node && rewire_in_place(u, with_node))) u->map_args_kwargs(repl);
    changed.push_back(u);
  }
  // torch.fx: `assert len(self.users) - len(skipped) == 0`, checked after the edit.
  if (num_users() != to_process.size() - changed.size()) throw AssertionFailure("");
  return changed;
}

void Node::replace_input_with(Node* old_input, const Argument& new_input) {
  map_args_kwargs([&](Node* n) -> Argument { return n == old_input ? new_input : Argument::node(n); });
}

bool Node::is_impure(const ModuleImpurityFn& module_is_impure) const {
  switch (op()) {
    case Op::Placeholder:
    case Op::Output: return true;
    case Op::CallFunction: {
      const Object& fn = target_.fn();
      return fn && fn.iface()->is_impure_target(fn.get());
    }
    case Op::CallModule: return module_is_impure ? module_is_impure(*this) : false;
    default: return false;
  }
}

std::string Node::to_string() const {
  auto s = format_node();
  return s ? *s : std::string();
}

void Node::print(std::ostream& os) const { os << to_string(); }

std::ostream& operator<<(std::ostream& os, const Node& n) {
  n.print(os);
  return os;
}

}  // namespace fxcpp
