# Precompiled headers (SHARDLINE_PCH): the third-party headers nearly every
# translation unit includes - the standard library, Abseil, Protobuf and
# gRPC, and GoogleTest for the tests - parsed once per build instead of
# once per file. They were 40-85% of a file's compile time; a cold build of
# everything (README's second command) took 7m05s here with them against
# 9m50s without, and the machine code is the same (README.md, "Build time").
#
# Contract: a precompiled header changes no generated code. It is built
# with every flag that changes code (the sanitizers', -ffp-contract=off,
# -pthread), and GCC refuses a header built with different ones; the
# headers listed here are outside the repository, so editing our own
# headers never rebuilds it. Two donors, one for libraries and one for
# tests, and every other target reuses theirs (REUSE_FROM), so the build
# pays for each header once. GCC and clang: with GCC the objects above are
# identical; with clang (the sanitizer and fuzzer build of .ci/run) the
# objects of gpt.cc and ring.cc hold the same instructions function by
# function, their sections in another order and string constants numbered
# otherwise.
#
# Files that must not see these headers (SentencePiece's bundled Abseil
# clashes with Abseil's; a file compiled with a code-changing option of its
# own) set SKIP_PRECOMPILE_HEADERS; binaries take none (each is one small
# main, and shardline-spm must not see Protobuf's).

set(SHARDLINE_PCH_HEADERS
  <algorithm> <atomic> <cmath> <cstdint> <cstring> <functional> <map> <memory> <set> <string>
  <thread> <utility> <vector>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/match.h> <absl/strings/numbers.h>
  <absl/strings/str_cat.h> <absl/strings/str_format.h> <absl/strings/string_view.h>
  <absl/time/clock.h> <absl/time/time.h>
  <google/protobuf/message.h> <google/protobuf/generated_message_reflection.h>
  <google/protobuf/repeated_field.h> <grpcpp/grpcpp.h>)

if(SHARDLINE_PCH AND NOT CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  message(STATUS "SHARDLINE_PCH: precompiled headers are for GCC and clang; off for ${CMAKE_CXX_COMPILER_ID}")
  set(SHARDLINE_PCH OFF)
endif()

# shardline_pch_donor(NAME HEADERS ... DEPS ... [DEFINITIONS ...]): an empty
# library compiled as every target that reuses its header is (the include
# path, the warnings, DEFINITIONS), precompiling HEADERS.
function(shardline_pch_donor name)
  cmake_parse_arguments(ARG "" "" "HEADERS;DEPS;DEFINITIONS" ${ARGN})
  set(src ${PROJECT_BINARY_DIR}/shardline_pch_donor.cc)
  file(WRITE ${src} "// The precompiled headers' donor (cmake/ShardlinePch.cmake).\n")
  add_library(${name} STATIC ${src})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${name} PRIVATE ${SHARDLINE_WARNINGS})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_precompile_headers(${name} PRIVATE ${ARG_HEADERS})
endfunction()

if(SHARDLINE_PCH)
  set(deps absl::status absl::statusor absl::strings absl::time protobuf::libprotobuf gRPC::grpc++)
  shardline_pch_donor(shardline_pch_lib HEADERS ${SHARDLINE_PCH_HEADERS} DEPS ${deps})
  if(SHARDLINE_BUILD_TESTS)
    shardline_pch_donor(shardline_pch_test HEADERS ${SHARDLINE_PCH_HEADERS} <gtest/gtest.h>
      DEPS ${deps} GTest::gtest DEFINITIONS ${SHARDLINE_TEST_DEFINITIONS})
  endif()
endif()

# shardline_use_pch(TARGET KIND): KIND is lib or test.
function(shardline_use_pch target kind)
  if(SHARDLINE_PCH)
    target_precompile_headers(${target} REUSE_FROM shardline_pch_${kind})
  endif()
endfunction()
