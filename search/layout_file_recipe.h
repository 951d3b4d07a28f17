// The measured-runs reader's recipe rules (search/layout_file_recipe.cpp): the settings a run's free
// text and recipe state, read into its plan and options. Called once per run by
// search/layout_file_measured.cpp after the layout (degrees, batch, sequence) is read.
#pragma once

#include <string>

#include "core/status.h"
#include "search/layout_file.h"
#include "search/layout_file_fields.h"

namespace onboard::layout {

// Precision, optimizer, recompute, pipeline layout, MTP, overlap, CPU offloading, CUDA graphs, EP
// dispatcher and the loss of `run` from its JSON object `r` (runs[i] of `origin`, json path `path`).
// Bad input (a pipeline layout that does not parse or does not cover the model) names file, field
// and value.
[[nodiscard]] Status ReadRecipeSettings(const json& r, const std::string& origin, const std::string& path,
                                        LayoutRun* run);

}  // namespace onboard::layout
