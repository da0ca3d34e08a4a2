#pragma once

namespace splash {
inline constexpr const char* kVersion = "0.1.0";
}
