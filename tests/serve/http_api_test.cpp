// The HTTP API in-process over loopback (httplib::Client against ApiServer on a free port) with a
// real JobStore and a gate runner: auth, body limit, malformed input and path escapes are refused
// with JSON errors and leave the store unchanged; submit / SSE / reports / cancel / retry / list /
// queue-full / plan / OpenAPI behave as documented.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "search/plan_request_checks.h"
#include "serve/api_job_request.h"
#include "serve/http_auth.h"
#include "serve/http_openapi.h"
#include "serve/http_server.h"
#include "tests/serve/http_sse_client.h"
#include "tests/serve/http_test_support.h"

namespace onboard::serve {
namespace {

using nlohmann::json;
using testing::Gate;
using testing::TempDir;

const char* kToken = "test-token-0123456789abcdef";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HttpApiTest : public ::testing::Test {
 protected:
  void Start(JobQueueOptions qopts = {8, 1}) {
    root_ = dir_.path + "/models";
    std::filesystem::create_directories(root_);
    std::filesystem::copy_file(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_kimi.config.json",
                               root_ + "/config.json");
    auto store = JobStore::Open(dir_.path + "/api.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    queue_ = std::make_unique<JobQueue>(*store_, notifier_, gate_.Runner(), qopts);
    auto roots = AllowedRoots::Make({root_});
    ASSERT_TRUE(roots.ok());
    ServerConfig cfg;
    cfg.port = 0;
    cfg.token = kToken;
    cfg.max_body = 64 * 1024;
    cfg.http_threads = 8;
    cfg.sse.keepalive = std::chrono::milliseconds(200);
    server_ = std::make_unique<ApiServer>(cfg, std::move(roots).value(), *store_, *queue_, notifier_, qopts.workers);
    ASSERT_TRUE(server_->Bind().ok());
    ASSERT_TRUE(queue_->Start().ok());
    thread_ = std::thread([this] { server_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_bearer_token_auth(kToken);
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    gate_.Open();
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    if (queue_) queue_->Shutdown(std::chrono::seconds(5));
  }

  json Topology() { return json::parse(ReadFile(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json")); }
  json ConfigBody() {
    return {{"model", {{"config", json::parse(ReadFile(root_ + "/config.json"))}}},
            {"topology", Topology()},
            {"options", {{"probe", {{"enabled", false}}}}}};
  }
  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }
  // Sends `body`, expects `status` with a JSON error of `code`, and checks the store did not change.
  void ExpectRefused(httplib::Client& c, const std::string& body, int status, const std::string& code) {
    int64_t jobs = *store_->CountJobs(), events = *store_->CountEvents();
    std::string db = ReadFile(dir_.path + "/api.db") + ReadFile(dir_.path + "/api.db-wal");
    auto res = c.Post("/v1/jobs", body, "application/json");
    ASSERT_TRUE(res) << "no response for " << body.substr(0, 80);
    EXPECT_EQ(res->status, status) << res->body;
    json err = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << res->body;
    EXPECT_EQ(err["error"]["code"], code) << res->body;
    EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());
    EXPECT_EQ(*store_->CountJobs(), jobs);
    EXPECT_EQ(*store_->CountEvents(), events);
    EXPECT_EQ(ReadFile(dir_.path + "/api.db") + ReadFile(dir_.path + "/api.db-wal"), db)
        << "the database files changed";
  }
  std::string SubmitOk() {
    auto res = Post("/v1/jobs", ConfigBody().dump());
    EXPECT_TRUE(res);
    if (!res) return "";
    EXPECT_EQ(res->status, 202) << res->body;
    json j = json::parse(res->body);
    EXPECT_EQ(res->get_header_value("Location"), "/v1/jobs/" + j["id"].get<std::string>());
    return j["id"];
  }
  json GetJson(const std::string& path, int want = 200) {
    auto res = client_->Get(path.c_str());
    EXPECT_TRUE(res);
    if (!res) return nullptr;
    EXPECT_EQ(res->status, want) << path << ": " << res->body;
    return json::parse(res->body, nullptr, false);
  }

  TempDir dir_;
  std::string root_;
  Gate gate_;
  JobNotifier notifier_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpApiTest, HealthIsOpenEverythingElseNeedsTheToken) {
  Start();
  httplib::Client anon("127.0.0.1", server_->port());
  auto h = anon.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  for (const char* path : {"/openapi.json", "/v1/jobs", "/v1/jobs/j-0000000000000000"}) {
    auto r = anon.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "unauthorized");
  }
  ExpectRefused(anon, ConfigBody().dump(), 401, "unauthorized");
  httplib::Client wrong("127.0.0.1", server_->port());
  wrong.set_bearer_token_auth(std::string(kToken) + "x");
  ExpectRefused(wrong, ConfigBody().dump(), 401, "unauthorized");
  httplib::Client prefix("127.0.0.1", server_->port());
  prefix.set_bearer_token_auth(std::string(kToken).substr(0, 10));
  ExpectRefused(prefix, ConfigBody().dump(), 401, "unauthorized");
  auto unknown = client_->Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "not_found");
}

TEST_F(HttpApiTest, OversizedMalformedAndEscapingRequestsAreRefusedWithoutWriting) {
  Start();
  // 413: body above --max-body (64 KiB here).
  json big = ConfigBody();
  big["model"]["config"]["_padding"] = std::string(100 * 1024, 'x');
  ExpectRefused(*client_, big.dump(), 413, "payload_too_large");
  // 400: malformed.
  ExpectRefused(*client_, "{\"model\": ", 400, "bad_request");
  ExpectRefused(*client_, "[1,2,3]", 400, "bad_request");
  ExpectRefused(*client_, R"({"model":{"config":{}},"topology":"x","colour":"red"})", 400, "bad_request");
  ExpectRefused(*client_, R"({"model":{"config":{}}})", 400, "bad_request");
  json bad_opt = ConfigBody();
  bad_opt["options"]["seq"] = "long";
  ExpectRefused(*client_, bad_opt.dump(), 400, "bad_request");
  bad_opt = ConfigBody();
  bad_opt["options"]["sequence_length"] = 4096;
  ExpectRefused(*client_, bad_opt.dump(), 400, "bad_request");
  bad_opt = ConfigBody();  // 3 probe ranks per node do not divide 4 ranks (ProbeConfig's own check)
  bad_opt["options"]["probe"] = {{"ranks", 4}, {"ranks_per_node", 3}};
  ExpectRefused(*client_, bad_opt.dump(), 400, "bad_request");
  json bad_b64 = {{"model", {{"onnx_base64", "@@not base64@@"}}}, {"topology", Topology()}};
  ExpectRefused(*client_, bad_b64.dump(), 400, "bad_request");
  json bad_topo = ConfigBody();
  bad_topo["topology"] = {{"name", "t"}, {"num_devices", -1}};
  ExpectRefused(*client_, bad_topo.dump(), 400, "bad_request");
  bad_topo["topology"] = "../etc/passwd";
  ExpectRefused(*client_, bad_topo.dump(), 400, "bad_request");
  // 403: paths outside the allowed root, by '..', absolute path or symlink.
  std::filesystem::create_symlink("/etc", root_ + "/escape");
  json esc = ConfigBody();
  for (std::string p : {root_ + "/../api.db", std::string("/etc/passwd"), root_ + "/escape/passwd",
                        std::string("escape/passwd"), std::string("../api.db")}) {
    esc["model"] = {{"path", p}};
    ExpectRefused(*client_, esc.dump(), 403, "forbidden");
  }
  esc["model"] = {{"path", root_ + "/config.json"}};
  esc["topology"] = {{"path", "/etc/hostname"}};
  ExpectRefused(*client_, esc.dump(), 403, "forbidden");
  // 404: inside the root but missing.
  esc = ConfigBody();
  esc["model"] = "missing.json";
  ExpectRefused(*client_, esc.dump(), 404, "not_found");
  // And a path inside the root is accepted and stored canonicalised.
  esc["model"] = "config.json";
  auto ok = Post("/v1/jobs", esc.dump());
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 202) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["request"]["model"]["path"],
            std::filesystem::canonical(root_ + "/config.json").string());
  // options.probe.ranks_per_node is a field (2 of 4 ranks per node; 3 was refused above).
  json nodes = ConfigBody();
  nodes["options"]["probe"] = {{"enabled", false}, {"ranks", 4}, {"ranks_per_node", 2}};
  auto two_nodes = Post("/v1/jobs", nodes.dump());
  ASSERT_TRUE(two_nodes);
  EXPECT_EQ(two_nodes->status, 202) << two_nodes->body;
}

TEST_F(HttpApiTest, SubmitFollowEventsFetchReports) {
  Start();
  std::string id = SubmitOk();
  ASSERT_TRUE(gate_.WaitForWaiters(1));
  json job = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(job["state"], "running");
  auto early = client_->Get(("/v1/jobs/" + id + "/report.md").c_str());
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 409);
  std::thread opener([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate_.Open();
  });
  int status = 0;
  auto frames = testing::ReadEventStream(*client_, "/v1/jobs/" + id + "/events", {}, &status);
  opener.join();
  EXPECT_EQ(status, 200);
  std::vector<std::string> types;
  int64_t last = 0;
  for (const auto& f : frames) {
    types.push_back(f.event);
    if (f.event == "end") continue;
    json d = json::parse(f.data);
    EXPECT_EQ(std::to_string(d["seq"].get<int64_t>()), f.id);
    EXPECT_GT(d["seq"].get<int64_t>(), last);
    last = d["seq"];
  }
  EXPECT_EQ(types, (std::vector<std::string>{"queued", "started", "gate_wait", "succeeded", "end"}));
  // Last-Event-ID: only what came after.
  auto tail = testing::ReadEventStream(*client_, "/v1/jobs/" + id + "/events", {{"Last-Event-ID", "2"}}, &status);
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail[0].event, "gate_wait");
  EXPECT_EQ(tail[1].event, "succeeded");
  job = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["result"]["job"], id);
  EXPECT_EQ(job["reports"].size(), 3u);
  for (auto [fmt, type] : {std::pair<std::string, std::string>{"json", "application/json"},
                           {"md", "text/markdown; charset=utf-8"},
                           {"html", "text/html; charset=utf-8"}}) {
    auto r = client_->Get(("/v1/jobs/" + id + "/report." + fmt).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), type);
    EXPECT_NE(r->body.find(id), std::string::npos);
  }
  GetJson("/v1/jobs/j-ffffffffffffffff", 404);
  GetJson("/v1/jobs/not-an-id", 404);
  auto bad_after = client_->Get(("/v1/jobs/" + id + "/events?after=-3").c_str());
  ASSERT_TRUE(bad_after);
  EXPECT_EQ(bad_after->status, 400);
}

