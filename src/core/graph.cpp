#include "fxcpp/core/graph.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace fxcpp {

namespace {
constexpr uint64_t kGap = uint64_t(1) << 20;
// The target of every output node (interned once).
Target output_target() {
  static const InternedString kOutput("output");
  return Target(kOutput);
}
constexpr uint64_t kEnd = uint64_t(1) << 62;  // order key of the root seen as "end"
}  // namespace

// ---------------------------------------------------------------- InsertGuard
InsertGuard::InsertGuard(Graph* g, Node* anchor, bool after)
    : g_(g), old_anchor_(g->insert_anchor_), old_after_(g->insert_after_) {
  g->set_insert_point(anchor, after);
}
InsertGuard::InsertGuard(InsertGuard&& o) noexcept : g_(o.g_), old_anchor_(o.old_anchor_), old_after_(o.old_after_) {
  o.g_ = nullptr;
}
InsertGuard::~InsertGuard() {
  if (g_) g_->set_insert_point(old_anchor_, old_after_);
}

// ----------------------------------------------------------------- NodeRange
NodeRange::iterator::iterator(Node* cur, Node* root, bool reverse) : cur_(cur), root_(root), reverse_(reverse) {
  root_->graph()->iterator_opened();
}
NodeRange::iterator::iterator(const iterator& o) : cur_(o.cur_), root_(o.root_), reverse_(o.reverse_) {
  root_->graph()->iterator_opened();
}
NodeRange::iterator& NodeRange::iterator::operator=(const iterator& o) {
  if (this != &o) {
    o.root_->graph()->iterator_opened();
    root_->graph()->iterator_closed();
    cur_ = o.cur_;
    root_ = o.root_;
    reverse_ = o.reverse_;
  }
  return *this;
}
NodeRange::iterator::~iterator() { root_->graph()->iterator_closed(); }
NodeRange::iterator NodeRange::begin() const {
  Node* first = reverse_ ? root_->prev() : root_->next();
  return iterator(first, root_, reverse_);
}

// ---------------------------------------------------------------------- Graph
Graph::Graph() {
  root_ = new (allocate_node()) Node(Op::Root, NameRef(), Target());
  root_->prev_ = root_->next_ = root_;
  insert_anchor_ = root_;
}

Graph::~Graph() {
  // Bindings first, while every node is still intact.
  if (observer_) {
    for (Node* n = root_->next_; n != root_; n = n->next_)
      if (n->binding()) observer_->on_destroy(*n);
    if (root_->binding()) observer_->on_destroy(*root_);
  }
  // Edges that cross into other graphs (only lint-invalid graphs have them)
  // are cut while every node is still alive: foreign users lose the
  // reference (it becomes None), and our nodes reading foreign nodes leave
  // their users lists.
  for (Node* n = root_->next_; n != root_; n = n->next_) {
    std::vector<Node*> foreign_users;
    for (Node* u : n->users())
      if (u->graph() != this) foreign_users.push_back(u);
    for (Node* u : foreign_users) u->replace_input_with(n, Argument());
    bool reads_foreign = false;
    for (size_t i = 0; i < n->num_inputs(); ++i) reads_foreign = reads_foreign || n->use_at(i).value()->graph() != this;
    if (reads_foreign) n->unlink_uses();
  }
  // Every remaining use is internal: drop them without unlinking and free.
  Node* n = root_->next_;
  while (n != root_) {
    Node* nx = n->next_;
    n->drop_uses();
    n->users_head_ = nullptr;
    n->~Node();
    n = nx;
  }
  root_->drop_uses();
  root_->users_head_ = nullptr;
  root_->~Node();
  // Tombstones and graveyard nodes were unlinked from the list only by flag,
  // so the walk above destroyed them too; slabs free the memory.
  for (auto& slab : slabs_) delete[] reinterpret_cast<detail::SlabHeader*>(slab.get())->bindings;
}

