#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "fxcpp/passes/dce.h"
#include "fxcpp/passes/lint.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {
std::vector<std::string> user_names(const Node* n) {
  std::vector<std::string> out;
  for (Node* u : n->users()) out.emplace_back(u->name());
  return out;
}
}  // namespace

TEST(Graph, BuildAndPrint) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y", {}, I(3));
  Node* a = g.call_function(F(kAdd), {N(x), N(y)});
  Node* r = g.call_method("relu", {N(a)});
  Node* s = g.call_method("sum", {N(r)}, {{"dim", I(-1)}, {"keepdim", Argument::boolean(true)}});
  g.output(N(s));
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %y : [#users=1] = placeholder[target=y](default=3)\n"
            "    %add : [#users=1] = call_function[target=operator.add](args = (%x, %y), kwargs = {})\n"
            "    %relu : [#users=1] = call_method[target=relu](args = (%add,), kwargs = {})\n"
            "    %sum_1 : [#users=1] = call_method[target=sum](args = (%relu,), kwargs = {dim: -1, keepdim: True})\n"
            "    return sum_1");
  EXPECT_EQ(g.size(), 6u);
  EXPECT_EQ(r->to_string(), "%relu : [#users=1] = call_method[target=relu](args = (%add,), kwargs = {})");
}

TEST(Graph, CreateNodeRejectsWrongTargetKinds) {
  Graph g;
  EXPECT_THROW(g.create_node(Op::CallFunction, Target("relu")), std::invalid_argument);
  EXPECT_THROW(g.create_node(Op::CallModule, Target(F(kRelu))), std::invalid_argument);
  EXPECT_THROW(g.create_node(Op::Root, Target("x")), std::invalid_argument);
  EXPECT_EQ(g.size(), 0u);
}

TEST(Graph, EraseWithUsersFails) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  g.output(N(a));
  try {
    g.erase_node(a);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "Tried to erase Node neg but it still had 1 users in the graph: {output: None}!");
  }
  EXPECT_EQ(g.size(), 3u);
}

TEST(Graph, EraseDropsUsesAndRenamesNothing) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  EXPECT_EQ(x->num_users(), 1u);
  g.erase_node(a);
  EXPECT_EQ(x->num_users(), 0u);
  // names are never reused (torch.fx semantics)
  Node* b = g.call_function(F(kNeg), {N(x)});
  EXPECT_EQ(b->name(), "neg_1");
}

TEST(Graph, IterationSafeWhileErasingCurrent) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* prev = x;
  for (int i = 0; i < 10; ++i) prev = g.call_function(F(kRelu), {N(prev)});
  g.output(N(x));
  // reverse: each erase makes the previous node dead in turn
  int erased = 0;
  for (Node* n : g.nodes().reversed()) {
    if (n->op() == Op::CallFunction && n->num_users() == 0) {
      g.erase_node(n);
      ++erased;
    }
  }
  EXPECT_EQ(erased, 10);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "output"}));
}

TEST(Graph, IterationSafeWhileErasingOthers) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  Node* c = g.call_function(F(kTanh), {N(x)});
  g.output(N(x));
  std::vector<std::string> seen;
  for (Node* n : g.nodes()) {
    seen.emplace_back(n->name());
    if (n == a) {
      g.erase_node(b);  // the successor
      g.erase_node(a);  // and the current node
    }
  }
  (void)c;
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "relu", "tanh", "output"}));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "tanh", "output"}));
}

TEST(Graph, IterationSafeWhileInserting) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  g.output(N(a));
  std::vector<std::string> seen;
  for (Node* n : g.nodes()) {
    seen.emplace_back(n->name());
    if (n == a) {
      InsertGuard at = g.inserting_after(n);
      g.call_function(F(kNeg), {N(n)});
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "relu", "neg", "output"}));
}

