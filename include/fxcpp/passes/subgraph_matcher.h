// fxcpp passes: subgraph matching and rewriting (torch.fx
// passes.utils.matcher_utils.SubgraphMatcher and subgraph_rewriter.replace_pattern).
//
// Note [Subgraph matching semantics]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The matcher reproduces torch.fx 1.13's results exactly -- the same matches,
// in the same order, with the same pattern->graph maps (in the same insertion
// order) -- but with iterative algorithms and no quadratic steps:
//  * Anchors are the pattern output's inputs used only by the output. For each
//    anchor, the candidates are the graph nodes equal to it (op and target; a
//    pattern placeholder is a wildcard). Anchors without any candidate are
//    dropped from the search, as in torch.fx (whose later lookup of an
//    unmatched pattern node then fails: see UnmatchedPatternNode).
//  * Every combination of candidates is tried in order (backtracking over
//    anchors); each anchor/candidate pair is matched by a depth-first walk up
//    the use-def edges, on an explicit stack (no recursion limit). The walk
//    compares pytree-flattened args (tuples, lists and dicts flattened, dict
//    keys dropped) and then kwargs by key (same key sets required; values are
//    compared whole). Node pairs recurse; a pattern placeholder binds to any
//    value (a graph node, or a literal); other leaves must have the same kind
//    and compare equal (Python ==: Argument::operator==). Pattern nodes map
//    injectively onto graph nodes.
//  * Matches are then filtered: a matched value used outside the match blocks
//    it (except placeholders and returned values); fusing the matched compute
//    nodes must not create a cycle (checked by a forward search from the
//    match's external users, pruned at the match's last node when the node
//    list is topologically ordered); finally overlapping matches are dropped
//    greedily, first match first.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// torch.fx SubgraphMatcher constructor flags.
struct SubgraphMatcherOptions {
  /// The pattern's output node is part of the pattern (anchors = [output]).
  bool match_output = false;
  /// Pattern placeholders must match graph placeholders (else: wildcards).
  bool match_placeholder = false;
  /// Drop matches overlapping an earlier one.
  bool remove_overlapping_matches = true;
};

/// One match (torch.fx InternalMatch). Graph values are Argument node
/// references, except that a pattern placeholder may be bound to a literal.
/// The match does not own or pin any node.
struct InternalMatch {
  /// The pattern anchors (pattern nodes), as in torch.fx.
  std::vector<const Node*> anchors;
  /// Pattern node -> graph value, in torch.fx's insertion order.
  std::vector<std::pair<const Node*, Argument>> nodes_map;
  /// Graph values bound to the pattern placeholders, in pattern order.
  std::vector<Argument> placeholder_nodes;
  /// Graph values of the pattern's returned nodes, in output order.
  std::vector<Argument> returning_nodes;
  /// The value bound to pattern node `pn`, or null. O(|nodes_map|).
  const Argument* find(const Node* pn) const;
};

/// Raised where torch.fx raises KeyError(pattern node): a complete match that
/// leaves a placeholder or returned pattern node unbound (e.g. an anchor with
/// no candidate in the graph).
struct UnmatchedPatternNode : std::runtime_error {
  explicit UnmatchedPatternNode(const Node* n) : std::runtime_error(std::string(n->name())), node(n) {}
  const Node* node;
};

/// Raised for torch.fx's assertion failures (e.g. a pattern with dead code).
struct SubgraphAssertion : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Finds the occurrences of a pattern graph in other graphs. Holds a
/// reference to `pattern`, which must outlive the matcher and not change.
class SubgraphMatcher {
 public:
  /// Throws std::invalid_argument for an empty pattern and SubgraphAssertion
  /// for a pattern with dead code (torch.fx's checks). O(|pattern|).
  explicit SubgraphMatcher(const Graph& pattern, SubgraphMatcherOptions options = {});

