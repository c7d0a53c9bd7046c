#include "fxcpp/passes/layout.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

// Note [Layout phases]
// ~~~~~~~~~~~~~~~~~~~~
// layout() is the classic Sugiyama pipeline, every phase linear or
// log-linear in the layered graph (boxes + dummies, V', and its edges, E'):
//   1. Break cycles (Note [Breaking cycles]).
//   2. Layers by longest path from the sources (Kahn's order), then, bottom
//      up, boxes with fewer in-edges than out-edges move down to just above
//      their highest successor (`tighten_sources` for sources,
//      `pull_down_fanouts` for the others), so a parameter read deep down
//      sits next to its reader and a shape read by several reshapes next to
//      the first of them, instead of high up with long edges (moving such a
//      box down one layer shortens its edges in total).
//   3. Edges spanning several layers get one dummy vertex per layer crossed
//      (Note [Trunks]); the layered graph has edges between consecutive
//      layers only.
//   4. Crossing reduction: `sweeps` pairs of a down sweep (each layer sorted,
//      stably, by the barycenter of its upper neighbours' positions; vertices
//      without such neighbours keep their position as key) and an up sweep
//      (lower neighbours). After each sweep, transposition: two neighbours
//      of a layer swap when that lowers the crossings of their edges to both
//      adjacent layers (counted by merging their neighbours' sorted
//      positions), in rounds over the layers that changed or border a
//      changed one, at most `transpose_rounds`. Then the crossings are
//      counted (Barth-Juenger-Mutzel, O(E' log V')) and the best order is
//      kept, so the result never has more crossings than the initial order
//      (and a tree, after its first down sweep, has none). On the bench's
//      48-block transformer, transposition and pulling fan-outs down take
//      the drawn crossings from 1,824 to about dot's.
//   5. x: Brandes-Koepf (Note [Brandes-Koepf]); with `brandes_koepf` off,
//      the earlier placement: alternating down/up passes, each layer's
//      vertices wanting the median x of their neighbours on the side just
//      placed and getting the closest positions that keep the order and the
//      gaps (an isotonic regression solved by pool-adjacent-violators), then
//      dummies moved under their upper neighbours where the gaps allow. It
//      drifts sideways on a chain whose nodes also read the one two back
//      (30 times dot's area at 1,000 nodes), which Brandes-Koepf does not.
//   6. y from layers (each layer as tall as its tallest box, boxes centred in
//      it), polylines through the dummies.
//
// Note [Breaking cycles]
// ~~~~~~~~~~~~~~~~~~~~~~
// An iterative depth-first search from every box in index order (edges in
// input order) marks each edge that reaches a vertex still on the search
// stack; those back edges are laid out reversed (LayoutResult::edge_reversed)
// and what remains is acyclic, so layering terminates. An fxcpp graph in
// graph order is topological, so a graph from the tracer has no reversed
// edge; a cycle made by hand (update_arg) gets a drawing with one upward edge
// per cycle broken, never a hang. Self-loops are ignored by every phase.
//
// Note [Brandes-Koepf]
// ~~~~~~~~~~~~~~~~~~~~
// x after U. Brandes and B. Koepf, "Fast and Simple Horizontal Coordinate
// Assignment" (Graph Drawing 2001), written from the paper:
//   * Conflicts. A segment (an edge of the layered graph) between two
//     dummies is inner. A segment that is not inner and crosses an inner one
//     between the same layers is marked (type 1 conflict: the long edge
//     wins), found per layer pair with the paper's left-to-right scan in
//     O(segments). Also marked: a trunk's branch to a box when the trunk goes
//     on below (Note [Trunks]), and a long edge's first or last segment at a
//     box that also has a box neighbour on that side, so chains of boxes
//     stay straight and long edges bend at their ends. Inner segments are
//     never marked.
//   * Four alignments: towards the upper or the lower neighbours, scanning
//     each layer from the left or from the right. Layer by layer, each
//     vertex tries its median neighbour (both medians, in scan order, when
//     it has an even number) and is aligned with it unless the segment is
//     marked or the alignment would cross one made earlier in the layer
//     (the scan's last aligned position). Aligned vertices form blocks
//     (vertical runs); every inner segment is aligned unless two inner
//     segments cross, so long edges are vertical.
//   * Compaction: blocks form a DAG (block a before block b when a vertex of
//     a is b's left neighbour in some layer, at the gap of those two
//     vertices; alignments never cross, so no cycle). In topological order
//     each block goes as far left as its left neighbours allow, then, in
//     reverse order, each block with right neighbours moves right as far as
//     they allow (this replaces the paper's classes and class shifts, whose
//     published version can misplace classes; see Brandes, Walter and Zink's
//     erratum, 2020). Every layer keeps its gaps by construction.
//   * Balancing: the right-scanned layouts are mirrored back; all four are
//     shifted to the narrowest one (left-scanned ones to its left edge,
//     right-scanned ones to its right edge), and each vertex gets the
//     average of its two median candidates. If every candidate keeps a
//     vertex at least a gap right of its left neighbour, so does each order
//     statistic, so the result has no overlap either.
// Cost: sorting each vertex's neighbours by position, O(E' log), then
// O(V' + E') per alignment.
//
// Note [Trunks]
// ~~~~~~~~~~~~~
// With one dummy chain per long edge, the dummies number the sum of the
// edges' spans: a box read by every node of an n-chain (a shared constant, a
// residual) costs n^2/2 dummies. With `concentrate`, all long edges leaving a
// box a share one chain (its trunk) from layer(a) + 1 down to one layer above
// its lowest long target, and each edge leaves the trunk at the layer above
// its target. Either way, a dummy of a chain starting at id c for an edge
// from a sits at layer layer(a) + 1 + (id - c), so an edge's path is three
// numbers and no per-edge vertex list is stored. Polylines list every bend
// point but not the middle of vertical runs, which a trunk mostly is, and are
// built a run at a time, so an edge costs O(bends of its path), not O(span).

