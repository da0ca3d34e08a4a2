// safetensors writing: one file, or shards plus `model.safetensors.index.json`.
// Streaming: tensor bytes go from the caller's buffers (or a producer callback) straight to the
// file, so converting a multi-GB checkpoint never holds a second copy. Every file is written to a
// temporary name and renamed into place, so readers never see a partial file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/byte_sink.h"
#include "core/result.h"

namespace splash {

struct SafeTensorWrite {
  std::string name;
  DType dtype = DType::kF32;     // plain types only (F32, F16, BF16, F64, I*, U*, BOOL)
  std::vector<uint64_t> shape;   // row-major: shape.back() is contiguous
  // Either `data` holds exactly product(shape) * dtype-size bytes, or `produce` writes exactly that
  // many bytes into the sink (called once, while the file is being written).
  std::span<const uint8_t> data;
  std::function<Status(ByteSink&)> produce;
};

// Writes one .safetensors file: tensors in the given order, `__metadata__` when non-empty, JSON
// header padded with spaces so the data section starts at a multiple of 8.
Status write_safetensors(const std::string& path, std::span<const SafeTensorWrite> tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Writes a checkpoint into directory `dir` (which must exist). When everything fits within
// `max_shard_bytes` of tensor data (0 = no limit) the result is `model.safetensors`; otherwise
// `model-0000i-of-0000n.safetensors` shards (tensors in order, a new shard when the next tensor
// would pass the limit; a single tensor larger than the limit gets a shard of its own) plus
// `model.safetensors.index.json` ({"metadata": {"total_size": N}, "weight_map": {...}}).
// Returns the file names written (index last).
Result<std::vector<std::string>> write_safetensors_checkpoint(
    const std::string& dir, std::span<const SafeTensorWrite> tensors,
    const std::map<std::string, std::string>& metadata = {}, uint64_t max_shard_bytes = 0);

}  // namespace splash
