#include "fxcpp/passes/split_module.h"

#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace fxcpp {

namespace {
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
}  // namespace

std::string split_module_target(const std::string& qualified_name) {
  std::string s = qualified_name;
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

SplitModuleResult split_module(const Graph& g, const std::vector<uint32_t>& partition_of,
                               const std::vector<std::string>& submod_names, const std::vector<Graph*>& partitions,
                               Graph& top, const Object& getitem, const SplitModuleOptions& options) {
  const bool fx2 = options.fx2;
  const size_t np = partitions.size();
  if (submod_names.size() != np)
    throw std::invalid_argument("split_module: one submodule name per partition graph expected");
  for (Graph* p : partitions)
    if (!p || p == &top || p == &g) throw std::invalid_argument("split_module: partition graphs must be distinct");

  SplitModuleResult r;
  r.inputs.resize(np);
  r.outputs.resize(np);
  std::vector<uint32_t> part(g.node_capacity(), kNone);  // by Node::index()
  std::vector<char> is_output(g.node_capacity(), 0);
  // Per partition: its inputs -> their placeholders (filled later).
  std::vector<std::unordered_map<const Node*, Node*>> input_env(np);
  std::vector<std::vector<uint32_t>> dependents(np);  // torch.fx partition_dependents, insertion order
  std::vector<uint32_t> n_dependent_on(np, 0);        // |partitions_dependent_on|
  std::unordered_set<uint64_t> edges;
  std::vector<uint32_t> first_seen;  // torch.fx's `partitions` dict order
  first_seen.reserve(np);
  std::vector<char> seen(np, 0);

  auto record = [&](const Node* def, uint32_t use_p) {
    const uint32_t def_p = def->graph() == &g ? part[def->index()] : kNone;
    if (def_p == use_p) return;
    if (def_p != kNone && !is_output[def->index()]) {
      is_output[def->index()] = 1;
      r.outputs[def_p].push_back(def);
    }
    if (use_p != kNone) {
      if (input_env[use_p].emplace(def, nullptr).second) r.inputs[use_p].push_back(def);
      if (def_p != kNone && edges.insert((uint64_t(def_p) << 32) | use_p).second) {
        dependents[def_p].push_back(use_p);
        ++n_dependent_on[use_p];
      }
    }
  };

  // 1. Partition the ops and record the uses that cross partitions.
  size_t next = 0;
  for (Node* n : g.nodes()) {
    const Op op = n->op();
    if (op == Op::Placeholder || op == Op::GetAttr) continue;
    uint32_t p = kNone;
    if (op != Op::Output) {
      if (next >= partition_of.size())
        throw std::invalid_argument("split_module: fewer partition ids than partitioned nodes");
      p = partition_of[next++];
      if (p >= np) throw std::invalid_argument("split_module: partition id out of range");
      part[n->index()] = p;
      if (!seen[p]) {
        seen[p] = 1;
        first_seen.push_back(p);
      }
    }
    for (size_t i = 0, k = n->num_inputs(); i < k; ++i) record(n->input_use(i).value(), p);
  }
  if (next != partition_of.size())
    throw std::invalid_argument("split_module: more partition ids than partitioned nodes");
  if (first_seen.size() != np) throw std::invalid_argument("split_module: a partition has no nodes");

  // 2. Topological order of the partitions (torch.fx: a stack of roots).
  std::vector<uint32_t> stack;
  for (uint32_t p : first_seen)
    if (n_dependent_on[p] == 0) stack.push_back(p);
  r.sorted.reserve(np);
  while (!stack.empty()) {
    const uint32_t p = stack.back();
    stack.pop_back();
    r.sorted.push_back(p);
    for (uint32_t d : dependents[p])
      if (--n_dependent_on[d] == 0) stack.push_back(d);
  }
  if (r.sorted.size() != np) throw std::runtime_error("cycle exists between partitions!");
  r.construct_order = options.keep_original_order ? first_seen : r.sorted;

  // 3. Each partition's placeholders, in topological partition order.
  for (uint32_t p : r.sorted) {
    Graph& sg = *partitions[p];
    size_t i = 0;
    for (const Node* in : r.inputs[p]) {
      Node* ph = !fx2 ? sg.placeholder(std::string(in->name()))
                      : sg.placeholder(options.keep_original_input_name ? std::string(in->name())
                                                                        : "arg_" + std::to_string(i),
                                       in->type());
      ++i;
      input_env[p][in] = ph;
      r.copied.emplace_back(ph, in);
    }
  }

  // 4. The ops, copied into their partitions in graph order.
  std::vector<Node*> local(g.node_capacity(), nullptr);
  for (Node* n : g.nodes()) {
    const uint32_t p = part[n->index()];
    if (p == kNone) continue;
    auto& env = input_env[p];
    auto mapped = n->mapped_args_kwargs([&](Node* a) -> Argument {
      if (a->graph() == &g && part[a->index()] == p) return Argument::node(local[a->index()]);
      auto it = env.find(a);
      if (it == env.end() || !it->second) throw UnmappedNode(a, std::string(a->name()));
      return Argument::node(it->second);
    });
    Target target = n->target();
    if (n->op() == Op::CallModule) {
      target = Target(split_module_target(n->target().str()));
      r.module_calls.emplace_back(p, n);
    }
    Node* c = !fx2 ? partitions[p]->create_node(n->op(), std::move(target), std::move(mapped.first),
                                                std::move(mapped.second))
                   : partitions[p]->create_node(n->op(), std::move(target), std::move(mapped.first),
                                                std::move(mapped.second),
                                                options.keep_original_node_name
                                                    ? std::optional<std::string>(std::string(n->name()))
                                                    : std::nullopt,
                                                n->type());
    local[n->index()] = c;
    r.copied.emplace_back(c, n);
  }

  // 5. The top graph: placeholders and get_attrs (fx2 with keep_original_order:
  // get_attrs before their first call, and a value read before the top graph
  // has it is reported in r.unmapped), then the calls.
  const bool lazy_get_attrs = fx2 && options.keep_original_order;
  std::vector<Node*> base(g.node_capacity(), nullptr);
  auto copy_get_attr = [&](const Node* n) {
    Node* c = top.get_attr(n->target().str());
    base[n->index()] = c;
    r.copied.emplace_back(c, n);
    if (!lazy_get_attrs) r.get_attrs.push_back(n);
  };
  if (lazy_get_attrs) {  // the get_attrs the calls take, in call and input order
    std::vector<char> listed(g.node_capacity(), 0);
    for (uint32_t p : r.construct_order)
      for (const Node* in : r.inputs[p])
        if (in->op() == Op::GetAttr && in->graph() == &g && !listed[in->index()]) {
          listed[in->index()] = 1;
          r.get_attrs.push_back(in);
        }
  }
  for (Node* n : g.nodes()) {
    if (n->op() == Op::Placeholder) {
      std::optional<Argument> dflt;
      if (!n->args().empty()) dflt = n->args()[0];
      Node* c = top.placeholder(n->target().str(), n->type(), std::move(dflt));
      base[n->index()] = c;
      r.copied.emplace_back(c, n);
    } else if (n->op() == Op::GetAttr && !lazy_get_attrs) {
      copy_get_attr(n);
    }
  }
  auto base_of = [&](const Node* a) -> Node* {
    Node* b = a->graph() == &g ? base[a->index()] : nullptr;
    if (!b) throw UnmappedNode(a, std::string(a->name()));
    return b;
  };
  for (uint32_t p : r.construct_order) {
    const auto& outs = r.outputs[p];
    std::vector<Argument> vals;
    vals.reserve(outs.size());
    for (const Node* o : outs) vals.push_back(Argument::node(local[o->index()]));
    const bool as_tuple = vals.size() != 1 || (fx2 && options.tuple_return);
    partitions[p]->output(as_tuple ? Argument::tuple(std::move(vals)) : std::move(vals[0]));
    std::vector<Argument> args;
    args.reserve(r.inputs[p].size());
    for (const Node* in : r.inputs[p]) {
      if (lazy_get_attrs && in->graph() == &g && !base[in->index()]) {
        if (in->op() != Op::GetAttr) {
          r.unmapped = in;  // its partition is called later (torch.fx 2.x: KeyError)
          return r;
        }
        copy_get_attr(in);
      }
      args.push_back(Argument::node(base_of(in)));
    }
    Node* call = top.call_module(submod_names[p], std::move(args));
    if (outs.size() > 1 || (fx2 && options.tuple_return && !outs.empty())) {
      for (size_t i = 0; i < outs.size(); ++i)
        base[outs[i]->index()] =
            top.call_function(getitem, {Argument::node(call), Argument::integer(static_cast<int64_t>(i))});
    } else if (outs.size() == 1) {
      base[outs[0]->index()] = call;
    } else if (!fx2) {
      throw std::out_of_range("list index out of range");  // torch.fx: list(partition.outputs)[0]
    }
  }
  for (Node* n : g.nodes()) {
    if (n->op() != Op::Output) continue;
    Argument res = n->args().empty() ? Argument::none() : n->args()[0];
    if (lazy_get_attrs) {  // a get_attr no partition took
      res.for_each_node([&](Node* a) {
        if (!r.unmapped && a->graph() == &g && !base[a->index()]) r.unmapped = a;
      });
      if (r.unmapped) break;
    }
    top.output(res.map_nodes([&](Node* a) { return Argument::node(base_of(a)); }));
  }
  return r;
}

}  // namespace fxcpp
