// bench_weights_load: safetensors weight loading from the page cache against a raw sequential read of
// the same file, measured in the same run.
//   baseline  read(2) of the whole file in 8 MiB chunks into one buffer (page cache -> user memory)
//   mapped    SafetensorsCheckpoint::Open + every tensor's span read (8-byte words summed)
//   load_f32  SafetensorsCheckpoint::Open + HfWeightReader::Read of every tensor: BF16 -> F32 tensors
//             (what `onboard verify` does per weight)
// Synthetic checkpoint: bf16 tensors of 4096 x 4096 (32 MiB each) up to SIZE_MB, one file in /tmp.
// The readers alternate within each repetition, so machine load hits them alike; CPU seconds of the
// process are reported beside wall seconds (the 2-core machine is shared).
// Units: GB/s = checkpoint bytes / wall seconds (median of N). Usage: bench_weights_load [SIZE_MB] [N]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "backends/hf_model.h"

namespace {

struct Timing {
  std::vector<double> wall, cpu;
  double Wall() const { return Median(wall); }
  double Cpu() const { return Median(cpu); }
  static double Median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void Time(const std::function<void()>& fn, Timing* t) {
  const double c0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  t->wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  t->cpu.push_back(CpuSeconds() - c0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace onboard;
  const int64_t size_mb = argc > 1 ? std::max(32, std::atoi(argv[1])) : 2000;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int64_t rows = 4096, cols = 4096, tensor_bytes = rows * cols * 2;
  const int64_t count = std::max<int64_t>(1, size_mb * 1000000 / tensor_bytes);
  const std::string dir = "/tmp/onboard_bench_weights";
  std::system(("mkdir -p " + dir).c_str());
  const std::string path = dir + "/model.safetensors";

  // Step 1: the synthetic checkpoint (bf16 0x3f80 = 1.0 everywhere but a counter per tensor).
  {
    std::vector<TensorToWrite> t;
    for (int64_t i = 0; i < count; ++i) {
      std::string data(size_t(tensor_bytes), '\0');
      for (size_t k = 0; k + 1 < data.size(); k += 2) data[k + 1] = '\x3f', data[k] = char(0x80 + (i & 0x3f));
      t.push_back({"model.layers." + std::to_string(i) + ".mlp.up_proj.weight", "BF16", {rows, cols}, std::move(data)});
    }
    if (!WriteSafetensorsFile(path, t).ok()) return 3;
  }
  const double gb = double(count * tensor_bytes) / 1e9;

  // Step 2: the three readers; the first baseline pass also warms the page cache.
  std::vector<char> buf(size_t(count * tensor_bytes) + (8 << 20));
  uint64_t sink = 0;
  auto raw = [&] {
    int fd = ::open(path.c_str(), O_RDONLY);
    size_t off = 0;
    ssize_t n;
    while ((n = ::read(fd, buf.data() + off, 8 << 20)) > 0) off += size_t(n);
    ::close(fd);
    sink += uint64_t(buf[off / 2]);
  };
  auto mapped = [&] {
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    for (const TensorInfo& ti : ck->inventory().tensors) {
      const ConstByteSpan s = ck->Get(ti.name)->bytes;
      uint64_t acc = 0, word;
      for (size_t k = 0; k + 8 <= s.size; k += 8) {
        std::memcpy(&word, s.data + k, 8);
        acc += word;
      }
      sink += acc;
    }
  };
  auto load = [&] {
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    HfWeightReader r(*ck, torch::kFloat);
    for (const TensorInfo& ti : ck->inventory().tensors) sink += uint64_t(r.Read(ti.name, ti.shape)->numel());
  };
  raw();  // warms the page cache
  Timing t_raw, t_map, t_load;
  for (int r = 0; r < reps; ++r) {
    Time(raw, &t_raw);
    Time(mapped, &t_map);
    Time(load, &t_load);
  }
  std::printf("checkpoint: %lld bf16 tensors [%lld, %lld], %.2f GB, page cache warm; median of %d (sink %llu)\n",
              static_cast<long long>(count), static_cast<long long>(rows), static_cast<long long>(cols), gb, reps,
              static_cast<unsigned long long>(sink % 10));
  std::printf("| reader | wall s | cpu s | GB/s (wall) | speed vs raw read |\n|---|---|---|---|---|\n");
  const std::vector<std::pair<const char*, const Timing*>> table = {
      {"raw read(2), 8 MiB chunks (baseline)", &t_raw},
      {"mmap + read every byte", &t_map},
      {"load to F32 tensors (BF16 decode)", &t_load}};
  for (const auto& [name, t] : table)
    std::printf("| %s | %.3f | %.3f | %.2f | %.2fx |\n", name, t->Wall(), t->Cpu(), gb / t->Wall(),
                t_raw.Wall() / t->Wall());
  std::remove(path.c_str());
  return 0;
}