TEST(Graph, InsertingAfterStacksLikeTorchFx) {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(N(x));
  {
    InsertGuard at = g.inserting_after(x);
    g.call_function(F(kRelu), {N(x)});
    g.call_function(F(kNeg), {N(x)});
  }
  // each insertion goes right after x: the later one comes first
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "relu", "output"}));
  // the guard restored append-at-end
  g.call_function(F(kTanh), {N(x)});
  EXPECT_EQ(names(g).back(), "tanh");
  {
    InsertGuard at = g.inserting_before(nullptr);  // beginning
    g.placeholder("w");
  }
  EXPECT_EQ(names(g).front(), "w");
}

TEST(Graph, UsersOrderMatchesTorchFx) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(F(kAdd), {N(x), N(y)});
  Node* b = g.call_function(F(kMul), {N(x), N(y)});
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"add", "mul"}));
  // re-setting a's args moves it to the end of every input's users
  a->set_args({N(x), N(y)});
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"mul", "add"}));
  EXPECT_EQ(user_names(y), (std::vector<std::string>{"mul", "add"}));
  // duplicates count once; kwargs after args
  Node* c = g.call_function(F(kAdd), {N(b), N(b)}, {{"other", N(a)}});
  EXPECT_EQ(c->all_input_nodes(), (std::vector<Node*>{b, a}));
  EXPECT_EQ(b->num_users(), 1u);
}

TEST(Graph, ReplaceAllUsesWithFilterAndInputs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  Node* c = g.call_function(F(kAdd), {N(x), Argument::list({N(x), I(1)})});
  auto changed = x->replace_all_uses_with(y, [&](Node* u) { return u != b; });
  EXPECT_EQ(changed, (std::vector<Node*>{a, c}));
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"neg_1"}));
  EXPECT_EQ(c->to_string(),
            "%add : [#users=0] = call_function[target=operator.add](args = (%y, [%y, 1]), kwargs = {})");
  c->replace_input_with(y, N(a));
  c->update_kwarg("alpha", N(b));
  EXPECT_EQ(c->all_input_nodes(), (std::vector<Node*>{a, b}));
  EXPECT_THROW(c->update_arg(7, I(1)), std::out_of_range);
}

