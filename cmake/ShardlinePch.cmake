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
# pays for each header once. GCC only: clang (the fuzz build) refuses a
# header whose command line defines differ, and our targets' do.
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

if(SHARDLINE_PCH AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(STATUS "SHARDLINE_PCH: precompiled headers are for GCC; off for ${CMAKE_CXX_COMPILER_ID}")
  set(SHARDLINE_PCH OFF)
endif()

if(SHARDLINE_PCH)
  set(_pch_src ${PROJECT_BINARY_DIR}/shardline_pch_donor.cc)
  file(WRITE ${_pch_src} "// The precompiled headers' donor (cmake/ShardlinePch.cmake).\n")
  add_library(shardline_pch_lib STATIC ${_pch_src})
  target_include_directories(shardline_pch_lib PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(shardline_pch_lib PRIVATE ${SHARDLINE_WARNINGS})
  target_link_libraries(shardline_pch_lib PRIVATE absl::status absl::statusor absl::strings absl::time
    protobuf::libprotobuf gRPC::grpc++)
  target_precompile_headers(shardline_pch_lib PRIVATE ${SHARDLINE_PCH_HEADERS})
  if(SHARDLINE_BUILD_TESTS)
    add_library(shardline_pch_test STATIC ${_pch_src})
    target_include_directories(shardline_pch_test PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_compile_options(shardline_pch_test PRIVATE ${SHARDLINE_WARNINGS})
    target_compile_definitions(shardline_pch_test PRIVATE
      SHARDLINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      SHARDLINE_BIN_DIR="${PROJECT_BINARY_DIR}/bin")
    target_link_libraries(shardline_pch_test PRIVATE absl::status absl::statusor absl::strings absl::time
      protobuf::libprotobuf gRPC::grpc++ GTest::gtest)
    target_precompile_headers(shardline_pch_test PRIVATE ${SHARDLINE_PCH_HEADERS} <gtest/gtest.h>)
  endif()
endif()

# shardline_use_pch(TARGET KIND): KIND is lib or test.
function(shardline_use_pch target kind)
  if(SHARDLINE_PCH)
    target_precompile_headers(${target} REUSE_FROM shardline_pch_${kind})
  endif()
endfunction()
