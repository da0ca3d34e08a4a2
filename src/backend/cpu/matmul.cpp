#include "backend/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_repack.h"
#include "backend/cpu/prefetch_tuner.h"
#include "core/half.h"

namespace splash {

using cpu::KernelArgs;
using cpu::QuantizedActs;
using cpu::TileKernel;

namespace {

std::string label(std::string_view name) {
  return name.empty() ? std::string("weight matrix") : str_cat("tensor '", name, "'");
}

// The best kernel at or below `level` (a level may lack a kernel for some format).
TileKernel pick_kernel(WeightFormat f, IsaLevel level) {
  TileKernel k = nullptr;
  if (is_x8_format(f)) {
    // x8 layouts are only built at AVX2 and above, the 16-row float ones at AVX-512 (pack_parts,
    // pack_mlx_weights).
    k = level >= IsaLevel::kAvx512 ? cpu::avx512_x8_kernel(f) : cpu::avx2_x8_kernel(f);
    SPLASH_CHECK(k != nullptr);
    return k;
  }
  if (level >= IsaLevel::kAvx512) k = cpu::avx512_kernel(f);
  if (!k && level >= IsaLevel::kAvx2) k = cpu::avx2_kernel(f);
  if (!k) k = cpu::scalar_kernel(f);
  SPLASH_CHECK(k != nullptr);
  return k;
}

float load_scale(const void* base, int64_t idx, DType t) {
  const auto* p = static_cast<const uint8_t*>(base);
  if (t == DType::kF32) {
    float v;
    std::memcpy(&v, p + 4 * idx, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * idx, 2);
  return t == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

}  // namespace

bool is_float_format(WeightFormat f) {
  return f == WeightFormat::kF32 || f == WeightFormat::kF16 || f == WeightFormat::kBF16 || f == WeightFormat::kF16x16 ||
         f == WeightFormat::kBF16x16;
}

bool is_x8_format(WeightFormat f) {
  switch (f) {
    case WeightFormat::kQ4_0x8:
    case WeightFormat::kQ8_0x8:
    case WeightFormat::kMlx4x8:
    case WeightFormat::kMlx8x8:
    case WeightFormat::kF16x16:
    case WeightFormat::kBF16x16:
    case WeightFormat::kQ4_Kx8:
    case WeightFormat::kQ5_Kx8:
    case WeightFormat::kQ6_Kx8: return true;
    default: return false;
  }
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32: return "F32";
    case WeightFormat::kF16: return "F16";
    case WeightFormat::kBF16: return "BF16";
    case WeightFormat::kQ8_0: return "Q8_0";
    case WeightFormat::kQ4_0: return "Q4_0";
    case WeightFormat::kQ4_K: return "Q4_K";
    case WeightFormat::kQ5_K: return "Q5_K";
    case WeightFormat::kQ6_K: return "Q6_K";
    case WeightFormat::kMlx4: return "MLX4";
    case WeightFormat::kMlx8: return "MLX8";
    case WeightFormat::kQ4_0x8: return "Q4_0x8";
    case WeightFormat::kQ8_0x8: return "Q8_0x8";
    case WeightFormat::kMlx4x8: return "MLX4x8";
    case WeightFormat::kMlx8x8: return "MLX8x8";
    case WeightFormat::kF16x16: return "F16x16";
    case WeightFormat::kBF16x16: return "BF16x16";
    case WeightFormat::kQ4_Kx8: return "Q4_Kx8";
    case WeightFormat::kQ5_Kx8: return "Q5_Kx8";
    case WeightFormat::kQ6_Kx8: return "Q6_Kx8";
  }
  return "?";
}

Result<PackedWeights> pack_weights(DType type, const void* data, int64_t rows, int64_t cols, IsaLevel level,
                                   std::string_view name) {
  const WeightRows part{data, rows};
  return PackedWeights::pack_parts(type, {&part, 1}, cols, level, name, false);
}

Result<PackedWeights> pack_stacked_weights(DType type, std::span<const WeightRows> parts, int64_t cols,
                                           IsaLevel level, std::string_view name) {
  if (parts.empty()) return make_error(label(name), ": no matrices to stack");
  return PackedWeights::pack_parts(type, parts, cols, level, name, true);
}

Result<PackedWeights> PackedWeights::pack_parts(DType type, std::span<const WeightRows> parts, int64_t cols,
                                                IsaLevel level, std::string_view name, bool own) {
  WeightFormat f;
  switch (type) {
    case DType::kF32: f = WeightFormat::kF32; break;
    case DType::kF16: f = WeightFormat::kF16; break;
    case DType::kBF16: f = WeightFormat::kBF16; break;
    case DType::kQ8_0: f = WeightFormat::kQ8_0; break;
    case DType::kQ4_0: f = WeightFormat::kQ4_0; break;
    case DType::kQ4_K: f = WeightFormat::kQ4_K; break;
    case DType::kQ5_K: f = WeightFormat::kQ5_K; break;
    case DType::kQ6_K: f = WeightFormat::kQ6_K; break;
    default:
      return make_error(label(name), ": matmul does not support type ", dtype_name(type),
                        " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
  }
  int64_t rows = 0;
  for (const WeightRows& p : parts) {
    if (p.rows <= 0 || cols <= 0 || p.rows > INT64_MAX - rows)
      return make_error(label(name), ": matrix shape [", p.rows, ", ", cols, "] must be positive");
    if (p.data == nullptr) return make_error(label(name), ": no data");
    rows += p.rows;
  }
  const DTypeTraits& tr = dtype_traits(type);
  if (cols % tr.block_elems != 0)
    return make_error(label(name), ": ", tr.name, " needs the row length (", cols, ") to be a multiple of ",
                      tr.block_elems);
  const auto row_bytes = dtype_bytes(type, static_cast<uint64_t>(cols));
  if (!row_bytes || *row_bytes > static_cast<uint64_t>(INT64_MAX / rows))
    return make_error(label(name), ": matrix shape [", rows, ", ", cols, "] overflows");

  PackedWeights w;
  w.format_ = f;
  w.rows_ = rows;
  w.cols_ = cols;
  w.isa_ = clamp_isa_level(level);
  w.data_ = static_cast<const uint8_t*>(parts[0].data);
  w.row_bytes_ = static_cast<int64_t>(*row_bytes);
  if ((f == WeightFormat::kF16 || f == WeightFormat::kBF16) && w.isa_ >= IsaLevel::kAvx512) {
    // 16 rows side by side per column (matmul_repack.h), straight from each part.
    w.format_ = f == WeightFormat::kF16 ? WeightFormat::kF16x16 : WeightFormat::kBF16x16;
    w.group_bytes_ = cols * 2 * cpu::kF16x16Rows;
    const int64_t groups = (rows + cpu::kF16x16Rows - 1) / cpu::kF16x16Rows;
    if (groups > INT64_MAX / w.group_bytes_)
      return make_error(label(name), ": matrix shape [", rows, ", ", cols, "] overflows");
    w.storage_ = ArenaBuffer::allocate(static_cast<size_t>(groups * w.group_bytes_));  // zeroed: padding rows
    int64_t row0 = 0;
    for (const WeightRows& p : parts) {
      cpu::repack_f16x16_rows(static_cast<const uint8_t*>(p.data), p.rows, cols, row0, w.storage_.data());
      row0 += p.rows;
    }
    w.data_ = w.storage_.data();
    return w;
  }
  const WeightFormat x8 = cpu::x8_format_of(f);
  if (x8 != f && w.isa_ >= IsaLevel::kAvx2) {
    // Repacked once here, straight from each part, so the kernels read 8 rows per load; the
    // sources are not read afterwards.
    w.format_ = x8;
    w.group_bytes_ = cols / 32 * cpu::x8_block_bytes(x8);
    const int64_t groups = (rows + cpu::kX8Rows - 1) / cpu::kX8Rows;
    if (groups > INT64_MAX / w.group_bytes_)
      return make_error(label(name), ": matrix shape [", rows, ", ", cols, "] overflows");
    w.storage_ = ArenaBuffer::allocate(static_cast<size_t>(groups * w.group_bytes_));
    int64_t row0 = 0;
    for (const WeightRows& p : parts) {
      cpu::repack_x8_rows(x8, static_cast<const uint8_t*>(p.data), p.rows, cols, row0, w.storage_.data());
      row0 += p.rows;
    }
    w.data_ = w.storage_.data();
  } else if (own) {
    w.storage_ = ArenaBuffer::allocate(static_cast<size_t>(rows * w.row_bytes_));
    uint8_t* dst = w.storage_.data();
    for (const WeightRows& p : parts) {
      std::memcpy(dst, p.data, static_cast<size_t>(p.rows * w.row_bytes_));
      dst += p.rows * w.row_bytes_;
    }
    w.data_ = w.storage_.data();
  }
  return w;
}

Result<PackedWeights> pack_mlx_weights(const MlxAffineView& v, int64_t rows, int64_t cols, IsaLevel level,
                                       std::string_view name) {
  if (v.bits != 4 && v.bits != 8)
    return make_error(label(name), ": MLX affine bits = ", v.bits, " not supported (4 or 8)");
  if (v.group_size <= 0 || v.group_size % 32 != 0 || v.group_size > 1024)
    return make_error(label(name), ": MLX group_size = ", v.group_size, " must be a multiple of 32 (<= 1024)");
  if (rows <= 0 || cols <= 0)
    return make_error(label(name), ": matrix shape [", rows, ", ", cols, "] must be positive");
  if (cols % v.group_size != 0)
    return make_error(label(name), ": row length ", cols, " is not a multiple of group_size ", v.group_size);
  if (v.scale_dtype != DType::kF16 && v.scale_dtype != DType::kBF16 && v.scale_dtype != DType::kF32)
    return make_error(label(name), ": MLX scales/biases type ", dtype_name(v.scale_dtype),
                      " not supported (F16, BF16, F32)");
  if (!v.codes || !v.scales || !v.biases) return make_error(label(name), ": missing codes, scales or biases");

  const int64_t groups = cols / v.group_size;
  const int64_t group_bytes = 8 + v.group_size * v.bits / 8;
  if (groups > INT64_MAX / group_bytes / rows)
    return make_error(label(name), ": matrix shape [", rows, ", ", cols, "] overflows");
  PackedWeights w;
  w.format_ = v.bits == 4 ? WeightFormat::kMlx4 : WeightFormat::kMlx8;
  w.rows_ = rows;
  w.cols_ = cols;
  w.isa_ = clamp_isa_level(level);
  w.group_size_ = v.group_size;
  w.group_bytes_ = group_bytes;
  w.row_bytes_ = groups * group_bytes;
  const int64_t words_per_row = cols * v.bits / 32;
  const auto* code_bytes = reinterpret_cast<const uint8_t*>(v.codes);
  if (w.isa_ >= IsaLevel::kAvx2) {
    // 8 rows interleaved (matmul_repack.h), so the kernels read 8 rows per load as for Q4_0 / Q8_0.
    // The padding rows of the last group stay zero (scale, bias and codes 0 contribute exactly 0;
    // for 8 bits the stored 0 is code 128, still times scale 0 and bias 0). Scales and biases stay
    // in the file's type (exact; f16 / bf16 halve their bytes against f32).
    const bool eight = v.bits == 8;
    w.format_ = eight ? WeightFormat::kMlx8x8 : WeightFormat::kMlx4x8;
    w.scale_dtype_ = v.scale_dtype;
    const int sb = v.scale_dtype == DType::kF32 ? 4 : 2;
    const int64_t gb = eight ? cpu::mlx8x8_group_bytes(v.group_size, sb) : cpu::mlx4x8_group_bytes(v.group_size, sb);
    w.group_bytes_ = groups * gb;
    const int64_t groups8 = (rows + cpu::kX8Rows - 1) / cpu::kX8Rows;
    w.storage_ = ArenaBuffer::allocate(static_cast<size_t>(groups8 * w.group_bytes_));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = code_bytes + r * words_per_row * 4;
      auto code_at = [&](int64_t e) { return (src[e / 2] >> ((e % 2) * 4)) & 0xF; };
      const int lane = static_cast<int>(r % cpu::kX8Rows);
      for (int64_t g = 0; g < groups; ++g) {
        uint8_t* dst = w.storage_.data() + (r / cpu::kX8Rows) * w.group_bytes_ + g * gb;
        const int64_t idx = r * groups + g;
        std::memcpy(dst + sb * lane, static_cast<const uint8_t*>(v.scales) + sb * idx, static_cast<size_t>(sb));
        std::memcpy(dst + 8 * sb + sb * lane, static_cast<const uint8_t*>(v.biases) + sb * idx,
                    static_cast<size_t>(sb));
        for (int b = 0; b < v.group_size / 32; ++b) {
          const int64_t e0 = g * v.group_size + 32 * b;
          if (eight) {  // value k: step k / 4, byte k % 4 of the lane, as code - 128
            uint8_t* codes = dst + 16 * sb + 256 * b;
            for (int k = 0; k < 32; ++k) codes[32 * (k / 4) + 4 * lane + k % 4] = static_cast<uint8_t>(src[e0 + k] ^ 0x80);
            continue;
          }
          uint8_t* codes = dst + 16 * sb + 128 * b;
          for (int k = 0; k < 16; ++k)  // byte k: values k and k + 16; step k / 4, byte k % 4 of the lane
            codes[32 * (k / 4) + 4 * lane + k % 4] = static_cast<uint8_t>(code_at(e0 + k) | (code_at(e0 + k + 16) << 4));
        }
      }
    }
    w.data_ = w.storage_.data();
    return w;
  }
  w.storage_ = ArenaBuffer::allocate(static_cast<size_t>(rows * w.row_bytes_));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = code_bytes + r * words_per_row * 4;  // little-endian words = byte stream
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* dst = w.storage_.data() + r * w.row_bytes_ + g * group_bytes;
      float scale = load_scale(v.scales, r * groups + g, v.scale_dtype);
      float bias = load_scale(v.biases, r * groups + g, v.scale_dtype);
      const int64_t e0 = g * v.group_size;
      if (v.bits == 4) {
        // MLX packs element e in nibble e % 2 of byte e / 2; our blocks want element k and k + 16 of
        // each 32 in one byte, the layout the SIMD nibble unpack produces in order.
        for (int s = 0; s < v.group_size / 32; ++s)
          for (int k = 0; k < 16; ++k) {
            auto code_at = [&](int64_t e) { return (src[e / 2] >> ((e % 2) * 4)) & 0xF; };
            const int64_t e = e0 + 32 * s + k;
            dst[8 + 16 * s + k] = static_cast<uint8_t>(code_at(e) | (code_at(e + 16) << 4));
          }
      } else {
        // Codes 0..255 become int8 code - 128 so the int8 dot products cannot saturate; the bias
        // absorbs the shift.
        for (int k = 0; k < v.group_size; ++k) dst[8 + k] = static_cast<uint8_t>(src[e0 + k] ^ 0x80);
        bias += 128.0f * scale;
      }
      std::memcpy(dst, &scale, 4);
      std::memcpy(dst + 4, &bias, 4);
    }
  }
  w.data_ = w.storage_.data();
  return w;
}

