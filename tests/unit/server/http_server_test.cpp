// The transport end to end over loopback sockets: framing, keep-alive, pipelining, refusals and
// their timing, streaming, disconnect detection, the connection cap, stop().
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/http/server.h"
#include "http_test_client.h"

namespace splash::http {
namespace {

using testing::ClientResponse;
using testing::code_of;
using testing::elapsed_ms;
using testing::RawClient;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;



// Echoes method, path, query and body; counts calls.
struct EchoServer {
  explicit EchoServer(ServerOptions options = {}) {
    options.port = 0;
    auto s = Server::bind(options);
    EXPECT_TRUE(s.ok()) << s.error_message();
    server = std::move(s).value();
    server->set_handler([this](const Request& req, std::shared_ptr<ResponseWriter> w) {
      calls.fetch_add(1);
      nlohmann::json j = {{"method", req.method}, {"path", req.path}, {"query", req.query},
                          {"body", req.body},     {"minor", req.version_minor}};
      w->respond(200, {{"Content-Type", "application/json"}}, j.dump());
    });
    EXPECT_TRUE(server->start().ok());
  }
  uint16_t port() const { return server->bound_port(); }
  std::unique_ptr<Server> server;
  std::atomic<int> calls{0};
};

std::unique_ptr<Server> start_server(ServerOptions options, Handler handler) {
  options.port = 0;
  auto s = Server::bind(options);
  EXPECT_TRUE(s.ok()) << s.error_message();
  auto server = std::move(s).value();
  server->set_handler(std::move(handler));
  EXPECT_TRUE(server->start().ok());
  return server;
}

// --- framing -----------------------------------------------------------------------------------

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  EchoServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send_bytes("GET /v1/models?i=" + std::to_string(i) + " HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200);
    auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["path"], "/v1/models");
    EXPECT_EQ(j["query"], "i=" + std::to_string(i));
    EXPECT_FALSE(r->header("Connection").has_value());
  }
  EXPECT_EQ(s.calls.load(), 3);
}

TEST(HttpServer, PostBodyByContentLengthInPieces) {
  EchoServer s;
  RawClient c(s.port());
  std::string body = R"({"messages":[{"role":"user","content":"hi"}]})";
  ASSERT_TRUE(c.send_bytes("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 10)));
  std::this_thread::sleep_for(ms(50));
  ASSERT_TRUE(c.send_bytes(body.substr(10)));
  auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(nlohmann::json::parse(r->body)["body"], body);
}

TEST(HttpServer, PipelinedRequestsAnswerInOrder) {
  EchoServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                           "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"
                           "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  for (const char* path : {"/a", "/b", "/c"}) {
    auto r = c.read_response();
    ASSERT_TRUE(r.has_value()) << path;
    auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["path"], path);
    if (std::string(path) == "/b") {
      EXPECT_EQ(j["body"], "xyz");
    }
  }
  EXPECT_TRUE(c.wait_closed(ms(2000)));  // Connection: close honoured
}

