#include "model_test_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace splash::model_test {

TempDir::TempDir(const std::string& tag) {
  path_ = (std::filesystem::temp_directory_path() / ("splash_model_" + tag + "_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool have_numpy_reference() {
  if (!std::filesystem::exists("/usr/bin/python3")) return false;
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

bool unit_only() { return std::getenv("SPLASH_MODEL_UNIT_ONLY") != nullptr; }

bool run_reference(const std::string& jobs_file) {
  const std::string cmd = std::string("/usr/bin/python3 ") + SPLASH_SOURCE_DIR + "/tests/unit/model/ref_logits.py " +
                          jobs_file;
  return std::system(cmd.c_str()) == 0;
}

std::vector<float> read_npy_f32(const std::string& path, int64_t& rows, int64_t& cols) {
  rows = cols = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) return {};
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t{b[3]} << 24);
  }
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (!f || header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    return {};
  auto lp = header.find("'shape': (");
  if (lp == std::string::npos) return {};
  std::istringstream shape(header.substr(lp + 10));
  char comma = 0;
  shape >> rows >> comma >> cols;
  if (rows <= 0 || cols <= 0) return {};
  std::vector<float> v(static_cast<size_t>(rows * cols));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) return {};
  return v;
}

double rel_max_err(const float* a, const float* b, int64_t n) {
  double max_diff = 0.0, max_ref = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
    max_ref = std::max(max_ref, std::fabs(double{b[i]}));
  }
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

int argmax(const float* x, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = static_cast<int>(i);
  return best;
}

std::vector<float> prefill_all(const Model& model, KvPagePool& kv, ThreadPool& threads,
                               const std::vector<int32_t>& tokens, int64_t chunk) {
  SequenceState seq;
  SequenceRun run{&seq, tokens, LogitRows::kAll};
  ForwardOptions opt;
  opt.chunk_tokens = chunk;
  auto out = model.forward({&run, 1}, kv, threads, opt);
  release_sequence(kv, seq);
  EXPECT_TRUE(out.ok()) << out.error_message();
  if (!out.ok()) return {};
  return std::move(out->logits);
}

std::vector<float> decode_all(const Model& model, KvPagePool& kv, ThreadPool& threads,
                              const std::vector<int32_t>& tokens) {
  SequenceState seq;
  std::vector<float> all;
  for (int32_t t : tokens) {
    SequenceRun run{&seq, {&t, 1}, LogitRows::kLast};
    auto out = model.forward({&run, 1}, kv, threads);
    EXPECT_TRUE(out.ok()) << out.error_message();
    if (!out.ok()) break;
    all.insert(all.end(), out->logits.begin(), out->logits.end());
  }
  release_sequence(kv, seq);
  return all;
}

std::string csv(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  return os.str();
}

std::vector<int32_t> read_ids_file(const std::string& path) {
  std::ifstream f(path);
  std::vector<int32_t> ids;
  std::string line;
  while (std::getline(f, line)) {
    line = line.substr(0, line.find('#'));
    for (char& ch : line)
      if (ch == ',') ch = ' ';
    std::istringstream is(line);
    int32_t v;
    while (is >> v) ids.push_back(v);
  }
  return ids;
}

}  // namespace splash::model_test
