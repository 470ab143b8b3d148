# Warnings and sanitizers, applied to every target the project builds.
# DISTTEST_SANITIZE: OFF, ON or address (ASan+UBSan), thread (TSan). Any
# sanitizer build leaves out what it adds nothing to (DISTTEST_SANITIZER_FLAGS
# is empty without one).
string(TOLOWER "${DISTTEST_SANITIZE}" disttest_sanitize)
set(DISTTEST_SANITIZER_FLAGS "")
if(disttest_sanitize MATCHES "^(|off|no|false|n|0)$")
  # None.
elseif(disttest_sanitize STREQUAL "thread")
  set(DISTTEST_SANITIZER_FLAGS -fsanitize=thread)
  # GCC says ThreadSanitizer cannot see fences: the seqlocks' readers, whose
  # fences they are, are not checked (src/base/unordered_reads.h).
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
elseif(disttest_sanitize MATCHES "^(on|yes|true|y|1|address)$")
  set(DISTTEST_SANITIZER_FLAGS -fsanitize=address,undefined)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
else()
  message(FATAL_ERROR "DISTTEST_SANITIZE=${DISTTEST_SANITIZE}: expected OFF, "
                      "ON (or address: ASan+UBSan) or thread (TSan)")
endif()
if(DISTTEST_SANITIZER_FLAGS)
  add_link_options(${DISTTEST_SANITIZER_FLAGS})
endif()
# A project that takes disttest in with add_subdirectory() and its own
# -fsanitize=thread: the same quiet about the seqlocks' fences.
if(NOT disttest_sanitize STREQUAL "thread" AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread"
   AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-tsan)
endif()

function(disttest_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         $<$<BOOL:${DISTTEST_WERROR}>:-Werror>)
endfunction()
