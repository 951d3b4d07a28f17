// The kernel headers of codegen/kernels/ (and core/gate_form.h) as embedded in the binary at build
// time, and their amalgamation into one self-contained translation unit for a generated kernel.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace onboard::codegen {

// {include path, text} of every embedded header, sorted by path (cmake/embed_files.cmake).
const std::vector<std::pair<std::string, std::string>>& EmbeddedKernelHeaders();

// The text of header `path` with every `#include "X"` of an embedded header X replaced by X's text
// (each header once, depth first) and `#pragma once` removed; system includes stay. An unknown
// `path` is a bug (InvariantError).
std::string AmalgamatedKernelHeader(const std::string& path);

}  // namespace onboard::codegen