// Note [In-place rewiring] (node.cpp): replace_all_uses_with(node) re-points a user's reads
// in place where it can; the graph must end exactly as rebuilding every user's arguments
// (set_args_kwargs, the general path) leaves it: arguments, unique inputs, and the order of
// every users list. Random users mix top-level reads, keyword reads, reads inside lists,
// users that read the replacement already, and more than the inline two arguments/inputs.
TEST(Graph, ReplaceAllUsesWithInPlaceMatchesRebuild) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    unsigned seed = rng();
    auto build = [&](Graph& g) {
      std::mt19937 r(seed);
      std::vector<Node*> pool = {g.placeholder("x"), g.placeholder("w"), g.placeholder("p")};
      // one container shared by several users: edited in place it would change them all
      Argument shared = Argument::tuple({N(pool[0]), Argument::list({N(pool[0])})});
      int n_users = 1 + static_cast<int>(r() % 6);
      for (int i = 0; i < n_users; ++i) {
        std::vector<Argument> args;
        int n_args = 1 + static_cast<int>(r() % 4);
        for (int k = 0; k < n_args; ++k) {
          switch (r() % 7) {
            case 0: args.push_back(N(pool[0])); break;  // x, top level
            case 1: args.push_back(N(pool[r() % pool.size()])); break;
            case 2: args.push_back(Argument::list({N(pool[r() % pool.size()]), I(k)})); break;
            case 3: args.push_back(I(k)); break;
            case 4: args.push_back(shared); break;
            case 5:  // nested two deep, own containers
              args.push_back(Argument::tuple({Argument::dict({{S("k"), N(pool[0])}}), N(pool[r() % pool.size()])}));
              break;
            default: args.push_back(N(pool[0])); break;
          }
        }
        KwArgs kw;
        if (r() % 3 == 0) kw.emplace_back("alpha", N(pool[r() % 2]));
        pool.push_back(g.call_function(F(kAdd), std::move(args), std::move(kw)));
      }
      g.output(N(pool.back()));
      return pool;
    };
    Graph fast, slow;
    auto fp = build(fast);
    auto sp = build(slow);
    Node* x = fp[0];
    Node* with = fp[1 + seed % (fp.size() - 2)];  // w, p or a user
    Node* sx = sp[0];
    Node* swith = sp[1 + seed % (sp.size() - 2)];
    // (a `with` that reads x is a user too: it ends up reading itself, on both paths)
    // every other round a filter leaves some users out (they must keep reading x, also
    // through containers they share with rewired users)
    auto keep = [&](Node* u) { return round % 2 == 0 || std::hash<std::string_view>()(u->name()) % 3 != 0; };
    bool left_out = false;
    for (Node* u : x->users()) left_out |= !keep(u);
    if (left_out) {  // torch.fx asserts only when users remain unfiltered; here every left-out user stays
      auto changed = x->replace_all_uses_with(with, keep);
      std::vector<Node*> expect_changed;
      for (Node* u : sx->users_vector()) {
        if (!keep(u)) continue;
        u->map_args_kwargs([&](Node* n) { return n == sx ? N(swith) : N(n); });
        expect_changed.push_back(u);
      }
      ASSERT_EQ(changed.size(), expect_changed.size());
      EXPECT_EQ(fast.to_string(), slow.to_string()) << "seed " << seed;
      for (size_t i = 0; i < fp.size(); ++i)
        EXPECT_EQ(user_names(fp[i]), user_names(sp[i])) << "seed " << seed << " node " << fp[i]->name();
      continue;
    }
    auto changed = x->replace_all_uses_with(with);
    std::vector<Node*> expect_changed;
    for (Node* u : sx->users_vector()) {
      u->map_args_kwargs([&](Node* n) { return n == sx ? N(swith) : N(n); });
      expect_changed.push_back(u);
    }
    ASSERT_EQ(changed.size(), expect_changed.size());
    for (size_t i = 0; i < changed.size(); ++i) EXPECT_EQ(changed[i]->name(), expect_changed[i]->name());
    EXPECT_EQ(fast.to_string(), slow.to_string()) << "seed " << seed;
    for (size_t i = 0; i < fp.size(); ++i) {
      EXPECT_EQ(user_names(fp[i]), user_names(sp[i])) << "seed " << seed << " node " << fp[i]->name();
      std::vector<std::string> fin, sin;
      for (Node* n : fp[i]->all_input_nodes()) fin.emplace_back(n->name());
      for (Node* n : sp[i]->all_input_nodes()) sin.emplace_back(n->name());
      EXPECT_EQ(fin, sin) << "seed " << seed;
    }
    EXPECT_FALSE(x->has_users());
  }
}

// The edit is in place only for containers no other value shares: a container held by two
// users (or by a caller's copy) is rebuilt, and the other holders keep reading the old node.
TEST(Graph, ReplaceAllUsesWithLeavesSharedContainersAlone) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Argument kept = Argument::list({N(x), I(1)});
  Node* a = g.call_function(F(kCat), {kept});
  x->replace_all_uses_with(w);
  EXPECT_EQ(a->args()[0].items()[0].as_node(), w);
  EXPECT_EQ(kept.items()[0].as_node(), x);  // the caller's copy is untouched
  Node* y = g.placeholder("y");
  Argument own = Argument::tuple({Argument::list({N(y)}), N(y)});
  Node* b = g.call_function(F(kCat), {std::move(own)});
  Node* c = g.call_function(F(kCat), {b->args()[0]});  // shares b's tuple
  y->replace_all_uses_with(w);
  EXPECT_EQ(b->args()[0].items()[1].as_node(), w);
  EXPECT_EQ(c->args()[0].items()[1].as_node(), w);
  EXPECT_EQ(b->args()[0].items()[0].items()[0].as_node(), w);
  EXPECT_FALSE(y->has_users());
  EXPECT_EQ(user_names(w), (std::vector<std::string>{"cat", "cat_1", "cat_2"}));
}

