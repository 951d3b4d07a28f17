// End-to-end: the real `onboard serve` binary on a free loopback port with a temp database.
//  1. Submit the tiny flagship-shaped config (by path, under --allowed-root), follow its events
//     over SSE (httplib::Client) to the end, fetch report.{json,md,html}; SIGTERM; restart on the
//     same database and find the job, its events and its reports again.
//  2. SIGKILL the server while a job runs; the restarted server reports it `interrupted`;
//     POST /retry runs it to success.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/serve/http_sse_client.h"
#include "tests/serve/http_test_support.h"
#include "tests/e2e/serve_process.h"

namespace onboard::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* kToken = "e2e-token-0123456789abcdef";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ServeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::string(ONBOARD_BINARY_DIR) + "/onboard";
    ASSERT_TRUE(fs::exists(binary_)) << binary_ << " is missing: build the `onboard` target first";
    models_ = dir_.path + "/models";
    fs::create_directories(models_);
    fs::copy_file(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_kimi.config.json", models_ + "/config.json");
    fs::copy_file(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json", models_ + "/topology.json");
    std::ofstream(dir_.path + "/token") << kToken << "\n";
  }

  bool StartServer(testing::ServeProcess& p, const std::string& log) {
    return p.Start(binary_,
                   {"--port", "0", "--host", "127.0.0.1", "--db", dir_.path + "/e2e.db", "--allowed-root", models_,
                    "--token-file", dir_.path + "/token", "--workers", "1", "--grace", "20"},
                   dir_.path + "/" + log);
  }

  std::unique_ptr<httplib::Client> Client(int port) { return testing::AuthedClient(port, kToken, 120); }

  // A small job: parse, templates, plan, one short probe round (2 ranks, 6 steps) and the reports on
  // the tiny model. Kernel generation is skipped to keep the test fast (tests/agent covers it).
  json JobBody() { return testing::TinyProbeJob(models_ + "/topology.json", 6); }

  std::string Submit(httplib::Client& c) {
    auto res = c.Post("/v1/jobs", JobBody().dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return "";
    EXPECT_EQ(res->status, 202) << res->body;
    return json::parse(res->body).value("id", "");
  }

  // Follows the job's events to the end; returns the frames.
  std::vector<testing::SseFrame> Follow(httplib::Client& c, const std::string& id, const std::string& last_id = "") {
    int status = 0;
    httplib::Headers h;
    if (!last_id.empty()) h.emplace("Last-Event-ID", last_id);
    auto frames = testing::ReadEventStream(c, "/v1/jobs/" + id + "/events", h, &status);
    EXPECT_EQ(status, 200);
    return frames;
  }

  // Reads the job's event stream until the orchestrator has started its first stage.
  bool WaitUntilRunning(httplib::Client& c, const std::string& id) {
    std::string buffer;
    bool running = false;
    c.Get(("/v1/jobs/" + id + "/events").c_str(), [&](const char* data, size_t n) {
      buffer.append(data, n);
      for (const auto& f : testing::TakeSseFrames(buffer)) {
        if (f.event == "stage_started") running = true;
      }
      return !running;  // stop reading once it runs
    });
    return running;
  }

  json GetJob(httplib::Client& c, const std::string& id) {
    auto res = c.Get(("/v1/jobs/" + id).c_str());
    EXPECT_TRUE(res);
    if (!res) return nullptr;
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body, nullptr, false);
  }

  testing::TempDir dir_;
  std::string binary_, models_;
};

