// Streaming through the transport: chunked and close-delimited bodies written from another thread
// (as the engine's callback does), disconnect detection, slow readers, the connection cap, stop().
// Slow and idle clients waiting for a head: http_slow_clients_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/http/server.h"
#include "server/http/sse.h"
#include "http_test_client.h"

namespace splash::http {
namespace {

using testing::RawClient;
using testing::code_of;
using testing::elapsed_ms;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;


// The handler starts a stream and hands the writer over to the test (playing the engine), the way
// the route layer hands it to an engine callback; it records disconnect notifications.
struct StreamServer {
  explicit StreamServer(ServerOptions options = {}) {
    options.port = 0;
    auto s = Server::bind(options);
    EXPECT_TRUE(s.ok()) << s.error_message();
    server = std::move(s).value();
    server->set_handler([this](const Request&, std::shared_ptr<ResponseWriter> w) {
      w->on_disconnect([this] {
        std::lock_guard<std::mutex> lock(mu);
        disconnected_at = Clock::now();
        ++disconnects;
        cv.notify_all();
      });
      EXPECT_TRUE(w->start_stream(200, sse_headers()));
      std::lock_guard<std::mutex> lock(mu);
      writers.push_back(std::move(w));
      cv.notify_all();
    });
    EXPECT_TRUE(server->start().ok());
  }
  uint16_t port() const { return server->bound_port(); }
  std::shared_ptr<ResponseWriter> wait_writer(size_t index) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, ms(5000), [&] { return writers.size() > index; });
    return writers.size() > index ? writers[index] : nullptr;
  }
  bool wait_disconnects(int n, ms timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return disconnects >= n; });
  }

  std::unique_ptr<Server> server;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  int disconnects = 0;
  Clock::time_point disconnected_at;
};

TEST(HttpStream, ChunkedFromAnotherThread) {
  StreamServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  const std::vector<std::string> pieces = {sse_event(R"({"n":1})"), "", sse_event(R"({"n":2})"),
                                           std::string(100000, 'z'), sse_done()};
  std::thread engine([&] {
    for (const auto& p : pieces) {
      EXPECT_TRUE(w->write(p));
      std::this_thread::sleep_for(ms(5));
    }
    w->end();
  });
  auto r = c.read_response();
  engine.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->chunked);
  EXPECT_EQ(r->header("Content-Type").value_or(""), "text/event-stream");
  std::string expected;
  for (const auto& p : pieces) expected += p;
  EXPECT_EQ(r->body, expected);
  EXPECT_EQ(r->chunks.size(), 4u);  // the empty write adds no chunk (it would end the body)
  EXPECT_FALSE(w->write("late"));   // after end()
  // The connection is reusable after a complete stream.
  w.reset();
  ASSERT_TRUE(c.send_bytes("POST /again HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto w2 = s.wait_writer(1);
  ASSERT_TRUE(w2);
  w2->write("x");
  w2->end();
  auto r2 = c.read_response();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->body, "x");
  EXPECT_EQ(s.disconnects, 0);
}

TEST(HttpStream, Http10IsCloseDelimited) {
  StreamServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("GET /s HTTP/1.0\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  w->write("hello ");
  w->write("world");
  w->end();
  auto r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->chunked);
  EXPECT_FALSE(r->header("Content-Length").has_value());
  EXPECT_EQ(r->body, "hello world");
}

TEST(HttpStream, ClientDisconnectMidStreamIsSeenAtOnce) {
  StreamServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write(sse_event("{}")));
  ASSERT_TRUE(c.find_line(0, ms(2000)).has_value());  // the stream has started on the client's side
  EXPECT_FALSE(w->client_gone());

  auto closed_at = Clock::now();
  c.close_now();
  ASSERT_TRUE(s.wait_disconnects(1, ms(3000)));
  long latency = static_cast<long>(std::chrono::duration_cast<ms>(s.disconnected_at - closed_at).count());
  EXPECT_LT(latency, 100) << "on_disconnect ran " << latency << " ms after the client closed";
  EXPECT_TRUE(w->client_gone());
  EXPECT_FALSE(w->write(sse_event("{}")));
  w->end();  // harmless after a disconnect
  std::this_thread::sleep_for(ms(20));
  EXPECT_EQ(s.disconnects, 1);  // once
}