// Note [Slab cache]
// ~~~~~~~~~~~~~~~~~
// Freed slabs go to a process-wide cache (up to kSlabCacheBytes) that later
// graphs draw from before asking the allocator. Memory the kernel has already
// faulted in is reused, so building, copying and dropping large graphs does
// not pay a page fault per 4 KiB each time (first-touch zeroing dominated
// graph_copy of 1e6 nodes). release_slab_cache() returns the cache to the
// allocator.
// Note [Slab mapping]
// ~~~~~~~~~~~~~~~~~~~
// A 64 KiB slab aligned to 64 KiB is a poor fit for malloc: glibc serves
// such a request by mapping 128 KiB and keeping the unused tail inside the
// block, about 35 KiB of slack per slab (measured: 100 KB usable per 64 KiB
// slab once the heap's mmap threshold is at its default). Slabs are
// therefore mapped directly, kSlabsPerMapping at a time, from a mapping
// trimmed to 64 KiB alignment; each slab is returned on its own (munmap
// works page by page). Slabs mapped but not yet handed out are untouched
// virtual memory. slab_bytes_in_use() counts the slabs handed out, for
// memory accounting. Under AddressSanitizer slabs come from the aligned
// operator new instead, so that ASan sees them.
namespace {
constexpr size_t kSlabCacheBytes = size_t(256) << 20;
constexpr size_t kSlabsPerMapping = 16;
struct SlabCache {
  std::mutex mu;
  std::vector<unsigned char*> slabs;  // freed, ready for reuse (faulted in)
  std::vector<unsigned char*> fresh;  // mapped, never handed out
  size_t in_use = 0;                  // slabs handed out
};
SlabCache& slab_cache() {
  static SlabCache* c = new SlabCache();  // never destroyed: usable during static teardown
  return *c;
}

#if defined(__SANITIZE_ADDRESS__)
#define FXCPP_SLABS_FROM_NEW 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FXCPP_SLABS_FROM_NEW 1
#endif
#endif

#ifdef FXCPP_SLABS_FROM_NEW
unsigned char* map_slab(SlabCache&) {
  return static_cast<unsigned char*>(::operator new(detail::kSlabBytes, std::align_val_t(detail::kSlabBytes)));
}
void unmap_slab(unsigned char* p) { ::operator delete(p, std::align_val_t(detail::kSlabBytes)); }
#else
// Called with c.mu held.
unsigned char* map_slab(SlabCache& c) {
  if (c.fresh.empty()) {
    const size_t want = kSlabsPerMapping * detail::kSlabBytes;
    const size_t len = want + detail::kSlabBytes;  // room to align
    void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    uintptr_t base = reinterpret_cast<uintptr_t>(m);
    uintptr_t aligned = (base + detail::kSlabBytes - 1) & ~(uintptr_t(detail::kSlabBytes) - 1);
    if (aligned > base) ::munmap(m, aligned - base);
    uintptr_t end = base + len;
    if (end > aligned + want) ::munmap(reinterpret_cast<void*>(aligned + want), end - (aligned + want));
    for (size_t i = kSlabsPerMapping; i-- > 0;)
      c.fresh.push_back(reinterpret_cast<unsigned char*>(aligned + i * detail::kSlabBytes));
  }
  unsigned char* s = c.fresh.back();
  c.fresh.pop_back();
  return s;
}
void unmap_slab(unsigned char* p) { ::munmap(p, detail::kSlabBytes); }
#endif

unsigned char* take_slab() {
  SlabCache& c = slab_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  unsigned char* s;
  if (!c.slabs.empty()) {
    s = c.slabs.back();
    c.slabs.pop_back();
  } else {
    s = map_slab(c);
  }
  ++c.in_use;
  return s;
}
}  // namespace

void Graph::SlabDeleter::operator()(unsigned char* p) const {
  SlabCache& c = slab_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    --c.in_use;
    if (c.slabs.size() < kSlabCacheBytes / detail::kSlabBytes) {
      c.slabs.push_back(p);
      return;
    }
  }
  unmap_slab(p);
}

size_t release_slab_cache() {
  SlabCache& c = slab_cache();
  std::vector<unsigned char*> slabs;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    slabs.swap(c.slabs);
  }
  for (unsigned char* p : slabs) unmap_slab(p);
  return slabs.size() * detail::kSlabBytes;
}

size_t slab_bytes_in_use() {
  SlabCache& c = slab_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.in_use * detail::kSlabBytes;
}

size_t Graph::BucketKeyHash::operator()(const BucketKey& k) const {
  return std::hash<const void*>()(k.key) * 31 + static_cast<size_t>(k.op);
}