TEST_F(ServeE2eTest, SubmitFollowReportsRestart) {
  std::string id;
  std::string report_json, report_md, report_html;
  size_t num_events = 0;
  {
    testing::ServeProcess server;
    ASSERT_TRUE(StartServer(server, "serve1.log")) << Slurp(dir_.path + "/serve1.log");
    auto c = Client(server.port());
    id = Submit(*c);
    ASSERT_FALSE(id.empty());
    auto frames = Follow(*c, id);
    ASSERT_GE(frames.size(), 4u) << server.log();
    EXPECT_EQ(frames.front().event, "queued");
    EXPECT_EQ(frames.back().event, "end");
    std::set<std::string> types;
    for (const auto& f : frames) types.insert(f.event);
    EXPECT_TRUE(types.count("started"));
    EXPECT_TRUE(types.count("stage_started")) << "the orchestrator's own events reach the stream";
    // The probe's progress (ProbeObserver::OnStep) reaches the stream: one event per step, in order.
    std::vector<int64_t> done;
    for (const auto& f : frames) {
      if (f.event != "stage_progress") continue;
      json e = json::parse(f.data, nullptr, false).value("data", json());  // {seq, type, data: the event}
      if (e.is_object() && e.value("stage", "") == "probe" && e.value("message", "").rfind("step ", 0) == 0)
        done.push_back(e.value("done", int64_t{-1}));
    }
    std::string seen;
    for (const auto& f : frames) seen += f.event + " " + f.data.substr(0, 160) + "\n";
    EXPECT_EQ(done, (std::vector<int64_t>{1, 2, 3, 4, 5, 6})) << seen;
    ASSERT_EQ(frames[frames.size() - 2].event, "succeeded")
        << frames[frames.size() - 2].data << "\n" << GetJob(*c, id).dump(2) << "\n" << server.log();
    num_events = frames.size() - 1;

    json job = GetJob(*c, id);
    EXPECT_EQ(job["state"], "succeeded");
    for (const char* fmt : {"json", "md", "html"}) {
      auto r = c->Get(("/v1/jobs/" + id + "/report." + fmt).c_str());
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << fmt << ": " << r->body;
      EXPECT_FALSE(r->body.empty()) << fmt;
      (std::string(fmt) == "json" ? report_json : std::string(fmt) == "md" ? report_md : report_html) = r->body;
    }
    EXPECT_TRUE(json::parse(report_json, nullptr, false).is_object());
    EXPECT_NE(report_html.find("<html"), std::string::npos);
    EXPECT_NE(report_md.find('#'), std::string::npos);
    int st = server.Stop(SIGTERM);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << server.log();
  }
  // Restart on the same database: the job, its events and its reports are still there.
  testing::ServeProcess server;
  ASSERT_TRUE(StartServer(server, "serve2.log")) << Slurp(dir_.path + "/serve2.log");
  auto c = Client(server.port());
  json job = GetJob(*c, id);
  EXPECT_EQ(job["state"], "succeeded");
  auto list = c->Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["total"], 1);
  auto frames = Follow(*c, id);
  EXPECT_EQ(frames.size(), num_events + 1);
  auto tail = Follow(*c, id, std::to_string(num_events - 1));
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].event, "succeeded");
  for (auto [fmt, want] : {std::pair<std::string, std::string*>{"json", &report_json}, {"md", &report_md},
                           {"html", &report_html}}) {
    auto r = c->Get(("/v1/jobs/" + id + "/report." + fmt).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, *want) << fmt;
  }
}

TEST_F(ServeE2eTest, KilledMidJobComesBackInterruptedAndRetryCompletes) {
  std::string id;
  {
    testing::ServeProcess server;
    ASSERT_TRUE(StartServer(server, "kill1.log")) << Slurp(dir_.path + "/kill1.log");
    auto c = Client(server.port());
    id = Submit(*c);
    ASSERT_FALSE(id.empty());
    // Wait until the job runs, then kill the server without warning.
    ASSERT_TRUE(WaitUntilRunning(*c, id)) << server.log();
    server.Stop(SIGKILL);
  }
  testing::ServeProcess server;
  ASSERT_TRUE(StartServer(server, "kill2.log")) << Slurp(dir_.path + "/kill2.log");
  EXPECT_NE(server.log().find("1 job(s) recovered as interrupted"), std::string::npos) << server.log();
  auto c = Client(server.port());
  json job = GetJob(*c, id);
  ASSERT_EQ(job["state"], "interrupted") << job.dump(2);
  EXPECT_EQ(job["error"]["code"], "interrupted");
  auto retry = c->Post(("/v1/jobs/" + id + "/retry").c_str(), "", "application/json");
  ASSERT_TRUE(retry);
  ASSERT_EQ(retry->status, 202) << retry->body;
  auto frames = Follow(*c, id, std::to_string(job["last_event_seq"].get<int64_t>()));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.front().event, "retry");
  EXPECT_EQ(frames[frames.size() - 2].event, "succeeded") << GetJob(*c, id).dump(2) << "\n" << server.log();
  job = GetJob(*c, id);
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["attempts"], 2);
  auto r = c->Get(("/v1/jobs/" + id + "/report.html").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServeE2eTest, SigtermCancelsTheRunningJobAsInterrupted) {
  std::string id;
  {
    testing::ServeProcess server;
    ASSERT_TRUE(server.Start(binary_,
                             {"--port", "0", "--db", dir_.path + "/e2e.db", "--allowed-root", models_,
                              "--token-file", dir_.path + "/token", "--grace", "0"},
                             dir_.path + "/term.log"))
        << Slurp(dir_.path + "/term.log");
    auto c = Client(server.port());
    id = Submit(*c);
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(WaitUntilRunning(*c, id)) << server.log();
    int st = server.Stop(SIGTERM);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << server.log();
  }
  testing::ServeProcess server;
  ASSERT_TRUE(StartServer(server, "term2.log")) << Slurp(dir_.path + "/term2.log");
  EXPECT_NE(server.log().find("0 job(s) recovered"), std::string::npos) << "shutdown already stored the outcome";
  auto c = Client(server.port());
  json job = GetJob(*c, id);
  EXPECT_EQ(job["state"], "interrupted") << job.dump(2);
  EXPECT_NE(job["error"]["message"].get<std::string>().find("shut down"), std::string::npos) << job.dump(2);
}

}  // namespace
}  // namespace onboard::serve
