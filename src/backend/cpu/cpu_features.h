// What the CPU we run on can execute, from CPUID and XGETBV, detected once per process. The binary
// is built for baseline x86-64; kernels in *_avx2.cpp / *_avx512.cpp may only be called after
// checking the level here. Thread-safe: cpu_features() is immutable after its first call.
#pragma once

#include <string>

namespace splash {

enum class CpuVendor { kOther, kIntel, kAmd };

struct CpuFeatures {
  CpuVendor vendor = CpuVendor::kOther;  // CPUID leaf 0: "GenuineIntel", "AuthenticAMD"
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;     // VEX-encoded VNNI (Alder Lake, Zen 5); detected, not used yet
  bool amx_int8 = false;     // AMX tiles with int8 dot products, and the OS saves tile state (XCR0)
  bool os_avx = false;       // the OS saves YMM state (XCR0)
  bool os_avx512 = false;    // the OS saves ZMM / opmask state (XCR0)
};

// Kernel tiers, ordered: a kernel built for a level runs on any CPU whose best_isa_level() >= it.
enum class IsaLevel : int {
  kScalar = 0,  // plain C++
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (BF16 is checked separately where used)
};

// Detected once (function-local static); never changes afterwards.
const CpuFeatures& cpu_features();

// The highest level this CPU (and OS) supports.
IsaLevel best_isa_level();

// min(requested, best_isa_level()): how callers force a lower level (tests, `--isa` flags). The
// override is a value passed down, never a global switch.
IsaLevel clamp_isa_level(IsaLevel requested);

const char* isa_level_name(IsaLevel level);  // "scalar", "avx2", "avx512"

// Whether this process may use the AMX tiles: the CPU and OS support them (amx_int8) and Linux
// granted the tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on the first call).
// Thread-safe. The AMX matmul kernels may only run after it returned true.
bool amx_usable();

// One line for logs: "avx2 fma f16c avx512f ... (intel, best: avx512)" (the vendor when known).
std::string cpu_features_summary();

}  // namespace splash