// Note [find_nodes order]
// ~~~~~~~~~~~~~~~~~~~~~~~
// find_nodes answers from buckets kept as torch.fx 2.x keeps its lookup table:
// one per (call_function, target), one per other opcode (a target given for
// those is a filter over the opcode's bucket). A bucket lists its nodes in the
// order they entered it: a node enters at creation and moves to the end when
// its target changes, or when anything assigns one of its attributes
// (torch.fx's Node.__setattr__ takes the node out of the table and puts it
// back: touch_lookup, which the bindings call). find_nodes(sort=false) returns
// that order, as torch.fx does; sort=true, the graph's order. Moving a node
// in the list does not change its place in the bucket.
Graph::BucketKey Graph::key_of(Op op, const Target& t) {
  return BucketKey{op, op == Op::CallFunction ? t.identity() : nullptr};
}

void Graph::touch_lookup(Node* n) {
  if (n->graph() != this || n->erased_ || n->op() == Op::Root) return;
  bucket_remove(n);
  bucket_add(n);
}

void Graph::bucket_add(Node* n) {
  Bucket& b = buckets_[key_of(n->op(), n->target_)];
  uint32_t id = n->index() + 1;
  n->bucket_prev_ = b.tail;
  n->bucket_next_ = 0;
  if (b.tail) node_at(b.tail - 1)->bucket_next_ = id; else b.head = id;
  b.tail = id;
  ++b.count;
}

void Graph::bucket_remove(Node* n) {
  auto it = buckets_.find(key_of(n->op(), n->target_));
  if (it == buckets_.end()) return;
  Bucket& b = it->second;
  if (n->bucket_prev_) node_at(n->bucket_prev_ - 1)->bucket_next_ = n->bucket_next_; else b.head = n->bucket_next_;
  if (n->bucket_next_) node_at(n->bucket_next_ - 1)->bucket_prev_ = n->bucket_prev_; else b.tail = n->bucket_prev_;
  n->bucket_prev_ = n->bucket_next_ = 0;
  if (--b.count == 0) buckets_.erase(it);
}

void Graph::link_before(Node* pos, Node* n) {
  Node* p = pos->prev_;
  p->next_ = n;
  n->prev_ = p;
  n->next_ = pos;
  pos->prev_ = n;
  assign_order(n);
}

void Graph::unlink(Node* n) {
  n->prev_->next_ = n->next_;
  n->next_->prev_ = n->prev_;
  n->prev_ = n->next_ = n;
}

void Graph::assign_order(Node* n) {
  uint64_t lo = n->prev_ == root_ ? 0 : n->prev_->order_;
  uint64_t hi = n->next_ == root_ ? kEnd : n->next_->order_;
  if (n->next_ == root_ && lo + kGap < kEnd) {
    n->order_ = lo + kGap;
    return;
  }
  if (hi > lo + 1) {
    n->order_ = lo + (hi - lo) / 2;
    return;
  }
  // Out of room: spread a growing window around n evenly (amortized cheap).
  Node* left = n;
  Node* right = n;
  size_t count = 1;
  for (size_t want = 2;; want *= 2) {
    while (count < want && (left->prev_ != root_ || right->next_ != root_)) {
      if (left->prev_ != root_) { left = left->prev_; ++count; }
      if (count < want && right->next_ != root_) { right = right->next_; ++count; }
    }
    uint64_t wlo = left->prev_ == root_ ? 0 : left->prev_->order_;
    uint64_t whi = right->next_ == root_ ? kEnd : right->next_->order_;
    if (whi - wlo > (count + 1) * 64 || (left->prev_ == root_ && right->next_ == root_)) {
      uint64_t step = (whi - wlo) / (count + 1);
      if (left->prev_ == root_ && right->next_ == root_) step = std::min<uint64_t>(kGap, step);
      uint64_t k = wlo;
      for (Node* x = left;; x = x->next_) {
        k += step;
        x->order_ = k;
        if (x == right) break;
      }
      return;
    }
  }
}

void Graph::set_insert_point(Node* anchor, bool after) {
  insert_anchor_ = anchor ? anchor : root_;
  insert_after_ = after;
}

