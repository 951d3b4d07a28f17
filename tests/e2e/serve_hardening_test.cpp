// Service hardening (issue 11), each on the real `onboard serve` binary over loopback:
//  1. topology names mean shipped topologies only (no cwd file, no existence oracle, no key leak);
//  2. --max-body applies to chunked bodies; 3. an oversize Content-Length is refused on the header;
//  4. cancel stops a running probe; 5. probe workers die with a SIGKILLed server, and leftovers of
//  an interrupted server are ended at start-up;
//  6. SIGTERM on an idle server (BLAS pool running) is a clean exit; 7. SSE ends with `event: shutdown`
//  and a clean chunked end; 8. the OpenAPI document lists 415 for POST /v1/jobs;
//  9. /healthz answers while 40 idle connections are open; one client address cannot hold more than
//     --max-client-connections connections, and others are served meanwhile.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/serve_process.h"
#include "tests/serve/http_sse_client.h"
#include "tests/serve/http_test_support.h"

namespace onboard::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* kToken = "hardening-token-0123456789abcdef";

// A raw loopback TCP connection (for requests httplib::Client will not send), from `source`
// (another 127.0.0.0/8 address stands for another client host).
class RawConn {
 public:
  explicit RawConn(int port, const char* source = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool Send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  // Reads until the peer closes, `until` appears, or the receive timeout passes.
  std::string Read(const std::string& until = "") {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }

 private:
  int fd_ = -1;
};

class ServeHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::string(ONBOARD_BINARY_DIR) + "/onboard";
    ASSERT_TRUE(fs::exists(binary_)) << binary_ << " is missing: build the `onboard` target first";
    models_ = dir_.path + "/models";
    outside_ = dir_.path + "/outside";
    fs::create_directories(models_);
    fs::create_directories(outside_);
    fs::copy_file(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_kimi.config.json", models_ + "/config.json");
    fs::copy_file(std::string(ONBOARD_TEST_DATA) + "/e2e/tiny_cluster.topology.json", models_ + "/topology.json");
    std::ofstream(dir_.path + "/token") << kToken << "\n";
  }
  void TearDown() override {
    for (pid_t p : testing::ProbeWorkerPids(dir_.path)) kill(p, SIGKILL);  // never leave workers behind
  }

  bool Start(testing::ServeProcess& p, const std::string& log, std::vector<std::string> extra = {},
             const std::string& cwd = "") {
    std::vector<std::string> args = {"--port", "0", "--db", dir_.path + "/h.db", "--allowed-root", models_,
                                     "--token-file", dir_.path + "/token", "--workers", "1", "--grace", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return p.Start(binary_, args, dir_.path + "/" + log, cwd);
  }

  std::unique_ptr<httplib::Client> Client(int port) { return testing::AuthedClient(port, kToken, 60); }

  // A job whose probe trains for a long time (100000 steps): it is still running when the test acts.
  json LongJob() { return testing::TinyProbeJob(models_ + "/topology.json", 100000, 600); }

  // Submits LongJob and waits until its probe workers run; returns the job id ("" on failure).
  std::string StartLongJob(httplib::Client& c) {
    auto res = c.Post("/v1/jobs", LongJob().dump(), "application/json");
    if (!res || res->status != 202) {
      ADD_FAILURE() << (res ? res->body : "no response");
      return "";
    }
    std::string id = json::parse(res->body).value("id", "");
    bool running = testing::WaitFor(90, [&] { return testing::ProbeWorkerPids(dir_.path).size() >= 2; });
    EXPECT_TRUE(running) << "probe workers never started";
    return running ? id : "";
  }

  std::string JobState(httplib::Client& c, const std::string& id) {
    auto res = c.Get(("/v1/jobs/" + id).c_str());
    if (!res || res->status != 200) return "";
    return json::parse(res->body, nullptr, false).value("state", "");
  }

  std::string Auth() const { return std::string("Authorization: Bearer ") + kToken + "\r\n"; }

  testing::TempDir dir_;
  std::string binary_, models_, outside_;
};

TEST_F(ServeHardeningTest, TopologyNamesMeanShippedTopologiesOnly) {
  // The server's working directory is outside the allowed roots and holds three tempting files.
  fs::copy_file(models_ + "/topology.json", outside_ + "/cwd-topology.json");
  std::ofstream(outside_ + "/leak.json") << R"({"password": "hunter2"})";
  std::ofstream(outside_ + "/notjson.json") << "not json";
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "topo.log", {}, outside_)) << server.log();
  auto c = Client(server.port());
  auto plan = [&](const std::string& topo) {
    json body = {{"model", {{"path", "config.json"}}}, {"topology", topo}};
    return c->Post("/v1/plan", body.dump(), "application/json");
  };
  auto outside = plan("cwd-topology.json");
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 404) << "a name resolved to a file in the working directory: " << outside->body.substr(0, 200);
  auto missing = plan("no-such-topology.json");
  auto notjson = plan("notjson.json");
  auto leak = plan("leak.json");
  ASSERT_TRUE(missing && notjson && leak);
  // No existence oracle: an existing non-JSON file and a missing file answer alike.
  EXPECT_EQ(notjson->status, missing->status) << notjson->body << " vs " << missing->body;
  EXPECT_EQ(leak->status, missing->status) << leak->body;
  EXPECT_EQ(leak->body.find("password"), std::string::npos) << "key name leaked: " << leak->body;
  // A shipped name still works.
  auto shipped = plan("h200-16x8");
  ASSERT_TRUE(shipped);
  EXPECT_EQ(shipped->status, 200) << shipped->body;
  // A job naming the outside file is refused at submission.
  json job = LongJob();
  job["topology"] = "cwd-topology.json";
  auto sub = c->Post("/v1/jobs", job.dump(), "application/json");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->status, 404) << sub->body;
}