namespace fxcpp {

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

/// Compressed adjacency: targets of vertex v are adj[begin[v] .. begin[v+1]).
struct Csr {
  std::vector<uint32_t> begin;
  std::vector<uint32_t> adj;
  void build(size_t n, const std::vector<std::pair<uint32_t, uint32_t>>& edges, bool forward) {
    begin.assign(n + 1, 0);
    for (const auto& e : edges) ++begin[(forward ? e.first : e.second) + 1];
    for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
    adj.resize(edges.size());
    std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& e : edges) {
      if (forward) adj[fill[e.first]++] = e.second;
      else adj[fill[e.second]++] = e.first;
    }
  }
};

/// Crossings between consecutive layers: for each layer, the lower ends of its
/// edges in (upper position, lower position) order; inversions counted with a
/// Fenwick tree.
uint64_t crossings(uint32_t num_layers, const std::vector<uint32_t>& layer_begin,
                   const std::vector<uint32_t>& layer_order, const std::vector<uint32_t>& pos,
                   const Csr& down, std::vector<uint32_t>& scratch, std::vector<uint32_t>& tree) {
  uint64_t total = 0;
  for (uint32_t l = 0; l + 1 < num_layers; ++l) {
    const uint32_t lower = layer_begin[l + 2] - layer_begin[l + 1];
    tree.assign(lower + 1, 0);
    uint64_t inserted = 0;
    for (uint32_t i = layer_begin[l]; i < layer_begin[l + 1]; ++i) {
      const uint32_t u = layer_order[i];
      scratch.clear();
      for (uint32_t k = down.begin[u]; k < down.begin[u + 1]; ++k) scratch.push_back(pos[down.adj[k]]);
      std::sort(scratch.begin(), scratch.end());
      for (uint32_t p : scratch) {
        uint64_t le = 0;  // inserted ends at positions <= p
        for (uint32_t j = p + 1; j > 0; j -= j & (~j + 1)) le += tree[j];
        total += inserted - le;
        for (uint32_t j = p + 1; j <= lower; j += j & (~j + 1)) ++tree[j];
        ++inserted;
      }
    }
  }
  return total;
}

/// Adjacency of the layered graph in one direction with, per slot, the index
/// of the layered edge it stands for; each vertex's slots sorted by the
/// neighbours' positions in their layer.
struct SortedAdj {
  std::vector<uint32_t> begin;
  std::vector<uint32_t> adj;
  std::vector<uint32_t> id;
  void build(size_t n, const std::vector<std::pair<uint32_t, uint32_t>>& edges, bool forward,
             const std::vector<uint32_t>& pos) {
    begin.assign(n + 1, 0);
    for (const auto& e : edges) ++begin[(forward ? e.first : e.second) + 1];
    for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
    adj.resize(edges.size());
    id.resize(edges.size());
    std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
    for (size_t k = 0; k < edges.size(); ++k) {
      const auto& e = edges[k];
      const uint32_t s = fill[forward ? e.first : e.second]++;
      adj[s] = forward ? e.second : e.first;
      id[s] = static_cast<uint32_t>(k);
    }
    std::vector<std::pair<uint32_t, uint32_t>> tmp;
    for (size_t v = 0; v < n; ++v) {
      const uint32_t b = begin[v], e = begin[v + 1];
      if (e - b < 2) continue;
      tmp.clear();
      for (uint32_t k = b; k < e; ++k) tmp.emplace_back(adj[k], id[k]);
      std::sort(tmp.begin(), tmp.end(), [&](const auto& p, const auto& q) { return pos[p.first] < pos[q.first]; });
      for (uint32_t k = b; k < e; ++k) {
        adj[k] = tmp[k - b].first;
        id[k] = tmp[k - b].second;
      }
    }
  }
  uint32_t degree(uint32_t v) const { return begin[v + 1] - begin[v]; }
};

