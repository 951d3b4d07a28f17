// The LibTorch backend is loaded only by the commands that train (backends/backend_entry.h): the
// `onboard` binary does not link LibTorch, the commands that never train run without the backend
// library, and the ones that need it name it when it is missing or is not an onboard backend.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

namespace {

struct ShellRun {
  int code = -1;
  std::string out;  // stdout + stderr
};

ShellRun Shell(const std::string& cmd) {
  ShellRun r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string kBin = std::string(ONBOARD_BINARY_DIR) + "/onboard";
const std::string kNoBackend = "ONBOARD_BACKEND_LIB=/nonexistent/libonboard_backend.so ";

TEST(BackendLoading, OnboardBinaryDoesNotNeedLibTorch) {
  const ShellRun r = Shell("readelf -d " + kBin);
  ASSERT_EQ(r.code, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int needed = 0;
  while (std::getline(lines, line)) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    ++needed;
    EXPECT_EQ(line.find("torch"), std::string::npos) << line;
    EXPECT_EQ(line.find("libc10"), std::string::npos) << line;
    EXPECT_EQ(line.find("gloo"), std::string::npos) << line;
  }
  EXPECT_GT(needed, 0) << "no NEEDED entry read: " << r.out;  // the check read something
}

TEST(BackendLoading, CommandsThatDoNotTrainRunWithoutTheBackendLibrary) {
  const std::string data = ONBOARD_TEST_DATA;
  EXPECT_EQ(Shell(kNoBackend + kBin + " --version").code, 0);
  EXPECT_EQ(Shell(kNoBackend + kBin + " inspect " + data + "/agent/tiny_kimi.config.json").code, 0);
  const ShellRun plan =
      Shell(kNoBackend + kBin + " plan " + data + "/agent/tiny_kimi.config.json --topology " + data +
            "/agent/tiny_2x4.topology.json");
  EXPECT_EQ(plan.code, 0) << plan.out;
}

TEST(BackendLoading, ProbeWithoutTheBackendNamesTheLibraryAndExits2) {
  const ShellRun r = Shell(kNoBackend + kBin + " probe " + std::string(ONBOARD_TEST_DATA) +
                           "/agent/tiny_kimi.config.json --steps 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("onboard probe: LibTorch backend libonboard_backend.so"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/libonboard_backend.so"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(BackendLoading, ALibraryThatIsNotAnOnboardBackendIsRefused) {
  // libm loads fine but has no entry table: an I/O-class error (exit 3) naming the symbol.
  const ShellRun r = Shell("ONBOARD_BACKEND_LIB=$(ldd " + kBin + " | awk '/libm.so/ {print $3}') " + kBin +
                           " probe-worker --spec /nonexistent.json --master-port 1");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("no symbol onboard_backend_entry_v1"), std::string::npos) << r.out;
}

}  // namespace