TEST_F(ServeHardeningTest, ChunkedBodyOverMaxBodyIs413) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "chunk.log", {"--max-body", "65536"})) << server.log();
  auto c = Client(server.port());
  const std::string piece(4096, ' ');
  size_t sent = 0;
  auto res = c->Post(
      "/v1/jobs",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= (size_t{4} << 20)) {  // 4 MiB: more than loopback socket buffers hold
          sink.done();
          return true;
        }
        sent += piece.size();
        return sink.write(piece.data(), piece.size());
      },
      "application/json");
  ASSERT_TRUE(res) << "no response (error " << static_cast<int>(res.error()) << ")";
  EXPECT_EQ(res->status, 413) << res->body;
}

TEST_F(ServeHardeningTest, DeclaredOversizeContentLengthIsRefusedOnTheHeader) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "length.log", {"--max-body", "65536"})) << server.log();
  RawConn conn(server.port());
  ASSERT_TRUE(conn.ok());
  auto t0 = Clock::now();
  ASSERT_TRUE(conn.Send("POST /v1/jobs HTTP/1.1\r\nHost: x\r\n" + Auth() +
                        "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n" +
                        std::string(1000, ' ')));
  std::string reply = conn.Read("\r\n\r\n");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_LT(s, 3.0) << "413 came only after " << s << " s";
}

TEST_F(ServeHardeningTest, CancelStopsTheRunningProbe) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "cancel.log")) << server.log();
  auto c = Client(server.port());
  std::string id = StartLongJob(*c);
  ASSERT_FALSE(id.empty()) << server.log();
  auto res = c->Post(("/v1/jobs/" + id + "/cancel").c_str(), "", "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 202) << res->body;
  EXPECT_TRUE(testing::WaitFor(10, [&] { return JobState(*c, id) == "cancelled"; }))
      << "state " << JobState(*c, id) << "\n" << server.log();
  EXPECT_TRUE(testing::WaitFor(5, [&] { return testing::ProbeWorkerPids(dir_.path).empty(); }))
      << "probe workers still run after cancel";
}

TEST_F(ServeHardeningTest, ProbeWorkersDieWithAKilledServer) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "kill.log")) << server.log();
  auto c = Client(server.port());
  ASSERT_FALSE(StartLongJob(*c).empty()) << server.log();
  server.Stop(SIGKILL);
  EXPECT_TRUE(testing::WaitFor(5, [&] { return testing::ProbeWorkerPids(dir_.path).empty(); }))
      << testing::ProbeWorkerPids(dir_.path).size() << " probe worker(s) outlived the SIGKILLed server";
}

TEST_F(ServeHardeningTest, LeftoverWorkersOfAnInterruptedServerAreEndedAtStartUp) {
  // Step 1: a real probe spec of this server's jobs directory (from a running job).
  std::string spec;
  {
    testing::ServeProcess server;
    ASSERT_TRUE(Start(server, "left1.log")) << server.log();
    auto c = Client(server.port());
    ASSERT_FALSE(StartLongJob(*c).empty()) << server.log();
    for (const auto& e : fs::recursive_directory_iterator(dir_.path + "/h.db.jobs"))
      if (e.path().filename() == "probe_spec.json") spec = e.path().string();
    server.Stop(SIGKILL);
  }
  ASSERT_FALSE(spec.empty());
  // Step 2: a worker of that directory the server did not start (so no parent-death signal reaches
  // it), blocked on a rendezvous port that accepts but never answers.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  pid_t worker = fork();
  if (worker == 0) {
    execl(binary_.c_str(), binary_.c_str(), "probe-worker", "--spec", spec.c_str(), "--rank", "1", "--world", "2",
          "--master-addr", "127.0.0.1", "--master-port", port.c_str(), "--out", (dir_.path + "/w.json").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(testing::ProbeWorkerPids(dir_.path).size(), 1u) << "the hand-started worker is not running";
  // Step 3: the restarted server ends it.
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "left2.log")) << server.log();
  EXPECT_TRUE(testing::WaitFor(3, [&] { return testing::ProbeWorkerPids(dir_.path).empty(); }))
      << "a leftover worker survived the restart\n" << server.log();
  EXPECT_NE(server.log().find("1 leftover probe worker(s) ended"), std::string::npos) << server.log();
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
  close(listener);
}

