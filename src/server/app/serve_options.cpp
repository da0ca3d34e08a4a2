#include "server/app/serve_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/sizes.h"
#include "engine/memory_plan.h"

namespace splash::app {

namespace {

bool is_space_or_control(unsigned char c) { return c <= 0x20 || c == 0x7f; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool valid_port_text(std::string_view p) {
  if (p.empty() || p.size() > 5) return false;
  unsigned v = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  return ec == std::errc() && end == p.data() + p.size() && v >= 1 && v <= 65535;
}

}  // namespace

Result<uint16_t> parse_port(const std::string& text, const char* flag) {
  if (!valid_port_text(text)) return make_error(flag, ": '", text, "' is not a port number (1-65535)");
  return static_cast<uint16_t>(std::atoi(text.c_str()));
}

Status check_api_key(const std::string& key, const char* source) {
  if (key.empty()) return make_error(source, ": the key is empty");
  for (unsigned char c : key)
    if (c >= 0x80 || is_space_or_control(c))
      return make_error(source, ": the key must be ASCII without whitespace or control characters");
  return {};
}

Status check_allowed_origin(const std::string& origin) {
  if (origin == "*") return {};
  const std::string bad = str_cat("--allowed-origin: '", origin, "' is not * or an exact scheme://host[:port]");
  size_t sep = origin.find("://");
  if (sep == std::string::npos) return make_error(bad);
  const std::string scheme = origin.substr(0, sep);
  if (scheme != "http" && scheme != "https") return make_error(bad, " (scheme must be http or https)");
  std::string_view rest = std::string_view(origin).substr(sep + 3);
  if (rest.empty()) return make_error(bad);
  std::string_view host = rest;
  if (rest.front() == '[') {  // IPv6 literal
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return make_error(bad);
    host = rest.substr(0, close + 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !valid_port_text(rest.substr(1)))) return make_error(bad);
  } else {
    size_t colon = rest.find(':');
    if (colon != std::string_view::npos) {
      if (!valid_port_text(rest.substr(colon + 1))) return make_error(bad, " (bad port)");
      host = rest.substr(0, colon);
    }
    if (host.empty()) return make_error(bad);
    for (unsigned char c : host)
      if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_'))
        return make_error(bad, " (patterns, paths and credentials are not accepted)");
  }
  return {};
}

Status check_allowed_host(const std::string& host) {
  if (host.empty()) return make_error("--allowed-host: the host is empty");
  for (unsigned char c : host)
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']'))
      return make_error("--allowed-host: '", host, "' is not a host name or address (no scheme, path or pattern)");
  return {};
}

Status check_served_model_name(const std::string& name) {
  const std::string what = str_cat("--served-model-name: '", name, "'");
  if (name.empty()) return make_error("--served-model-name: the name is empty");
  for (unsigned char c : name) {
    if (is_space_or_control(c)) return make_error(what, " contains whitespace or a control character");
    if (c == '\\' || c == '%' || c == '?' || c == '#') return make_error(what, " contains one of \\ % ? #");
  }
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string seg = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return make_error(what, " has an empty, '.' or '..' path segment");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return {};
}

Status check_announce_served_name(bool announce, const std::vector<std::string>& served_model_names) {
  if (announce && served_model_names.empty()) return make_error("--announce-served-name needs --served-model-name");
  return {};
}

Result<double> parse_decode_share(const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
    return make_error("--decode-share: '", text, "' is not a finite number >= 0");
  return v;
}

Result<int64_t> parse_max_image_pixels(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 1)
    return make_error("--max-image-pixels: '", text, "' is not a positive integer");
  return v;
}

Status check_reasoning_effort(const std::string& effort) {
  for (const char* e : {"none", "minimal", "low", "medium", "high", "xhigh", "max"})
    if (effort == e) return {};
  return make_error("--default-reasoning-effort: '", effort,
                    "' is not one of none, minimal, low, medium, high, xhigh, max");
}

