#include "hub/hub_settings.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace splash::hub {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

bool truthy(const std::string& v) {
  std::string s;
  for (char c : trim(v)) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

}  // namespace

HubSettings settings_from_environment(bool offline_flag) {
  HubSettings s;
  if (std::string e = trim(env("HF_ENDPOINT")); !e.empty()) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    s.endpoint = e;
  }
  const std::string home = env("HOME");
  const std::string xdg = env("XDG_CACHE_HOME");
  std::string hf_home = env("HF_HOME");
  if (hf_home.empty()) hf_home = (xdg.empty() ? home + "/.cache" : xdg) + "/huggingface";
  s.cache_dir = env("HF_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = env("HUGGINGFACE_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = hf_home + "/hub";
  s.token = trim(env("HF_TOKEN"));
  if (s.token.empty()) {
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) path = hf_home + "/token";
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      s.token = trim(ss.str());
    }
  }
  s.offline = offline_flag || truthy(env("HF_HUB_OFFLINE"));
  s.progress_tty = isatty(STDERR_FILENO) == 1;
  return s;
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3))
    text.replace(pos, secret.size(), "***");
  return text;
}

}  // namespace splash::hub
