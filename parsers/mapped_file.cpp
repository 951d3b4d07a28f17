// MappedFile: read-only mmap with bounds-checked slices (see parsers/mapped_file.h).
#include "parsers/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace onboard {

Expected<std::string> ReadFileCapped(const std::string& path, uint64_t max_bytes, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return IoError(path + ": cannot determine the file size");
  if (uint64_t(size) > max_bytes)
    return BadInput(path, field, "file exceeds the cap of " + std::to_string(max_bytes) + " bytes",
                    std::to_string(size));
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(&bytes[0], size);
  if (!in) return IoError(path + ": read failed");
  return bytes;
}

Expected<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path);
    return IoError(path + ": open failed: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + ": not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return IoError(path + ": mmap failed: " + std::strerror(errno));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid after close
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Expected<ConstByteSpan> MappedFile::Slice(uint64_t offset, uint64_t length, const std::string& field) const {
  // offset + length may overflow: compare against the remaining size instead.
  if (offset > size_ || length > size_ - offset) {
    return BadInput(path_, field, "byte range lies outside the file (file is " + std::to_string(size_) + " bytes)",
                    "[" + std::to_string(offset) + ", +" + std::to_string(length) + ")");
  }
  return ConstByteSpan{data_ + offset, static_cast<size_t>(length)};
}

}  // namespace onboard
