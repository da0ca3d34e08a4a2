#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/dtype.h"
#include "formats/tensor_names.h"

namespace splash {

namespace {

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += str_cat(i ? ", " : "", shape[i]);
  return s + "]";
}

int64_t scale_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

MlxAffineView mlx_view(const ModelTensor& t) {
  MlxAffineView v;
  v.bits = t.mlx->bits;
  v.group_size = t.mlx->group_size;
  v.codes = reinterpret_cast<const uint32_t*>(t.data.data());
  v.scales = t.mlx->scales.data();
  v.biases = t.mlx->biases.data();
  v.scale_dtype = t.mlx->scale_dtype;
  return v;
}

bool same_storage(const ModelTensor& a, const ModelTensor& b) {
  if (a.dtype != b.dtype || a.mlx.has_value() != b.mlx.has_value()) return false;
  if (!a.mlx) return true;
  return a.mlx->bits == b.mlx->bits && a.mlx->group_size == b.mlx->group_size &&
         a.mlx->scale_dtype == b.mlx->scale_dtype;
}

// A tensor that was repacked into owned memory is never read from the mapping again: hand its file
// pages back so resident memory holds the weights once. The mapping is read-only and file-backed
// (MappedFile), so a later read would just fault the bytes in again; only whole pages inside the
// range are dropped, never a neighbour's.
void release_file_pages(std::span<const uint8_t> bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + bytes.size()) / page * page;
  // Advice only: a failure leaves the pages resident, nothing else.
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void release_file_pages(const ModelTensor& t) {
  release_file_pages(t.data);
  if (t.mlx) {
    release_file_pages(t.mlx->scales);
    release_file_pages(t.mlx->biases);
  }
}

}  // namespace

std::string layer_tensor_name(int il, std::string_view suffix) { return str_cat("model.layers.", il, ".", suffix); }

std::string WeightLoader::layer_name(int il, std::string_view suffix) const {
  return str_cat(layer_prefix_, il, ".", suffix);
}

Result<const ModelTensor*> WeightLoader::require(std::string_view name) const {
  const ModelTensor* t = files_.find(name);
  if (t == nullptr) return make_error(files_.path(), ": tensor '", name, "' is missing");
  return t;
}

Result<const ModelTensor*> WeightLoader::checked(std::string_view name, int64_t rows, int64_t cols) const {
  SPLASH_TRY(const ModelTensor* t, require(name));
  const auto& s = t->shape;
  if (s.size() != 2 || s[0] != static_cast<uint64_t>(rows) || s[1] != static_cast<uint64_t>(cols))
    return make_error(files_.path(), ": tensor '", name, "' has shape ", shape_str(s), ", expected [", rows, ", ",
                      cols, "]");
  if (t->mlx) {
    const auto& q = *t->mlx;
    if ((q.bits != 4 && q.bits != 8) || q.group_size <= 0 || q.group_size % 32 != 0 || cols % q.group_size != 0)
      return make_error(files_.path(), ": tensor '", name, "': MLX quantization with ", q.bits, " bits, group ",
                        q.group_size, " is not supported for ", cols, " columns (4 or 8 bits, group a multiple of 32)");
    if (q.scale_dtype != DType::kF16 && q.scale_dtype != DType::kBF16 && q.scale_dtype != DType::kF32)
      return make_error(files_.path(), ": tensor '", name, "': MLX scales of type ", dtype_name(q.scale_dtype),
                        " are not supported (F16, BF16, F32)");
    const uint64_t code_bytes = static_cast<uint64_t>(rows) * cols * q.bits / 8;
    const uint64_t group_bytes = static_cast<uint64_t>(rows) * (cols / q.group_size) * scale_bytes(q.scale_dtype);
    if (t->data.size() != code_bytes || q.scales.size() != group_bytes || q.biases.size() != group_bytes)
      return make_error(files_.path(), ": tensor '", name, "': MLX data of ", t->data.size(), " bytes and scales/biases of ",
                        q.scales.size(), "/", q.biases.size(), " bytes, expected ", code_bytes, " and ", group_bytes);
    return t;
  }
  const auto& traits = dtype_traits(t->dtype);
  if (cols % traits.block_elems != 0)
    return make_error(files_.path(), ": tensor '", name, "' of type ", traits.name, " has ", cols,
                      " columns, not a multiple of its block size ", traits.block_elems);
  auto bytes = dtype_bytes(t->dtype, static_cast<uint64_t>(rows) * cols);
  if (!bytes || *bytes != t->data.size())
    return make_error(files_.path(), ": tensor '", name, "' holds ", t->data.size(), " bytes, expected ",
                      bytes ? *bytes : 0, " for ", traits.name, " ", shape_str(s));
  return t;
}

