// exp(x) for x <= 0 from basic IEEE float operations only, so that it (a) vectorizes in a plain loop
// (glibc's expf is a scalar call, 4 ns a token, 0.6 ms over a 152K vocabulary) and (b) gives the same
// bits on every machine and libm, which keeps seeded sampling reproducible.
//
// Method: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, the degree-7 Taylor polynomial of e^r
// (error < 2 ulp on that interval), then scaling by 2^n through the exponent bits. Rounding to n uses
// the 1.5 * 2^23 trick instead of a rounding instruction, which baseline x86-64 lacks.
// x < -87 (result below FLT_MIN, i.e. < 1e-38 relative to the largest weight) and -inf return 0;
// positive or NaN input is a caller bug (weights are exp(logit - max)).
#pragma once

#include <bit>
#include <cstdint>

namespace splash {

inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 split: hi has trailing zero bits, so n * hi
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;  //   is exact for |n| < 2^9
  constexpr float kRound = 12582912.0f;                // 1.5 * 2^23
  constexpr float kMin = -87.0f;
  const bool underflow = !(x >= kMin);  // also catches -inf
  const float xc = underflow ? kMin : x;
  const float t = xc * kLog2e + kRound;  // n in the low mantissa bits
  const float n = t - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  // e^r by Horner, 1/k! coefficients.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(ni + 127) << 23);
  return underflow ? 0.0f : p * scale;
}

}  // namespace splash
