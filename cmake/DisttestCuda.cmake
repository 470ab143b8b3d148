# The optional GPU backend: CUDA Toolkit and NCCL.
#
#   -DDISTTEST_WITH_NCCL=AUTO   (default) build it when both are found
#   -DDISTTEST_WITH_NCCL=ON     build it; configuring fails when one is missing
#   -DDISTTEST_WITH_NCCL=OFF    never look: the CPU-only build
#
# Sets DISTTEST_NCCL_BUILT (ON or OFF) for the rest of the project, and
# defines disttest_add_nccl(target), which adds the NCCL backend to the
# library when it is built. NCCL_ROOT points at a NCCL outside the CUDA
# Toolkit.
set(DISTTEST_WITH_NCCL AUTO CACHE STRING
    "Build the NCCL backend: AUTO (when CUDA and NCCL are found), ON or OFF")
set_property(CACHE DISTTEST_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)

# The oldest NCCL with non-blocking communicators (ncclConfig_t.blocking)
# and ncclCommFinalize.
set(DISTTEST_NCCL_MIN_VERSION 2.14)

string(TOUPPER "${DISTTEST_WITH_NCCL}" _disttest_nccl_mode)
if(_disttest_nccl_mode STREQUAL "AUTO")
  set(_disttest_nccl_mode AUTO)
elseif(_disttest_nccl_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_disttest_nccl_mode ON)
elseif(_disttest_nccl_mode MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(_disttest_nccl_mode OFF)
else()
  message(FATAL_ERROR "DISTTEST_WITH_NCCL is '${DISTTEST_WITH_NCCL}'; "
                      "it takes AUTO, ON or OFF")
endif()

set(DISTTEST_NCCL_BUILT OFF)
if(_disttest_nccl_mode STREQUAL "OFF")
  message(STATUS "disttest: NCCL backend not built: DISTTEST_WITH_NCCL=OFF")
else()
  set(_disttest_nccl_missing "")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    get_filename_component(_disttest_cuda_root "${CUDAToolkit_BIN_DIR}"
                           DIRECTORY)
  endif()
  if(NOT CUDAToolkit_FOUND)
    set(_disttest_nccl_missing
        "the CUDA Toolkit was not found (set CUDAToolkit_ROOT)")
  else()
    find_package(NCCL ${DISTTEST_NCCL_MIN_VERSION} QUIET)
    if(NOT NCCL_FOUND)
      if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
        set(_disttest_nccl_missing
            "NCCL ${NCCL_VERSION} in ${NCCL_INCLUDE_DIR} is older than "
            "${DISTTEST_NCCL_MIN_VERSION}")
      else()
        set(_disttest_nccl_missing "NCCL was not found (")
        if(NOT NCCL_INCLUDE_DIR)
          string(APPEND _disttest_nccl_missing "no nccl.h")
        endif()
        if(NOT NCCL_INCLUDE_DIR AND NOT NCCL_LIBRARY)
          string(APPEND _disttest_nccl_missing ", ")
        endif()
        if(NOT NCCL_LIBRARY)
          string(APPEND _disttest_nccl_missing "no libnccl")
        endif()
        string(APPEND _disttest_nccl_missing
               " in ${_disttest_cuda_root}, NCCL_ROOT or the system paths; "
               "set NCCL_ROOT)")
      endif()
    endif()
  endif()

  if(_disttest_nccl_missing STREQUAL "")
    set(DISTTEST_NCCL_BUILT ON)
    message(STATUS "disttest: NCCL backend built: CUDA "
                   "${CUDAToolkit_VERSION} (${_disttest_cuda_root}), "
                   "NCCL ${NCCL_VERSION} (${NCCL_LIBRARY})")
  elseif(_disttest_nccl_mode STREQUAL "ON")
    message(FATAL_ERROR "DISTTEST_WITH_NCCL=ON, but ${_disttest_nccl_missing}")
  else()
    message(STATUS "disttest: NCCL backend not built: "
                   "${_disttest_nccl_missing}")
  endif()
  unset(_disttest_nccl_missing)
  unset(_disttest_cuda_root)
endif()
unset(_disttest_nccl_mode)

# Adds the NCCL backend's dependencies to `target` (disttest::core) when it
# is built; its sources are in the comm layer.
# The public header nccl_communicator.h includes nccl.h and
# cuda_runtime_api.h, so CUDA and NCCL are public dependencies.
function(disttest_add_nccl target)
  if(NOT DISTTEST_NCCL_BUILT)
    return()
  endif()
  target_link_libraries(${target} PUBLIC CUDA::cudart NCCL::nccl)
  target_compile_definitions(${target} PUBLIC DISTTEST_HAVE_NCCL=1)
endfunction()