TEST(Graph, PrependAppendMove) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  a->prepend(b);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "relu"}));
  b->prepend(b);  // no-op
  a->append(b);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "relu", "neg"}));
  EXPECT_LT(x->order_key(), a->order_key());
  EXPECT_LT(a->order_key(), b->order_key());
  Graph other;
  Node* o = other.placeholder("o");
  EXPECT_THROW(a->prepend(o), std::invalid_argument);
  EXPECT_THROW(a->prepend(g.root()), std::invalid_argument);  // the sentinel never moves
  EXPECT_THROW(a->append(g.root()), std::invalid_argument);
}

TEST(Graph, OrderKeysSurviveDenseInsertion) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* last = g.output(N(x));
  {
    InsertGuard at = g.inserting_before(last);
    for (int i = 0; i < 5000; ++i) g.call_function(F(kRelu), {N(x)});
  }
  {
    InsertGuard at = g.inserting_after(x);  // always right after x: gaps exhaust
    for (int i = 0; i < 5000; ++i) g.call_function(F(kNeg), {N(x)});
  }
  uint64_t prev = 0;
  bool first = true;
  for (Node* n : g.nodes()) {
    if (!first) {
      EXPECT_LT(prev, n->order_key()) << n->name();
    }
    prev = n->order_key();
    first = false;
  }
}

TEST(Graph, FindNodes) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  Node* c = g.call_function(F(kRelu), {N(b)});
  g.call_method("relu", {N(c)});
  {
    InsertGuard at = g.inserting_before(a);
    g.call_function(F(kRelu), {N(x)});  // inserted first in order
  }
  Target relu(F(kRelu));
  auto found = g.find_nodes(Op::CallFunction, &relu);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0]->name(), "relu_3");  // relu_2 is the call_method
  EXPECT_EQ(found[1], a);
  EXPECT_EQ(found[2], c);
  g.erase_node(g.find_nodes(Op::CallMethod)[0]);
  EXPECT_TRUE(g.find_nodes(Op::CallMethod).empty());
  EXPECT_EQ(g.find_nodes(Op::Placeholder), (std::vector<Node*>{x}));
}

// Note [find_nodes order]: sort=false lists a bucket in the order its nodes entered it; a
// touched node (an attribute assigned) or a changed target moves to the end; moving a node in
// the list does not; a target of another opcode filters that opcode's one bucket.
TEST(Graph, FindNodesLookupOrder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kRelu), {N(x)});
  Node* m = g.call_method("neg", {N(a)});
  Node* r = g.call_method("relu", {N(b)});
  Node* m2 = g.call_method("neg", {N(b)});
  Node* c;
  {
    InsertGuard at = g.inserting_before(a);
    c = g.call_function(F(kRelu), {N(x)});
  }
  Target relu(F(kRelu));
  EXPECT_EQ(g.find_nodes(Op::CallFunction, &relu), (std::vector<Node*>{c, a, b}));
  EXPECT_EQ(g.find_nodes(Op::CallFunction, &relu, /*sort=*/false), (std::vector<Node*>{a, b, c}));
  g.touch_lookup(a);
  EXPECT_EQ(g.find_nodes(Op::CallFunction, &relu, false), (std::vector<Node*>{b, c, a}));
  EXPECT_EQ(g.find_nodes(Op::CallFunction, &relu), (std::vector<Node*>{c, a, b}));
  g.touch_lookup(r);
  EXPECT_EQ(g.find_nodes(Op::CallMethod, nullptr, false), (std::vector<Node*>{m, m2, r}));
  Target neg("neg");
  EXPECT_EQ(g.find_nodes(Op::CallMethod, &neg, false), (std::vector<Node*>{m, m2}));
  m->set_target(Target("relu"));
  EXPECT_EQ(g.find_nodes(Op::CallMethod, nullptr, false), (std::vector<Node*>{m2, r, m}));
  EXPECT_EQ(g.find_nodes(Op::CallMethod, &neg), (std::vector<Node*>{m2}));
  g.erase_node(c);
  EXPECT_EQ(g.find_nodes(Op::CallFunction, &relu, false), (std::vector<Node*>{b, a}));
}

