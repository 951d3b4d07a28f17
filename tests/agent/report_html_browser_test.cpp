// The HTML report of a real run (tiny model, one probe round) opens in headless Chromium: the
// screenshot exists and is not blank, and the browser logs no console (JavaScript) errors. The page
// has no scripts or external resources at all. Skips when chromium is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/orchestrator.h"
#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string FindChromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(c)) return c;
  return "";
}

// PNG width/height from the IHDR chunk (big-endian at bytes 16..23).
std::pair<uint32_t, uint32_t> PngSize(const std::string& png) {
  auto be = [&](size_t o) {
    return (uint32_t(uint8_t(png[o])) << 24) | (uint32_t(uint8_t(png[o + 1])) << 16) |
           (uint32_t(uint8_t(png[o + 2])) << 8) | uint32_t(uint8_t(png[o + 3]));
  };
  return {be(16), be(20)};
}

TEST(ReportHtmlBrowser, OpensInHeadlessChromiumWithoutErrors) {
  std::string chromium = FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh installs it)";
  ASSERT_TRUE(fs::exists(testing::OnboardBinary())) << "build the onboard binary first (probe workers)";
  std::string out = testing::FreshDir("html");
  RunRequest req = testing::TinyRequest(out, /*probe=*/true, /*kernels=*/false);
  req.max_rounds = 1;
  NullEventSink sink;
  auto res = RunOnboarding(req, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  std::string html_path = out + "/report.html";
  std::string html = ReadFile(html_path);

  // Self-contained: no scripts, no external resources; charts are inline SVG.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::string no_ns = html;
  for (size_t p = no_ns.find("http://www.w3.org/2000/svg"); p != std::string::npos; p = no_ns.find("http://www.w3.org/2000/svg"))
    no_ns.erase(p, 26);
  EXPECT_EQ(no_ns.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_GE(svgs, 5u);  // memory, Pareto, loss, grad norm, expert load, timeline

  std::string png = out + "/report.png";
  std::string log = out + "/chromium.log";
  std::string profile = out + "/chromium-profile";
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                    " --disable-background-networking --disable-component-update --disable-sync"
                    " --user-data-dir=" + profile + " --screenshot=" + png +
                    " --window-size=1280,2000 --enable-logging=stderr --v=0 file://" + html_path + " > " + log +
                    " 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << ReadFile(log);
  ASSERT_TRUE(fs::exists(png)) << ReadFile(log);
  std::string img = ReadFile(png);
  ASSERT_GT(img.size(), 24u);
  EXPECT_EQ(img.substr(1, 3), "PNG");
  auto [w, h] = PngSize(img);
  EXPECT_EQ(w, 1280u);
  EXPECT_EQ(h, 2000u);
  EXPECT_GT(img.size(), 40u * 1024) << "screenshot looks blank";  // text + charts, not a white page
  std::string logs = ReadFile(log);
  EXPECT_EQ(logs.find("CONSOLE"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("Uncaught"), std::string::npos) << logs;
  if (const char* keep = std::getenv("ONBOARD_KEEP_SCREENSHOT")) fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
  fs::remove_all(out);
}

}  // namespace
}  // namespace onboard::agent