InsertGuard Graph::inserting_before(Node* n) {
  if (!n) return InsertGuard(this, root_, true);  // torch.fx: inserting_after(root)
  if (n->graph() != this) throw std::invalid_argument("Node to insert before is not in graph.");
  return InsertGuard(this, n, false);
}

InsertGuard Graph::inserting_after(Node* n) {
  if (!n) return InsertGuard(this, root_, false);  // torch.fx: inserting_before(root)
  if (n->graph() != this) throw std::invalid_argument("Node to insert after is not in graph.");
  return InsertGuard(this, n, true);
}

Node* Graph::create_node(Op op, Target target, std::vector<Argument> args, KwArgs kwargs,
                         const std::optional<std::string>& name, Object type) {
  if (op == Op::Root) throw std::invalid_argument("cannot create a node with op 'root'");
  if (op == Op::CallFunction && !target.is_object())
    throw std::invalid_argument("call_function target must be a callable object");
  if (op != Op::CallFunction && target.is_object())
    throw std::invalid_argument(std::string(op_name(op)) + " target must be a string");
  NameRef uniq = names_.create_name(name ? *name : target_to_str(target), nullptr);
  return make_node(op, uniq, std::move(target), std::move(args), std::move(kwargs), std::move(type));
}

std::string Graph::target_to_str(const Target& target) {
  if (target.is_object()) return snake_case(target.fn().name());
  // torch.fx: `target[2:-2] if _is_magic(target)`; for "__" and "___" the
  // prefix and suffix overlap and the slice is empty.
  std::string_view t = target.str().get();
  if (t.size() >= 2 && t.substr(0, 2) == "__" && t.substr(t.size() - 2) == "__")
    t = t.size() >= 4 ? t.substr(2, t.size() - 4) : std::string_view();
  return snake_case(t);
}

void Graph::throw_busy() const {
  throw GraphBusyError(
      "the graph cannot be edited while it is being printed, generating code or copied from (an argument's "
      "__repr__/__str__ or an arg_transform tried to)");
}

Node* Graph::make_node(Op op, NameRef uniq, Target target, std::vector<Argument> args, KwArgs kwargs, Object type) {
  check_not_busy();
  Node* n = new (allocate_node()) Node(op, uniq, std::move(target));
  try {
    if (type) n->set_type(std::move(type));
    n->assign_args(std::move(args));
    if (!kwargs.empty()) n->cold().kwargs = std::move(kwargs);
    n->link_uses();  // validates arguments before linking anything; may throw
  } catch (...) {
    free_node(n);
    throw;
  }
  // torch.fx: _insert = anchor.prepend (before) or anchor.append (after).
  Node* pos = insert_after_ ? insert_anchor_->next_ : insert_anchor_;
  link_before(pos, n);
  bucket_add(n);
  ++size_;
  return n;
}

Node* Graph::placeholder(const std::string& name, Object type, std::optional<Argument> default_value) {
  std::vector<Argument> args;
  if (default_value) args.push_back(std::move(*default_value));
  return create_node(Op::Placeholder, Target(name), std::move(args), {}, name, std::move(type));
}

Node* Graph::get_attr(const std::string& qualified_name, Object type) {
  return create_node(Op::GetAttr, Target(qualified_name), {}, {}, std::nullopt, std::move(type));
}

Node* Graph::call_function(Object fn, std::vector<Argument> args, KwArgs kwargs, Object type) {
  return create_node(Op::CallFunction, Target(std::move(fn)), std::move(args), std::move(kwargs), std::nullopt,
                     std::move(type));
}

Node* Graph::call_method(const std::string& method, std::vector<Argument> args, KwArgs kwargs, Object type) {
  return create_node(Op::CallMethod, Target(method), std::move(args), std::move(kwargs), std::nullopt, std::move(type));
}

Node* Graph::call_module(const std::string& module, std::vector<Argument> args, KwArgs kwargs, Object type) {
  return create_node(Op::CallModule, Target(module), std::move(args), std::move(kwargs), std::nullopt, std::move(type));
}

Node* Graph::output(Argument result, Object type) {
  return create_node(Op::Output, output_target(), {std::move(result)}, {}, std::nullopt, std::move(type));
}

