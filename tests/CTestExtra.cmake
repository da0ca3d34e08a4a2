# Extra ctest registrations (scripts, node/python comparisons) and per-test link additions.
# Each area keeps its own delimited block.

# --- reference (numpy reference, golden data, test models) -------------------------------------
# Self-tests of the independent numpy reference: dequantization of hand-made blocks, MLX packing,
# SPM tokenizer vs llama.cpp's tokenizations, RoPE/layout agreement across HF/GGUF files, and the
# stories15M greedy/top-5 golden data (skipped when ~/.cache/splash/demo is absent).
find_program(SPLASH_NUMPY_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(SPLASH_NUMPY_PYTHON)
  add_test(NAME reference_selftest
    COMMAND ${SPLASH_NUMPY_PYTHON} -m unittest -v test_reference
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/reference)
  set_tests_properties(reference_selftest PROPERTIES LABELS "reference" TIMEOUT 300)
endif()
# --- end reference ------------------------------------------------------------------------------
