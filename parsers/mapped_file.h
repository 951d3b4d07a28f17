// MappedFile: a read-only mmap of one file, with bounds-checked slices.
// Units: offsets and sizes are bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace onboard {

// A non-owning view of bytes inside a mapping (C++17 has no std::span).
struct ConstByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Reads a whole file that must not exceed `max_bytes` (kNotFound when missing; kBadInput naming
// `field` when larger than the cap; kIo on a read failure).
[[nodiscard]] Expected<std::string> ReadFileCapped(const std::string& path, uint64_t max_bytes,
                                                   const std::string& field);

class MappedFile {
 public:
  // Maps `path` read-only. A zero-length file maps to an empty span. Missing file -> kNotFound.
  [[nodiscard]] static Expected<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // [offset, offset + length) or kBadInput naming `field` when it does not lie inside the file.
  [[nodiscard]] Expected<ConstByteSpan> Slice(uint64_t offset, uint64_t length,
                                              const std::string& field) const;

 private:
  void Reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace onboard