void dequantize_packed_row(const PackedWeights& w, int64_t r, float* out) {
  SPLASH_CHECK(r >= 0 && r < w.rows());
  cpu::dequantize_row_scalar(w, r, out);
}

bool PackedWeights::uses_amx() const {
  const bool layout = format_ == WeightFormat::kQ4_0x8 || format_ == WeightFormat::kQ8_0x8 ||
                      format_ == WeightFormat::kMlx4x8 || format_ == WeightFormat::kMlx8x8;
  return amx_allowed_ && isa_ >= IsaLevel::kAvx512 && layout && amx_usable();
}

int64_t default_stream_prefetch_bytes(WeightFormat format) {
  if (cpu_features().vendor != CpuVendor::kIntel) return 0;
  switch (format) {
    case WeightFormat::kQ8_0x8:
    case WeightFormat::kQ4_0x8:
    case WeightFormat::kQ6_Kx8:
    case WeightFormat::kF16x16:
    case WeightFormat::kBF16x16:
      return 1024;
    default:
      return 2048;
  }
}

int default_decode_streams() { return cpu_features().vendor == CpuVendor::kIntel ? 2 : 1; }

namespace {

// The formats up to the last one declared (kQ6_Kx8); a format added after it has no tuner until
// this bound follows it (prefetch_tuner() returns nullptr for it instead of reading past the table).
constexpr int kFormats = static_cast<int>(WeightFormat::kQ6_Kx8) + 1;

// Each interleaved layout's tuner, where its default distance is not 0 (none on AMD: there the
// hardware prefetchers do better than any distance).
cpu::PrefetchTuner* prefetch_tuner(WeightFormat f) {
  if (static_cast<int>(f) >= kFormats) return nullptr;
  static const auto tuners = [] {
    std::array<std::unique_ptr<cpu::PrefetchTuner>, kFormats> t;
    for (int i = 0; i < kFormats; ++i) {
      const auto format = static_cast<WeightFormat>(i);
      if (is_x8_format(format) && default_stream_prefetch_bytes(format) > 0)
        t[static_cast<size_t>(i)] = std::make_unique<cpu::PrefetchTuner>(default_stream_prefetch_bytes(format));
    }
    return t;
  }();
  return tuners[static_cast<size_t>(f)].get();
}

}  // namespace

