// The .pt2 reader's entry points for load.cpp (private to the torch layer;
// Note [Reading .pt2 archives] in fxcpp/torch/pt2.h).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "fxcpp/torch/module.h"
#include "zip_reader.h"

namespace fxcpp::torch::pt2 {

/// Whether the checked archive is a .pt2 archive: it has an `archive_format`
/// record and no graph.json. O(1) lookups; reads at most a few bytes.
bool is_pt2(const zip::Reader& archive);

/// The graph and tensors of a .pt2 archive, checked as load() checks .fxpt
/// files. Throws FormatError saying what is wrong or unsupported.
std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read(const zip::Reader& archive,
                                                                 const LoadOptions& options);

}  // namespace fxcpp::torch::pt2
