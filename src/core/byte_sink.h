// Where a writer streams bytes: the model-file writers hand one to each tensor producer so a
// multi-GB tensor is produced piece by piece and never held twice in memory.
#pragma once

#include <cstdint>
#include <span>

#include "core/result.h"

namespace splash {

// Receives bytes in order; a producer may call write() any number of times.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status write(std::span<const uint8_t> bytes) = 0;
};

}  // namespace splash
