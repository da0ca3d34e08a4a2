// Request-head parsing: what is accepted, what is refused and with which status (spec 2).
#include <gtest/gtest.h>

#include <string>

#include "server/http/request_parser.h"

namespace splash::http {
namespace {

HeadParse parse(const std::string& raw) {
  ParseLimits limits;
  HeadScan scan = scan_head(raw, limits);
  if (scan.state == HeadScanState::kError) {
    HeadParse p;
    p.error = scan.error;
    return p;
  }
  EXPECT_EQ(scan.state, HeadScanState::kComplete) << raw;
  return parse_head(std::string_view(raw).substr(scan.skip, scan.length - scan.skip), limits);
}

TEST(HttpParser, ParsesRequestLineHeadersAndLength) {
  auto p = parse("POST /v1/chat/completions?x=1&y HTTP/1.1\r\nHost: localhost:8000\r\n"
                 "content-length:  12 \r\nX-Empty:\r\nAuthorization: Bearer k\r\n\r\n");
  ASSERT_TRUE(p.ok()) << p.error.message;
  const Request& r = p.head->request;
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/chat/completions?x=1&y");
  EXPECT_EQ(r.path, "/v1/chat/completions");
  EXPECT_EQ(r.query, "x=1&y");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_EQ(p.head->content_length, 12u);
  EXPECT_TRUE(p.head->keep_alive);
  ASSERT_EQ(r.headers.size(), 4u);
  EXPECT_EQ(r.headers[1].name, "content-length");  // as received
  EXPECT_EQ(r.headers[1].value, "12");              // OWS trimmed
  EXPECT_EQ(r.header("CONTENT-LENGTH").value_or("?"), "12");
  EXPECT_EQ(r.header("x-empty").value_or("?"), "");
  EXPECT_FALSE(r.header("Cookie").has_value());
}

TEST(HttpParser, KeepAliveRules) {
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n").head->keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n").head->keep_alive);
  auto p10 = parse("GET / HTTP/1.0\r\n\r\n");  // Host optional on 1.0, and 1.0 always closes
  ASSERT_TRUE(p10.ok());
  EXPECT_EQ(p10.head->request.version_minor, 0);
  EXPECT_FALSE(p10.head->keep_alive);
}

TEST(HttpParser, SkipsLeadingEmptyLines) {
  std::string raw = "\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  HeadScan scan = scan_head(raw, ParseLimits{});
  ASSERT_EQ(scan.state, HeadScanState::kComplete);
  EXPECT_EQ(scan.skip, 4u);
  EXPECT_EQ(scan.length, raw.size());
}

TEST(HttpParser, ScanFindsTheEndAndLeavesPipelinedBytes) {
  std::string raw = "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\n";
  HeadScan scan = scan_head(raw, ParseLimits{});
  ASSERT_EQ(scan.state, HeadScanState::kComplete);
  EXPECT_EQ(raw.substr(scan.length), "GET /b HTTP/1.1\r\n");
}

TEST(HttpParser, IncrementalScanGivesTheSameAnswer) {
  std::string raw = "GET /a HTTP/1.1\r\nHost: a\r\nX: y\r\n\r\n";
  ParseLimits limits;
  size_t resume = 0;
  for (size_t n = 1; n <= raw.size(); ++n) {
    HeadScan scan = scan_head(std::string_view(raw).substr(0, n), limits, resume);
    if (n < raw.size()) {
      ASSERT_EQ(scan.state, HeadScanState::kIncomplete) << n;
      resume = scan.scanned;
    } else {
      ASSERT_EQ(scan.state, HeadScanState::kComplete);
      EXPECT_EQ(scan.length, raw.size());
    }
  }
}

struct Refusal {
  const char* name;
  std::string raw;
  int status;
  const char* code;
};

class HttpParserRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(HttpParserRefuses, WithStatusAndCode) {
  const Refusal& c = GetParam();
  HeadParse p = parse(c.raw);
  ASSERT_FALSE(p.ok()) << c.name;
  EXPECT_EQ(p.error.status, c.status) << c.name << ": " << p.error.message;
  EXPECT_EQ(p.error.code, c.code) << c.name;
  EXPECT_FALSE(p.error.message.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Table, HttpParserRefuses,
    ::testing::Values(
        Refusal{"http2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http_version_not_supported"},
        Refusal{"http_1_2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505, "http_version_not_supported"},
        Refusal{"http_0_9", "GET /\r\n\r\n", 505, "http_version_not_supported"},
        Refusal{"lowercase_version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"garbage", "\x16\x03\x01\x02\x01\xfc\x03\x03\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"double_space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"absolute_form", "GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"star_not_options", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"control_in_target", "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"bare_lf", "GET / HTTP/1.1\nHost: a\n\n", 400, "invalid_request_error"},
        Refusal{"bare_lf_in_header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"bare_cr", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"obs_fold", "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"space_before_colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"no_colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"nul_in_value", std::string("GET / HTTP/1.1\r\nHost: a\r\nX: a") + '\0' + "b\r\n\r\n", 400,
                "invalid_request_error"},
        Refusal{"missing_host_1_1", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"two_hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "invalid_request_error"},
        Refusal{"duplicate_length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
                400, "invalid_request_error"},
        Refusal{"length_list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", 400,
                "invalid_request_error"},
        Refusal{"negative_length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400,
                "invalid_request_error"},
        Refusal{"plus_length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400,
                "invalid_request_error"},
        Refusal{"post_without_length", "POST /v1/completions HTTP/1.1\r\nHost: a\r\n\r\n", 411, "length_required"},
        Refusal{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
                "not_implemented"},
        Refusal{"te_and_length",
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400,
                "invalid_request_error"},
        Refusal{"te_on_get", "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
                "not_implemented"},
        Refusal{"bad_expect", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 200-ok\r\n\r\n", 417,
                "expectation_failed"}),
    [](const ::testing::TestParamInfo<Refusal>& info) { return std::string(info.param.name); });

TEST(HttpParser, AbsurdContentLengthSaturatesInsteadOfFailing) {
  auto p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999999\r\n\r\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.head->content_length, UINT64_MAX);  // the server answers 413 for it
}

TEST(HttpParser, ExpectContinue) {
  auto p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-Continue\r\n\r\n");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.head->expect_continue);
  auto empty = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty.head->expect_continue);  // nothing to wait for
}

TEST(HttpParser, OptionsStarAndObsText) {
  auto p = parse("OPTIONS * HTTP/1.1\r\nHost: a\r\nX-Name: caf\xc3\xa9\r\n\r\n");
  ASSERT_TRUE(p.ok()) << p.error.message;
  EXPECT_EQ(p.head->request.path, "*");
  EXPECT_EQ(p.head->request.header("x-name").value_or(""), "caf\xc3\xa9");
}

TEST(HttpParser, HeadTooLargeIs431) {
  ParseLimits limits;
  limits.max_head_bytes = 1024;
  std::string raw = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(2000, 'a');
  HeadScan scan = scan_head(raw, limits);
  ASSERT_EQ(scan.state, HeadScanState::kError);
  EXPECT_EQ(scan.error.status, 431);
  // Exactly at the limit is fine, one byte over is not.
  std::string exact = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  limits.max_head_bytes = exact.size();
  EXPECT_EQ(scan_head(exact, limits).state, HeadScanState::kComplete);
  limits.max_head_bytes = exact.size() - 1;
  EXPECT_EQ(scan_head(exact, limits).state, HeadScanState::kError);
}

TEST(HttpParser, TooManyHeadersIs431) {
  std::string raw = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 100; ++i) raw += "X-" + std::to_string(i) + ": v\r\n";
  raw += "\r\n";
  auto p = parse(raw);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error.status, 431);
}

TEST(HttpParser, ErrorBodyIsOpenAiShaped) {
  std::string body = error_body(413, "request_too_large", "too big \"x\"");
  EXPECT_EQ(body,
            R"({"error":{"code":"request_too_large","message":"too big \"x\"","type":"invalid_request_error"}})");
  EXPECT_NE(error_body(503, "frontend_overloaded", "m").find(R"("type":"server_error")"), std::string::npos);
  SimpleResponse r = error_response(503, "frontend_overloaded", "busy");
  EXPECT_EQ(find_header(r.headers, "retry-after").value_or(""), "1");
  // Invalid UTF-8 in a message (client bytes) is replaced, never thrown.
  EXPECT_NE(error_body(400, "invalid_request_error", "bad \xff byte").find("bad "), std::string::npos);
}

// The message names the byte and what to send instead (a path with byte 0xFF used to be "a control
// character or a space").
TEST(HttpParser, TargetByteMessagesSayWhatIsWrong) {
  auto ff = parse("GET /a\xff HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(ff.ok());
  EXPECT_NE(ff.error.message.find("byte 0xFF (a byte outside ASCII)"), std::string::npos) << ff.error.message;
  EXPECT_NE(ff.error.message.find("%FF"), std::string::npos) << ff.error.message;
  auto ctl = parse("GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(ctl.ok());
  EXPECT_NE(ctl.error.message.find("byte 0x01 (a control character)"), std::string::npos) << ctl.error.message;
  auto tab = parse("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(tab.ok());
  EXPECT_NE(tab.error.message.find("byte 0x09 (a control character)"), std::string::npos) << tab.error.message;
}

TEST(HttpParser, ParseContentLength) {
  EXPECT_EQ(parse_content_length("0"), 0u);
  EXPECT_EQ(parse_content_length("104857600"), 104857600u);
  EXPECT_EQ(parse_content_length("99999999999999999999999"), UINT64_MAX);
  EXPECT_FALSE(parse_content_length("").has_value());
  EXPECT_FALSE(parse_content_length("-1").has_value());
}

}  // namespace
}  // namespace splash::http
