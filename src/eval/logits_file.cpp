#include "eval/logits_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <xxhash.h>

#include "core/le_bytes.h"

namespace splash::eval {

namespace {

constexpr char kMagic[4] = {'S', 'P', 'L', 'G'};
constexpr char kLlamaMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr size_t kHeaderBytes = 32;
constexpr uint32_t kFlagBosReplaced = 1;

// uint16 entries per row: scale and min (two f32 = four uint16), then the codes padded to even.
int64_t row_entries(int64_t n_vocab) { return 4 + 2 * ((n_vocab + 1) / 2); }

}  // namespace

// --- writer

struct LogitsWriter::State {
  std::string path, tmp;
  std::FILE* f = nullptr;
  XXH3_state_t* hash = nullptr;
  int64_t n_vocab = 0;
  int64_t rows_expected = 0, rows_written = 0;
  std::vector<uint16_t> row;

  ~State() {
    if (f != nullptr) {
      std::fclose(f);
      ::unlink(tmp.c_str());
    }
    if (hash != nullptr) XXH3_freeState(hash);
  }
  Status write(const void* data, size_t n) {
    if (std::fwrite(data, 1, n, f) != n) return make_error(tmp, ": write failed: ", std::strerror(errno));
    XXH3_64bits_update(hash, data, n);
    return {};
  }
};

LogitsWriter::LogitsWriter(std::unique_ptr<State> s) : s_(std::move(s)) {}
LogitsWriter::~LogitsWriter() = default;
LogitsWriter::LogitsWriter(LogitsWriter&&) noexcept = default;
LogitsWriter& LogitsWriter::operator=(LogitsWriter&&) noexcept = default;

Result<LogitsWriter> LogitsWriter::create(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                                          bool bos_replaced, std::span<const int32_t> tokens) {
  SPLASH_CHECK(n_ctx >= 2 && n_vocab >= 1 && n_chunk >= 1);
  SPLASH_CHECK(static_cast<int64_t>(tokens.size()) == n_ctx * n_chunk);
  auto s = std::make_unique<State>();
  s->path = path;
  s->tmp = path + ".tmp-" + std::to_string(getpid());
  s->f = std::fopen(s->tmp.c_str(), "wb");
  if (s->f == nullptr) return make_error(s->tmp, ": cannot create: ", std::strerror(errno));
  s->hash = XXH3_createState();
  SPLASH_CHECK(s->hash != nullptr);
  XXH3_64bits_reset(s->hash);
  s->n_vocab = n_vocab;
  s->rows_expected = n_chunk * scored_per_chunk(n_ctx);
  s->row.resize(static_cast<size_t>(row_entries(n_vocab)), 0);

  uint8_t h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, 4);
  put_le<uint16_t>(h + 4, kLogitsFormat);
  put_le<uint16_t>(h + 6, kLogitsRowQuant16);
  put_le<uint32_t>(h + 8, static_cast<uint32_t>(n_ctx));
  put_le<uint32_t>(h + 12, static_cast<uint32_t>(n_vocab));
  put_le<uint32_t>(h + 16, static_cast<uint32_t>(n_chunk));
  put_le<uint32_t>(h + 20, bos_replaced ? kFlagBosReplaced : 0);
  put_le<uint64_t>(h + 24, XXH3_64bits(h, 24));
  SPLASH_TRY_STATUS(s->write(h, sizeof h));
  SPLASH_TRY_STATUS(s->write(tokens.data(), tokens.size_bytes()));
  return LogitsWriter(std::move(s));
}

Status LogitsWriter::add_row(std::span<const float> logits) {
  SPLASH_CHECK(static_cast<int64_t>(logits.size()) == s_->n_vocab);
  SPLASH_CHECK(s_->rows_written < s_->rows_expected);
  std::span<uint16_t> codes(s_->row.data() + 4, logits.size());
  const QuantizedHeader q = quantize_log_probs(logits, codes);
  std::memcpy(s_->row.data(), &q.scale, 4);
  std::memcpy(s_->row.data() + 2, &q.min_log_prob, 4);
  ++s_->rows_written;
  return s_->write(s_->row.data(), s_->row.size() * sizeof(uint16_t));
}

Status LogitsWriter::finish() {
  SPLASH_CHECK(s_->rows_written == s_->rows_expected);
  uint8_t sum[8];
  put_le<uint64_t>(sum, XXH3_64bits_digest(s_->hash));
  if (std::fwrite(sum, 1, 8, s_->f) != 8) return make_error(s_->tmp, ": write failed: ", std::strerror(errno));
  const int rc = std::fclose(s_->f);
  s_->f = nullptr;
  if (rc != 0) {
    ::unlink(s_->tmp.c_str());
    return make_error(s_->tmp, ": close failed: ", std::strerror(errno));
  }
  if (std::rename(s_->tmp.c_str(), s_->path.c_str()) != 0) {
    const int e = errno;
    ::unlink(s_->tmp.c_str());
    return make_error(s_->path, ": cannot rename into place: ", std::strerror(e));
  }
  return {};
}