/// x of every vertex's centre by Brandes-Koepf (Note [Brandes-Koepf]).
/// `gap(a, b)`: least distance between the centres of neighbours a, b of a
/// layer. O((V' + E') log) for sorting the adjacency, then O(V' + E') per
/// alignment.
template <class Gap>
std::vector<double> brandes_koepf(uint32_t nb, uint32_t num_layers, const std::vector<uint32_t>& lbegin,
                                  const std::vector<uint32_t>& order, const std::vector<uint32_t>& pos,
                                  const std::vector<std::pair<uint32_t, uint32_t>>& ledges,
                                  const std::vector<double>& w, Gap gap) {
  const uint32_t nv = static_cast<uint32_t>(order.size());
  SortedAdj up, down;
  up.build(nv, ledges, false, pos);
  down.build(nv, ledges, true, pos);
  // Type 1 conflicts: a segment that is not inner (between two dummies)
  // crossing an inner one loses, so long edges stay straight. A trunk's
  // branch to a box (from a dummy that continues below) loses too: the trunk
  // stays straight (Note [Trunks]).
  std::vector<uint8_t> marked(ledges.size(), 0);
  auto inner = [&](uint32_t v) {  // v, a lower end, is a dummy read by a dummy
    return v >= nb && up.degree(v) == 1 && up.adj[up.begin[v]] >= nb;
  };
  for (uint32_t l = 0; l + 1 < num_layers; ++l) {
    const uint32_t b = lbegin[l + 1], n1 = lbegin[l + 2] - b, n0 = lbegin[l + 1] - lbegin[l];
    int64_t k0 = 0;
    uint32_t start = 0;
    for (uint32_t l1 = 0; l1 < n1; ++l1) {
      const uint32_t v = order[b + l1];
      const bool in = inner(v);
      if (l1 + 1 < n1 && !in) continue;
      const int64_t k1 = in ? pos[up.adj[up.begin[v]]] : static_cast<int64_t>(n0) - 1;
      for (; start <= l1; ++start) {
        const uint32_t y = order[b + start];
        if (inner(y)) continue;
        for (uint32_t k = up.begin[y]; k < up.begin[y + 1]; ++k) {
          const int64_t p = pos[up.adj[k]];
          if (p < k0 || p > k1) marked[up.id[k]] = 1;
        }
      }
      k0 = k1;
    }
  }
  // And a long edge's first or last segment loses to a segment between two
  // boxes at the same box: chains of boxes stay straight, long edges bend
  // at their ends.
  std::vector<uint8_t> continues(nv, 0), box_below(nv, 0), box_above(nv, 0);
  for (const auto& [a, c] : ledges) {
    if (a >= nb && c >= nb) continues[a] = 1;
    if (a < nb && c < nb) box_below[a] = box_above[c] = 1;
  }
  for (size_t k = 0; k < ledges.size(); ++k) {
    const auto [a, c] = ledges[k];
    if (a >= nb && c < nb && (continues[a] || box_above[c])) marked[k] = 1;
    if (a < nb && c >= nb && box_below[a]) marked[k] = 1;
  }

  std::vector<uint32_t> root(nv), align(nv), indeg(nv), topo, bbegin(nv + 1), badj;
  std::vector<double> bw, xs(nv), cand[4];
  std::vector<std::pair<uint32_t, std::pair<uint32_t, double>>> bedges;
  for (int view = 0; view < 4; ++view) {
    const bool to_upper = view < 2, left = view % 2 == 0;
    const SortedAdj& nbr = to_upper ? up : down;
    auto vpos = [&](uint32_t v, uint32_t l) {
      return left ? pos[v] : lbegin[l + 1] - lbegin[l] - 1 - pos[v];
    };
    auto at = [&](uint32_t l, uint32_t i) {  // i-th vertex of layer l in view order
      return order[left ? lbegin[l] + i : lbegin[l + 1] - 1 - i];
    };
    // Vertical alignment.
    for (uint32_t v = 0; v < nv; ++v) root[v] = align[v] = v;
    for (uint32_t s = 1; s < num_layers; ++s) {
      const uint32_t l = to_upper ? s : num_layers - 1 - s, nl = to_upper ? l - 1 : l + 1;
      int64_t r = -1;
      for (uint32_t i = 0, n = lbegin[l + 1] - lbegin[l]; i < n; ++i) {
        const uint32_t v = at(l, i), d = nbr.degree(v);
        if (!d) continue;
        for (uint32_t m : {(d - 1) / 2, d / 2}) {
          if (align[v] != v) break;
          const uint32_t slot = nbr.begin[v] + (left ? m : d - 1 - m);
          const uint32_t u = nbr.adj[slot];
          const int64_t pu = vpos(u, nl);
          if (!marked[nbr.id[slot]] && r < pu) {
            align[u] = v;
            root[v] = root[u];
            align[v] = root[v];
            r = pu;
          }
        }
      }
    }
    // Horizontal compaction: the block graph (one vertex per block, an edge
    // from a block to the next one in some layer) in topological order, each
    // block as far left as its left neighbours allow, then each pulled right
    // towards its right neighbours as far as they allow.
    bedges.clear();
    for (uint32_t l = 0; l < num_layers; ++l)
      for (uint32_t i = 1, n = lbegin[l + 1] - lbegin[l]; i < n; ++i) {
        const uint32_t a = at(l, i - 1), c = at(l, i);
        bedges.push_back({root[a], {root[c], gap(a, c)}});
      }
    std::fill(bbegin.begin(), bbegin.end(), 0);
    for (const auto& e : bedges) ++bbegin[e.first + 1];
    for (uint32_t i = 0; i < nv; ++i) bbegin[i + 1] += bbegin[i];
    badj.resize(bedges.size());
    bw.resize(bedges.size());
    {
      std::vector<uint32_t> fill(bbegin.begin(), bbegin.end() - 1);
      for (const auto& e : bedges) {
        badj[fill[e.first]] = e.second.first;
        bw[fill[e.first]++] = e.second.second;
      }
    }
    std::fill(indeg.begin(), indeg.end(), 0);
    for (const auto& e : bedges) ++indeg[e.second.first];
    topo.clear();
    for (uint32_t v = 0; v < nv; ++v)
      if (root[v] == v && !indeg[v]) topo.push_back(v);
    std::fill(xs.begin(), xs.end(), 0.0);
    for (size_t qi = 0; qi < topo.size(); ++qi) {
      const uint32_t v = topo[qi];
      for (uint32_t k = bbegin[v]; k < bbegin[v + 1]; ++k) {
        const uint32_t u = badj[k];
        xs[u] = std::max(xs[u], xs[v] + bw[k]);
        if (--indeg[u] == 0) topo.push_back(u);
      }
    }
    for (size_t qi = topo.size(); qi-- > 0;) {
      const uint32_t v = topo[qi];
      if (bbegin[v] == bbegin[v + 1]) continue;
      double m = std::numeric_limits<double>::infinity();
      for (uint32_t k = bbegin[v]; k < bbegin[v + 1]; ++k) m = std::min(m, xs[badj[k]] - bw[k]);
      xs[v] = std::max(xs[v], m);
    }
    cand[view].resize(nv);
    for (uint32_t v = 0; v < nv; ++v) cand[view][v] = left ? xs[root[v]] : -xs[root[v]];
  }
  // Balancing: align the four to the narrowest one (left ones at its left
  // edge, right ones at its right edge), then each vertex gets the average of
  // its two median candidates.
  double lo[4], hi[4];
  int narrow = 0;
  for (int c = 0; c < 4; ++c) {
    lo[c] = std::numeric_limits<double>::infinity();
    hi[c] = -lo[c];
    for (uint32_t v = 0; v < nv; ++v) {
      lo[c] = std::min(lo[c], cand[c][v] - w[v] / 2);
      hi[c] = std::max(hi[c], cand[c][v] + w[v] / 2);
    }
    if (hi[c] - lo[c] < hi[narrow] - lo[narrow]) narrow = c;
  }
  std::vector<double> x(nv, 0);
  for (uint32_t v = 0; v < nv; ++v) {
    double c4[4];
    for (int c = 0; c < 4; ++c) c4[c] = cand[c][v] + (c % 2 == 0 ? lo[narrow] - lo[c] : hi[narrow] - hi[c]);
    std::sort(c4, c4 + 4);
    x[v] = (c4[1] + c4[2]) / 2;
  }
  return x;
}

}  // namespace

