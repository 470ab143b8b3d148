# disttest_discover_tests(<target>
#     [EXTRA_ARGS arg...] [TEST_PREFIX prefix] [WORKING_DIRECTORY dir]
#     [DISCOVERY_TIMEOUT seconds] [PROPERTIES name value...])
#
# Registers every gtest test of <target> as its own ctest test, like
# gtest_discover_tests(), and gives each distributed test (one per world
# size: "Suite.Name/4ranks") what ctest needs to schedule it:
#   PROCESSORS       its number of ranks (the largest of its fixtures too);
#   RESOURCE_GROUPS  "<ranks>,gpus:1" when each rank owns a GPU
#                    ("<ranks>,gpus:1,gpus:1" for two), so that
#                    `ctest --resource-spec-file spec.json -j` never gives
#                    one GPU to two tests; write spec.json with
#                    disttest_resource_spec. Only for tests that the machine
#                    running ctest has the GPUs for (counted when ctest
#                    starts, as disttest_resource_spec --count does): ctest
#                    would report the others "Not Run", a failure, where
#                    disttest skips them ("needs 8 GPUs, found 4"). Without
#                    a spec file ctest ignores RESOURCE_GROUPS and the ranks
#                    take the GPUs in order. A test that shares GPUs
#                    (options().share_gpus, or DISTTEST_SHARE_GPUS=1 when
#                    ctest runs) and has too few gets a group for each
#                    rank's worth of GPUs there is; its ranks take them in
#                    turn.
#   SKIP_RETURN_CODE 77, with DISTTEST_SKIP_EXIT_CODE=77 in the test's
#                    environment (ENVIRONMENT_MODIFICATION; added to one
#                    PROPERTIES gives): a run whose every test skipped, and
#                    in which nothing failed, exits 77, so skips show as
#                    skips and a failure after a skip (a global
#                    Environment's TearDown()) as a failure. (gtest's
#                    "[  SKIPPED ]" in the output would win over the exit
#                    status.)
# Each test is selected by a filter in which '-', ':', '*' and '?' of its
# name (a typed test's "int-32") are '?'; a listing line that is neither a
# suite nor a test under one stops the build.
#   TIMEOUT_SIGNAL_NAME SIGTERM, TIMEOUT_SIGNAL_GRACE_PERIOD 10 (CMake 3.27
#                    and later; unless PROPERTIES names them): at its TIMEOUT
#                    ctest sends SIGTERM, on which disttest fails the test in
#                    flight with its stacks and ledgers and writes the gtest
#                    XML and JSON, then SIGKILL 10 s later. Older CMake sends
#                    SIGKILL at once, which no report survives (configuring
#                    says which).
# The ranks and GPUs come from the test binary itself, after each build: it
# runs once with DISTTEST_LIST_RESOURCES set, which makes every distributed
# test write its line instead of running (the fixtures' constructors and
# SetUp() run, in the parent; only tests named "<...>/<N>ranks" are asked).
# Backend::kAuto asks for GPUs when disttest has NCCL.
function(disttest_discover_tests target)
  cmake_parse_arguments(ARG ""
    "TEST_PREFIX;WORKING_DIRECTORY;DISCOVERY_TIMEOUT" "EXTRA_ARGS;PROPERTIES"
    ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "disttest_discover_tests(${target}): unknown arguments "
      "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_WORKING_DIRECTORY)
    set(ARG_WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  if(NOT ARG_DISCOVERY_TIMEOUT)
    set(ARG_DISCOVERY_TIMEOUT 120)
  endif()
  # ctest's TIMEOUT: SIGTERM first where CMake can say so (3.27).
  get_property(said GLOBAL PROPERTY DISTTEST_SAID_TIMEOUT_SIGNAL)
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.27)
    list(FIND ARG_PROPERTIES TIMEOUT_SIGNAL_NAME named)
    if(named EQUAL -1)
      list(PREPEND ARG_PROPERTIES
           TIMEOUT_SIGNAL_NAME SIGTERM TIMEOUT_SIGNAL_GRACE_PERIOD 10)
    endif()
    if(NOT said)
      message(STATUS "disttest: at a ctest TIMEOUT the test gets SIGTERM, "
              "fails with its stacks and ledgers and writes its XML, then "
              "SIGKILL after 10 s")
    endif()
  elseif(NOT said)
    message(STATUS "disttest: CMake ${CMAKE_VERSION} ends a test at its ctest "
            "TIMEOUT with SIGKILL, which no report survives; CMake 3.27 and "
            "later send SIGTERM first (TIMEOUT_SIGNAL_NAME), which disttest "
            "reports")
  endif()
  set_property(GLOBAL PROPERTY DISTTEST_SAID_TIMEOUT_SIGNAL TRUE)
  # Where this file is, whichever directory calls the function (a project
  # that took disttest in with add_subdirectory() does not see our
  # variables).
  get_property(add_tests_script GLOBAL PROPERTY DISTTEST_ADD_TESTS_SCRIPT)
  set(base "${CMAKE_CURRENT_BINARY_DIR}/${target}[disttest]")
  set(tests_file "${base}_tests.cmake")
  set(include_file "${base}_include.cmake")
  # Lists travel to the script with '|' for ';' (a command line splits ';').
  string(REPLACE ";" "|" extra_args "${ARG_EXTRA_ARGS}")
  string(REPLACE ";" "|" properties "${ARG_PROPERTIES}")
  add_custom_command(TARGET ${target} POST_BUILD
    BYPRODUCTS "${tests_file}"
    COMMAND "${CMAKE_COMMAND}"
      -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
      -D "TEST_WORKING_DIR=${ARG_WORKING_DIRECTORY}"
      -D "TEST_EXTRA_ARGS=${extra_args}"
      -D "TEST_PREFIX=${ARG_TEST_PREFIX}"
      -D "TEST_PROPERTIES=${properties}"
      -D "TEST_DISCOVERY_TIMEOUT=${ARG_DISCOVERY_TIMEOUT}"
      -D "CTEST_FILE=${tests_file}"
      -P "${add_tests_script}"
    VERBATIM)
  # Run by ctest each time it starts: how many GPUs there are now.
  string(CONCAT content
    "if(EXISTS \"${tests_file}\")\n"
    "  execute_process(COMMAND \"$<TARGET_FILE:disttest::resource_spec>\" --count\n"
    "    OUTPUT_VARIABLE _disttest_gpus ERROR_QUIET RESULT_VARIABLE _disttest_rc\n"
    "    OUTPUT_STRIP_TRAILING_WHITESPACE)\n"
    "  if(NOT _disttest_rc EQUAL 0 OR NOT _disttest_gpus MATCHES \"^[0-9]+$\")\n"
    "    set(_disttest_gpus 0)\n"
    "  endif()\n"
    "  include(\"${tests_file}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  file(GENERATE OUTPUT "${include_file}" CONTENT "${content}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

set_property(GLOBAL PROPERTY DISTTEST_ADD_TESTS_SCRIPT
  "${CMAKE_CURRENT_LIST_DIR}/DisttestAddTests.cmake")
