# One helper per kind of target, in the spirit of absl_cc_library/absl_cc_test.
#
#   shardline_cc_library(NAME foo SRCS foo.cc HDRS foo.h DEPS bar absl::status)
#   shardline_cc_binary(NAME shardline OUTPUT shardline SRCS main.cc DEPS ...)
#   shardline_cc_test(NAME foo_test SRCS foo_test.cc DEPS foo LABELS unit)
#
# Every target sees the repository root and the generated-proto root on its
# include path, so includes are spelled from the top: "common/status.h",
# "proto/config.pb.h".

function(shardline_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS} ${ARG_HDRS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${ARG_NAME} PRIVATE ${SHARDLINE_WARNINGS})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  shardline_use_pch(${ARG_NAME} lib)
endfunction()

function(shardline_cc_binary)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  if(ARG_OUTPUT)
    set_target_properties(${ARG_NAME} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT})
  endif()
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${ARG_NAME} PRIVATE ${SHARDLINE_WARNINGS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
endfunction()

# What every test is compiled with (and the tests' precompiled header:
# cmake/ShardlinePch.cmake): where the sources and the binaries are.
set(SHARDLINE_TEST_DEFINITIONS
  SHARDLINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  SHARDLINE_BIN_DIR="${PROJECT_BINARY_DIR}/bin")

# LABELS: "unit" for in-process tests (also run under ASan/UBSan in CI),
# "e2e" for tests that start real processes. WIDENED: every test runs a
# second time as "Widened.<name>" with SHARDLINE_BF16_KERNEL=widened, so a
# CPU with bfloat16 dot products also tests the kernel of the CPUs without
# them (worker/model/gemm.h).
function(shardline_cc_test)
  cmake_parse_arguments(ARG "SERIAL;WIDENED" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${ARG_NAME} PRIVATE ${SHARDLINE_WARNINGS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  shardline_use_pch(${ARG_NAME} test)
  target_compile_definitions(${ARG_NAME} PRIVATE ${SHARDLINE_TEST_DEFINITIONS})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if("unit" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY SHARDLINE_UNIT_TESTS ${ARG_NAME})
  endif()
  set(serial FALSE)
  if(ARG_SERIAL)
    set(serial TRUE)
  endif()
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial}
    DISCOVERY_TIMEOUT 60)
  if(ARG_WIDENED)
    gtest_discover_tests(${ARG_NAME} TEST_PREFIX "Widened."
      PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial}
                 ENVIRONMENT "SHARDLINE_BF16_KERNEL=widened"
      DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