LayoutGraph layout_graph(const Graph& g, const std::vector<uint32_t>& group, const LayoutGraphOptions& options) {
  std::vector<uint32_t> box_of(g.node_capacity(), kNone);
  uint32_t n = 0;
  for (Node* v : g.nodes()) {
    if (!group.empty() && n >= group.size()) throw std::invalid_argument("layout_graph: one group id per node expected");
    box_of[v->index()] = group.empty() ? n : group[n];
    ++n;
  }
  if (!group.empty() && n != group.size()) throw std::invalid_argument("layout_graph: one group id per node expected");
  uint32_t boxes = n;
  if (!group.empty()) {
    boxes = 0;
    for (uint32_t k : group) {
      if (k == kNone) throw std::invalid_argument("layout_graph: group id out of range");
      boxes = std::max(boxes, k + 1);
    }
  }
  LayoutGraph lg;
  lg.boxes.assign(boxes, LayoutBox{options.box_width, options.box_height, group.empty() ? 1u : 0u});
  if (!group.empty())
    for (uint32_t k : group) ++lg.boxes[k].members;
  std::vector<std::pair<uint32_t, uint32_t>> raw;
  for (Node* v : g.nodes()) {
    const uint32_t t = box_of[v->index()];
    for (size_t i = 0, k = v->num_inputs(); i < k; ++i) {
      const Node* u = v->input_use(i).value();
      if (u->graph() != &g) continue;
      const uint32_t s = box_of[u->index()];
      if (s == kNone) continue;
      if (!group.empty() && s == t) continue;
      raw.emplace_back(s, t);
    }
  }
  std::sort(raw.begin(), raw.end());
  for (size_t i = 0; i < raw.size();) {
    size_t j = i;
    while (j < raw.size() && raw[j] == raw[i]) ++j;
    lg.edges.push_back(LayoutEdge{raw[i].first, raw[i].second, static_cast<uint32_t>(j - i)});
    i = j;
  }
  return lg;
}