TEST(Graph, CopyAndClone) {
  Graph g;
  Node* x = g.placeholder("x", {}, D(1.5));
  Node* a = g.call_function(F(kAdd), {N(x), I(1)}, {{"alpha", N(x)}});
  a->meta().emplace_back("tag", S("t"));
  g.output(Argument::tuple({N(a), N(x)}));
  auto c = g.clone();
  EXPECT_EQ(c->to_string(), g.to_string());
  EXPECT_EQ(python_code(*c).src, python_code(g).src);
  lint(*c);
  Node* ca = *std::next(c->nodes().begin());
  ASSERT_TRUE(ca->has_meta());
  EXPECT_EQ(ca->meta()[0].second, S("t"));

  Graph h;
  Node* z = h.placeholder("z");
  std::unordered_map<const Node*, Argument> vm{{x, N(z)}};
  auto rv = h.graph_copy(g, vm);
  ASSERT_TRUE(rv.has_value());
  h.output(*rv);
  EXPECT_EQ(names(h), (std::vector<std::string>{"z", "add", "output"}));
  EXPECT_EQ(python_code(h).src, "\n\n\ndef forward(self, z):\n    add = z + 1\n    return (add, z)\n    ");
}

TEST(Graph, NodeCopyFromAnotherGraphNeedsTransform) {
  Graph g, h;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* y = h.placeholder("y");
  Node* c = h.node_copy(*a, [&](Node*) { return N(y); });
  EXPECT_EQ(c->name(), "relu");
  EXPECT_EQ(c->all_input_nodes(), (std::vector<Node*>{y}));
  lint(h);
  // without a transform the copy reads a node of g: lint reports it
  h.node_copy(*a);
  EXPECT_THROW(lint(h), LintError);
}

TEST(Lint, Messages) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(F(kRelu), {N(x)});
  Node* n = g.call_function(F(kNeg), {N(r)});
  r->prepend(n);
  try {
    lint(g, {false});
    FAIL();
  } catch (const LintError& e) {
    EXPECT_STREQ(e.what(),
                 "Argument 'relu' of Node 'neg' was used before it has been defined! Please check that Nodes in the "
                 "graph are topologically ordered");
  }
  n->append(r);  // restore order: x, relu, neg? (append moves r after n)
  r->append(n);
  lint(g);
  n->set_name("x");
  try {
    lint(g);
    FAIL();
  } catch (const LintError& e) {
    EXPECT_STREQ(e.what(), "Node redefined name x!");
  }
}

TEST(Dce, KeepsImpureAndReportsChange) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  g.call_function(F(kNeg), {N(a)});
  Node* keep = g.call_module("side_effect", {N(x)});
  g.output(N(x));
  DceOptions opts;
  opts.module_is_impure = [&](const Node& n) { return &n == keep; };
  EXPECT_TRUE(eliminate_dead_code(g, opts));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "side_effect", "output"}));
  EXPECT_FALSE(eliminate_dead_code(g, opts));
}

TEST(Dce, ModuleHookSeesEveryCallModuleAndMayThrow) {
  // torch.fx evaluates `not node.is_impure() and len(node.users) == 0`, so
  // the module hook runs for used call_module nodes too, and when it raises
  // the later nodes are already gone.
  Graph g;
  Node* x = g.placeholder("x");
  Node* m = g.call_module("sub", {N(x)});
  Node* dead = g.call_function(F(kNeg), {N(x)});
  g.output(N(m));
  (void)dead;
  std::vector<std::string> asked;
  DceOptions opts;
  opts.module_is_impure = [&](const Node& n) -> bool {
    asked.emplace_back(n.name());
    throw std::runtime_error("no owning module");
  };
  EXPECT_THROW(eliminate_dead_code(g, opts), std::runtime_error);
  EXPECT_EQ(asked, (std::vector<std::string>{"sub"}));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "sub", "output"}));
}