TEST_F(HttpApiTest, CancelRetryConflictsAndQueueFull) {
  Start({1, 1});
  std::string running = SubmitOk();
  ASSERT_TRUE(gate_.WaitForWaiters(1));
  std::string queued = SubmitOk();
  // Queue full: 429 + Retry-After, nothing written.
  int64_t jobs = *store_->CountJobs();
  auto full = Post("/v1/jobs", ConfigBody().dump());
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_FALSE(full->get_header_value("Retry-After").empty());
  EXPECT_EQ(json::parse(full->body)["error"]["code"], "queue_full");
  EXPECT_EQ(*store_->CountJobs(), jobs);
  // Cancel the queued one (immediate) and the running one (flag).
  auto c = Post("/v1/jobs/" + queued + "/cancel", "");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 202);
  EXPECT_EQ(json::parse(c->body)["state"], "cancelled");
  c = Post("/v1/jobs/" + queued + "/cancel", "");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 409);
  c = Post("/v1/jobs/" + running + "/cancel", "");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 202);
  int status = 0;
  auto frames = testing::ReadEventStream(*client_, "/v1/jobs/" + running + "/events", {}, &status);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_EQ(frames[frames.size() - 2].event, "cancelled");
  EXPECT_EQ(frames.back().event, "end");
  // Retry: 202, then it runs to success; retrying a succeeded job is a conflict.
  auto r = Post("/v1/jobs/" + running + "/retry", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
  gate_.Open();
  testing::ReadEventStream(*client_, "/v1/jobs/" + running + "/events", {}, &status);
  EXPECT_EQ(GetJson("/v1/jobs/" + running)["state"], "succeeded");
  EXPECT_EQ(GetJson("/v1/jobs/" + running)["attempts"], 2);
  r = Post("/v1/jobs/" + running + "/retry", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "conflict");
}

