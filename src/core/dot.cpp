// fxcpp core: Graphviz DOT export (Note [DOT export]).
#include "fxcpp/core/dot.h"

#include <cstdint>
#include <ostream>
#include <sstream>

#include "fxcpp/core/printer.h"

namespace fxcpp {
namespace {

// FxGraphDrawer's palettes (torch/fx/passes/graph_drawer.py).
const char* const kHashColors[] = {
    "CadetBlue1", "Coral",         "DarkOliveGreen1", "DarkSeaGreen1", "GhostWhite", "Khaki1",
    "LavenderBlush1", "LightSkyBlue", "MistyRose1",  "MistyRose2",    "PaleTurquoise2", "PeachPuff1",
    "Salmon",     "Thistle1",      "Thistle3",        "Wheat1",
};

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::string target_text(const Node& n) {
  const Target& t = n.target();
  if (t.fn()) return t.fn().iface()->pretty_target(t.fn().get());
  return t.str();
}

const char* fill_color(const Node& n, const std::string& target) {
  switch (n.op()) {
    case Op::Placeholder: return "AliceBlue";
    case Op::CallModule: return "LemonChiffon1";
    case Op::GetAttr: return "LightGrey";
    case Op::Output: return "PowderBlue";
    default: return kHashColors[fnv1a(target) % (sizeof(kHashColors) / sizeof(kHashColors[0]))];
  }
}

std::string clip(std::string s, size_t max_chars) {
  if (max_chars >= 3 && s.size() > max_chars) {
    size_t cut = max_chars - 3;
    // Do not split a UTF-8 sequence.
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s.resize(cut);
    s += "...";
  }
  return s;
}

// "|args=(\l<a>,\l<b>,\l)\l" with node-mentioning entries dropped; "" if none remain.
std::string args_field(const Node& n, const DotOptions& opts) {
  std::string out;
  std::vector<std::string> items;
  for (const Argument& a : n.args()) {
    if (a.contains_nodes()) continue;
    items.push_back(clip(format_arg(a), opts.max_arg_chars));
  }
  if (!items.empty()) {
    out += "|args=(\\l";
    for (const auto& s : items) out += dot_record_escape(s) + ",\\l";
    out += ")\\l";
  }
  items.clear();
  for (const auto& kv : n.kwargs()) {
    if (kv.second.contains_nodes()) continue;
    items.push_back(clip(kv.first + ": " + format_arg(kv.second), opts.max_arg_chars));
  }
  if (!items.empty()) {
    out += "|kwargs=\\{\\l";
    for (const auto& s : items) out += dot_record_escape(s) + ",\\l";
    out += "\\}\\l";
  }
  return out;
}

}  // namespace

std::string dot_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += ' ';
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string dot_record_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '{': case '}': case '|': case '<': case '>': case '"': case '\\':
        out += '\\';
        out += static_cast<char>(c);
        break;
      default:
        out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
    }
  }
  return out;
}

void write_dot(std::ostream& os, const Graph& g, const DotOptions& opts) {
  os << "digraph " << dot_quote(opts.graph_name) << " {\n";
  os << "  graph [rankdir=" << dot_quote(opts.rankdir.empty() ? "TB" : opts.rankdir) << "];\n";
  os << "  node [shape=record, style=\"filled,rounded\", fontcolor=\"#000000\", fontname=\"Helvetica\"];\n";
  for (Node* n : g.nodes()) {
    std::string target = target_text(*n);
    std::string label = "{name=%" + dot_record_escape(n->name()) + "|op_code=" + op_name(n->op()) + "\\l";
    if (n->op() != Op::Output || !target.empty()) label += "|target=" + dot_record_escape(target) + "\\l";
    if (opts.extra_fields) {
      for (const std::string& f : opts.extra_fields(*n)) label += "|" + dot_record_escape(f) + "\\l";
    }
    if (opts.show_args) label += args_field(*n, opts);
    label += "|num_users=" + std::to_string(n->num_users()) + "\\l}";
    os << "  " << dot_quote(n->name()) << " [label=\"" << label << "\", fillcolor=" << dot_quote(fill_color(*n, target))
       << "];\n";
  }
  for (Node* n : g.nodes()) {
    for (Node* u : n->users()) os << "  " << dot_quote(n->name()) << " -> " << dot_quote(u->name()) << ";\n";
  }
  os << "}\n";
}

std::string to_dot(const Graph& g, const DotOptions& opts) {
  std::ostringstream os;
  write_dot(os, g, opts);
  return os.str();
}

}  // namespace fxcpp