TEST(Impurity, OneDecision) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* f = g.call_function(F(kRelu), {N(x)});
  Node* m = g.call_module("sub", {N(x)});
  Node* meth = g.call_method("add", {N(x), N(f)});
  Node* out = g.output(N(m));
  EXPECT_TRUE(x->is_impure());
  EXPECT_TRUE(out->is_impure());
  EXPECT_FALSE(f->is_impure());
  EXPECT_FALSE(meth->is_impure());
  EXPECT_FALSE(m->is_impure());  // no module hook: pure
  EXPECT_TRUE(m->is_impure([](const Node& n) { return n.target().str() == "sub"; }));
}

TEST(Naming, TargetToStrMatchesTorchFx) {
  // torch.fx Graph._target_to_str: `target[2:-2] if _is_magic(target)`, then
  // _snake_case. For "__" and "___" the slice is empty (create_name then
  // raises IndexError, as Namespace::create_name does with out_of_range);
  // the bindings used to keep "__" as the candidate.
  EXPECT_EQ(Graph::target_to_str(Target("__add__")), "add");
  EXPECT_EQ(Graph::target_to_str(Target("__")), "");
  EXPECT_EQ(Graph::target_to_str(Target("___")), "");
  EXPECT_EQ(Graph::target_to_str(Target("____")), "");
  EXPECT_EQ(Graph::target_to_str(Target("__x")), "__x");
  EXPECT_EQ(Graph::target_to_str(Target("_")), "_");
  EXPECT_EQ(Graph::target_to_str(Target("camelCase")), "camel_case");
  EXPECT_EQ(Graph::target_to_str(Target(F(kRelu))), "relu");
  Graph g;
  Node* x = g.placeholder("x");
  EXPECT_THROW(g.call_method("__", {N(x)}), std::out_of_range);
  EXPECT_THROW(g.call_method("___", {N(x)}), std::out_of_range);
  EXPECT_EQ(g.call_method("__neg__", {N(x)})->name(), "neg");
}

namespace {
struct RecordingObserver : GraphObserver {
  std::vector<Node*> tombstones, destroyed;
  void on_tombstone(Node& n) override { tombstones.push_back(&n); }
  void on_destroy(Node& n) override { destroyed.push_back(&n); }
};
}  // namespace

TEST(Tombstones, BoundNodesStayIterable) {
  RecordingObserver obs;
  NodeBinding dummy;
  {
    Graph g;
    g.set_observer(&obs);
    Node* x = g.placeholder("x");
    Node* a = g.call_function(F(kRelu), {N(x)});
    Node* b = g.call_function(F(kNeg), {N(x)});
    g.output(N(x));
    a->set_binding(&dummy);
    g.erase_node(a);
    ASSERT_EQ(obs.tombstones.size(), 1u);
    EXPECT_TRUE(a->erased());
    EXPECT_EQ(a->next(), b);  // stepping from a tombstone still works
    EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "output"}));
    EXPECT_EQ(g.size(), 3u);
    EXPECT_THROW(g.call_function(F(kNeg), {N(a)}), std::invalid_argument);
    EXPECT_THROW(b->set_args({N(a)}), std::invalid_argument);
    EXPECT_EQ(b->all_input_nodes(), (std::vector<Node*>{x}));  // unchanged
    b->set_binding(&dummy);
  }
  // graph destruction reports every bound node, tombstones included
  EXPECT_EQ(obs.destroyed.size(), 2u);
}

