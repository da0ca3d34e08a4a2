// Helpers shared by the model tests: temp dirs, test-model files, the numpy reference, .npy files
// and logit comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/kv_pages.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace splash::model_test {

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// True when the numpy reference can run here (Debian's /usr/bin/python3 with numpy).
bool have_numpy_reference();
// Whether ctest asked for the fast unit subset only (SPLASH_MODEL_UNIT_ONLY set on the `model` test).
bool unit_only();

// Runs tests/unit/model/ref_logits.py over `jobs` ("model tokens_csv out.npy" lines).
bool run_reference(const std::string& jobs_file);

// Reads a float32 2-D .npy file (as numpy writes it). Empty on any error; `rows`/`cols` set.
std::vector<float> read_npy_f32(const std::string& path, int64_t& rows, int64_t& cols);

// max |a - b| / max |b| over n values.
double rel_max_err(const float* a, const float* b, int64_t n);

int argmax(const float* x, int64_t n);

// Runs tokens through `model` in one fresh sequence and returns all-row logits [n, n_vocab].
std::vector<float> prefill_all(const Model& model, KvPagePool& kv, ThreadPool& threads,
                               const std::vector<int32_t>& tokens, int64_t chunk = 0);
// Token by token (one decode step each), returns [n, n_vocab].
std::vector<float> decode_all(const Model& model, KvPagePool& kv, ThreadPool& threads,
                              const std::vector<int32_t>& tokens);

std::string csv(const std::vector<int32_t>& ids);
std::vector<int32_t> read_ids_file(const std::string& path);

}  // namespace splash::model_test