  /// All matches of the pattern in `graph`, filtered as described in Note
  /// [Subgraph matching semantics]. Cost: per anchor candidate, the size of
  /// the walked region; plus per match, its users and the nodes between its
  /// first and last node (cycle check). Throws UnmatchedPatternNode.
  std::vector<InternalMatch> match(const Graph& graph) const;

  const Graph& pattern() const { return pattern_; }
  const std::vector<const Node*>& anchors() const { return anchors_; }
  const std::vector<const Node*>& placeholders() const { return placeholders_; }
  const std::vector<const Node*>& returning_nodes() const { return returning_; }
  const SubgraphMatcherOptions& options() const { return options_; }

 private:
  friend struct MatchState;
  struct PatternInfo {
    std::vector<const Argument*> leaves;  ///< flattened args, then kwargs values
    std::vector<std::string> kw_keys;     ///< kwargs keys in pattern order
    bool is_returning = false;
  };
  bool nodes_are_equal(const Node* pn, const Node* gn) const;

  const Graph& pattern_;
  SubgraphMatcherOptions options_;
  std::vector<const Node*> placeholders_;
  std::vector<const Node*> returning_;
  std::vector<const Node*> anchors_;
  std::unordered_map<const Node*, size_t> index_;  ///< pattern node -> dense index
  std::vector<PatternInfo> info_;                    ///< by dense index
};

/// Note [Core matches under torch.fx 2.x]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/// torch.fx 2.x's SubgraphMatcher and replace_pattern differ from 1.13's (the
/// semantics above) on some inputs only; on the others the core's results are
/// 2.x's and the 2.x Python layer runs the core. The pattern-side conditions
/// (no get_attr, operator-overload or container-argument pattern nodes, no
/// dead code, default matcher flags) need Python types and are checked there
/// (fxcpp.passes.utils.matcher_utils._pattern_agrees); the graph-side ones,
/// which grow with the graph, are agrees_with_fx2_on() and, for the rewrite,
/// replace_agrees_with_fx2().

/// Graph side of Note [Core matches under torch.fx 2.x]: true when every
/// anchor that is not a placeholder has a candidate in `graph` (2.x drops an
/// anchor without one, where 1.13 fails), and no graph node with the op and
/// target of a pattern compute node has a tuple, list, dict or slice among
/// its positional arguments or keyword values (2.x walks them in step) or the
/// pattern node's keyword names in another order (2.x compares them in
/// order). Cost: the find_nodes() lookups plus the candidates' arguments.
bool agrees_with_fx2_on(const SubgraphMatcher& matcher, const Graph& graph);

/// Whether replace_matches() on `matches` rewrites as torch.fx 2.x's
/// replace_pattern does: every returned value is a node with users (2.x then
/// inserts before the same node) and no match binds a placeholder to a value
/// any match returns (2.x then points nodes_map at the replacement's node).
/// O(total size of the matches).
bool replace_agrees_with_fx2(const std::vector<InternalMatch>& matches);

/// Callbacks letting a binding keep its own state coherent during rewriting.
struct ReplacePatternHooks {
  /// A replacement node `src` was copied into the graph as `dst`.
  std::function<void(const Node& src, Node& dst)> on_copy;
};

/// torch.fx subgraph_rewriter.replace_pattern's graph surgery for matches
/// found by `matcher` in `graph`: for each match, in order, copies
/// `replacement` before the first user of the match's returned values, binds
/// its placeholders to the match's placeholder values (as already rewritten by
/// earlier matches), rewires the returned values' uses and erases the matched
/// compute nodes. Throws SubgraphAssertion for torch.fx's assertion failures
/// and std::runtime_error when a node to erase is still used. Cost per match:
/// |replacement| + the users of its returned values.
void replace_matches(Graph& graph, const SubgraphMatcher& matcher, const Graph& replacement,
                     const std::vector<InternalMatch>& matches, const ReplacePatternHooks& hooks = {});

}  // namespace fxcpp