Result<PackedWeights> WeightLoader::matrix(std::string_view name, int64_t rows, int64_t cols) const {
  SPLASH_TRY(const ModelTensor* t, checked(name, rows, cols));
  Result<PackedWeights> packed = t->mlx ? pack_mlx_weights(mlx_view(*t), rows, cols, isa_, name)
                                        : pack_weights(t->dtype, t->data.data(), rows, cols, isa_, name);
  if (!packed.ok()) return make_error(files_.path(), ": ", packed.error_message());
  if (packed->owns_data()) release_file_pages(*t);
  return packed;
}

Result<PackedWeights> WeightLoader::expert_matrix(std::string_view name, int64_t expert, int64_t n_expert,
                                                  int64_t rows, int64_t cols, int64_t row_begin,
                                                  int64_t n_rows) const {
  SPLASH_CHECK(expert >= 0 && expert < n_expert);
  if (n_rows < 0) n_rows = rows;
  SPLASH_CHECK(row_begin >= 0 && row_begin + n_rows <= rows);
  SPLASH_TRY(const ModelTensor* t, require(name));
  const auto& s = t->shape;
  if (s.size() != 3 || s[0] != static_cast<uint64_t>(n_expert) || s[1] != static_cast<uint64_t>(rows) ||
      s[2] != static_cast<uint64_t>(cols))
    return make_error(files_.path(), ": tensor '", name, "' has shape ", shape_str(s), ", expected [", n_expert, ", ",
                      rows, ", ", cols, "]");
  const std::string label = n_rows == rows ? str_cat(name, " [expert ", expert, "]")
                                            : str_cat(name, " [expert ", expert, ", rows ", row_begin, "..",
                                                      row_begin + n_rows, "]");
  // The expert's rows [row_begin, row_begin + n_rows): every array here stores whole rows in order.
  const auto slice = [&](std::span<const uint8_t> all) {
    const size_t each = all.size() / static_cast<size_t>(n_expert), row = each / static_cast<size_t>(rows);
    return all.subspan(static_cast<size_t>(expert) * each + static_cast<size_t>(row_begin) * row,
                       static_cast<size_t>(n_rows) * row);
  };
  if (t->mlx) {
    const auto& q = *t->mlx;
    if ((q.bits != 4 && q.bits != 8) || q.group_size <= 0 || q.group_size % 32 != 0 || cols % q.group_size != 0)
      return make_error(files_.path(), ": tensor '", name, "': MLX quantization with ", q.bits, " bits, group ",
                        q.group_size, " is not supported for ", cols, " columns (4 or 8 bits, group a multiple of 32)");
    const uint64_t code_bytes = static_cast<uint64_t>(n_expert) * rows * cols * q.bits / 8;
    const uint64_t group_bytes =
        static_cast<uint64_t>(n_expert) * rows * (cols / q.group_size) * scale_bytes(q.scale_dtype);
    if (t->data.size() != code_bytes || q.scales.size() != group_bytes || q.biases.size() != group_bytes)
      return make_error(files_.path(), ": tensor '", name, "': MLX data of ", t->data.size(),
                        " bytes and scales/biases of ", q.scales.size(), "/", q.biases.size(), " bytes, expected ",
                        code_bytes, " and ", group_bytes);
    MlxAffineView v = mlx_view(*t);
    const auto codes = slice(t->data), scales = slice(q.scales), biases = slice(q.biases);
    v.codes = reinterpret_cast<const uint32_t*>(codes.data());
    v.scales = scales.data();
    v.biases = biases.data();
    auto packed = pack_mlx_weights(v, n_rows, cols, isa_, label);
    if (!packed.ok()) return make_error(files_.path(), ": ", packed.error_message());
    release_file_pages(codes);
    release_file_pages(scales);
    release_file_pages(biases);
    return packed;
  }
  const auto& traits = dtype_traits(t->dtype);
  if (cols % traits.block_elems != 0)
    return make_error(files_.path(), ": tensor '", name, "' of type ", traits.name, " has ", cols,
                      " columns, not a multiple of its block size ", traits.block_elems);
  auto bytes = dtype_bytes(t->dtype, static_cast<uint64_t>(n_expert) * rows * cols);
  if (!bytes || *bytes != t->data.size())
    return make_error(files_.path(), ": tensor '", name, "' holds ", t->data.size(), " bytes, expected ",
                      bytes ? *bytes : 0, " for ", traits.name, " ", shape_str(s));
  const auto data = slice(t->data);
  auto packed = pack_weights(t->dtype, data.data(), n_rows, cols, isa_, label);
  if (!packed.ok()) return make_error(files_.path(), ": ", packed.error_message());
  if (packed->owns_data()) release_file_pages(data);
  return packed;
}

