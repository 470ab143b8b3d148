# Run by disttest_discover_tests() after each build of a test binary
# (cmake -P): lists its tests, asks the distributed ones for their ranks and
# GPUs, and writes CTEST_FILE with one add_test() per test.
cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" extra_args "${TEST_EXTRA_ARGS}")
string(REPLACE "|" ";" properties "${TEST_PROPERTIES}")

execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env --unset=GTEST_OUTPUT --unset=GTEST_FILTER
          --unset=DISTTEST_SKIP_EXIT_CODE
          "${TEST_EXECUTABLE}" --gtest_list_tests ${extra_args}
  WORKING_DIRECTORY "${TEST_WORKING_DIR}"
  TIMEOUT ${TEST_DISCOVERY_TIMEOUT}
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE listing_err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR
    "disttest_discover_tests: ${TEST_EXECUTABLE} --gtest_list_tests failed "
    "(${rc}):\n${listing}${listing_err}")
endif()

# The tests, one per line ("[" and "]" masked: in a CMake list an unmatched
# bracket, as in a "# GetParam() = [1" comment, would join lines).
string(REPLACE "[" "<disttest-lb>" listing "${listing}")
string(REPLACE "]" "<disttest-rb>" listing "${listing}")
string(REPLACE ";" "<disttest-sc>" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
# The filter that selects `name` alone: gtest reads '-' (the tests left
# out), ':' (another pattern) and '*' and '?' (wildcards) in it, which a
# typed test's name may hold ("int-32"): each becomes '?', as the rerun
# line disttest prints does. (Unescaped, the filter matched no test, and a
# run of no test passes.)
function(disttest_filter_of name out)
  string(REGEX REPLACE "[-:*?]" "?" filter "${name}")
  set(${out} "${filter}" PARENT_SCOPE)
endfunction()

set(tests "")
set(distributed "")
set(suite "")
foreach(line IN LISTS lines)
  string(REPLACE "<disttest-lb>" "[" line "${line}")
  string(REPLACE "<disttest-rb>" "]" line "${line}")
  string(REPLACE "<disttest-sc>" ";" line "${line}")
  if(line STREQUAL "")
    continue()
  endif()
  # gtest's comment after a name starts with two spaces and '#'; a name may
  # hold spaces and '#' (a typed test's name generator), so the name ends
  # where the first such comment starts.
  string(FIND "${line}" "  # " comment)
  if(comment GREATER_EQUAL 0)
    string(SUBSTRING "${line}" 0 ${comment} named)
  else()
    set(named "${line}")
  endif()
  if(NOT line MATCHES "^ ")
    # A suite: "Suite.", "Conv/unsigned int.  # TypeParam = unsigned int".
    # Another line (gtest_main's "Running main() from ...") ends the suite
    # before it.
    set(suite "")
    set(suite_line "${line}")
    if(named MATCHES "^(.*[^ ])\\.$")
      set(suite "${CMAKE_MATCH_1}")
    endif()
  elseif(named MATCHES "^  ([^ ].*[^ ]|[^ ])$")
    if(suite STREQUAL "")
      message(FATAL_ERROR
        "disttest_discover_tests: ${TEST_EXECUTABLE} --gtest_list_tests "
        "lists the test \"${CMAKE_MATCH_1}\" under no suite it can read "
        "(the line before it: \"${suite_line}\"); its listing:\n${listing}")
    endif()
    set(test "${suite}.${CMAKE_MATCH_1}")
    if(test MATCHES ";")
      # A CMake list would cut it in two, each a filter that matches no test:
      # a run of no test passes.
      message(FATAL_ERROR
        "disttest_discover_tests: the test \"${test}\" of ${TEST_EXECUTABLE} "
        "has a ';' in its name, which CMake cannot register as one test "
        "(it would run none): rename it (a typed or parameterized test's "
        "name generator)")
    endif()
    list(APPEND tests "${test}")
    # "Name/4ranks", and a DIST_TEST_P's "Name/4ranks/param".
    if(test MATCHES "/[0-9]+ranks(/[^/]+)?$")
      disttest_filter_of("${test}" filter)
      string(APPEND distributed ":${filter}")
    endif()
  else()
    message(FATAL_ERROR
      "disttest_discover_tests: cannot read the line \"${line}\" of "
      "${TEST_EXECUTABLE} --gtest_list_tests: a test would go unregistered")
  endif()
endforeach()

if(tests STREQUAL "")
  # A filter in EXTRA_ARGS that matches nothing ("Pra.*" for "Par.*") would
  # leave ctest with nothing to run, and "No tests were found" is no failure.
  message(WARNING
    "disttest_discover_tests: ${TEST_EXECUTABLE} --gtest_list_tests "
    "${extra_args} lists no test: ctest will run none of it")
endif()

# Each distributed test writes "<name> <ranks> <gpus per rank>" and skips.
set(resources_file "${CTEST_FILE}.resources")
file(REMOVE "${resources_file}")
string(SUBSTRING "${distributed}:" 1 -1 distributed)
set(rc 0)
set(ignored "")
if(NOT distributed STREQUAL "")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env --unset=GTEST_OUTPUT --unset=GTEST_FILTER
            --unset=DISTTEST_SKIP_EXIT_CODE
            "DISTTEST_LIST_RESOURCES=${resources_file}" DISTTEST_LAUNCHER=spawn
            "${TEST_EXECUTABLE}" "--gtest_filter=${distributed}" ${extra_args}
    WORKING_DIRECTORY "${TEST_WORKING_DIR}"
    TIMEOUT ${TEST_DISCOVERY_TIMEOUT}
    OUTPUT_VARIABLE ignored
    ERROR_VARIABLE ignored
    RESULT_VARIABLE rc)
