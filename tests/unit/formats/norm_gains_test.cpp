// The one rule for whether a hybrid checkpoint stores its zero-centred norm gains as 1 + w
// (formats/norm_gains.h), case by case as each converter leaves its files. The files themselves,
// laid out by an independent writer, are checked in tests/unit/model/converter_layout_test.cpp.
#include <gtest/gtest.h>

#include "formats/norm_gains.h"

namespace splash {
namespace {

TEST(NormGains, GgufAlwaysStoresOnePlusW) {
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_next", {.gguf = true, .conv_axis_raw = true}));
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_5", {.gguf = true, .mtp_tensors = true}));
}

TEST(NormGains, TransformersLayoutStoresW) {
  // conv1d [C, 1, K] whatever else the folder holds.
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_next", {.conv_axis_raw = true, .per_expert_tensors = true}));
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_next", {.conv_axis_raw = true}));  // dense
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_5", {.conv_axis_raw = true, .mtp_tensors = true}));
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_5", {.conv_axis_raw = true}));
}

TEST(NormGains, MlxLmLayoutStoresOnePlusW) {
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_next", {.conv_axis_moved = true}));
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_5", {.conv_axis_moved = true}));
  // mlx-lm versions that keep Qwen3.5's MTP head shift its norms in the same pass.
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_5", {.conv_axis_moved = true, .mtp_tensors = true}));
}

TEST(NormGains, WithoutConvMlxLmMarkersDecide) {
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_next", {.per_expert_tensors = true}));
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_next", {}));
  EXPECT_FALSE(zero_centred_gains_stored_shifted("qwen3_5", {.mtp_tensors = true}));
  EXPECT_TRUE(zero_centred_gains_stored_shifted("qwen3_5", {}));
}

}  // namespace
}  // namespace splash