// --- reader

Result<LogitsBase> LogitsBase::open(const std::string& path) {
  SPLASH_TRY(MappedFile file, MappedFile::open(path));
  const uint8_t* p = file.data();
  const uint64_t size = file.size();
  LogitsBase b;
  uint64_t tokens_at = 0;
  if (size >= 8 && std::memcmp(p, kLlamaMagic, 8) == 0) {
    if (size < 20) return make_error(path, ": truncated llama.cpp logits header");
    b.llama_cpp_ = true;
    b.n_ctx_ = get_le<uint32_t>(p + 8);
    b.n_vocab_ = get_le<int32_t>(p + 12);
    b.n_chunk_ = get_le<int32_t>(p + 16);
    tokens_at = 20;
  } else if (size >= 4 && std::memcmp(p, kMagic, 4) == 0) {
    if (size < kHeaderBytes + 8) return make_error(path, ": truncated header");
    if (get_le<uint64_t>(p + 24) != XXH3_64bits(p, 24)) return make_error(path, ": header checksum mismatch");
    const uint16_t version = get_le<uint16_t>(p + 4);
    if (version != kLogitsFormat)
      return make_error(path, ": logits format version ", version, " is not supported (this build reads ",
                        kLogitsFormat, ")");
    const uint16_t encoding = get_le<uint16_t>(p + 6);
    if (encoding != kLogitsRowQuant16) return make_error(path, ": unknown row encoding ", encoding);
    b.n_ctx_ = get_le<uint32_t>(p + 8);
    b.n_vocab_ = get_le<uint32_t>(p + 12);
    b.n_chunk_ = get_le<uint32_t>(p + 16);
    tokens_at = kHeaderBytes;
  } else {
    return make_error(path, ": not a logits file (neither Splash's \"SPLG\" nor llama.cpp's \"_logits_\" magic)");
  }
  if (b.n_ctx_ < 4 || b.n_vocab_ < 1 || b.n_chunk_ < 1)
    return make_error(path, ": bad header (n_ctx ", b.n_ctx_, ", n_vocab ", b.n_vocab_, ", n_chunk ", b.n_chunk_, ")");
  const uint64_t n_tokens = static_cast<uint64_t>(b.n_ctx_) * static_cast<uint64_t>(b.n_chunk_);
  const uint64_t rows_bytes = static_cast<uint64_t>(b.n_chunk_) * static_cast<uint64_t>(scored_per_chunk(b.n_ctx_)) *
                              static_cast<uint64_t>(row_entries(b.n_vocab_)) * 2;
  const uint64_t want = tokens_at + n_tokens * 4 + rows_bytes + (b.llama_cpp_ ? 0 : 8);
  if (size != want)
    return make_error(path, ": ", size, " bytes, but its header (n_ctx ", b.n_ctx_, ", n_vocab ", b.n_vocab_,
                      ", n_chunk ", b.n_chunk_, ") needs ", want, b.llama_cpp_ ? "" : " (truncated or damaged)");
  if (!b.llama_cpp_ && get_le<uint64_t>(p + size - 8) != XXH3_64bits(p, size - 8))
    return make_error(path, ": checksum mismatch (the file is damaged)");
  b.tokens_ = {reinterpret_cast<const int32_t*>(p + tokens_at), static_cast<size_t>(n_tokens)};
  for (int32_t t : b.tokens_)
    if (t < 0 || t >= b.n_vocab_) return make_error(path, ": token id ", t, " outside the vocabulary of ", b.n_vocab_);
  b.rows_ = p + tokens_at + n_tokens * 4;
  b.file_ = std::move(file);
  return b;
}

QuantizedLogProbs LogitsBase::row(int64_t chunk, int64_t i) const {
  const int64_t per_chunk = scored_per_chunk(n_ctx_);
  SPLASH_CHECK(chunk >= 0 && chunk < n_chunk_ && i >= 0 && i < per_chunk);
  const uint8_t* r =
      rows_ + static_cast<uint64_t>(chunk * per_chunk + i) * static_cast<uint64_t>(row_entries(n_vocab_)) * 2;
  QuantizedLogProbs q;
  q.scale = get_le<float>(r);
  q.min_log_prob = get_le<float>(r + 4);
  q.codes = {reinterpret_cast<const uint16_t*>(r + 8), static_cast<size_t>(n_vocab_)};
  return q;
}

}  // namespace splash::eval
