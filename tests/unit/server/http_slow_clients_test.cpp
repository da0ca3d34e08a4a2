// Clients that are slow, idle or not speaking HTTP while the transport waits for a request head:
// the head stage's rules alone (head_wait.h), then through real loopback sockets: no thread per
// waiting connection, a minimum rate for heads, eviction of the slowest when the loop is full, and
// an immediate 400 for bytes that cannot start a request line.
#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "server/http/head_wait.h"
#include "server/http/server.h"
#include "http_test_client.h"

namespace splash::http {
namespace {

using testing::RawClient;
using testing::code_of;
using testing::elapsed_ms;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;


int count_entries(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}
int thread_count() { return count_entries("/proc/self/task"); }
int fd_count() { return count_entries("/proc/self/fd"); }


struct OkServer {
  explicit OkServer(ServerOptions options = {}) {
    options.port = 0;
    auto s = Server::bind(options);
    EXPECT_TRUE(s.ok()) << s.error_message();
    server = std::move(s).value();
    server->set_handler([this](const Request& req, std::shared_ptr<ResponseWriter> w) {
      calls.fetch_add(1);
      w->respond(200, {{"Content-Type", "text/plain"}}, "ok " + req.path);
    });
    EXPECT_TRUE(server->start().ok());
  }
  uint16_t port() const { return server->bound_port(); }
  std::unique_ptr<Server> server;
  std::atomic<int> calls{0};
};

bool get_ok(uint16_t port, const std::string& path, ms timeout) {
  RawClient c(port);
  if (!c.send_bytes("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")) return false;
  auto r = c.read_response(timeout);
  return r && r->status == 200 && r->body == "ok " + path;
}

// Waits until `pred` holds, up to `timeout`.
template <typename Pred>
bool eventually(Pred pred, ms timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(ms(10));
  }
  return pred();
}

// --- the rules alone -----------------------------------------------------------------------------

TEST(HeadWait, DeadlineIsTheHardLimitUntilTheFirstByteThenGraceAndRate) {
  HeadPolicy p{ms(30000), ms(5000), 1000};
  auto t0 = Clock::now();
  HeadWait w = head_wait_start(t0, "");
  EXPECT_EQ(head_deadline(w, p), t0 + ms(30000));
  head_wait_received(&w, 10, t0 + ms(2000));
  EXPECT_EQ(head_deadline(w, p), t0 + ms(2000) + ms(5000) + ms(10));
  head_wait_received(&w, 2000, t0 + ms(3000));  // 2010 bytes earn 2.01 s beyond the grace
  EXPECT_EQ(head_deadline(w, p), t0 + ms(2000) + ms(5000) + ms(2010));
  head_wait_received(&w, 1 << 20, t0 + ms(4000));  // never beyond the hard limit
  EXPECT_EQ(head_deadline(w, p), t0 + ms(30000));
  p.min_rate = 0;
  EXPECT_EQ(head_deadline(w, p), t0 + ms(30000));
  // Pipelined leftovers count as received from the start of the wait.
  HeadWait left = head_wait_start(t0, "GET /");
  EXPECT_EQ(left.received, 5u);
  EXPECT_EQ(head_deadline(left, HeadPolicy{ms(30000), ms(5000), 1000}), t0 + ms(5005));
}

TEST(HeadWait, RequestLineBytesThatNoRequestMayHoldAreRefused) {
  EXPECT_FALSE(check_request_line_bytes(""));
  EXPECT_FALSE(check_request_line_bytes("GET /v1/models HTTP/1.1\r\nX: \x80\xff\r\n"));  // headers: the parser's
  EXPECT_FALSE(check_request_line_bytes("\r\n\r\nPOST /v1/comp"));
  auto tls = check_request_line_bytes(std::string("\x16\x03\x01\x02\x00\x01", 6));
  ASSERT_TRUE(tls);
  EXPECT_EQ(tls->status, 400);
  EXPECT_NE(tls->message.find("TLS"), std::string::npos) << tls->message;
  auto utf8 = check_request_line_bytes("GET /caf\xc3\xa9 HTTP/1.1");
  ASSERT_TRUE(utf8);
  EXPECT_NE(utf8->message.find("byte 8 (0xC3)"), std::string::npos) << utf8->message;
  EXPECT_NE(utf8->message.find("not ASCII; percent-encode it in the target as %C3"), std::string::npos) << utf8->message;
  auto nul = check_request_line_bytes(std::string("GET /\0", 6));
  ASSERT_TRUE(nul);
  EXPECT_NE(nul->message.find("control character"), std::string::npos) << nul->message;
}

TEST(HeadWait, EvictsTheSilentFirstThenTheSlowestHead) {
  auto t0 = Clock::now();
  HeadWait fast = head_wait_start(t0, ""), slow = head_wait_start(t0, ""), silent_old = head_wait_start(t0, ""),
           silent_new = head_wait_start(t0 + ms(500), "");
  head_wait_received(&fast, 900, t0 + ms(100));
  head_wait_received(&slow, 3, t0 + ms(100));
  auto now = t0 + ms(1000);
  EXPECT_EQ(pick_head_to_evict({&fast, &silent_new, &slow, &silent_old}, now), 3u);
  EXPECT_EQ(pick_head_to_evict({&fast, &silent_new, &slow}, now), 1u);
  EXPECT_EQ(pick_head_to_evict({&fast, &slow}, now), 1u);
  EXPECT_EQ(pick_head_to_evict({&fast}, now), 0u);
  EXPECT_FALSE(pick_head_to_evict({}, now));
}

// --- through sockets -----------------------------------------------------------------------------

TEST(HttpSlowClients, WaitingConnectionsCostNoThreads) {
  OkServer s;
  ASSERT_TRUE(get_ok(s.port(), "/warm", ms(3000)));
  // The warm-up connection's server side is gone too before the baseline is taken.
  ASSERT_TRUE(eventually([&] { return s.server->stats().serving == 0 && s.server->stats().waiting == 0; }, ms(3000)));
  const int threads0 = thread_count(), fds0 = fd_count();
  {
    std::vector<std::unique_ptr<RawClient>> slow;
    for (int i = 0; i < 300; ++i) {
      slow.push_back(std::make_unique<RawClient>(s.port()));
      ASSERT_TRUE(slow.back()->send_bytes(i % 2 ? "GET /slo" : ""));  // half idle, half mid-head
    }
    ASSERT_TRUE(eventually([&] { return s.server->stats().waiting == 300; }, ms(5000)))
        << s.server->stats().waiting;
    EXPECT_LE(thread_count(), threads0 + 1);  // not one thread per connection
    auto t0 = Clock::now();
    EXPECT_TRUE(get_ok(s.port(), "/health", ms(3000)));
    EXPECT_LT(elapsed_ms(t0), 1000);
  }
  // The clients left: descriptors and threads back to where they were.
  EXPECT_TRUE(eventually([&] { return s.server->stats().waiting == 0 && fd_count() == fds0; }, ms(5000)))
      << "fds " << fd_count() << " vs " << fds0 << ", waiting " << s.server->stats().waiting;
  EXPECT_TRUE(eventually([&] { return thread_count() == threads0; }, ms(3000)));
}

TEST(HttpSlowClients, KeepAliveConnectionGoesBackToTheLoopBetweenRequests) {
  OkServer s;
  RawClient c(s.port());
  ASSERT_TRUE(c.send_bytes("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r1 = c.read_response();
  ASSERT_TRUE(r1.has_value());
  EXPECT_TRUE(eventually([&] { return s.server->stats().serving == 0 && s.server->stats().waiting == 1; }, ms(3000)));
  ASSERT_TRUE(c.send_bytes("GET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r2 = c.read_response();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->body, "ok /two");
}

TEST(HttpSlowClients, TrickledHeadIsCutOnceItFallsBelowTheMinimumRate) {
  ServerOptions o;
  o.header_timeout = ms(20000);
  o.head_grace = ms(300);
  o.head_min_rate = 1000;
  OkServer s(o);
  RawClient slow(s.port());
  auto t0 = Clock::now();
  // One byte every 50 ms: 20 bytes/s, far below 1000.
  std::string head = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  bool refused = false;
  for (size_t i = 0; i < head.size() && !refused; ++i) {
    if (!slow.send_bytes(head.substr(i, 1))) break;
    std::this_thread::sleep_for(ms(50));
    refused = !slow.buffer().empty() || slow.wait_closed(ms(1));
  }
  auto r = slow.read_response(ms(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(code_of(*r), "request_timeout");
  EXPECT_GE(elapsed_ms(t0), 300);
  EXPECT_LT(elapsed_ms(t0), 1500);  // the hard limit (20 s) did not decide it
  EXPECT_EQ(s.calls.load(), 0);
  EXPECT_GE(s.server->stats().head_timeouts, 1);
  // A head sent at a normal pace in pieces is served.
  RawClient ok(s.port());
  ASSERT_TRUE(ok.send_bytes("GET /fine HTTP/1.1\r\n"));
  std::this_thread::sleep_for(ms(100));
  ASSERT_TRUE(ok.send_bytes("Host: x\r\n\r\n"));
  auto r2 = ok.read_response();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->body, "ok /fine");
}

TEST(HttpSlowClients, FullLoopEvictsTheSlowestPartialHeadWith503) {
  ServerOptions o;
  o.max_waiting = 2;
  OkServer s(o);
  RawClient slowest(s.port());
  ASSERT_TRUE(slowest.send_bytes("G"));
  std::this_thread::sleep_for(ms(200));
  RawClient faster(s.port());
  ASSERT_TRUE(faster.send_bytes("GET /faster HTTP/1.1\r\nHost"));
  ASSERT_TRUE(eventually([&] { return s.server->stats().waiting == 2; }, ms(3000)));
  // Full: a new connection makes the slowest partial head leave, with a 503 it can read.
  EXPECT_TRUE(get_ok(s.port(), "/new", ms(3000)));
  auto r = slowest.read_response(ms(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(code_of(*r), "frontend_overloaded");
  EXPECT_EQ(s.server->stats().evicted, 1);
  // The faster one kept its place and completes.
  ASSERT_TRUE(faster.send_bytes(": x\r\n\r\n"));
  auto rf = faster.read_response();
  ASSERT_TRUE(rf.has_value());
  EXPECT_EQ(rf->body, "ok /faster");
}

TEST(HttpSlowClients, SlowUploadMakesRoomWhenEverySlotIsTaken) {
  ServerOptions o;
  o.max_connections = 2;
  OkServer s(o);
  // Two complete heads whose bodies trickle take both serving slots.
  RawClient up1(s.port()), up2(s.port());
  ASSERT_TRUE(up1.send_bytes("POST /up1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabcdef"));
  ASSERT_TRUE(up2.send_bytes("POST /up2 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc"));
  ASSERT_TRUE(eventually([&] { return s.server->stats().serving == 2; }, ms(3000)));
  // Within the first second an upload is not judged: the newcomer is refused.
  RawClient early(s.port());
  ASSERT_TRUE(early.send_bytes("GET /early HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto re = early.read_response(ms(3000));
  ASSERT_TRUE(re.has_value());
  EXPECT_EQ(re->status, 503);
  // Past it, both run far below 512 KiB/s: the slower one (3 bytes, served second) makes room.
  std::this_thread::sleep_for(ms(1100));
  EXPECT_TRUE(get_ok(s.port(), "/late", ms(3000)));
  auto r2 = up2.read_response(ms(3000));
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->status, 503);
  EXPECT_EQ(code_of(*r2), "frontend_overloaded");
  EXPECT_EQ(s.server->stats().evicted, 1);
  // The other upload still completes.
  ASSERT_TRUE(up1.send_bytes(std::string(100000 - 6, 'x')));
  auto r1 = up1.read_response(ms(5000));
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->body, "ok /up1");
}

TEST(HttpSlowClients, TlsOrBinaryFirstBytesAre400AtOnce) {
  OkServer s;  // 30 s head timeout: only the first bytes can explain a quick answer
  for (std::string first : {std::string("\x16\x03\x01\x00\xa5\x01\x00\x00", 8), std::string("GET /\xff HTTP/1.1")}) {
    RawClient c(s.port());
    auto t0 = Clock::now();
    ASSERT_TRUE(c.send_bytes(first));
    auto r = c.read_response(ms(3000));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(code_of(*r), "invalid_request_error");
    EXPECT_LT(elapsed_ms(t0), 1000);
    EXPECT_TRUE(c.wait_closed(ms(3000)));
  }
  EXPECT_EQ(s.server->stats().refused_not_http, 2);
  EXPECT_EQ(s.calls.load(), 0);
}

}  // namespace
}  // namespace splash::http
