// NumPy .npy files (format 1.0 / 2.0 / 3.0, https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//   "\x93NUMPY" major minor, u16 (v1) / u32 (v2, v3) little-endian header length, an ASCII dict
//   {'descr': '<f4', 'fortran_order': False, 'shape': (a, b, c), } padded with spaces to a multiple of
//   64 bytes and ended by '\n', then the C-order data.
// Reading treats the file as untrusted: errors are kBadInput naming the file, the field and the value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;   // C order; '<f8' input is rounded to float
};

// Writes float32 C-order data of `shape` (format 1.0).
[[nodiscard]] Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads a little-endian '<f4' or '<f8', C-order array.
[[nodiscard]] Expected<NpyArray> ReadNpy(const std::string& path);

}  // namespace onboard
