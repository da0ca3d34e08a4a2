// Fixed-width fields of our own binary files (cache records, saved log-probs). The build is x86-64
// only (little-endian), so a field is copied as it is in memory.
#pragma once

#include <cstdint>
#include <cstring>

namespace splash {

template <class T>
void put_le(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <class T>
T get_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace splash
