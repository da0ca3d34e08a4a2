// Small helpers the blocks and the forward pass share.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace splash {

// Scratch buffers grow to the largest pass seen and never shrink, so passes reuse them.
template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace splash