TEST(Tombstones, ReleasedTombstoneIsFreed) {
  RecordingObserver obs;
  NodeBinding dummy;
  Graph g;
  g.set_observer(&obs);
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  a->set_binding(&dummy);
  g.erase_node(a);
  a->set_binding(nullptr);
  g.release_tombstone(a);  // ASan checks this frees exactly once
  EXPECT_EQ(names(g), (std::vector<std::string>{"x"}));
}

TEST(CrossGraph, DestroyingAGraphCutsForeignEdges) {
  Graph h;
  Node* user;
  {
    Graph g;
    Node* x = g.placeholder("x");
    user = h.call_function(F(kRelu), {N(x)});
    EXPECT_EQ(x->num_users(), 1u);
  }
  EXPECT_TRUE(user->args()[0].is_none());
  EXPECT_EQ(user->num_inputs(), 0u);
}

TEST(Tombstones, ReleasedDuringIterationIsDeferred) {
  RecordingObserver obs;
  NodeBinding dummy;
  Graph g;
  g.set_observer(&obs);
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  g.output(N(x));
  a->set_binding(&dummy);
  for (Node* n : g.nodes()) {
    if (n == a) {
      g.erase_node(a);          // tombstone
      a->set_binding(nullptr);  // the binding lets go at once
      g.release_tombstone(a);   // must not free under the iterator
    }
  }
  (void)b;
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "output"}));
}

// Note [Cloning the namespace]: clone() copies the name table as a block when
// it holds exactly the copied nodes' names, and re-creates names otherwise.
// Either way the copy must then name new nodes as a copy made node by node
// (torch.fx's deepcopy) would.
TEST(Graph, CloneNamespaceMatchesNodeByNodeCopy) {
  auto scenario = [](int variant) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* o = g->placeholder("output");  // the real output becomes "output_1"
    Node* prev = x;
    for (int i = 0; i < 40; ++i) prev = g->call_function(F(i % 3 ? kAdd : kMul), {N(prev), N(o)});
    Node* out = g->output(N(prev));
    if (variant == 1) {  // an erased node: its name stays taken in g only
      Node* dead = g->call_function(F(kAdd), {N(x), I(0)});
      out->prepend(dead);
      g->erase_node(dead);
    }
    if (variant == 2) g->names().reserve_name("add_50");  // a reserved name
    if (variant == 3) {                                      // a node after the output
      auto guard = g->inserting_after(out);
      g->call_function(F(kAdd), {N(x), I(3)});
    }
    return g;
  };
  for (int variant = 0; variant < 4; ++variant) {
    auto g = scenario(variant);
    auto c = g->clone();
    // Reference: a node-by-node copy into a fresh graph (graph_copy, then output).
    Graph ref;
    std::unordered_map<const Node*, Argument> vm;
    const Node* old_out = nullptr;
    auto rv = ref.graph_copy(*g, vm, &old_out);
    ASSERT_TRUE(rv.has_value());
    ref.output(*rv, old_out->type());
    EXPECT_EQ(c->to_string(), ref.to_string()) << variant;
    lint(*c);
    for (const char* base : {"add", "mul", "output", "x", "add_50"}) {
      Node* cn = c->call_method(base, {});
      Node* rn = ref.call_method(base, {});
      EXPECT_EQ(cn->name(), rn->name()) << variant << " " << base;
    }
  }
}

TEST(Lint, ManyAndRepeatedInputs) {
  // lint finds each node's unique inputs by a short scan, then by a set past
  // 16 of them; both must agree with the use records (first appearance order)
  for (int count : {3, 15, 16, 17, 40}) {
    Graph g;
    std::vector<Argument> items;
    std::vector<Node*> ph;
    for (int i = 0; i < count; ++i) ph.push_back(g.placeholder("p" + std::to_string(i)));
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < count; ++i) items.push_back(N(ph[static_cast<size_t>((i * 7 + round) % count)]));
    Node* c = g.call_function(F(kCat), {Argument::list(items)}, {{"dim", N(ph[0])}});
    g.output(N(c));
    EXPECT_EQ(c->num_inputs(), static_cast<size_t>(count));
    lint(g);
  }
}
