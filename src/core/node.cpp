#include "fxcpp/core/node.h"

#include <algorithm>
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

Node::Node(Graph* g, Op op, const std::string* name, Target target)
    : graph_(g), name_(name), target_(std::move(target)), op_(op) {}

void Node::set_name(const std::string& n) {
  name_ = graph_->intern_name(n);
  ++attrs_version_;
}

const KwArgs& Node::kwargs() const {
  static const KwArgs empty;
  return kwargs_ ? *kwargs_ : empty;
}

const Object& Node::type() const {
  static const Object none;
  return extra_ ? extra_->type : none;
}

void Node::set_type(Object t) {
  if (!extra_) {
    if (!t) return;
    extra_ = std::make_unique<Extra>();
  }
  extra_->type = std::move(t);
}

Node::~Node() { unlink_uses(); }

void Node::set_target(Target t) {
  if (!erased_ && op_ != Op::Root) graph_->bucket_remove(this);
  target_ = std::move(t);
  if (!erased_ && op_ != Op::Root) graph_->bucket_add(this);
  ++attrs_version_;
}

// Note [Use lists]: the only place where use lists change.
void Node::unlink_uses() {
  for (Use& u : inputs_) {
    Node* v = u.value;
    if (u.prev) u.prev->next = u.next; else v->users_head_ = u.next;
    if (u.next) u.next->prev = u.prev; else v->users_tail_ = u.prev;
    --v->num_users_;
    ++v->users_version_;
  }
  inputs_.clear();
}

namespace {
// Unique input nodes of (args, kwargs) in first-appearance order. Throws for
// erased nodes before anything is modified.
std::vector<Node*> collect_inputs(const std::vector<Argument>& args, const KwArgs& kwargs) {
  std::vector<Node*> uniq;
  std::unordered_set<Node*> seen;
  bool big = false;
  auto add = [&](Node* n) {
    if (n->erased())
      throw std::invalid_argument("Node '" + n->name() + "' was erased from its graph and cannot be used as an argument");
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

void Node::link_uses() { link_uses(collect_inputs(args_, kwargs())); }

void Node::link_uses(const std::vector<Node*>& uniq) {
  inputs_.resize(uniq.size());
  for (size_t i = 0; i < uniq.size(); ++i) {
    Use& u = inputs_[i];
    Node* v = uniq[i];
    u.value = v;
    u.user = this;
    u.next = nullptr;
    u.prev = v->users_tail_;
    if (v->users_tail_) v->users_tail_->next = &u; else v->users_head_ = &u;
    v->users_tail_ = &u;
    ++v->num_users_;
    ++v->users_version_;
  }
}

void Node::set_args_kwargs(std::vector<Argument> args, KwArgs kwargs) {
  std::vector<Node*> uniq = collect_inputs(args, kwargs);  // may throw: nothing changed yet
  unlink_uses();
  args_ = std::move(args);
  if (kwargs.empty()) kwargs_.reset();
  else if (kwargs_) *kwargs_ = std::move(kwargs);
  else kwargs_ = std::make_unique<KwArgs>(std::move(kwargs));
  link_uses(uniq);
  ++args_version_;
}

void Node::update_arg(size_t idx, Argument arg) {
  if (idx >= args_.size()) throw std::out_of_range("list assignment index out of range");
  std::vector<Argument> a = args_;
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
  out.reserve(inputs_.size());
  for (auto& u : inputs_) out.push_back(u.value);
  return out;
}

std::vector<Node*> Node::users_vector() const {
  std::vector<Node*> out;
  out.reserve(num_users_);
  for (Node* u : users()) out.push_back(u);
  return out;
}

KwArgs& Node::meta() {
  if (!extra_) extra_ = std::make_unique<Extra>();
  if (!extra_->meta) extra_->meta = std::make_unique<KwArgs>();
  return *extra_->meta;
}

Node* Node::next() const {
  Node* n = next_;
  while (n->erased_) n = n->next_;
  return n;
}

Node* Node::prev() const {
  Node* n = prev_;
  while (n->erased_) n = n->prev_;
  return n;
}

void Node::prepend(Node* x) {
  if (x->graph_ != graph_) throw std::invalid_argument("Attempting to move a Node into a different Graph");
  if (x->op_ == Op::Root) throw std::invalid_argument("The graph's root node cannot be moved");
  if (x == this) return;
  if (x->erased_) throw std::invalid_argument("Attempting to move an erased Node");
  graph_->unlink(x);
  graph_->link_before(this, x);
}

void Node::append(Node* x) {
  if (x->graph_ != graph_) throw std::invalid_argument("Attempting to move a Node into a different Graph");
  if (x->op_ == Op::Root) throw std::invalid_argument("The graph's root node cannot be moved");
  if (x == this) return;
  // torch.fx: self._next.prepend(x), with _next the raw successor.
  Node* nx = next_;
  if (nx == x) return;  // already right after us
  nx->prepend(x);
}

std::pair<std::vector<Argument>, KwArgs> Node::mapped_args_kwargs(const std::function<Argument(Node*)>& fn) const {
  std::vector<Argument> na;
  na.reserve(args_.size());
  for (auto& a : args_) na.push_back(a.map_nodes(fn));
  KwArgs nk;
  nk.reserve(kwargs().size());
  for (auto& kv : kwargs()) nk.emplace_back(kv.first, kv.second.map_nodes(fn));
  return {std::move(na), std::move(nk)};
}

void Node::map_args_kwargs(const std::function<Argument(Node*)>& fn) {
  auto mapped = mapped_args_kwargs(fn);
  set_args_kwargs(std::move(mapped.first), std::move(mapped.second));
}

std::vector<Node*> Node::replace_all_uses_with(const Argument& with, const std::function<bool(Node*)>& filter) {
  std::vector<Node*> to_process = users_vector();
  std::vector<Node*> changed;
  changed.reserve(to_process.size());
  auto repl = [&](Node* n) -> Argument { return n == this ? with : Argument::node(n); };
  for (Node* u : to_process) {
    if (filter && !filter(u)) continue;
    u->map_args_kwargs(repl);
    changed.push_back(u);
  }
  return changed;
}

void Node::replace_input_with(Node* old_input, const Argument& new_input) {
  map_args_kwargs([&](Node* n) -> Argument { return n == old_input ? new_input : Argument::node(n); });
}

bool Node::is_impure() const {
  switch (op_) {
    case Op::Placeholder:
    case Op::Output: return true;
    case Op::CallFunction: return target_.fn && target_.fn.iface()->is_impure_target(target_.fn.get());
    case Op::CallModule: return graph_->module_impure_fn() ? graph_->module_impure_fn()(*this) : false;
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
