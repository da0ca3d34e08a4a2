#include "backend/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace splash {

namespace {

uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  // xgetbv is only legal once CPUID says OSXSAVE; the caller checks that first.
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char id[12];  // the vendor string is EBX, EDX, ECX in that order
    std::memcpy(id, &b, 4);
    std::memcpy(id + 4, &d, 4);
    std::memcpy(id + 8, &c, 4);
    if (std::memcmp(id, "GenuineIntel", 12) == 0) f.vendor = CpuVendor::kIntel;
    if (std::memcmp(id, "AuthenticAMD", 12) == 0) f.vendor = CpuVendor::kAmd;
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (osxsave && avx) {
    const uint64_t xcr0 = read_xcr0();
    f.os_avx = (xcr0 & 0x6) == 0x6;            // XMM and YMM state
    f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = ((b >> 5) & 1) && f.os_avx;
    f.bmi2 = (b >> 8) & 1;
    f.avx512f = ((b >> 16) & 1) && f.os_avx512;
    f.avx512dq = ((b >> 17) & 1) && f.os_avx512;
    f.avx512bw = ((b >> 30) & 1) && f.os_avx512;
    f.avx512vl = ((b >> 31) & 1) && f.os_avx512;
    f.avx512vnni = ((c >> 11) & 1) && f.os_avx512;
    // AMX-TILE (EDX bit 24) and AMX-INT8 (bit 25), with XTILECFG and XTILEDATA enabled in XCR0.
    const bool os_tiles = osxsave && avx && (read_xcr0() & 0x60000) == 0x60000;
    f.amx_int8 = ((d >> 24) & 1) && ((d >> 25) & 1) && os_tiles && f.os_avx512;
    __cpuid_count(7, 1, a, b, c, d);
    f.avx_vnni = ((a >> 4) & 1) && f.os_avx;
    f.avx512bf16 = ((a >> 5) & 1) && f.os_avx512;
  }
  f.fma = f.fma && f.os_avx;
  f.f16c = f.f16c && f.os_avx;
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool amx_usable() {
  static const bool usable = [] {
    if (!cpu_features().amx_int8 || best_isa_level() < IsaLevel::kAvx512) return false;
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return usable;
}

IsaLevel best_isa_level() {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni) return IsaLevel::kAvx512;
  if (avx2) return IsaLevel::kAvx2;
  return IsaLevel::kScalar;
}

IsaLevel clamp_isa_level(IsaLevel requested) {
  const IsaLevel best = best_isa_level();
  return static_cast<int>(requested) < static_cast<int>(best) ? requested : best;
}

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "?";
}

std::string cpu_features_summary() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.bmi2, "bmi2");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx_vnni, "avxvnni");
  add(f.amx_int8, "amx-int8");
  s += f.vendor == CpuVendor::kIntel ? " (intel, best: " : f.vendor == CpuVendor::kAmd ? " (amd, best: " : " (best: ";
  s += isa_level_name(best_isa_level());
  s += ')';
  return s;
}

}  // namespace splash