// The plan-shape limits have one home (search/plan_request_checks.h): POST /v1/jobs answers at once
// with the message `onboard run` prints for the same option, and `onboard plan` applies the same
// limit. Before, lora_rank 5000 was 400 here (RunRequest's own 4096) while `onboard plan` took it,
// and global_batch 2^30 passed the HTTP reader but not RunRequest (2^24).
std::string CliStderr(const std::string& args) {
  const std::string cmd = std::string(ONBOARD_BINARY_DIR) + "/onboard " + args + " 2>&1 >/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST_F(HttpApiTest, PlanShapeLimitsAreTheCliLimitsAndAnsweredAtSubmit) {
  Start();
  const std::string topo = std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json";
  auto submit = [&](const json& options) {
    json body = ConfigBody();
    for (auto it = options.begin(); it != options.end(); ++it) body["options"][it.key()] = it.value();
    return Post("/v1/jobs", body.dump());
  };
  // Inside the one limit: accepted (a job is queued), and `onboard plan` takes it too.
  auto ok = submit({{"lora_rank", 5000}, {"global_batch", int64_t{1} << 30}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 202) << ok->body;
  EXPECT_EQ(CliStderr("plan " + root_ + "/config.json --topology " + topo + " --lora-rank 5000"), "");
  // Outside it: 400 now, with the message `onboard run` prints; `onboard plan` names the same limit.
  for (const auto& [option, flag, value] : std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"lora_rank", "--lora-rank", 65537}, {"global_batch", "--global-batch", (int64_t{1} << 30) + 1}}) {
    auto res = submit({{option, value}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 400) << res->body;
    const std::string http = json::parse(res->body)["error"]["message"];
    const std::string run =
        CliStderr("run " + root_ + "/config.json --topology " + topo + " " + flag + " " +
                  std::to_string(value) + " --no-probe --no-kernels --out " + dir_.path + "/cli");
    EXPECT_EQ("onboard run: " + http + "\n", run);
    const std::string limit = http.substr(http.find("field '"));
    EXPECT_NE(CliStderr("plan " + root_ + "/config.json --topology " + topo + " " + flag + " " +
                        std::to_string(value))
                  .find(limit),
              std::string::npos)
        << limit;
  }
}