TEST(HttpStream, HalfCloseCancelsWhileWaiting) {
  StreamServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("GET /s HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  c.shutdown_write();  // spec 2.8: a half-close cancels too
  ASSERT_TRUE(s.wait_disconnects(1, ms(3000)));
  EXPECT_FALSE(w->write("x"));
}

TEST(HttpStream, OnDisconnectRegisteredLateRunsAtOnce) {
  std::atomic<int> calls{0};
  std::shared_ptr<ResponseWriter> kept;
  std::mutex mu;
  std::condition_variable cv;
  auto server = [&] {
    ServerOptions o;
    o.port = 0;
    auto s = Server::bind(o);
    EXPECT_TRUE(s.ok());
    auto srv = std::move(s).value();
    srv->set_handler([&](const Request&, std::shared_ptr<ResponseWriter> w) {
      std::lock_guard<std::mutex> lock(mu);
      kept = std::move(w);  // nothing sent, no callback registered yet
      cv.notify_all();
    });
    EXPECT_TRUE(srv->start().ok());
    return srv;
  }();
  RawClient c(server->bound_port());
  ASSERT_TRUE(c.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, ms(3000), [&] { return kept != nullptr; }));
  }
  c.close_now();
  auto t0 = Clock::now();
  while (!kept->client_gone() && elapsed_ms(t0) < 3000) std::this_thread::sleep_for(ms(5));
  ASSERT_TRUE(kept->client_gone());
  kept->on_disconnect([&] { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(kept->start_stream(200, {}));
}

TEST(HttpStream, ClientThatStopsReadingIsDropped) {
  ServerOptions o;
  o.max_buffered_bytes = 256 << 10;
  o.write_stall_timeout = ms(500);
  StreamServer s(o);
  RawClient c(s.port());
  int small = 4096;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(c.send_bytes("GET /s HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  // The client reads nothing: writes must keep returning quickly, then fail.
  std::string piece(16 << 10, 'p');
  auto t0 = Clock::now();
  bool failed = false;
  for (int i = 0; i < 2000 && !failed; ++i) {
    auto before = Clock::now();
    failed = !w->write(piece);
    EXPECT_LT(elapsed_ms(before), 50) << "write() blocked";
    if (!failed) std::this_thread::sleep_for(ms(2));
  }
  EXPECT_TRUE(failed);
  EXPECT_LT(elapsed_ms(t0), 5000);
  EXPECT_TRUE(s.wait_disconnects(1, ms(3000)));
}

TEST(HttpStream, StalledReaderIsDroppedAfterTheTimeout) {
  ServerOptions o;
  o.write_stall_timeout = ms(300);
  StreamServer s(o);
  RawClient c(s.port());
  int small = 4096;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(c.send_bytes("GET /s HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  // Fill the socket buffers once (well under max_buffered), then just wait.
  ASSERT_TRUE(w->write(std::string(4 << 20, 'q')));
  auto t0 = Clock::now();
  ASSERT_TRUE(s.wait_disconnects(1, ms(5000)));
  EXPECT_GE(elapsed_ms(t0), 200);
  EXPECT_FALSE(w->write("x"));
}

// --- connection cap ----------------------------------------------------------------------------

TEST(HttpStream, ConnectionCapAnswers503) {
  ServerOptions o;
  o.max_connections = 2;
  StreamServer s(o);
  // Two requests in progress (their streams stay open) fill the cap.
  RawClient a(s.port()), b(s.port());
  ASSERT_TRUE(a.send_bytes("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(s.wait_writer(0));
  ASSERT_TRUE(b.send_bytes("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(s.wait_writer(1));
  // A third connection is accepted (it costs no thread while it waits), but its request is refused.
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send_bytes("GET /c HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response(ms(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After").value_or(""), "1");
  EXPECT_NE(r->body.find("\"frontend_overloaded\""), std::string::npos);
  EXPECT_NE(r->body.find("\"server_error\""), std::string::npos);
  EXPECT_TRUE(c.wait_closed(ms(3000)));
  EXPECT_EQ(s.server->stats().refused_overloaded, 1);
  // The two admitted requests still work; once one ends, a new request gets its slot.
  auto wa = s.wait_writer(0);
  wa->write("ok");
  wa->end();
  auto ra = a.read_response();
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->body, "ok");
  // The slot is free once a's thread has finished (the client can read its response a moment
  // before that).
  auto deadline = Clock::now() + ms(3000);
  while (s.server->stats().serving > 1 && Clock::now() < deadline) std::this_thread::sleep_for(ms(5));
  RawClient d(s.port());
  ASSERT_TRUE(d.send_bytes("GET /d HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto wd = s.wait_writer(2);
  ASSERT_TRUE(wd);
  wd->end();
  auto rd = d.read_response();
  ASSERT_TRUE(rd.has_value());
  EXPECT_EQ(rd->status, 200);
}

TEST(HttpStream, IdleConnectionsYieldToNewOnes) {
  ServerOptions o;
  o.max_waiting = 2;
  StreamServer s(o);
  RawClient idle1(s.port());
  std::this_thread::sleep_for(ms(30));
  RawClient idle2(s.port());
  std::this_thread::sleep_for(ms(100));
  RawClient fresh(s.port());  // full: the oldest head-less connection makes room
  EXPECT_TRUE(idle1.wait_closed(ms(3000)));
  EXPECT_TRUE(idle1.buffer().empty());
  ASSERT_TRUE(fresh.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  w->write("served");
  w->end();
  auto r = fresh.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "served");
}

// --- stop --------------------------------------------------------------------------------------

TEST(HttpStream, StopWithOpenConnectionsReturnsPromptly) {
  StreamServer s;
  RawClient idle(s.port());
  RawClient partial(s.port());
  ASSERT_TRUE(partial.send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"));
  RawClient streaming(s.port());
  ASSERT_TRUE(streaming.send_bytes("GET /s HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto w = s.wait_writer(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("first"));
  std::this_thread::sleep_for(ms(50));
  auto t0 = Clock::now();
  s.server->stop();
  EXPECT_LT(elapsed_ms(t0), 1000);
  EXPECT_EQ(s.disconnects, 1);  // the in-flight stream was told to cancel
  EXPECT_FALSE(w->write("after stop"));
  EXPECT_TRUE(idle.wait_closed(ms(2000)));
  EXPECT_TRUE(streaming.wait_closed(ms(2000)));
  s.server->stop();  // idempotent
  // Nothing listens any more.
  RawClient late(s.port());
  EXPECT_FALSE(late.connected() && late.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n") &&
               late.read_response(ms(500)).has_value());
}

}  // namespace
}  // namespace splash::http