Result<std::vector<float>> WeightLoader::vector(std::string_view name, int64_t n) const {
  SPLASH_TRY(const ModelTensor* t, require(name));
  if (t->n_elems() != static_cast<uint64_t>(n) || t->mlx)
    return make_error(files_.path(), ": tensor '", name, "' has shape ", shape_str(t->shape), ", expected [", n, "]");
  SPLASH_TRY(std::vector<float> v, files_.read_f32(*t));
  if (t->rope_interleaved) {
    // read_f32 hands back the rotate-half order; the matrix rows stay interleaved, so must the bias.
    const bool is_k = name.find("k_proj") != std::string_view::npos;
    const int n_head = static_cast<int>(is_k ? config().n_head_kv : config().n_head);
    permute_rope_rows(v.data(), sizeof(float), n_head, static_cast<int>(config().head_dim), true);
  }
  return v;
}

Result<Projection> WeightLoader::fused(const std::vector<const ModelTensor*>& parts, const std::vector<int64_t>& rows,
                                       int64_t cols) const {
  int64_t total_rows = 0;
  for (int64_t r : rows) total_rows += r;
  std::string name = parts[0]->name + " (fused)";
  Projection p;
  if (parts[0]->mlx) {
    std::vector<uint32_t> codes;
    std::vector<uint8_t> scales, biases;
    for (const ModelTensor* t : parts) {
      const auto* c = reinterpret_cast<const uint32_t*>(t->data.data());
      codes.insert(codes.end(), c, c + t->data.size() / 4);
      scales.insert(scales.end(), t->mlx->scales.begin(), t->mlx->scales.end());
      biases.insert(biases.end(), t->mlx->biases.begin(), t->mlx->biases.end());
    }
    MlxAffineView v = mlx_view(*parts[0]);
    v.codes = codes.data();
    v.scales = scales.data();
    v.biases = biases.data();
    auto packed = pack_mlx_weights(v, total_rows, cols, isa_, name);
    if (!packed.ok()) return make_error(files_.path(), ": ", packed.error_message());
    p.w = std::move(packed).value();
    for (const ModelTensor* t : parts) release_file_pages(*t);
    return p;
  }
  // Stacked straight from the file parts into the one buffer the kernels read (a repack, or a
  // concatenation for the zero-copy types): no intermediate copy, so nothing is left behind in the
  // heap, and the file pages are dropped.
  std::vector<WeightRows> stack;
  for (size_t i = 0; i < parts.size(); ++i) stack.push_back({parts[i]->data.data(), rows[i]});
  auto packed = pack_stacked_weights(parts[0]->dtype, stack, cols, isa_, name);
  if (!packed.ok()) return make_error(files_.path(), ": ", packed.error_message());
  p.w = std::move(packed).value();
  for (const ModelTensor* t : parts) release_file_pages(*t);
  return p;
}

Result<std::vector<Projection>> WeightLoader::projections(const std::vector<std::string>& names,
                                                          const std::vector<int64_t>& rows, int64_t cols,
                                                          const std::vector<std::string>& bias_names) const {
  SPLASH_CHECK(names.size() == rows.size() && (bias_names.empty() || bias_names.size() == names.size()));
  std::vector<const ModelTensor*> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    SPLASH_TRY(const ModelTensor* t, checked(names[i], rows[i], cols));
    parts.push_back(t);
  }
  std::vector<std::vector<float>> biases;
  for (size_t i = 0; i < bias_names.size(); ++i) {
    SPLASH_TRY(std::vector<float> b, vector(bias_names[i], rows[i]));
    biases.push_back(std::move(b));
  }
  bool fusable = fuse_ && parts.size() > 1;
  for (const ModelTensor* t : parts) fusable = fusable && same_storage(*parts[0], *t);

  std::vector<Projection> out;
  if (fusable) {
    SPLASH_TRY(Projection p, fused(parts, rows, cols));
    for (auto& b : biases) p.bias.insert(p.bias.end(), b.begin(), b.end());
    out.push_back(std::move(p));
    return out;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    Projection p;
    SPLASH_TRY(p.w, matrix(names[i], rows[i], cols));
    if (!biases.empty()) p.bias = std::move(biases[i]);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace splash