Result<std::chrono::milliseconds> parse_duration(const std::string& text, const char* flag) {
  const std::string bad = str_cat(flag, ": '", text,
                                  "' is not a duration (seconds, or a number with an s, m or h suffix, > 0)");
  if (text.empty()) return make_error(bad);
  std::string num = text;
  double mult = 1;
  char last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  if (last == 's' || last == 'm' || last == 'h') {
    mult = last == 's' ? 1 : last == 'm' ? 60 : 3600;
    num.pop_back();
  }
  double v = 0;
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || end != num.data() + num.size() || !std::isfinite(v) || v <= 0)
    return make_error(bad);
  const double ms = v * mult * 1000.0;
  // The deadline is arrival + this on a nanosecond clock (64 bits, ~292 years): cap well below it.
  if (!std::isfinite(ms) || ms > 1e12) return make_error(bad, " (too long: at most 1e9 s)");
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(ms)));
}

Result<std::optional<std::chrono::milliseconds>> parse_idle_release(const std::string& text) {
  if (lower(text) == "off") return std::optional<std::chrono::milliseconds>();
  auto d = parse_duration(text, "--idle-release");
  if (!d.ok()) return make_error(d.error_message(), " or off");
  return std::optional<std::chrono::milliseconds>(*d);
}

Result<std::optional<uint64_t>> parse_max_memory(const std::string& text) {
  if (lower(text) == "auto") return std::optional<uint64_t>();
  auto v = parse_size_bytes(text);
  if (!v.ok()) return make_error("--max-memory: ", v.error_message());
  if (*v == 0) return make_error("--max-memory: 0 is not allowed (pass a positive SIZE or auto)");
  return std::optional<uint64_t>(*v);
}

Result<std::optional<int64_t>> parse_max_context(const std::string& text) {
  if (lower(text) == "auto") return std::optional<int64_t>();
  auto v = parse_token_count(text);
  if (!v.ok()) return make_error("--max-context: ", v.error_message());
  if (*v < 1 || *v > static_cast<uint64_t>(kMaxContextTokens))
    return make_error("--max-context: ", text, " is outside 1..", kMaxContextTokens, " tokens (K = 1024)");
  return std::optional<int64_t>(static_cast<int64_t>(*v));
}

Result<std::optional<uint64_t>> parse_max_cache_disk(const std::string& text) {
  if (lower(text) == "auto") return std::optional<uint64_t>();
  auto v = parse_size_bytes(text);
  if (!v.ok()) return make_error("--max-cache-disk: ", v.error_message());
  return std::optional<uint64_t>(*v);
}

Result<std::optional<uint64_t>> parse_max_request_size(const std::string& text) {
  if (lower(text) == "auto") return std::optional<uint64_t>();
  auto v = parse_size_bytes(text);
  if (!v.ok()) return make_error("--max-request-size: ", v.error_message());
  if (*v == 0) return make_error("--max-request-size: 0 is not allowed");
  return std::optional<uint64_t>(*v);
}

uint64_t auto_max_request_bytes(int64_t context_tokens) {
  const uint64_t tokens = static_cast<uint64_t>(std::max<int64_t>(context_tokens, 0));
  const uint64_t by_context =
      tokens > kAutoRequestBytesMax / kAutoRequestBytesPerToken ? kAutoRequestBytesMax : tokens * kAutoRequestBytesPerToken;
  return std::clamp(by_context, kAutoRequestBytesMin, kAutoRequestBytesMax);
}

std::string auto_max_request_rule() {
  return str_cat("auto: ", kAutoRequestBytesPerToken, " bytes per context token, ", kAutoRequestBytesMin >> 20, "M..",
                 kAutoRequestBytesMax >> 20, "M");
}

Status check_cache_flags(const std::optional<uint64_t>& max_cache_disk, bool persistent_cache, bool cache_dir_given) {
  if (persistent_cache && max_cache_disk && *max_cache_disk == 0)
    return make_error("--persistent-cache needs --max-cache-disk (a nonzero SSD quota)");
  if (cache_dir_given && !persistent_cache) return make_error("--cache-dir needs --persistent-cache");
  return {};
}

Result<KvFormat> parse_kv_format(const std::string& text) {
  if (text == "int8") return KvFormat::kInt8;
  if (text == "bf16") return KvFormat::kBF16;
  if (text == "f32") return KvFormat::kF32;
  return make_error("--kv-format: '", text, "' is not one of int8, bf16 (f32 for debugging)");
}

}  // namespace splash::app