// Issue 10: base_dtype (and, since issue 13, compute_dtype) is parsed by the one parser
// (core/precision.h) in both front ends: an unknown name, or one its field cannot take, is 400 at
// submit with the message `onboard run` prints (file = the request, field, value).
TEST_F(HttpApiTest, UnknownBaseDtypeIsRefusedAtSubmitWithTheCliMessage) {
  Start();
  const std::string topo = std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json";
  const struct {
    const char *field, *flag, *value;
  } cases[] = {{"base_dtype", "--base-dtype", "fp7"},
               {"compute_dtype", "--compute-dtype", "fp7"},
               {"compute_dtype", "--compute-dtype", "mxfp4"}};  // a weight format, not a GEMM recipe
  for (const auto& c : cases) {
    json body = ConfigBody();
    body["options"][c.field] = c.value;
    auto res = Post("/v1/jobs", body.dump());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 400) << res->body;
    const std::string http = json::parse(res->body)["error"]["message"];
    EXPECT_NE(http.find(std::string("run request: field '") + c.field + "'"), std::string::npos) << http;
    EXPECT_NE(http.find(c.value), std::string::npos) << http;
    const std::string run = CliStderr("run " + root_ + "/config.json --topology " + topo + " " + c.flag +
                                      " " + c.value + " --no-probe --no-kernels --out " + dir_.path + "/cli");
    EXPECT_EQ("onboard run: " + http + "\n", run);
  }
  json ok = ConfigBody();
  ok["options"]["compute_dtype"] = "mxfp8";
  auto res = Post("/v1/jobs", ok.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 202) << res->body;
  // bf16 first / last layers: the same rule and message in both front ends (RunRequest::Validate).
  json bf = ConfigBody();
  bf["options"]["bf16_layers_last"] = 1;
  res = Post("/v1/jobs", bf.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 400) << res->body;
  const std::string http = json::parse(res->body)["error"]["message"];
  EXPECT_NE(http.find("run request: field 'bf16_layers'"), std::string::npos) << http;
  const std::string run =
      CliStderr("run " + root_ + "/config.json --topology " + topo +
                " --bf16-layers-last 1 --no-probe --no-kernels --out " + dir_.path + "/cli");
  EXPECT_EQ("onboard run: " + http + "\n", run);
  bf["options"]["compute_dtype"] = "mxfp8";
  res = Post("/v1/jobs", bf.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 202) << res->body;
}

