// Where the Hub is and how to reach it: the settings every hub/ function takes. Read once at the
// edge (the CLI) from the environment by settings_from_environment(); nothing below reads it again.
#pragma once

#include <string>

namespace splash::hub {

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT; no trailing '/'
  std::string cache_dir;      // HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  std::string token;          // HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token; never printed
  bool offline = false;       // --offline or HF_HUB_OFFLINE=1: only what is cached
  std::string revision = "main";  // --revision: branch, tag or commit
  bool progress_tty = false;  // stderr is a terminal: one redrawn progress line, else plain lines
  long connect_timeout_s = 5;   // a Hub that does not answer in time counts as unreachable
  long request_timeout_s = 15;  // whole metadata requests (file list, HEAD, header probes)
  long stall_timeout_s = 60;    // a download receiving < 1 KiB/s for this long is retried
  int download_attempts = 5;    // per file; each attempt resumes where the last stopped
  bool check_model = true;      // identify config.json / the GGUF header (off for DFlash drafts,
                                // whose config the speculative-decoding module checks)
};

// HF_ENDPOINT, HF_HUB_CACHE, HF_HOME, HF_TOKEN, HF_TOKEN_PATH, HF_HUB_OFFLINE and whether stderr is a
// terminal. `offline_flag` is --offline.
HubSettings settings_from_environment(bool offline_flag);

// Removes every occurrence of `secret` from `text` ("***" instead); a no-op for an empty secret.
std::string redact(std::string text, const std::string& secret);

}  // namespace splash::hub