int64_t PackedWeights::stream_prefetch_bytes() const {
  if (stream_prefetch_bytes_ >= 0) return stream_prefetch_bytes_;
  const cpu::PrefetchTuner* tuner = prefetch_tuner(format_);
  return tuner != nullptr ? tuner->current() : default_stream_prefetch_bytes(format_);
}

bool PackedWeights::stream_prefetch_tuned() const {
  return stream_prefetch_bytes_ < 0 && prefetch_tuner(format_) != nullptr;
}

std::string decode_prefetch_summary() {
  std::string out;
  for (int i = 0; i < kFormats; ++i) {
    const auto format = static_cast<WeightFormat>(i);
    const cpu::PrefetchTuner* tuner = prefetch_tuner(format);
    if (tuner == nullptr || tuner->rounds() == 0) continue;
    if (!out.empty()) out += "; ";
    out += str_cat(weight_format_name(format), " ", tuner->current(), " B (", tuner->rounds(), " trials, ",
                   tuner->moves(), " moves)");
  }
  return out;
}

namespace {

// Decode (one to a few activation rows): the weight rows are split into one contiguous share per
// thread, each walked front to back in chunks of 64 rows; a thread done with its own share takes
// chunks from the back of the others'. So each thread reads one sequential stream per product and
// the threads' data only meet where a thief and an owner cross, while a slow or descheduled thread
// still gets its work taken over. The split before handed out tasks shrinking from a quarter of the
// matrix to 64 rows in turn, so its last half alternated 36 KB pieces between the threads; in a
// microbenchmark such pieces stream at half the rate of one run per thread. End to end (0.6B Q4_0,
// two threads) +3-10%, within this host's noise, and the same beside a busy-looping neighbour
// (docs/PERFORMANCE.md, "Decode without software prefetch, one share per thread"). `chunk_rows`: 64,
// or 256 where the kernel reads a chunk as two streams (PackedWeights::decode_streams; each stream
// then runs 16 groups: tg64 on the Intel host +1-3% over 64-row chunks, 128 in between).
// `prepare()` runs once per task, on the task's thread, before its first chunk.
template <class Prepare, class Run>
void decode_shares(int64_t rows, int64_t group_rows, int64_t chunk_rows, int threads, ThreadPool& pool,
                   Prepare&& prepare, Run&& run) {
  if (threads == 1) {
    prepare();
    run(0, rows);
    return;
  }
  const int64_t chunk = (chunk_rows + group_rows - 1) / group_rows * group_rows;  // chunks start on a group
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  SPLASH_CHECK(n_chunks < (int64_t{1} << 32));
  struct alignas(64) Share {
    std::atomic<uint64_t> range;  // low 32 bits: the next chunk from the front; high 32: the end
  };
  constexpr int kStackShares = 16;
  Share stack_shares[kStackShares];
  std::unique_ptr<Share[]> heap_shares;
  Share* shares = stack_shares;
  if (threads > kStackShares) {
    heap_shares = std::make_unique<Share[]>(static_cast<size_t>(threads));
    shares = heap_shares.get();
  }
  for (int t = 0; t < threads; ++t) {
    const auto f = static_cast<uint64_t>(n_chunks * t / threads);
    const auto e = static_cast<uint64_t>(n_chunks * (t + 1) / threads);
    shares[t].range.store(f | (e << 32), std::memory_order_relaxed);
  }
  // Takes one chunk from the front (the owner) or the back (a thief); -1 once the share is empty.
  auto claim = [](Share& sh, bool front) -> int64_t {
    uint64_t v = sh.range.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = v & 0xffffffffu, e = v >> 32;
      if (f >= e) return -1;
      const uint64_t next = front ? v + 1 : (f | ((e - 1) << 32));
      if (sh.range.compare_exchange_weak(v, next, std::memory_order_relaxed))
        return static_cast<int64_t>(front ? f : e - 1);
    }
  };
  auto run_chunk = [&](int64_t c) { run(c * chunk, std::min(rows, (c + 1) * chunk)); };
  // parallel_for's return orders every chunk's writes before the caller goes on.
  pool.parallel_for(threads, [&](int64_t t, int) {
    prepare();
    for (int64_t c; (c = claim(shares[t], true)) >= 0;) run_chunk(c);
    for (int k = 1; k < threads; ++k) {
      Share& other = shares[(t + k) % threads];
      for (int64_t c; (c = claim(other, false)) >= 0;) run_chunk(c);
    }
  });
}