TEST_F(HttpApiTest, ListPaginates) {
  Start({8, 1});
  gate_.Open();
  std::set<std::string> submitted;
  for (int i = 0; i < 5; ++i) submitted.insert(SubmitOk());
  std::set<std::string> listed;
  std::string path = "/v1/jobs?limit=2";
  for (int page = 0; page < 10; ++page) {
    json p = GetJson(path);
    EXPECT_EQ(p["total"], 5);
    EXPECT_LE(p["jobs"].size(), 2u);
    for (const auto& j : p["jobs"]) listed.insert(j["id"].get<std::string>());
    if (p["next_cursor"].is_null()) break;
    path = "/v1/jobs?limit=2&before=" + std::to_string(p["next_cursor"].get<int64_t>());
  }
  EXPECT_EQ(listed, submitted);
  GetJson("/v1/jobs?limit=0", 400);
  GetJson("/v1/jobs?state=sleeping", 400);
  EXPECT_EQ(GetJson("/v1/jobs?state=cancelled")["total"], 0);
}

TEST_F(HttpApiTest, PlanSearchesSynchronously) {
  Start();
  json body = {{"model", {{"config", json::parse(ReadFile(root_ + "/config.json"))}}},
               {"topology", Topology()},
               {"options", {{"mode", "full"}, {"seq", 2048}}}};
  int64_t jobs = *store_->CountJobs();
  auto res = Post("/v1/plan", body.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json r = json::parse(res->body);
  EXPECT_TRUE(r.contains("feasible"));
  EXPECT_TRUE(r["best"].contains("plan"));
  EXPECT_EQ(*store_->CountJobs(), jobs) << "planning stores nothing";
  // bf16 first / last layers reach the searched plan; without a quantised compute_dtype they are a 400.
  body["options"]["compute_dtype"] = "mxfp8";
  body["options"]["bf16_layers_last"] = 1;
  res = Post("/v1/plan", body.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["best"]["plan"].value("bf16_layers_last", 0), 1)
      << res->body.substr(0, 800);
  body["options"]["compute_dtype"] = "bf16";
  res = Post("/v1/plan", body.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body.substr(0, 400);
  body["options"].erase("compute_dtype");
  body["options"].erase("bf16_layers_last");
  body["options"]["tp"] = 2;
  res = Post("/v1/plan", body.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  body["options"].erase("tp");
  body["model"] = "/etc/passwd";
  res = Post("/v1/plan", body.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
}

// Issue 18: options.ep_dispatcher / expert_nodes_per_token / max_route_nodes reach the search's
// PlanRequest (parsed by ParseEpDispatcher, ranges by CheckExpertRouting, as `onboard plan`): the
// dispatcher changes the best plan's step_s on the CLI test's model and topology (unwired, both
// requests are the same and give the same number), and each bad value is a 400 naming the field and
// the value (unwired, it is ignored and the search answers 200).
TEST_F(HttpApiTest, PlanExpertRoutingReachesTheSearchAndBadValuesAre400) {
  Start();
  json body = {
      {"model",
       {{"config", json::parse(ReadFile(std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-30b-a3b.config.json"))}}},
      {"topology", "b200-32x8"},
      {"options", {{"mode", "full"}}}};
  auto step_s = [&](const std::string& dispatcher) {
    body["options"]["ep_dispatcher"] = dispatcher;
    auto res = Post("/v1/plan", body.dump());
    EXPECT_TRUE(res);
    if (!res) return -1.0;
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body).at("best").at("estimate").at("step_s").get<double>();
  };
  const double s_a2a = step_s("alltoall");
  const double s_deepep = step_s("deepep");
  EXPECT_GT(s_a2a, 0);
  EXPECT_NE(s_a2a, s_deepep);
  body["options"].erase("ep_dispatcher");
  for (const auto& [field, value, shown] :
       std::vector<std::tuple<std::string, json, std::string>>{{"ep_dispatcher", "nccl", "nccl"},
                                                               {"expert_nodes_per_token", 0.5, "0.5"},
                                                               {"max_route_nodes", -1, "-1"}}) {
    json bad = body;
    bad["options"][field] = value;
    auto res = Post("/v1/plan", bad.dump());
    ASSERT_TRUE(res) << field;
    EXPECT_EQ(res->status, 400) << field << ": " << res->body.substr(0, 200);
    if (res->status != 400) continue;
    const json err = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(err.contains("error")) << res->body;
    EXPECT_EQ(err["error"].value("code", ""), "bad_request") << res->body;
    const std::string msg = err["error"].value("message", "");
    EXPECT_NE(msg.find("field '" + field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(shown), std::string::npos) << msg;
  }
}

// Issue 18: POST /v1/jobs takes options.ep_dispatcher / expert_nodes_per_token / max_route_nodes
// into the job's RunRequest (the stored request, read back by ToRunRequest as the worker reads it),
// and refuses bad values at submit with a 400 naming the field and the value: the ranges are
// RunRequest::Validate's (CheckExpertRouting, the plan's one check), so the message is the one
// `onboard run` prints. Unwired, the good submit is a 400 "unknown option" (or the fields read 0 /
// alltoall) and the bad values are accepted.
TEST_F(HttpApiTest, JobExpertRoutingReachesTheRunRequestAndBadValuesAre400) {
  Start();
  json body = ConfigBody();
  body["options"]["ep_dispatcher"] = "deepep";
  body["options"]["expert_nodes_per_token"] = 1.5;
  body["options"]["max_route_nodes"] = 4;
  auto res = Post("/v1/jobs", body.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 202) << res->body;
  const json job = GetJson("/v1/jobs/" + json::parse(res->body)["id"].get<std::string>());
  auto run = ToRunRequest(job.at("request"), dir_.path + "/out");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->ep_dispatcher, EpDispatcher::kDeepEP);
  EXPECT_EQ(run->expert_nodes_per_token, 1.5);
  EXPECT_EQ(run->max_route_nodes, 4);
  const std::string topo = std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json";
  for (const auto& [field, value, shown, flag] :
       std::vector<std::tuple<std::string, json, std::string, std::string>>{
           {"ep_dispatcher", "nccl", "nccl", ""},
           {"ep_dispatcher", 3, "3", ""},
           {"expert_nodes_per_token", "two", "\"two\"", ""},  // types: the API's own 400
           {"max_route_nodes", 1.5, "1.5", ""},
           {"expert_nodes_per_token", 0.5, "0.5", "--expert-nodes-per-token"},
           {"max_route_nodes", -1, "-1", "--max-route-nodes"}}) {
    json bad = ConfigBody();
    bad["options"][field] = value;
    res = Post("/v1/jobs", bad.dump());
    ASSERT_TRUE(res) << field;
    ASSERT_EQ(res->status, 400) << field << ": " << res->body.substr(0, 200);
    const std::string msg = json::parse(res->body)["error"].value("message", "");
    EXPECT_NE(msg.find(field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(shown), std::string::npos) << msg;
    if (flag.empty()) continue;
    EXPECT_EQ("onboard run: " + msg + "\n",
              CliStderr("run " + root_ + "/config.json --topology " + topo + " " + flag + " " + shown +
                        " --no-probe --no-kernels --out " + dir_.path + "/cli"));
  }
}

// Collects every "$ref" string in a JSON document.
void CollectRefs(const json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) out.push_back(it.value());
      else CollectRefs(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) CollectRefs(v, out);
  }
}

TEST_F(HttpApiTest, OpenApiDocumentDescribesEveryRouteAndResolves) {
  Start();
  json doc = GetJson("/openapi.json");
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  EXPECT_TRUE(doc["components"]["securitySchemes"].contains("bearer"));
  for (const auto& r : ApiRoutes()) {
    ASSERT_TRUE(doc["paths"].contains(r.path)) << r.path;
    ASSERT_TRUE(doc["paths"][r.path].contains(r.method)) << r.method << " " << r.path;
    // The document lists exactly the declared statuses.
    std::vector<int> listed;
    for (const auto& [code, _] : doc["paths"][r.path][r.method]["responses"].items()) listed.push_back(std::stoi(code));
    EXPECT_EQ(listed, r.statuses) << r.method << " " << r.path;
  }
  EXPECT_EQ(doc["paths"]["/healthz"]["get"]["security"], json::array());
  // POST /v1/plan options name the expert-routing fields; the dispatcher enum is what the one
  // parser (ParseEpDispatcher) accepts.
  const json plan_opts =
      doc.at(json::json_pointer("/components/schemas/PlanRequest/properties/options/properties"));
  EXPECT_EQ(plan_opts.value("expert_nodes_per_token", json::object()).value("type", ""), "number");
  EXPECT_EQ(plan_opts.value("max_route_nodes", json::object()).value("type", ""), "integer");
  const json names = plan_opts.value("ep_dispatcher", json::object()).value("enum", json::array());
  ASSERT_EQ(names.size(), 3u) << plan_opts.dump();
  for (const auto& name : names)
    EXPECT_TRUE(ParseEpDispatcher("test", "ep_dispatcher", name.get<std::string>()).ok()) << name;
  // POST /v1/jobs options (RunOptions) name the same fields with the same enum.
  const json run_opts = doc.at(json::json_pointer("/components/schemas/RunOptions/properties"));
  EXPECT_EQ(run_opts.value("expert_nodes_per_token", json::object()).value("type", ""), "number");
  EXPECT_EQ(run_opts.value("max_route_nodes", json::object()).value("type", ""), "integer");
  EXPECT_EQ(run_opts.value("ep_dispatcher", json::object()).value("enum", json::array()), names);
  std::vector<std::string> refs;
  CollectRefs(doc, refs);
  EXPECT_GT(refs.size(), 20u);
  for (const auto& ref : refs) {
    ASSERT_EQ(ref.substr(0, 2), "#/") << ref;
    EXPECT_TRUE(doc.contains(json::json_pointer(ref.substr(1)))) << "dangling " << ref;
  }
  // Every route in the document answers something other than "no route" (404 with that message).
  for (const auto& route : ApiRoutes()) {
    const std::string& method = route.method;
    std::string concrete = route.path;
    size_t p = concrete.find("{id}");
    if (p != std::string::npos) concrete.replace(p, 4, "j-0000000000000000");
    auto res = method == "get" ? client_->Get(concrete.c_str()) : Post(concrete, "{}");
    ASSERT_TRUE(res) << concrete;
    if (res->status == 404) {
      EXPECT_EQ(json::parse(res->body)["error"]["message"].get<std::string>().find("no route"), std::string::npos)
          << method << " " << concrete;
    }
  }
}

TEST(HttpAuthTest, ConstantTimeEqualsAndTokenLoading) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  TempDir dir;
  std::string f = dir.path + "/token";
  std::ofstream(f) << "  0123456789abcdefXYZ  \nsecond line ignored\n";
  auto t = LoadToken(f, "env-token-is-ignored-when-a-file-is-given");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "0123456789abcdefXYZ");
  auto env = LoadToken("", "0123456789abcdef-env");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*env, "0123456789abcdef-env");
  EXPECT_EQ(LoadToken("", nullptr).status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(LoadToken("", "short").status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(LoadToken(dir.path + "/missing", nullptr).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace onboard::serve