TEST(HttpServer, Http10ClosesAndHeadHasNoBody) {
  EchoServer s;
  {
    RawClient c(s.port());
    ASSERT_TRUE(c.send_bytes("GET /x HTTP/1.0\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(nlohmann::json::parse(r->body)["minor"], 0);
    EXPECT_EQ(r->header("Connection").value_or(""), "close");
    EXPECT_TRUE(c.wait_closed(ms(2000)));
  }
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto head = c.read_response(ms(5000), /*head_request=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_NE(std::stoul(head->header("Content-Length").value_or("0")), 0u);
  auto next = c.read_response();  // the HEAD response carried no body, so this parses cleanly
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(nlohmann::json::parse(next->body)["path"], "/y");
}

TEST(HttpServer, ExpectContinue) {
  EchoServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(c.find_line(0, ms(2000)).has_value());
  EXPECT_EQ(c.buffer().rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u);
  ASSERT_TRUE(c.send_bytes("abcd"));
  int interim = 0;
  auto r = c.read_response(ms(5000), false, &interim);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(interim, 1);
  EXPECT_EQ(nlohmann::json::parse(r->body)["body"], "abcd");
}

// --- refusals ----------------------------------------------------------------------------------

struct BadHead {
  const char* name;
  std::string bytes;
  int status;
  const char* code;
};

TEST(HttpServer, MalformedHeadsAreRefusedAndClosed) {
  EchoServer s;
  const BadHead cases[] = {
      {"http2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http_version_not_supported"},
      {"http/0.9", "GET /\r\n\r\n", 505, "http_version_not_supported"},
      {"tls hello", std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 15), 400,
       "invalid_request_error"},
      {"bare LF", "GET / HTTP/1.1\nHost: x\n\n", 400, "invalid_request_error"},
      {"post without length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 411, "length_required"},
      {"chunked", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
       501, "not_implemented"},
      {"te + cl", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "invalid_request_error"},
      {"duplicate length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400,
       "invalid_request_error"},
      {"missing host", "GET / HTTP/1.1\r\n\r\n", 400, "invalid_request_error"},
  };
  for (const auto& c : cases) {
    RawClient client(s.port());
    ASSERT_TRUE(client.send_bytes(c.bytes)) << c.name;
    auto r = client.read_response();
    ASSERT_TRUE(r.has_value()) << c.name;
    EXPECT_EQ(r->status, c.status) << c.name;
    EXPECT_EQ(code_of(*r), c.code) << c.name;
    EXPECT_EQ(r->header("Connection").value_or(""), "close") << c.name;
    EXPECT_TRUE(client.wait_closed(ms(3000))) << c.name;
  }
  EXPECT_EQ(s.calls.load(), 0);
}

TEST(HttpServer, HeadTooLargeIs431) {
  EchoServer s;
  RawClient c(s.port());
  std::string big = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70 << 10, 'a') + "\r\n\r\n";
  c.send_bytes(big);  // the server may close before taking all of it
  auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 431);
  EXPECT_TRUE(c.wait_closed(ms(3000)));
}

TEST(HttpServer, OversizedBodyIsRefusedBeforeItIsSent) {
  ServerOptions o;
  o.max_request_bytes = 1 << 20;
  EchoServer s(o);
  RawClient c(s.port());
  auto t0 = Clock::now();
  // 1 GiB announced, not one byte of it sent: the answer must not wait for the body.
  ASSERT_TRUE(c.send_bytes("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n"));
  auto r = c.read_response(ms(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_LT(elapsed_ms(t0), 1500);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(code_of(*r), "request_too_large");
  EXPECT_EQ(s.calls.load(), 0);
  EXPECT_TRUE(c.wait_closed(ms(3000)));
}

TEST(HttpServer, PreBodyCheckRefusesBeforeTheBody) {
  std::atomic<int> handler_calls{0};
  ServerOptions o;
  o.pre_body_check = [](const Request& head) -> std::optional<SimpleResponse> {
    if (head.header("x-api-key").value_or("") != "k") {
      SimpleResponse r = error_response(401, "authentication_error", "invalid API key");
      r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return r;
    }
    return std::nullopt;
  };
  auto server = start_server(o, [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    handler_calls.fetch_add(1);
    w->respond(200, {}, "ok");
  });
  {
    RawClient c(server->bound_port());
    ASSERT_TRUE(c.send_bytes("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"));
    auto r = c.read_response(ms(3000));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(r->header("WWW-Authenticate").value_or(""), "Bearer");
    EXPECT_TRUE(c.wait_closed(ms(3000)));  // the unread body forces a close
  }
  {
    // Without a body the connection stays usable.
    RawClient c(server->bound_port());
    ASSERT_TRUE(c.send_bytes("GET /status HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 401);
    ASSERT_TRUE(c.send_bytes("GET /status HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n\r\n"));
    r = c.read_response();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "ok");
  }
  EXPECT_EQ(handler_calls.load(), 1);
}

TEST(HttpServer, SlowLorisHeadTimesOut) {
  ServerOptions o;
  o.header_timeout = ms(300);
  EchoServer s(o);
  RawClient c(s.port());
  auto t0 = Clock::now();
  ASSERT_TRUE(c.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n"));
  std::this_thread::sleep_for(ms(100));
  c.send_bytes("X-A: b\r\n");  // trickling bytes does not extend the deadline
  auto r = c.read_response(ms(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(code_of(*r), "request_timeout");
  EXPECT_GE(elapsed_ms(t0), 250);
  EXPECT_LT(elapsed_ms(t0), 2500);
  EXPECT_TRUE(c.wait_closed(ms(3000)));
}

TEST(HttpServer, StalledBodyTimesOut) {
  ServerOptions o;
  o.body_idle_timeout = ms(300);
  EchoServer s(o);
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  auto r = c.read_response(ms(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(s.calls.load(), 0);
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosedSilently) {
  ServerOptions o;
  o.header_timeout = ms(200);
  EchoServer s(o);
  RawClient c(s.port());
  EXPECT_TRUE(c.wait_closed(ms(3000)));
  EXPECT_TRUE(c.buffer().empty());  // no 408 for a client that never started a request
}

// --- handler misuse ----------------------------------------------------------------------------

TEST(HttpServer, AbandonedOrThrowingHandlerGets500) {
  std::atomic<int> mode{0};
  auto server = start_server({}, [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    if (mode.load() == 0) return;  // drops the writer without answering
    if (mode.load() == 1) throw std::runtime_error("boom");
    w->respond(200, {{"X-Bad", "a\r\nSet-Cookie: x=1"}, {"X-Good", "v"}, {"Content-Length", "999"}}, "body");
  });
  RawClient c(server->bound_port());
  for (int m = 0; m < 2; ++m) {
    mode.store(m);
    ASSERT_TRUE(c.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r.has_value()) << m;
    EXPECT_EQ(r->status, 500);
    EXPECT_EQ(code_of(*r), "internal_server_error");
  }
  // Header injection is dropped; the transport's own Content-Length wins.
  mode.store(2);
  ASSERT_TRUE(c.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "body");
  EXPECT_FALSE(r->header("X-Bad").has_value());
  EXPECT_FALSE(r->header("Set-Cookie").has_value());
  EXPECT_EQ(r->header("X-Good").value_or(""), "v");
  EXPECT_EQ(r->header("Content-Length").value_or(""), "4");
}

TEST(HttpServer, BindErrorNamesHostAndPort) {
  EchoServer s;
  ServerOptions o;
  o.port = s.port();
  auto second = Server::bind(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error_message(),
            "cannot bind 127.0.0.1:" + std::to_string(s.port()) + ": Address already in use");
  o.host = "not-an-address";
  auto bad = Server::bind(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("cannot bind not-an-address:"), std::string::npos);
}

}  // namespace
}  // namespace splash::http
