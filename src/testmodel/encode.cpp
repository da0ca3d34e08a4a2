#include "testmodel/encode.h"

#include <cstring>

#include "core/half.h"
#include "formats/quant/quantize.h"

namespace splash::testmodel {

bool gguf_type_supported(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ8_0: case DType::kQ4_0:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

Status encode_rows(DType t, std::span<const float> values, uint64_t cols, std::vector<uint8_t>& out) {
  if (cols == 0 || values.size() % cols != 0) {
    return make_error("encode_rows: ", values.size(), " values are not whole rows of ", cols);
  }
  const size_t start = out.size();
  switch (t) {
    case DType::kF32:
      out.resize(start + values.size() * 4);
      std::memcpy(out.data() + start, values.data(), values.size() * 4);
      return {};
    case DType::kF16:
    case DType::kBF16: {
      out.resize(start + values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = t == DType::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
        std::memcpy(out.data() + start + 2 * i, &h, 2);
      }
      return {};
    }
    default:
      break;
  }
  if (!gguf_type_supported(t)) {
    return make_error("encode_rows: type ", dtype_name(t), " is not supported by the test-model generator");
  }
  return quant::quantize_tensor(t, values, static_cast<int64_t>(cols), out);
}

}  // namespace splash::testmodel
