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
#                    disttest_resource_spec. Without a spec file ctest
#                    ignores RESOURCE_GROUPS and the ranks take the GPUs in
#                    order (a test that needs more is skipped).
#   SKIP_REGULAR_EXPRESSION  gtest's "[  SKIPPED ]", so skips show as skips.
# The ranks and GPUs come from the test binary itself, after each build: it
# runs once with DISTTEST_LIST_RESOURCES set, which makes every distributed
# test write its line instead of running (the fixtures' constructors and
# SetUp() run, in the parent). Backend::kAuto counts the GPUs of the machine
# that builds.
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
      -P "${_DISTTEST_ADD_TESTS_SCRIPT}"
    VERBATIM)
  file(WRITE "${include_file}"
    "if(EXISTS \"${tests_file}\")\n"
    "  include(\"${tests_file}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

set(_DISTTEST_ADD_TESTS_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/DisttestAddTests.cmake")
