#include "core/dtype.h"

#include <array>
#include <cctype>

namespace splash {

namespace {

constexpr std::array<DTypeTraits, 24> kTraits = {{
    {"F32", 1, 4, false},   {"F16", 1, 2, false},   {"BF16", 1, 2, false},  {"F64", 1, 8, false},
    {"I8", 1, 1, false},    {"I16", 1, 2, false},   {"I32", 1, 4, false},   {"I64", 1, 8, false},
    {"U8", 1, 1, false},    {"U16", 1, 2, false},   {"U32", 1, 4, false},   {"U64", 1, 8, false},
    {"BOOL", 1, 1, false},
    {"Q4_0", 32, 18, true}, {"Q4_1", 32, 20, true}, {"Q5_0", 32, 22, true}, {"Q5_1", 32, 24, true},
    {"Q8_0", 32, 34, true},
    {"Q2_K", 256, 84, true}, {"Q3_K", 256, 110, true}, {"Q4_K", 256, 144, true}, {"Q5_K", 256, 176, true},
    {"Q6_K", 256, 210, true}, {"Q8_K", 256, 292, true},
}};

struct GgufId {
  uint32_t id;
  DType type;
};
// ggml_type values as fixed by the GGUF specification.
constexpr std::array<GgufId, 19> kGguf = {{
    {0, DType::kF32},   {1, DType::kF16},   {2, DType::kQ4_0},  {3, DType::kQ4_1},  {6, DType::kQ5_0},
    {7, DType::kQ5_1},  {8, DType::kQ8_0},  {10, DType::kQ2_K}, {11, DType::kQ3_K}, {12, DType::kQ4_K},
    {13, DType::kQ5_K}, {14, DType::kQ6_K}, {15, DType::kQ8_K}, {24, DType::kI8},   {25, DType::kI16},
    {26, DType::kI32},  {27, DType::kI64},  {28, DType::kF64},  {30, DType::kBF16},
}};

}  // namespace

const DTypeTraits& dtype_traits(DType t) { return kTraits[static_cast<size_t>(t)]; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kTraits.size(); ++i) {
    std::string_view n = kTraits[i].name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t j = 0; j < n.size() && eq; ++j)
      eq = std::toupper(static_cast<unsigned char>(name[j])) == n[j];
    if (eq) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<uint64_t> dtype_bytes(DType t, uint64_t n_elems) {
  const auto& tr = dtype_traits(t);
  if (n_elems % tr.block_elems != 0) return std::nullopt;
  uint64_t blocks = n_elems / tr.block_elems;
  if (blocks > UINT64_MAX / tr.block_bytes) return std::nullopt;
  return blocks * tr.block_bytes;
}

std::optional<DType> dtype_from_gguf(uint32_t ggml_type) {
  for (const auto& g : kGguf)
    if (g.id == ggml_type) return g.type;
  return std::nullopt;
}

std::optional<uint32_t> dtype_to_gguf(DType t) {
  for (const auto& g : kGguf)
    if (g.type == t) return g.id;
  return std::nullopt;
}

}  // namespace splash