// This thread's quantized activations: the caller's copy that every task reads, or in decode a
// task's own (matmul()). One buffer serves both: a call uses one of the two ways throughout.
QuantizedActs& thread_acts() {
  thread_local QuantizedActs acts;
  return acts;
}

// Sizes `qx` for n rows of `cols` values; it only grows.
void size_acts(QuantizedActs& qx, int64_t n, int64_t cols) {
  qx.n = n;
  qx.cols = cols;
  auto grow = [](auto& v, int64_t size) {
    if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
  };
  grow(qx.qs, n * cols);
  grow(qx.d, n * qx.blocks());
  grow(qx.dsum, n * qx.blocks());
  grow(qx.qsum, n * qx.blocks());
  grow(qx.qsum16, n * qx.blocks());
}

}  // namespace

void matmul(const PackedWeights& w, const float* x, float* y, int64_t n, ThreadPool& pool) {
  if (n <= 0) return;
  SPLASH_CHECK(w.data() != nullptr);
  const IsaLevel level = w.isa();
  const TileKernel kernel = pick_kernel(w.format(), level);
  const int threads = pool.size();

  // Decode (n <= 8) on several threads: every thread quantizes the activations into a buffer of its
  // own when its task starts (decode_shares' prepare) instead of reading one copy that the caller
  // wrote: the copy was a cross-core transfer per product, and at this Zen 4 host's upper bandwidth
  // level one-row decode read ~10% faster without it (docs/PERFORMANCE.md, "Decode activations
  // quantized per thread"). The quantization is deterministic, so every copy is the same bytes and
  // no result depends on which thread ran which rows.
  const bool quantized = !is_float_format(w.format());
  const bool local_acts = quantized && n <= 8 && threads > 1;
  auto quantize = level >= IsaLevel::kAvx2 ? cpu::quantize_acts_avx2 : cpu::quantize_acts_scalar;
  // Per thread, reused: a fresh 0.1-1 MB buffer per call cost an mmap, page faults and a zero fill
  // every time. Only this call's rows are read, so stale contents beyond them are harmless. (A named
  // reference: lambdas run on pool workers must see the caller's buffer, not their own.)
  QuantizedActs& qx = thread_acts();
  if (quantized && !local_acts) {
    size_acts(qx, n, w.cols());
    constexpr int64_t kRowsPerTask = 16;
    if (n < kRowsPerTask) {
      quantize(x, qx, 0, n);
    } else {
      pool.parallel_for((n + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t, int) {
        quantize(x, qx, t * kRowsPerTask, std::min(n, (t + 1) * kRowsPerTask));
      });
    }
  }

  const int64_t rows = w.rows();
  // One-row products of a tuned layout are timed for its tuner (prefetch_tuner.h); the rest run on
  // its current distance.
  cpu::PrefetchTuner* tuner = n == 1 && w.stream_prefetch_tuned() ? prefetch_tuner(w.format()) : nullptr;
  const cpu::PrefetchTuner::Ticket ticket = tuner != nullptr ? tuner->begin(w.packed_bytes()) : cpu::PrefetchTuner::Ticket{};
  const int64_t prefetch = tuner != nullptr ? ticket.bytes : w.stream_prefetch_bytes();
  const int streams = w.decode_streams();
  auto run_tile = [&](TileKernel k, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
    KernelArgs a;
    a.w = &w;
    a.x = x;
    a.qx = local_acts ? &thread_acts() : &qx;
    a.y = y;
    a.r0 = r0;
    a.r1 = r1;
    a.i0 = i0;
    a.i1 = i1;
    a.prefetch = prefetch;
    a.streams = streams;
    k(a);
  };
  if (n <= 8) {
    // Decode: all activation rows in every chunk (decode_shares).
    const int64_t chunk_rows = n == 1 && w.is_x8() && streams == 2 ? 256 : 64;
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = ticket.slot >= 0 ? Clock::now() : Clock::time_point{};
    auto prepare = [&] {
      if (!local_acts) return;
      QuantizedActs& own = thread_acts();
      size_acts(own, n, w.cols());
      quantize(x, own, 0, n);
    };
    decode_shares(rows, w.is_x8() ? w.group_rows() : 8, chunk_rows, threads, pool, prepare,
                  [&](int64_t r0, int64_t r1) { run_tile(kernel, r0, r1, 0, n); });
    if (ticket.slot >= 0)
      tuner->end(ticket, w.packed_bytes(), std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    return;
  }
  // Prefill: tasks of 32 weight rows x 64 activation rows, so the activation tile (64 x cols int8)
  // stays in L2 while consecutive tasks stream weight tiles past it. The AMX kernel builds its B
  // tiles once per task for all of the task's activation rows, so it takes 256 of them (0.6B Q4_0
  // pp512 +4% at 128, +2-7% more at 256, alternating runs; 256 x 3072 int8 still fits L2).
  const TileKernel prefill = n >= 16 && w.uses_amx() ? cpu::amx_x8_kernel(w.format()) : kernel;
  SPLASH_CHECK(prefill != nullptr);
  constexpr int64_t row_chunk = 32;
  const int64_t x_chunk = prefill == kernel ? 64 : 256;
  const int64_t n_row_tasks = (rows + row_chunk - 1) / row_chunk;
  const int64_t n_x_tasks = (n + x_chunk - 1) / x_chunk;
  pool.parallel_for(n_row_tasks * n_x_tasks, [&](int64_t t, int) {
    const int64_t xt = t / n_row_tasks, rt = t % n_row_tasks;
    const int64_t r0 = rt * row_chunk, i0 = xt * x_chunk;
    run_tile(prefill, r0, std::min(rows, r0 + row_chunk), i0, std::min(n, i0 + x_chunk));
  });
}

void matmul_rows(const PackedWeights& w, const float* x, float* y, int64_t n, int64_t r0, int64_t r1) {
  if (n <= 0 || r0 >= r1) return;
  SPLASH_CHECK(w.data() != nullptr);
  SPLASH_CHECK(n <= 8);
  SPLASH_CHECK(r0 >= 0 && r1 <= w.rows());
  const int64_t group = w.is_x8() ? w.group_rows() : 1;
  SPLASH_CHECK(r0 % group == 0 && (r1 % group == 0 || r1 == w.rows()));
  const TileKernel kernel = pick_kernel(w.format(), w.isa());
  QuantizedActs& qx = thread_acts();
  if (!is_float_format(w.format())) {
    size_acts(qx, n, w.cols());
    (w.isa() >= IsaLevel::kAvx2 ? cpu::quantize_acts_avx2 : cpu::quantize_acts_scalar)(x, qx, 0, n);
  }
  KernelArgs a;
  a.w = &w;
  a.x = x;
  a.qx = &qx;
  a.y = y;
  a.r0 = r0;
  a.r1 = r1;
  a.i0 = 0;
  a.i1 = n;
  a.prefetch = w.stream_prefetch_bytes();
  a.streams = w.decode_streams();
  kernel(a);
}

}  // namespace splash