LayoutResult layout(const LayoutGraph& lg, const LayoutOptions& options) {
  const uint32_t nb = static_cast<uint32_t>(lg.boxes.size());
  const size_t ne = lg.edges.size();
  for (const LayoutEdge& e : lg.edges)
    if (e.source >= nb || e.target >= nb) throw std::invalid_argument("layout: edge names a box that does not exist");
  LayoutResult r;
  r.edge_reversed.assign(ne, 0);

  // 1. Break cycles (Note [Breaking cycles]).
  std::vector<uint32_t> out_begin(nb + 1, 0), out_edge(ne);
  for (const LayoutEdge& e : lg.edges) ++out_begin[e.source + 1];
  for (uint32_t i = 0; i < nb; ++i) out_begin[i + 1] += out_begin[i];
  {
    std::vector<uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
    for (size_t e = 0; e < ne; ++e) out_edge[fill[lg.edges[e].source]++] = static_cast<uint32_t>(e);
    std::vector<uint8_t> state(nb, 0);  // 0 new, 1 on stack, 2 done
    std::vector<std::pair<uint32_t, uint32_t>> stack;  // (vertex, next out slot)
    for (uint32_t root = 0; root < nb; ++root) {
      if (state[root]) continue;
      state[root] = 1;
      stack.emplace_back(root, out_begin[root]);
      while (!stack.empty()) {
        auto& [v, k] = stack.back();
        if (k == out_begin[v + 1]) {
          state[v] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t e = out_edge[k++];
        const uint32_t w = lg.edges[e].target;
        if (w == v) continue;
        if (state[w] == 1) r.edge_reversed[e] = 1;
        else if (state[w] == 0) {
          state[w] = 1;
          stack.emplace_back(w, out_begin[w]);
        }
      }
    }
  }
  // Oriented edges (upper, lower); self-loops get kNone.
  std::vector<std::pair<uint32_t, uint32_t>> dir(ne);
  std::vector<std::pair<uint32_t, uint32_t>> dag;
  dag.reserve(ne);
  for (size_t e = 0; e < ne; ++e) {
    const LayoutEdge& x = lg.edges[e];
    if (x.source == x.target) { dir[e] = {kNone, kNone}; continue; }
    dir[e] = r.edge_reversed[e] ? std::make_pair(x.target, x.source) : std::make_pair(x.source, x.target);
    dag.push_back(dir[e]);
  }

  // 2. Layers: longest path in Kahn's order.
  Csr fwd;
  fwd.build(nb, dag, true);
  std::vector<uint32_t> indeg(nb, 0), layer(nb, 0), queue;
  queue.reserve(nb);
  for (const auto& e : dag) ++indeg[e.second];
  for (uint32_t v = 0; v < nb; ++v)
    if (!indeg[v]) queue.push_back(v);
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const uint32_t v = queue[qi];
    for (uint32_t k = fwd.begin[v]; k < fwd.begin[v + 1]; ++k) {
      const uint32_t w = fwd.adj[k];
      layer[w] = std::max(layer[w], layer[v] + 1);
      if (--indeg[w] == 0) queue.push_back(w);
    }
  }
  if (options.tighten_sources || options.pull_down_fanouts) {
    // Bottom up (reverse Kahn order), so a box sees its successors' final
    // layers. Moving a box down by one shortens its out-edges and lengthens
    // its in-edges by one each: worth it when it has fewer in-edges.
    std::vector<uint32_t> in_count(nb, 0);
    for (const auto& e : dag) ++in_count[e.second];
    for (size_t qi = queue.size(); qi-- > 0;) {
      const uint32_t v = queue[qi];
      const uint32_t out = fwd.begin[v + 1] - fwd.begin[v];
      if (!out || in_count[v] >= out) continue;
      if (!(in_count[v] ? options.pull_down_fanouts : options.tighten_sources)) continue;
      uint32_t m = kNone;
      for (uint32_t k = fwd.begin[v]; k < fwd.begin[v + 1]; ++k) m = std::min(m, layer[fwd.adj[k]]);
      layer[v] = std::max(layer[v], m - 1);
    }
  }
  uint32_t num_layers = 0;
  for (uint32_t v = 0; v < nb; ++v) num_layers = std::max(num_layers, layer[v] + 1);
  if (nb == 0) num_layers = 0;

  // 3. Dummies (Note [Trunks]). chain[e]: id of the dummy one layer below the
  // edge's upper end (kNone for a span of 1 or a self-loop).
  std::vector<uint32_t> vlayer(layer);
  std::vector<uint32_t> chain(ne, kNone);
  std::vector<std::pair<uint32_t, uint32_t>> ledges;
  ledges.reserve(dag.size());
  auto add_chain = [&](uint32_t a, uint32_t last_layer) {  // dummies at layer(a)+1 .. last_layer
    const uint32_t start = static_cast<uint32_t>(vlayer.size());
    uint32_t prev = a;
    for (uint32_t l = layer[a] + 1; l <= last_layer; ++l) {
      const uint32_t d = static_cast<uint32_t>(vlayer.size());
      vlayer.push_back(l);
      ledges.emplace_back(prev, d);
      prev = d;
    }
    return start;
  };
  if (options.concentrate) {
    std::vector<uint32_t> deepest(nb, 0);  // lowest target layer of a long edge, per upper end
    for (size_t e = 0; e < ne; ++e) {
      const auto [a, b] = dir[e];
      if (a != kNone && layer[b] > layer[a] + 1) deepest[a] = std::max(deepest[a], layer[b]);
    }
    std::vector<uint32_t> trunk(nb, kNone);
    for (uint32_t a = 0; a < nb; ++a)
      if (deepest[a]) trunk[a] = add_chain(a, deepest[a] - 1);
    for (size_t e = 0; e < ne; ++e) {
      const auto [a, b] = dir[e];
      if (a == kNone) continue;
      if (layer[b] == layer[a] + 1) { ledges.emplace_back(a, b); continue; }
      chain[e] = trunk[a];
      ledges.emplace_back(trunk[a] + (layer[b] - layer[a] - 2), b);
    }
  } else {
    for (size_t e = 0; e < ne; ++e) {
      const auto [a, b] = dir[e];
      if (a == kNone) continue;
      if (layer[b] == layer[a] + 1) { ledges.emplace_back(a, b); continue; }
      chain[e] = add_chain(a, layer[b] - 1);
      ledges.emplace_back(static_cast<uint32_t>(vlayer.size() - 1), b);
    }
  }
  std::sort(ledges.begin(), ledges.end());
  ledges.erase(std::unique(ledges.begin(), ledges.end()), ledges.end());
  const uint32_t nv = static_cast<uint32_t>(vlayer.size());

  // Initial order: by layer, then by id.
  std::vector<uint32_t> lbegin(num_layers + 1, 0), order(nv), pos(nv);
  for (uint32_t v = 0; v < nv; ++v) ++lbegin[vlayer[v] + 1];
  for (uint32_t l = 0; l < num_layers; ++l) lbegin[l + 1] += lbegin[l];
  {
    std::vector<uint32_t> fill(lbegin.begin(), lbegin.end() - 1);
    for (uint32_t v = 0; v < nv; ++v) {
      pos[v] = fill[vlayer[v]] - lbegin[vlayer[v]];
      order[fill[vlayer[v]]++] = v;
    }
  }
  Csr up, down;
  down.build(nv, ledges, true);
  up.build(nv, ledges, false);

  // 4. Crossing reduction.
  std::vector<uint32_t> scratch, tree;
  if (options.sweeps > 0 && num_layers > 1) {
    uint64_t best = crossings(num_layers, lbegin, order, pos, down, scratch, tree);
    std::vector<uint32_t> best_order(order);
    std::vector<double> key(nv);
    auto sweep_layer = [&](uint32_t l, const Csr& nb_of) {
      const uint32_t b = lbegin[l], e = lbegin[l + 1];
      for (uint32_t i = b; i < e; ++i) {
        const uint32_t v = order[i];
        const uint32_t k0 = nb_of.begin[v], k1 = nb_of.begin[v + 1];
        if (k0 == k1) { key[v] = pos[v]; continue; }
        double s = 0;
        for (uint32_t k = k0; k < k1; ++k) s += pos[nb_of.adj[k]];
        key[v] = s / (k1 - k0);
      }
      std::stable_sort(order.begin() + b, order.begin() + e,
                       [&](uint32_t x, uint32_t y) { return key[x] < key[y]; });
      for (uint32_t i = b; i < e; ++i) pos[order[i]] = i - b;
    };
    // Transposition (Note [Layout phases]): swap two neighbours of a layer
    // when that strictly lowers the crossings of their edges to both
    // neighbouring layers; rounds over all layers until none helps (at most
    // options.transpose_rounds).
    std::vector<uint32_t> pa, pb;
    auto pair_crossings = [&](uint32_t v, uint32_t u, const Csr& nb_of, uint64_t& vu, uint64_t& uv) {
      pa.clear();
      pb.clear();
      for (uint32_t k = nb_of.begin[v]; k < nb_of.begin[v + 1]; ++k) pa.push_back(pos[nb_of.adj[k]]);
      for (uint32_t k = nb_of.begin[u]; k < nb_of.begin[u + 1]; ++k) pb.push_back(pos[nb_of.adj[k]]);
      if (pa.empty() || pb.empty()) return;
      std::sort(pa.begin(), pa.end());
      std::sort(pb.begin(), pb.end());
      // vu: pairs a > b (crossings with v left of u); uv: pairs a < b.
      size_t lt = 0, le = 0;  // entries of pb below / not above the current a
      for (uint32_t a : pa) {
        while (lt < pb.size() && pb[lt] < a) ++lt;
        while (le < pb.size() && pb[le] <= a) ++le;
        vu += lt;
        uv += pb.size() - le;
      }
    };
    // A layer is looked at again only when it or a neighbouring layer
    // changed in the previous round.
    std::vector<uint8_t> dirty, next_dirty;
    auto transpose = [&] {
      dirty.assign(num_layers, 1);
      for (uint32_t round = 0; round < options.transpose_rounds; ++round) {
        bool improved = false;
        next_dirty.assign(num_layers, 0);
        for (uint32_t l = 0; l < num_layers; ++l) {
          if (!dirty[l]) continue;
          for (uint32_t i = lbegin[l]; i + 1 < lbegin[l + 1]; ++i) {
            const uint32_t v = order[i], u = order[i + 1];
            uint64_t vu = 0, uv = 0;
            pair_crossings(v, u, up, vu, uv);
            pair_crossings(v, u, down, vu, uv);
            if (uv < vu) {
              std::swap(order[i], order[i + 1]);
              std::swap(pos[v], pos[u]);
              improved = true;
              next_dirty[l] = 1;
              if (l) next_dirty[l - 1] = 1;
              if (l + 1 < num_layers) next_dirty[l + 1] = 1;
            }
          }
        }
        if (!improved) break;
        dirty.swap(next_dirty);
      }
    };
    auto keep_if_better = [&] {
      transpose();
      const uint64_t c = crossings(num_layers, lbegin, order, pos, down, scratch, tree);
      if (c < best) {
        best = c;
        best_order = order;
      }
    };
    for (uint32_t s = 0; s < options.sweeps && best > 0; ++s) {
      for (uint32_t l = 1; l < num_layers; ++l) sweep_layer(l, up);
      keep_if_better();
      if (best == 0) break;
      for (uint32_t l = num_layers ? num_layers - 1 : 0; l-- > 0;) sweep_layer(l, down);
      keep_if_better();
    }
    order.swap(best_order);
    for (uint32_t l = 0; l < num_layers; ++l)
      for (uint32_t i = lbegin[l]; i < lbegin[l + 1]; ++i) pos[order[i]] = i - lbegin[l];
  }

  // 5. x coordinates (centres).
  std::vector<double> w(nv, 0), x(nv, 0);
  for (uint32_t v = 0; v < nb; ++v) w[v] = lg.boxes[v].width;
  auto gap = [&](uint32_t a, uint32_t b) {
    return (w[a] + w[b]) / 2 + ((a < nb && b < nb) ? options.box_spacing : options.edge_spacing);
  };
  if (options.brandes_koepf) {
    x = brandes_koepf(nb, num_layers, lbegin, order, pos, ledges, w, gap);
  } else {
  for (uint32_t l = 0; l < num_layers; ++l)
    for (uint32_t i = lbegin[l] + 1; i < lbegin[l + 1]; ++i) x[order[i]] = x[order[i - 1]] + gap(order[i - 1], order[i]);
  {
    std::vector<double> med, off;
    struct Block { double sw, swz; uint32_t n; };
    std::vector<Block> blocks;
    auto place_layer = [&](uint32_t l, const Csr& nb_of) {
      const uint32_t b = lbegin[l], e = lbegin[l + 1];
      blocks.clear();
      off.assign(e - b, 0);
      for (uint32_t i = b; i < e; ++i) {
        const uint32_t v = order[i];
        if (i > b) off[i - b] = off[i - b - 1] + gap(order[i - 1], v);
        const uint32_t k0 = nb_of.begin[v], k1 = nb_of.begin[v + 1];
        double want = x[v], wt = 0.25;
        if (k0 < k1) {
          // A dummy follows the dummies of its chain, a box ignores trunk
          // dummies it branches off (dummies with several lower neighbours),
          // when there are other neighbours: trunks stay straight and boxes
          // are not pulled sideways by them (Note [Trunks]).
          med.clear();
          const bool dummy = v >= nb;
          for (uint32_t k = k0; k < k1; ++k) {
            const uint32_t u = nb_of.adj[k];
            const bool keep = dummy ? u >= nb : (u < nb || down.begin[u + 1] - down.begin[u] <= 1);
            if (keep) med.push_back(x[u]);
          }
          if (med.empty())
            for (uint32_t k = k0; k < k1; ++k) med.push_back(x[nb_of.adj[k]]);
          const size_t m = med.size() / 2;
          std::nth_element(med.begin(), med.begin() + m, med.end());
          want = med[m];
          if (med.size() % 2 == 0) want = (want + *std::max_element(med.begin(), med.begin() + m)) / 2;
          wt = static_cast<double>(med.size()) * (dummy ? 2 : 1);
        }
        Block blk{wt, wt * (want - off[i - b]), 1};
        while (!blocks.empty() && blocks.back().swz / blocks.back().sw >= blk.swz / blk.sw) {
          blk.sw += blocks.back().sw;
          blk.swz += blocks.back().swz;
          blk.n += blocks.back().n;
          blocks.pop_back();
        }
        blocks.push_back(blk);
      }
      uint32_t i = b;
      for (const Block& blk : blocks) {
        const double z = blk.swz / blk.sw;
        for (uint32_t k = 0; k < blk.n; ++k, ++i) x[order[i]] = z + off[i - b];
      }
    };
    for (uint32_t p = 0; p < options.x_passes; ++p) {
      if (p % 2 == 0)
        for (uint32_t l = 1; l < num_layers; ++l) place_layer(l, up);
      else
        for (uint32_t l = num_layers ? num_layers - 1 : 0; l-- > 0;) place_layer(l, down);
    }
  }
  }
  // Straighten: a dummy moves right under its upper neighbour when the gaps
  // to its (already final) left and (current) right neighbours allow, so
  // trunks and long edges become vertical runs (short polylines).
  // (Brandes-Koepf aligns the long edges itself.)
  for (uint32_t l = 1; l < num_layers && !options.brandes_koepf; ++l)
    for (uint32_t i = lbegin[l]; i < lbegin[l + 1]; ++i) {
      const uint32_t v = order[i];
      if (v < nb || up.begin[v + 1] - up.begin[v] != 1) continue;
      const double t = x[up.adj[up.begin[v]]];
      if (i > lbegin[l] && t < x[order[i - 1]] + gap(order[i - 1], v)) continue;
      if (i + 1 < lbegin[l + 1] && t > x[order[i + 1]] - gap(v, order[i + 1])) continue;
      x[v] = t;
    }
  double min_x = nv ? std::numeric_limits<double>::infinity() : 0, max_x = 0;
  for (uint32_t v = 0; v < nv; ++v) min_x = std::min(min_x, x[v] - w[v] / 2);
  for (uint32_t v = 0; v < nv; ++v) {
    x[v] -= min_x;
    max_x = std::max(max_x, x[v] + w[v] / 2);
  }

  // 6. y and output.
  std::vector<double> ltop(num_layers, 0), lh(num_layers, 0);
  for (uint32_t v = 0; v < nb; ++v) lh[layer[v]] = std::max(lh[layer[v]], lg.boxes[v].height);
  double y = 0;
  for (uint32_t l = 0; l < num_layers; ++l) {
    if (l) y += options.layer_spacing;
    ltop[l] = y;
    y += lh[l];
  }
  r.width = max_x;
  r.height = y;
  r.boxes.resize(nb);
  r.box_layer = layer;
  for (uint32_t v = 0; v < nb; ++v) {
    const LayoutBox& bx = lg.boxes[v];
    r.boxes[v] = LayoutRect{x[v] - bx.width / 2, ltop[layer[v]] + (lh[layer[v]] - bx.height) / 2, bx.width, bx.height};
  }
  // run_end[d]: the lowest dummy of d's chain reached from d through dummies
  // of the same x (so a trunk's polylines cost O(bends), not O(span)).
  std::vector<uint32_t> run_end(nv, 0);
  for (uint32_t d = nv; d-- > nb;) {
    const bool next_in_chain = d + 1 < nv && vlayer[d + 1] == vlayer[d] + 1 && up.adj[up.begin[d + 1]] == d;
    run_end[d] = next_in_chain && x[d + 1] == x[d] ? run_end[d + 1] : d;
  }
  r.edge_begin.reserve(ne + 1);
  r.edge_begin.push_back(0);
  std::vector<LayoutPoint> pts;
  for (size_t e = 0; e < ne; ++e) {
    const auto [a, b] = dir[e];
    if (a != kNone) {
      pts.clear();
      pts.push_back({x[a], r.boxes[a].y + r.boxes[a].height});
      if (chain[e] != kNone) {
        // Through the dummies, a vertical run at a time (its two ends).
        const uint32_t last = chain[e] + (layer[b] - layer[a] - 2);
        for (uint32_t d = chain[e]; d <= last;) {
          pts.push_back({x[d], ltop[vlayer[d]] + lh[vlayer[d]] / 2});
          const uint32_t j = std::min(run_end[d], last);
          if (j != d) pts.push_back({x[j], ltop[vlayer[j]] + lh[vlayer[j]] / 2});
          d = j + 1;
        }
      }
      pts.push_back({x[b], r.boxes[b].y});
      if (r.edge_reversed[e]) std::reverse(pts.begin(), pts.end());
      for (size_t i = 0; i < pts.size(); ++i) {
        const bool middle = i > 0 && i + 1 < pts.size() && r.points.size() > r.edge_begin.back() &&
                            r.points.back().x == pts[i].x && pts[i + 1].x == pts[i].x;
        if (!middle) r.points.push_back(pts[i]);
      }
    }
    r.edge_begin.push_back(static_cast<uint32_t>(r.points.size()));
  }
  r.num_layers = num_layers;
  r.layer_begin = std::move(lbegin);
  r.layer_order = std::move(order);
  r.vertex_x = std::move(x);
  r.layered_edges = std::move(ledges);
  return r;
}

LayoutResult layout(const Graph& g, const std::vector<uint32_t>& group, const LayoutOptions& options,
                    const LayoutGraphOptions& box_options) {
  return layout(layout_graph(g, group, box_options), options);
}

uint64_t count_crossings(const LayoutResult& r) {
  const size_t nv = r.layer_order.size();
  std::vector<uint32_t> pos(nv, 0);
  for (uint32_t l = 0; l < r.num_layers; ++l)
    for (uint32_t i = r.layer_begin[l]; i < r.layer_begin[l + 1]; ++i) pos[r.layer_order[i]] = i - r.layer_begin[l];
  Csr down;
  down.build(nv, r.layered_edges, true);
  std::vector<uint32_t> scratch, tree;
  return crossings(r.num_layers, r.layer_begin, r.layer_order, pos, down, scratch, tree);
}

double layout_area(const LayoutResult& r) { return r.width * r.height; }

}  // namespace fxcpp
