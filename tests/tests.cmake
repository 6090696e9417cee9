# Every tests/test_*.c is one ctest executable. Tests see the internal
# headers (src/) as well as the public one. Tests that need a real model
# find it through the FX_MODELS_DIR environment variable (default: models/)
# and fail, not skip, when CI has fetched the models (FX_REQUIRE_MODELS=1).
file(GLOB FX_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.c)
foreach(src ${FX_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ferrox_internal)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
endforeach()

# tok_dump (tests/tok_dump.c): ferrox's tokenizer for scripts, through
# include/ferrox.h alone; tests/test_hf_tokenizer_oracle.py and
# bench/tokenize_speed.py drive it.
add_executable(tok_dump ${CMAKE_SOURCE_DIR}/tests/tok_dump.c)
target_link_libraries(tok_dump PRIVATE ferrox_internal)

# The include graph points one way (scripts/check-includes.sh).
add_test(NAME include_graph COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-includes.sh)

# test_noalloc counts the library's heap calls through the linker's --wrap.
if(TARGET test_noalloc)
  target_link_options(test_noalloc PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
endif()

# Every test_*_oom fails the k-th heap call (tests/oom_wrap.h) of what it
# drives, for every k: grammars, chat templates, paged decodes, model
# loads / contexts / decodes (test_load_oom), the server's request path
# (test_request_oom). The linker's --wrap catches the calls of our code and
# of the static libraries linked in; shared ones (cJSON, PCRE2) are routed
# through their allocator hooks by the test.
foreach(src ${FX_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(name MATCHES "_oom$")
    target_link_options(${name} PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
  endif()
endforeach()

# The HTTP server end to end with the official openai client (PyPI;
# scripts/install-deps.sh installs it). Skips (77) without the models or the
# package unless FX_REQUIRE_MODELS=1.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_server COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_server.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_server PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200)
  # llama-server's own endpoints: GET /props, POST /completion against
  # /v1/completions (streamed, stop strings, token and mixed prompts), GET
  # /slots, slot save / erase / restore across two servers through
  # --slot-save-path (the restored prompt served from the cache), bad
  # filenames and state files.
  add_test(NAME test_server_llama COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_server_llama.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_server_llama PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  # serve --embeddings through the openai client (tests/test_embed_server.py):
  # base64 and float, batched == alone, token ids, dimensions, ferrox embed's
  # vectors, a stream beside embeddings, 400s, the 501 without the flag.
  add_test(NAME test_embed_server COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_embed_server.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_embed_server PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  # --spec-type ngram-simple against a plain server: the same text, greedy
  # and sampled, alone, beside a plain request, streamed; drafts accepted.
  add_test(NAME test_server_spec COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_server_spec.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_server_spec PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  # --kv-events-endpoint: a subscriber rebuilds the server's held blocks
  # from vLLM-format events alone, replays, a stalled subscriber, bad input.
  add_test(NAME test_kv_events_server COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_kv_events_server.py $<TARGET_FILE:ferrox-cli>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_kv_events_server PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  # Two replicas behind vllm-router and sglang-router (PyPI; install-deps.sh):
  # round_robin, cache_aware and kv_aware answer with a lone replica's greedy
  # text; SIGKILL and SIGTERM on a replica under load fail no request.
  # Release only: its timings (health within 0.5 s, retries within the
  # routers' budgets) are not an ASan build's. Skips (77) without the model
  # or both routers unless FX_REQUIRE_MODELS=1.
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    add_test(NAME test_routers COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_routers.py
             $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(test_routers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
    # The web chat at GET / in headless Chromium (Debian's chromium and
    # chromium-driver, selenium from PyPI; install-deps.sh): a streamed reply
    # equal to the API's greedy one, stop, reload, --api-key; a screenshot
    # in Testing/webui.png. Release only (a browser once is enough; ~20 s).
    # Skips (77) without them or the model unless FX_REQUIRE_MODELS=1.
    add_test(NAME test_webui COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_webui.py
             $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(test_webui PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
endif()

# `ferrox perplexity --kl-divergence(-base)` on SmolLM2: the saved file's
# layout and values against `ferrox logits`, the printed statistics against
# the script's own computation, refusals. Skips (77) without the model
# unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_perplexity COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_perplexity.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_perplexity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# JSON Schema and regex to GBNF (tests/test_schema.py): every schema in
# tests/data/schemas against jsonschema, llguidance and ferrox's matcher,
# sampled strings validated; refused schemas and regexes. Skips (77)
# without llguidance or jsonschema unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_schema COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_schema.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_schema PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# Chat templates against Python's jinja2 (tests/chat_conformance.py): the 26
# templates in ../shared/templates and the default models' own, rendered by
# `ferrox render-template` and by jinja2, byte for byte. Skipped (77) when
# jinja2 is not importable; the templates / models are skipped, saying so,
# when absent.
add_test(NAME chat_templates
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/chat_conformance.py --ferrox $<TARGET_FILE:ferrox-cli>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(chat_templates PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)

# GBNF acceptance against llguidance (PyPI, tests only): 12 grammars, 1,000
# strings each (sampled by ferrox and one-edit mutations), and bad grammars'
# messages. Skips (77) without llguidance unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_grammar COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_grammar.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_grammar PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# test_tool_parse links the server library (src/server/tools.c). Without
# arguments it runs the parser's unit checks; tests/test_tool_parse.py
# drives it over replies rendered from ../shared/templates.
if(TARGET test_tool_parse)
  target_link_libraries(test_tool_parse PRIVATE ferrox_server)
endif()
# test_request_oom drives the server's request path in process.
if(TARGET test_request_oom)
  target_link_libraries(test_request_oom PRIVATE ferrox_server)
endif()

# Tool-call parsing against the real templates (tests/test_tool_parse.py):
# replies rendered with tool_calls by `ferrox render-template` (checked
# against jinja2) parse back to the input calls; their streams, fed to the
# openai client's accumulator, give the same message. Skipped (77) without
# jinja2 / openai unless FX_REQUIRE_MODELS=1; absent templates skip.
if(Python3_Interpreter_FOUND AND TARGET test_tool_parse)
  add_test(NAME test_tool_parse_templates
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_tool_parse.py
           $<TARGET_FILE:ferrox-cli> $<TARGET_FILE:test_tool_parse>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_tool_parse_templates PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# Tool calling through `ferrox serve` with the openai client on SmolLM2
# (tests/test_tool_server.py): 400s, forced calls through the grammar,
# stream == non-stream through the client's stream helper. Skips (77)
# without the model or openai unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_tool_server COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_tool_server.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_tool_server PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# `ferrox serve --chat-template gemma` on Gemma 3 270M, a base model
# (tests/test_chat_template_server.py): the rendered prompt's tokens are
# those of llama.cpp's own text (tests/data/chat/builtin_refs.json), chat
# answers; --chat-template-file; no template refuses chat naming the flag;
# an unknown name lists the built-ins. Skips (77) without the model unless
# FX_REQUIRE_MODELS=1. (tests/test_chat_builtin.c checks every built-in
# against llama.cpp byte for byte, no model needed.)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_chat_template_server COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_chat_template_server.py $<TARGET_FILE:ferrox-cli>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_chat_template_server PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# Structured output end to end (openai client, jsonschema, pydantic): the
# schema suite of tests/data/schemas at temperature 0 and 1 through
# /v1/chat/completions on SmolLM2, parse() with a pydantic model, grammar /
# regex / choice fields, constrained beside free requests, bad constraints;
# Gemma 3 through /v1/completions and `ferrox run -j`. Skips (77) without
# the models or packages unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_structured COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_structured.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_structured PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
endif()

# `ferrox run --context-shift` past n_ctx on SmolLM2 and Gemma 3 270M
# (tests/test_context_shift.py). Skips (77) without the models unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_context_shift COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_context_shift.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_context_shift PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# llama.cpp's flags on run, chat and serve by their effects (-f, -e, -sp,
# -r, --ignore-eos, BOS not doubled, -b/-ub, --no-mmap, --mlock, -fa/-ngl),
# the unknown-flag suggestion, --version, and serve's BOS, --ignore-eos, -sp
# and --context-shift (tests/test_cli_flags.py).
# Under ASan the Gemma checks are left out. Skips (77) without the models
# unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_cli_flags COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_cli_flags.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_cli_flags PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  # ferrox bench / batched-bench: the JSON fields bench/compare.sh reads,
  # both rooflines in range, --kernels (tests/test_bench_tool.py).
  add_test(NAME test_bench_tool COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_bench_tool.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_bench_tool PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# Hugging Face tokenizer.json against the `tokenizers` package
# (tests/test_hf_tokenizer_oracle.py): 19 vocabularies that
# scripts/make-hf-tokenizers.py writes into build/hf-tokenizers (converted
# from llama.cpp's test GGUFs and the default models by transformers, plus
# trained WordPiece / Unigram ones), each on ~10,000 strings x 4
# add/parse_special combinations through tok_dump (500 under ASan); its
# EXPECTED_EQUAL list (all 19) is asserted. Skip (77) without the packages or sources unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_tokenizer_oracle COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_hf_tokenizer_oracle.py $<TARGET_FILE:tok_dump>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # (--gguf, ferrox's GGUF path against tokenizers on transformers'
  # conversions, is a manual mode: 3.5 min, and test_vocab_corpus already
  # holds that path to llama.cpp's own ids)
  set_tests_properties(test_hf_tokenizer_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
endif()

# Folders without tokenizer.json (tests/test_hf_legacy_oracle.py,
# src/tokenizer/hf_legacy.c): vocab.json + merges.txt made from the gpt-2
# and smollm2-135m vocabularies above, 4 tokenizer_config.json variants,
# each on 350 strings x 4 combinations against transformers'
# AutoTokenizer, all equal; 6 malformed folders refused naming the file.
# Skip (77) as test_hf_tokenizer_oracle.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_legacy_oracle COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_hf_legacy_oracle.py $<TARGET_FILE:tok_dump>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_hf_legacy_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# Folders with SentencePiece's tokenizer.model and no tokenizer.json
# (tests/test_hf_spm_oracle.py, src/tokenizer/hf_spm.c): the llama-bpe and
# unigram-nfkc models of tests/fixtures/spm, one made from the Gemma 3
# 270M GGUF and one from llama.cpp's ggml-vocab-llama-spm.gguf (when the
# llama-cpp-python sdist is there), under 17 tokenizer_config.json /
# config.json variants
# (LlamaTokenizer legacy or not, with or without prefix space, GemmaTokenizer
# and T5Tokenizer bare or with their saved configs, TokenizersBackend by
# several routes), each on 2,050 strings x 4 combinations against
# transformers' AutoTokenizer, all equal, decoding too; ferrox inspect /
# tokenize / run on hf-tiny/llama with a tokenizer.model; 14 malformed or
# unsupported folders refused naming the problem. Skip (77) without the
# packages (gemma / llama-spm alone without their sources) unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_spm_oracle COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_hf_spm_oracle.py $<TARGET_FILE:tok_dump>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_hf_spm_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# The public libraries (cmake/public-libs.cmake): libferrox.so and
# libferrox.a define only ferrox.h's FX_API names (nm; fx_serve and its
# params live in ferrox_server), and each is usable alone: tests/api_smoke.c
# linked against one of them and nothing else of ferrox's (the archive's
# target adds only its dependencies' -l flags) runs an hf-tiny model.
add_test(NAME public_symbols
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check-symbols.sh $<TARGET_FILE:ferrox_shared>
                 $<TARGET_FILE:ferrox_static> ${CMAKE_SOURCE_DIR}/include/ferrox.h
                 fx_serve fx_server_default_params)
foreach(kind shared static)
  add_executable(api_smoke_${kind} ${CMAKE_SOURCE_DIR}/tests/api_smoke.c)
  target_link_libraries(api_smoke_${kind} PRIVATE ferrox_${kind})
  add_test(NAME api_smoke_${kind} COMMAND api_smoke_${kind} tests/fixtures/hf-tiny/llama
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(api_smoke_${kind} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()

# test_sampling_defaults reads the server's request defaults in process.
if(TARGET test_sampling_defaults)
  target_link_libraries(test_sampling_defaults PRIVATE ferrox_server)
endif()

# tokenizer.json -> `ferrox convert` -> GGUF tokenizes as llama.cpp
# (tests/test_hf_vocab_convert.py, io/hf_vocab.c): llama.cpp's test
# vocabularies (bert-bge's WordPiece among them) against their .out ids,
# the default models against their GGUFs, the WordPiece folders against
# their own tokenizer.json; Unigram refused. Tokenizer folders from $FX_HF_TOKENIZERS or
# scripts/make-hf-tokenizers.py; skips (77) without them unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_vocab_convert COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_hf_vocab_convert.py
           $<TARGET_FILE:ferrox-cli> $<TARGET_FILE:test_vocab_corpus> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_hf_vocab_convert PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# A Hugging Face checkpoint made from SmolLM2 (scripts/make-hf-checkpoint.py,
# gguf + numpy) through `ferrox convert`: the directory and its f32 GGUF give
# the same logits and greedy path (tests/test_hf_checkpoint.py, ~15 s).
# Skips (77) without the model or packages unless FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_checkpoint COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_hf_checkpoint.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_hf_checkpoint PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# The tiny checkpoints of tests/fixtures run from text: their
# tokenizer.json against the tokenizers package, `ferrox run` on each
# (tests/test_fixture_tokenizers.py). Skips (77) without tokenizers unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_fixture_tokenizers COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_fixture_tokenizers.py $<TARGET_FILE:ferrox-cli> $<TARGET_FILE:tok_dump>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_fixture_tokenizers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# tokenizer_config.json beside tokenizer.json (tests/test_hf_tokenizer_config.py):
# add_bos_token / add_eos_token true / false / absent under tokenizer_class
# Llama / LlamaFast / Gemma / Qwen2(Fast) / PreTrainedTokenizerFast / none
# (scripts/make-hf-tokenizer-configs.py), ferrox's ids against
# AutoTokenizer.encode (transformers 5.23 ignores both keys there: the
# post-processor decides); model_max_length as the context when config.json
# has no length (`ferrox inspect`, `ferrox convert`). The model_max_length
# part needs nothing; the rest skips (77) without transformers unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_hf_tokenizer_config COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_SOURCE_DIR}/tests/test_hf_tokenizer_config.py $<TARGET_FILE:ferrox-cli> $<TARGET_FILE:tok_dump>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_hf_tokenizer_config PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# `cmake --install` into a temporary prefix, and every program of
# docs/API.md compiled against the installed tree alone (pkg-config,
# shared and static) and run on SmolLM2, each output checked against the
# `ferrox` command doing the same job (tests/test_install.py, ~25 s).
# Release only: it builds nothing the ASan pass would check differently.
if(Python3_Interpreter_FOUND AND CMAKE_BUILD_TYPE STREQUAL "Release")
  add_test(NAME test_install COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_install.py
           ${CMAKE_BINARY_DIR} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_install PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# The Python package (python/; tests/test_python_package.py): a wheel built
# from a copy of the repository (setup.py compiles libferrox.so), installed
# into a fresh virtual environment, the copy moved away, python/tests run
# (pytest) against the installed package from another folder: generate,
# stream, chat and tokenize against this build's ferrox run / chat /
# tokenize on both default models, struct layouts against ferrox.h, the
# README example. Release only (the wheel compiles its own library; not
# again under ASan). Skips (77) without venv, setuptools or pytest unless
# FX_REQUIRE_MODELS=1.
if(Python3_Interpreter_FOUND AND CMAKE_BUILD_TYPE STREQUAL "Release")
  add_test(NAME python_package COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/test_python_package.py
           $<TARGET_FILE:ferrox-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(python_package PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()