endif()
if(NOT rc MATCHES "^[01]$")
  message(FATAL_ERROR
    "disttest_discover_tests: listing the ranks of ${TEST_EXECUTABLE}'s tests "
    "failed (${rc}):\n${ignored}")
endif()
# Four lists in step: a listed test, its ranks, its GPUs a rank, and
# whether its ranks may share GPUs (options().share_gpus).
set(listed_names "")
set(listed_ranks "")
set(listed_gpus "")
set(listed_share "")
if(EXISTS "${resources_file}")
  file(STRINGS "${resources_file}" resource_lines)
  file(REMOVE "${resources_file}")
  foreach(line IN LISTS resource_lines)
    if(line MATCHES "^(.+) ([0-9]+) ([0-9]+)( share)?$")
      list(APPEND listed_names "${CMAKE_MATCH_1}")
      list(APPEND listed_ranks "${CMAKE_MATCH_2}")
      list(APPEND listed_gpus "${CMAKE_MATCH_3}")
      if(CMAKE_MATCH_4)
        list(APPEND listed_share 1)
      else()
        list(APPEND listed_share 0)
      endif()
    endif()
  endforeach()
endif()

set(script "")
foreach(test IN LISTS tests)
  set(name "${TEST_PREFIX}${test}")
  set(args "")
  foreach(arg IN LISTS extra_args)
    string(APPEND args " [==[${arg}]==]")
  endforeach()
  disttest_filter_of("${test}" filter)
  string(APPEND script
    "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] "
    "[==[--gtest_filter=${filter}]==]${args})\n")
  set(props "WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==]")
  # A skip is a skip by the exit status alone: disttest ends a run whose
  # every test skipped, and nothing failed, with DISTTEST_SKIP_EXIT_CODE.
  # (Matching gtest's "[  SKIPPED ]" in the output instead would call a run
  # skipped that failed after its skip: ctest takes a match over the exit
  # status.)
  string(APPEND props " SKIP_RETURN_CODE 77")
  if(test MATCHES "(^|\\.)DISABLED_")
    string(APPEND props " DISABLED TRUE")
  endif()
  list(FIND listed_names "${test}" at)
  set(groups "")
  if(at GREATER_EQUAL 0)
    list(GET listed_ranks ${at} ranks)
    list(GET listed_gpus ${at} gpus)
    list(GET listed_share ${at} share)
    string(APPEND props " PROCESSORS ${ranks}")
    if(gpus GREATER 0)
      set(group "${ranks}")
      foreach(i RANGE 1 ${gpus})
        string(APPEND group ",gpus:1")
      endforeach()
      math(EXPR needed "${ranks} * ${gpus}")
      string(REGEX REPLACE "^[0-9]+" "\${_disttest_groups}" shared_group
        "${group}")
      # _disttest_gpus: counted by the include file when ctest starts. A
      # test that shares GPUs (options().share_gpus, or DISTTEST_SHARE_GPUS=1
      # when ctest runs) and has too few takes a group for each rank's worth
      # of GPUs there is, its ranks round-robin on them.
      string(APPEND groups
        "if(_disttest_gpus GREATER_EQUAL ${needed})\n"
        "  set_tests_properties([==[${name}]==] PROPERTIES "
        "RESOURCE_GROUPS [==[${group}]==])\n"
        "elseif(_disttest_gpus GREATER_EQUAL ${gpus} AND (${share} OR "
        "\"\$ENV{DISTTEST_SHARE_GPUS}\" STREQUAL \"1\"))\n"
        "  math(EXPR _disttest_groups \"\${_disttest_gpus} / ${gpus}\")\n"
        "  set_tests_properties([==[${name}]==] PROPERTIES "
        "RESOURCE_GROUPS \"${shared_group}\")\n"
        "endif()\n")
    endif()
  endif()
  # The user's own ENVIRONMENT_MODIFICATION keeps ours.
  set(skip_code "DISTTEST_SKIP_EXIT_CODE=set:77")
  set(environment_next FALSE)
  foreach(p IN LISTS properties)
    if(environment_next)
      set(p "${p};${skip_code}")
      set(skip_code "")
    endif()
    set(environment_next FALSE)
    if(p STREQUAL "ENVIRONMENT_MODIFICATION")
      set(environment_next TRUE)
    endif()
    string(APPEND props " [==[${p}]==]")
  endforeach()
  if(NOT skip_code STREQUAL "")
    string(APPEND props " ENVIRONMENT_MODIFICATION [==[${skip_code}]==]")
  endif()
  string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES ${props})\n${groups}")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
