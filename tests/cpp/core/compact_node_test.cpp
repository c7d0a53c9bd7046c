// Note [Compact nodes] / [Node slabs] / [Slab cache] / [Binding dirty bits]:
// the storage tricks behind the 160-byte Node, checked through the public API.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fxcpp/core/graph.h"
#include "fxcpp/passes/lint.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

TEST(CompactNode, IndexAndGraphComeFromTheSlab) {
  Graph g;
  Graph h;
  std::set<uint32_t> seen;
  Node* prev = g.placeholder("x");
  // enough nodes to span several slabs
  for (int i = 0; i < 3 * static_cast<int>(detail::kNodesPerSlab); ++i)
    prev = g.call_function(F(kRelu), {N(prev)});
  for (Node* n : g.nodes()) {
    EXPECT_EQ(n->graph(), &g);
    EXPECT_LT(n->index(), g.node_capacity());
    EXPECT_EQ(g.node_at(n->index()), n);
    EXPECT_TRUE(seen.insert(n->index()).second);
  }
  Node* y = h.placeholder("y");
  EXPECT_EQ(y->graph(), &h);
  EXPECT_EQ(g.root()->graph(), &g);
}

TEST(CompactNode, ArgumentsSpillAndShrink) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* c = g.call_function(F(kAdd), {N(x), N(y)});  // inline
  ASSERT_EQ(c->args().size(), 2u);
  c->set_args({N(x), I(1), N(y), I(2), N(x)});  // spills
  ASSERT_EQ(c->args().size(), 5u);
  EXPECT_EQ(c->args()[2].as_node(), y);
  EXPECT_EQ(c->args()[3].as_int(), 2);
  EXPECT_EQ(c->all_input_nodes(), (std::vector<Node*>{x, y}));
  c->set_args({I(7)});  // back inline
  ASSERT_EQ(c->args().size(), 1u);
  EXPECT_EQ(c->args()[0].as_int(), 7);
  EXPECT_FALSE(x->has_users());
  lint(g);
}

TEST(CompactNode, UsersOfSpilledAndInlineUsesDeriveTheirUser) {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Node* one = g.call_function(F(kNeg), {N(a)});                         // 1 inline use
  Node* two = g.call_function(F(kAdd), {N(a), N(b)});                   // 2 inline uses
  Node* three = g.call_function(F(kAdd), {Argument::list({N(a), N(b), N(c)})});  // heap uses
  g.output(Argument::tuple({N(one), N(two), N(three)}));
  EXPECT_EQ(a->users_vector(), (std::vector<Node*>{one, two, three}));
  EXPECT_EQ(b->users_vector(), (std::vector<Node*>{two, three}));
  EXPECT_EQ(c->users_vector(), (std::vector<Node*>{three}));
  for (size_t i = 0; i < three->num_inputs(); ++i) EXPECT_EQ(three->input_use(i).user(), three);
  EXPECT_EQ(two->input_use(1).user(), two);
  EXPECT_EQ(two->input_use(1).value(), b);
  // Removing the head, a middle record and the tail keeps the circular prev
  // link (head->prev == tail) right; lint walks the records.
  two->replace_input_with(a, Argument());   // a: middle record goes
  EXPECT_EQ(a->users_vector(), (std::vector<Node*>{one, three}));
  lint(g);
  one->replace_input_with(a, Argument());   // head goes
  EXPECT_EQ(a->users_vector(), (std::vector<Node*>{three}));
  EXPECT_EQ(a->first_use()->prev, a->first_use());
  lint(g);
  three->set_args({N(b)});                  // tail (and only) record of a and c go
  EXPECT_FALSE(a->has_users());
  EXPECT_FALSE(c->has_users());
  EXPECT_EQ(b->users_vector(), (std::vector<Node*>{two, three}));
  EXPECT_EQ(b->num_users(), 2u);
  lint(g);
}

TEST(CompactNode, LongAndRenamedNamesLiveInTheArena) {
  Graph g;
  std::string big(100000, 'v');  // longer than an arena chunk
  Node* p = g.placeholder(big);
  EXPECT_EQ(p->name(), big);
  EXPECT_EQ(std::string(p->name_c_str()), big);
  Node* q = g.placeholder("q");
  q->set_name("renamed");
  EXPECT_EQ(q->name(), "renamed");
  EXPECT_FALSE(g.names_from_namespace());
  EXPECT_EQ(g.root()->name(), "");
}

TEST(CompactNode, BindingDirtyBits) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.call_function(F(kNeg), {N(x)});
  NodeBinding bx, by;
  x->set_binding(&bx);
  y->set_binding(&by);
  EXPECT_EQ(y->binding(), &by);
  bx.dirty = by.dirty = 0;
  y->set_args({N(x), I(1)});
  EXPECT_EQ(by.dirty, NodeBinding::kArgs | NodeBinding::kKwargs);
  EXPECT_EQ(bx.dirty, NodeBinding::kUsers);
  bx.dirty = by.dirty = 0;
  y->set_name("z");
  EXPECT_EQ(by.dirty, NodeBinding::kAttrs);
  x->set_binding(nullptr);
  y->set_binding(nullptr);
  EXPECT_EQ(x->binding(), nullptr);
}

TEST(SlabCache, ReleasedSlabsAreReusedAndCanBeFreed) {
  release_slab_cache();
  { Graph g; g.placeholder("x"); }  // one slab goes to the cache
  EXPECT_GE(release_slab_cache(), detail::kSlabBytes);
  EXPECT_EQ(release_slab_cache(), 0u);
}

TEST(CompactNode, SlabsAreCountedWhileOwned) {
  // Note [Slab mapping]: slab_bytes_in_use() follows the slabs live graphs own.
  release_slab_cache();
  size_t before = slab_bytes_in_use();
  {
    Graph g;
    Node* prev = g.placeholder("x");
    for (int i = 0; i < 3000; ++i) prev = g.call_function(F(kAdd), {N(prev), I(i)});
    size_t owned = slab_bytes_in_use() - before;
    EXPECT_EQ(owned % detail::kSlabBytes, 0u);
    EXPECT_EQ(owned / detail::kSlabBytes, (3002 + detail::kNodesPerSlab - 1) / detail::kNodesPerSlab);
    // The graph and index are found from the address of a node in a mapped slab.
    EXPECT_EQ(prev->graph(), &g);
    EXPECT_EQ(g.node_at(prev->index()), prev);
  }
  EXPECT_EQ(slab_bytes_in_use(), before);
  // Freed slabs wait in the cache and are reused by the next graph.
  EXPECT_GT(release_slab_cache(), 0u);
}
