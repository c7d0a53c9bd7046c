// fxcpp pass: a layered (Sugiyama-style) drawing of a graph or of one fold
// level of it (issue 22, item 4): cycle breaking, layer assignment, long edges
// split by dummy vertices, crossing reduction by layer sweeps and
// transposition, x-coordinates by Brandes-Koepf, polylines for the edges.
#pragma once

#include <cstdint>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// One box to draw: a node, or a group of nodes collapsed into one box.
struct LayoutBox {
  double width = 0;
  double height = 0;
  /// How many graph nodes the box stands for (1 for a node; informational).
  uint32_t members = 1;
};

/// A directed edge source -> target between boxes (indices into
/// LayoutGraph::boxes). `count`: how many graph edges it bundles (for
/// layout_graph: distinct (input, user) node pairs; a node reading the same
/// input twice is one).
struct LayoutEdge {
  uint32_t source = 0;
  uint32_t target = 0;
  uint32_t count = 1;
};

/// The abstract input of layout(): boxes with sizes and edges between them.
/// Any directed graph is accepted: cycles are broken by layout() (Note
/// [Breaking cycles] in layout.cpp), self-loops and repeated edges are allowed.
struct LayoutGraph {
  std::vector<LayoutBox> boxes;
  std::vector<LayoutEdge> edges;
};

struct LayoutGraphOptions {
  /// Size given to every box (callers resize boxes afterwards as they like).
  double box_width = 80;
  double box_height = 24;
};

/// The fold level of `g` given by `group`: one group id per live node in graph
/// order (as propose_partitions' flags), or empty for one box per node (box i
/// = the i-th node). With groups, box k stands for the nodes with group id k
/// (there are max id + 1 boxes; an id no node has gives a box with members =
/// 0); an edge u -> v of the graph (v reads u: Node inputs, duplicates
/// included) becomes an edge group(u) -> group(v), edges inside a group are
/// dropped and those between two groups are bundled into one LayoutEdge per
/// ordered pair, whose count is the number of graph uses it stands for. Edges
/// are sorted by (source, target). Inputs from another graph are ignored.
/// Cost: O(nodes + uses + log-linear sort of the bundled edges); memory
/// O(node_capacity). Throws std::invalid_argument when a non-empty `group`
/// has the wrong size.
LayoutGraph layout_graph(const Graph& g, const std::vector<uint32_t>& group = {},
                         const LayoutGraphOptions& options = {});

struct LayoutOptions {
  /// Horizontal gap between two boxes of a layer.
  double box_spacing = 20;
  /// Horizontal gap next to an edge's bend point (a dummy vertex).
  double edge_spacing = 10;
  /// Vertical gap between two layers.
  double layer_spacing = 40;
  /// Crossing reduction: number of sweep pairs (down then up). 0 keeps the
  /// initial order (boxes by index, then dummies in creation order).
  uint32_t sweeps = 6;
  /// Crossing reduction: after each sweep, at most this many rounds of
  /// transposition (swapping neighbours of a layer when that lowers the
  /// crossings; each round O(E' log)). 0: none.
  uint32_t transpose_rounds = 8;
  /// x assignment by Brandes-Koepf (four alignments, balanced; Note
  /// [Brandes-Koepf] in layout.cpp). false: the median placement below.
  bool brandes_koepf = true;
  /// x assignment without brandes_koepf: number of alternating down/up
  /// balancing passes.
  uint32_t x_passes = 6;
  /// Move boxes without in-edges down next to their highest successor
  /// (shorter edges from, e.g., parameters read deep in the graph).
  bool tighten_sources = true;
  /// Likewise, bottom up, every other box with fewer in-edges than out-edges
  /// (a shape read by several later nodes): moving it down shortens its edges
  /// in total, so fewer dummies and crossings.
  bool pull_down_fanouts = true;
  /// Long edges leaving one box share one chain of dummy vertices (a trunk)
  /// and branch off at their targets' layers: one box read by every node of a
  /// chain costs O(chain) dummies instead of O(chain^2) (Note [Trunks]).
  bool concentrate = true;
};

struct LayoutPoint {
  double x = 0;
  double y = 0;
};

/// A box's place: top-left corner and size.
struct LayoutRect {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
};

struct LayoutResult {
  /// Per box of the input, in input order.
  std::vector<LayoutRect> boxes;
  /// Per box: its layer (0 at the top).
  std::vector<uint32_t> box_layer;
  /// Per input edge: the polyline of edge e is points[edge_begin[e] ..
  /// edge_begin[e + 1]), from the bottom centre of the upper box through the
  /// bend points to the top centre of the lower one, oriented source ->
  /// target (so it runs upwards for a reversed edge). Points in the middle of
  /// a vertical run are dropped. Self-loops have an empty polyline.
  std::vector<LayoutPoint> points;
  std::vector<uint32_t> edge_begin;
  /// Per input edge: 1 when it was reversed to break a cycle (drawn upwards).
  std::vector<uint8_t> edge_reversed;
  /// The drawing's extent: everything lies in [0, width] x [0, height].
  double width = 0;
  double height = 0;

  /// The layered graph the phases worked on. Vertices 0 .. boxes.size() - 1
  /// are the boxes, the rest dummy vertices (bend points of long edges).
  uint32_t num_layers = 0;
  /// Vertices of layer l, left to right: layer_order[layer_begin[l] ..
  /// layer_begin[l + 1]).
  std::vector<uint32_t> layer_begin;
  std::vector<uint32_t> layer_order;
  /// Per vertex: x of its centre.
  std::vector<double> vertex_x;
  /// Edges between consecutive layers (upper, lower), each once, also when
  /// it carries several input edges (a trunk, bundled or parallel edges).
  std::vector<std::pair<uint32_t, uint32_t>> layered_edges;
};

/// Lays out `lg` top to bottom (Note [Layout phases] in layout.cpp). Every
/// edge goes from a lower layer to a higher one (reversed edges in the
/// reversed direction), boxes of a layer do not overlap (gaps of at least
/// box_spacing / edge_spacing), layers do not overlap (gaps of
/// layer_spacing), and the result is a function of the input and options
/// only. Cost: O((V + E + D) * (sweeps * (1 + transpose_rounds) + 4) * log)
/// (x_passes instead of 4 without brandes_koepf) where D, the dummy
/// vertices, is the sum of the edges' layer spans (with `concentrate`, per
/// source box only its longest out-edge's span); memory O(V + E + D).
/// Throws std::invalid_argument when an edge names a box that does not exist.
LayoutResult layout(const LayoutGraph& lg, const LayoutOptions& options = {});

/// layout(layout_graph(g, group, box_options), options).
LayoutResult layout(const Graph& g, const std::vector<uint32_t>& group = {},
                    const LayoutOptions& options = {}, const LayoutGraphOptions& box_options = {});

/// Crossings of the result's layered edges between each pair of consecutive
/// layers (the measure crossing reduction minimises; two edges leaving or
/// entering one vertex never cross). O(E log V) (Barth, Juenger, Mutzel).
uint64_t count_crossings(const LayoutResult& r);

/// The drawing's area: width * height.
double layout_area(const LayoutResult& r);

}  // namespace fxcpp