Node* Graph::node_copy(const Node& node, const std::function<Argument(Node*)>& arg_transform) {
  std::pair<std::vector<Argument>, KwArgs> mapped;
  if (arg_transform) {
    Graph::BusyScope busy(*node.graph());  // the transform must not edit the args being mapped
    mapped = node.mapped_args_kwargs(arg_transform);
  } else {
    mapped = std::make_pair(node.args().to_vector(), node.kwargs());
  }
  Node* n = create_node(node.op(), node.target_, std::move(mapped.first), std::move(mapped.second),
                        std::string(node.name()), node.type());
  if (node.has_meta()) n->meta() = *node.cold_->meta;
  return n;
}

std::optional<Argument> Graph::graph_copy(const Graph& other, std::unordered_map<const Node*, Argument>& val_map,
                                          const Node** output_node) {
  auto lookup = [&](Node* n) -> Argument {
    auto it = val_map.find(n);
    if (it == val_map.end())
      throw UnmappedNode(n, "graph_copy: node '" + std::string(n->name()) + "' has no mapped value");
    return it->second;
  };
  for (Node* node : other.nodes()) {
    if (val_map.count(node)) continue;
    if (node->op() == Op::Output) {
      if (output_node) *output_node = node;
      // torch.fx maps `node.args[0]`: an output without args raises IndexError.
      if (node->args().empty()) throw std::out_of_range("tuple index out of range");
      return node->args()[0].map_nodes(lookup);
    }
    val_map[node] = Argument::node(node_copy(*node, lookup));
  }
  return std::nullopt;
}

std::unique_ptr<Graph> Graph::clone() const {
  // Old -> new mapping in a side table indexed by node index (no hashing).
  auto g = std::make_unique<Graph>();
  std::vector<Node*> map(node_capacity(), nullptr);
  auto mapped = [&map](Node* n) { return Argument::node(map[n->index()]); };
  // Note [Cloning the namespace]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Re-creating N names one by one costs a random probe into an N-entry
  // table each. When the namespace holds exactly the names of the nodes
  // being copied (no renames, no erased or reserved names, no associations)
  // and the output comes last, the copy's namespace ends up as the same set
  // anyway: every copied node keeps its unique name, and the output, named
  // last, takes the first free name in its "output", "output_1", ...
  // sequence, which is the one it has (the names it skipped are still
  // taken). So the table is copied as a block and each node takes the
  // copy's text of its own name.
  bool whole_namespace = names_from_namespace() && names_.size() == size_ && names_.no_associations();
  if (whole_namespace) {
    std::vector<Node*> outputs = find_nodes(Op::Output);
    whole_namespace = outputs.empty() || (outputs.size() == 1 && outputs[0] == root_->prev());
  }
  if (whole_namespace) g->names_.copy_from(names_);
  else g->names_.reserve(size_);
  for (Node* n : nodes()) {
    if (n->op() == Op::Output) {
      // As output(): the first argument only; the type, not the meta.
      Argument result = n->args().empty() ? Argument() : n->args()[0].map_nodes(mapped);
      if (whole_namespace)
        g->make_node(Op::Output, g->names_.translate(names_, n->name_), output_target(), {std::move(result)}, {},
                     n->type());
      else
        g->output(std::move(result), n->type());
      break;
    }
    if (!whole_namespace) {
      map[n->index()] = g->node_copy(*n, mapped);
      continue;
    }
    auto m = n->mapped_args_kwargs(mapped);
    Node* c = g->make_node(n->op(), g->names_.translate(names_, n->name_), n->target_, std::move(m.first),
                           std::move(m.second), n->type());
    if (n->has_meta()) c->meta() = *n->cold_->meta;
    map[n->index()] = c;
  }
  return g;
}

