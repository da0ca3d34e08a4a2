#include "core/sizes.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace splash {

namespace {

// Splits "1.5G" into a number and an upper-cased suffix; rejects anything else.
Result<std::pair<double, std::string>> split_number(const std::string& text, const char* what) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num = text.substr(0, i);
  std::string suffix;
  for (size_t j = i; j < text.size(); ++j) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[j])));
  if (num.empty() || num == "." || num.find('.') != num.rfind('.'))
    return make_error("invalid ", what, " '", text, "': expected a number with an optional suffix");
  return std::make_pair(std::stod(num), suffix);
}

}  // namespace

Result<uint64_t> parse_size_bytes(const std::string& text) {
  SPLASH_TRY(auto parts, split_number(text, "size"));
  auto [value, suffix] = parts;
  if (suffix.size() >= 2 && suffix.substr(suffix.size() - 2) == "IB") suffix.resize(suffix.size() - 2);
  else if (suffix.size() >= 2 && suffix.back() == 'B') suffix.pop_back();
  double mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K") mult = 1024.0;
  else if (suffix == "M") mult = 1024.0 * 1024;
  else if (suffix == "G") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else return make_error("invalid size '", text, "': unknown suffix (use K, M, G or T)");
  if (suffix.empty() && text.find('.') != std::string::npos)
    return make_error("invalid size '", text, "': a byte count must be a whole number");
  double bytes = value * mult;
  if (bytes > 1.8e19) return make_error("invalid size '", text, "': too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<uint64_t> parse_token_count(const std::string& text) {
  SPLASH_TRY(auto parts, split_number(text, "token count"));
  auto [value, suffix] = parts;
  if (text.find('.') != std::string::npos)
    return make_error("invalid token count '", text, "': must be a whole number");
  if (suffix == "K") value *= 1024;
  else if (!suffix.empty()) return make_error("invalid token count '", text, "': unknown suffix (use K)");
  if (value > 1e15) return make_error("invalid token count '", text, "': too large");
  return static_cast<uint64_t>(value);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace splash