TEST_F(ServeHardeningTest, SigtermOnAnIdleServerIsACleanExit) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "idle.log")) << server.log();
  auto c = Client(server.port());
  auto h = c->Get("/healthz");
  ASSERT_TRUE(h);
  int st = server.Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "wait status " << st << (WIFSIGNALED(st) ? " (killed by signal " + std::to_string(WTERMSIG(st)) + ")" : "")
      << "\n" << server.log();
  EXPECT_NE(server.log().find("onboard serve: stopped"), std::string::npos) << server.log();
}

TEST_F(ServeHardeningTest, EventStreamEndsWithShutdownAndACleanChunkedEnd) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "sse.log")) << server.log();
  auto c = Client(server.port());
  std::string id = StartLongJob(*c);
  ASSERT_FALSE(id.empty()) << server.log();
  RawConn conn(server.port());
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(conn.Send("GET /v1/jobs/" + id + "/events HTTP/1.1\r\nHost: x\r\n" + Auth() + "\r\n"));
  std::string head = conn.Read("retry: 2000");
  ASSERT_NE(head.find("200"), std::string::npos) << head;
  kill(server.pid(), SIGTERM);
  std::string rest = conn.Read("\r\n0\r\n\r\n");
  EXPECT_NE(rest.find("event: shutdown"), std::string::npos) << rest;
  EXPECT_NE(rest.find("\r\n0\r\n\r\n"), std::string::npos) << "no final chunk: " << rest;
}

TEST_F(ServeHardeningTest, OpenApiListsEveryStatusTheRoutesDeclare) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "openapi.log")) << server.log();
  auto c = Client(server.port());
  auto res = c->Get("/openapi.json");
  ASSERT_TRUE(res);
  json doc = json::parse(res->body);
  const json& post = doc["paths"]["/v1/jobs"]["post"]["responses"];
  EXPECT_TRUE(post.contains("415")) << post.dump();
  // And the server really answers 415 there.
  auto bad = c->Post("/v1/jobs", "x", "application/octet-stream");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 415);
}

TEST_F(ServeHardeningTest, HealthzAnswersWhileFortyIdleConnectionsAreOpen) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "idleconn.log")) << server.log();
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawConn>(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client c("127.0.0.1", server.port());
  c.set_connection_timeout(10, 0);
  auto t0 = Clock::now();
  auto h = c.Get("/healthz");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(s, 0.5) << "/healthz took " << s << " s behind 40 idle connections";
}

TEST_F(ServeHardeningTest, OneClientAddressIsCappedWhileOthersAreServed) {
  testing::ServeProcess server;
  ASSERT_TRUE(Start(server, "cap.log", {"--max-client-connections", "4"})) << server.log();
  const std::string healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  // Step 1: client 127.0.0.2 opens 4 connections. Each is counted (its /healthz answered), then held
  // mid-request: a POST whose body never completes keeps the connection busy for the read timeout.
  std::vector<std::unique_ptr<RawConn>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawConn>(server.port(), "127.0.0.2"));
    ASSERT_TRUE(held.back()->ok());
    ASSERT_TRUE(held.back()->Send(healthz));
    std::string first = held.back()->Read("}");
    ASSERT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << "connection " << i << ": " << first;
    ASSERT_TRUE(held.back()->Send("POST /v1/jobs HTTP/1.1\r\nHost: x\r\n" + Auth() +
                                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"));
  }
  // Step 2: a fifth connection from the same address is refused at once: 429, Retry-After,
  // Connection: close (httplib 0.11 leaves the closing to the client, or to the idle timeout).
  RawConn fifth(server.port(), "127.0.0.2");
  ASSERT_TRUE(fifth.ok());
  ASSERT_TRUE(fifth.Send(healthz));
  std::string refused = fifth.Read("}");
  EXPECT_EQ(refused.rfind("HTTP/1.1 429", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("too_many_connections"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Connection: close"), std::string::npos) << refused;
  // Step 3: another client address is served meanwhile.
  RawConn other(server.port(), "127.0.0.1");
  ASSERT_TRUE(other.Send(healthz));
  std::string served = other.Read("}");
  EXPECT_EQ(served.rfind("HTTP/1.1 200", 0), 0u) << served;
  // Step 4: when one held connection closes, its slot is free again.
  held.pop_back();
  bool admitted = testing::WaitFor(10, [&] {
    RawConn again(server.port(), "127.0.0.2");
    return again.Send(healthz) && again.Read("}").rfind("HTTP/1.1 200", 0) == 0;
  });
  EXPECT_TRUE(admitted) << "a freed slot was never given to the next connection";
}

}  // namespace
}  // namespace onboard::serve