void Graph::erase_node(Node* n) {
  if (n->graph() != this || n->op() == Op::Root) throw std::invalid_argument("Node is not in this graph");
  if (n->erased_) return;
  check_not_busy();
  if (n->has_users()) {
    std::ostringstream os;
    os << "Tried to erase Node " << n->name() << " but it still had " << n->num_users()
       << " users in the graph: {";
    bool first = true;
    for (Node* u : n->users()) {
      os << (first ? "" : ", ") << u->name() << ": None";
      first = false;
    }
    os << "}!";
    throw std::runtime_error(os.str());
  }
  // torch.fx replaces Node arguments of the erased node by None.
  n->map_args_kwargs([](Node*) { return Argument(); });
  bucket_remove(n);
  --size_;
  if (insert_anchor_ == n) {
    // Keep inserting at the same place relative to the live neighbours.
    insert_anchor_ = insert_after_ ? n->prev() : n->next();
  }
  if (n->binding() && observer_) {
    n->erased_ = true;
    observer_->on_tombstone(*n);  // may call release_tombstone(n) re-entrantly
    return;
  }
  if (iterators_ > 0) {
    n->erased_ = true;  // freed when the last iterator ends
    graveyard_.push_back(n);
    return;
  }
  unlink(n);
  free_node(n);
}

// Note [Node slabs]: nodes come from per-graph slabs so that a graph built in
// order is laid out in order (iteration, lint and codegen stream through
// memory). Freed nodes go to a free list reused by later creations.
void* Graph::allocate_node() {
  if (free_list_) {
    void* p = free_list_;
    free_list_ = *static_cast<void**>(p);
    return p;
  }
  if (slab_used_ == detail::kNodesPerSlab) {
    if (slabs_.size() >= (size_t(UINT32_MAX) - 1) / detail::kNodesPerSlab)
      throw std::length_error("too many nodes in one graph");
    unsigned char* slab = take_slab();
    slabs_.emplace_back(slab);
    auto* h = reinterpret_cast<detail::SlabHeader*>(slab);
    h->graph = this;
    h->first_index = static_cast<uint32_t>((slabs_.size() - 1) * detail::kNodesPerSlab);
    h->bindings = nullptr;
    h->reserved = 0;
    slab_used_ = 0;
  }
  unsigned char* slab = slabs_.back().get();
  return slab + detail::kSlabHeaderBytes + (slab_used_++) * sizeof(Node);
}

void Graph::free_node(Node* n) {
  n->set_binding(nullptr);  // the slot may be reused: no stale binding
  n->~Node();
  *reinterpret_cast<void**>(n) = free_list_;
  free_list_ = n;
}

NameRef Graph::intern_name(std::string_view n) {
  ++renames_;
  if (auto s = names_.find(n)) return *s;
  return names_.store_unindexed(n);
}

void Graph::iterator_closed() {
  if (--iterators_ != 0 || graveyard_.empty()) return;
  std::vector<Node*> dead;
  dead.swap(graveyard_);
  for (Node* n : dead) {
    if (n->binding()) continue;  // a binding took it over: it is a tombstone now
    unlink(n);
    free_node(n);
  }
}

void Graph::release_tombstone(Node* n) {
  if (!n->erased_) return;
  if (iterators_ > 0) {
    graveyard_.push_back(n);  // an iterator may be parked on it
    return;
  }
  unlink(n);
  free_node(n);
}

std::vector<Node*> Graph::find_nodes(Op op, const Target* target, bool sort) const {
  std::vector<Node*> out;
  if (target || op != Op::CallFunction) {
    // Note [find_nodes order]: the one bucket of (call_function, target), or of the opcode.
    auto it = buckets_.find(key_of(op, target ? *target : Target()));
    if (it == buckets_.end()) return out;
    const void* want = target && op != Op::CallFunction ? target->identity() : nullptr;
    out.reserve(want ? 0 : it->second.count);
    for (uint32_t i = it->second.head; i; i = node_at(i - 1)->bucket_next_) {
      Node* n = node_at(i - 1);
      if (!want || n->target_.identity() == want) out.push_back(n);
    }
  } else {
    for (auto& kv : buckets_)
      if (kv.first.op == op)
        for (uint32_t i = kv.second.head; i; i = node_at(i - 1)->bucket_next_) out.push_back(node_at(i - 1));
  }
  if (sort) std::sort(out.begin(), out.end(), [](Node* a, Node* b) { return a->order_ < b->order_; });
  return out;
}

std::string Graph::to_string() const {
  std::ostringstream os;
  print(os);
  return os.str();
}

void Graph::dump() const { std::cerr << to_string() << "\n"; }

std::ostream& operator<<(std::ostream& os, const Graph& g) {
  g.print(os);
  return os;
}

}  // namespace fxcpp
