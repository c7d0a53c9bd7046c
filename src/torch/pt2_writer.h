// The .pt2 writer's entry point for save.cpp (private to the torch layer;
// Note [Writing .pt2 archives] in src/torch/pt2_writer.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "fxcpp/torch/format.h"

namespace fxcpp::torch::pt2 {

/// The records of a .pt2 archive, built and checked before anything is written.
struct Archive {
  /// (record name, bytes): the JSON documents and the small text records.
  std::vector<std::pair<std::string, std::string>> texts;
  /// (record name, a tensor whose whole storage is the record's bytes).
  std::vector<std::pair<std::string, at::Tensor>> payloads;
};

/// The archive torch.export.save would write for the program `graph` is (its
/// get_attr nodes lifted to parameter, buffer and constant inputs). Throws
/// FormatError naming the node for what an ExportedProgram cannot express.
/// O(nodes + argument size + metadata size); tensors are not copied unless
/// they are not plain CPU tensors.
Archive prepare(const Graph& graph, const std::vector<NamedTensor>& tensors);

}  // namespace fxcpp::torch::pt2
