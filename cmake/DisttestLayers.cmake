# The layers (docs/how-it-works.md), one object library each, and the
# arrows between them enforced by the compiler: a layer's sources see only a
# view of the tree, build/layers/<layer>/, with links to its own and its lower
# layers' folders (src/<folder> and include/disttest/<folder>). An include of
# a higher layer's header is "file not found", at the line that has it. The
# harness's rooms (src/harness/<room>/) are layers of their own, so that the
# rank's side never sees the parent's.
#
#   disttest_layer(comm SOURCES src/comm/create.cc ... BELOW base env rendezvous
#                  LIBS gloo)
#
# Every layer sees include/disttest/error.h; the gtest glue (src/glue) also
# sees the
# headers at the top of include/disttest/ (distributed_test.h, ...) and
# include/disttest/internal/.

# The view of `layer` on the tree: its own folders and those of `below`.
# A layer's folder is src/<FOLDER> (its name by default); a FILES_ONLY layer
# shows only the headers at the top of its folder, not the folders below it
# (the harness's vocabulary, whose rooms are layers of their own).
function(_disttest_layer_view layer below extra)
  set(view ${PROJECT_BINARY_DIR}/layers/${layer})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view}/src ${view}/include/disttest)
  foreach(l IN LISTS below ITEMS ${layer})
    get_property(folder GLOBAL PROPERTY DISTTEST_LAYER_FOLDER_${l})
    get_property(files_only GLOBAL PROPERTY DISTTEST_LAYER_FILES_ONLY_${l})
    if(files_only)
      file(MAKE_DIRECTORY ${view}/src/${folder})
      file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.h)
      foreach(header IN LISTS headers)
        get_filename_component(name ${header} NAME)
        file(CREATE_LINK ${header} ${view}/src/${folder}/${name} SYMBOLIC)
      endforeach()
    elseif(EXISTS ${PROJECT_SOURCE_DIR}/src/${folder})
      get_filename_component(parent ${view}/src/${folder} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${view}/src/${folder}
           SYMBOLIC)
    endif()
    if(EXISTS ${PROJECT_SOURCE_DIR}/include/disttest/${folder})
      get_filename_component(parent ${view}/include/disttest/${folder} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/disttest/${folder}
           ${view}/include/disttest/${folder} SYMBOLIC)
    endif()
  endforeach()
  foreach(entry error.h ${extra})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/disttest/${entry}
         ${view}/include/disttest/${entry} SYMBOLIC)
  endforeach()
endfunction()

# One precompiled header for every layer's sources: fmt and the standard
# library, which nearly every file includes, parsed once rather than in each
# of some 110 files. Only headers outside the tree: the arrows between the
# layers stay the compiler's. Built as the layers are (C++20, position-
# independent, the same definitions and warnings), so that each reuses it.
# GCC only, and never a warning: where a layer's flags differ (a project's
# own, MPI's), GCC reads the headers themselves instead; Clang would fail.
function(_disttest_layers_pch)
  if(TARGET disttest_layers_pch_)
    return()
  endif()
  set(anchor ${PROJECT_BINARY_DIR}/layers/pch_anchor.cc)
  # Written only when it changes: a new one would rebuild every layer.
  file(CONFIGURE OUTPUT ${anchor}
       CONTENT "// The layers' precompiled header is built with this file.\n")
  add_library(disttest_layers_pch_ OBJECT ${anchor})
  target_compile_features(disttest_layers_pch_ PUBLIC cxx_std_20)
  target_link_libraries(disttest_layers_pch_ PRIVATE fmt::fmt)
  if(DISTTEST_NCCL_BUILT)
    target_compile_definitions(disttest_layers_pch_ PRIVATE DISTTEST_HAVE_NCCL=1)
  endif()
  set_target_properties(disttest_layers_pch_ PROPERTIES
    POSITION_INDEPENDENT_CODE ON PCH_WARN_INVALID OFF)
  disttest_set_warnings(disttest_layers_pch_)
  target_precompile_headers(disttest_layers_pch_ PRIVATE
    <fmt/format.h> <algorithm> <atomic> <chrono> <cstdint> <cstdio> <cstdlib>
    <cstring> <functional> <map> <memory> <mutex> <optional> <set> <string>
    <string_view> <thread> <unordered_map> <utility> <vector>)
endfunction()

# disttest_layer(name SOURCES ... [BELOW layers...] [LIBS targets...]
#                [FOLDER folder under src/] [FILES_ONLY]
#                [TOP_HEADERS entries of include/disttest/...])
function(disttest_layer name)
  cmake_parse_arguments(ARG "FILES_ONLY" "FOLDER" "SOURCES;BELOW;LIBS;TOP_HEADERS"
                        ${ARGN})
  if(NOT ARG_FOLDER)
    set(ARG_FOLDER ${name})
  endif()
  set_property(GLOBAL PROPERTY DISTTEST_LAYER_FOLDER_${name} ${ARG_FOLDER})
  set_property(GLOBAL PROPERTY DISTTEST_LAYER_FILES_ONLY_${name} ${ARG_FILES_ONLY})
  _disttest_layer_view(${name} "${ARG_BELOW}" "${ARG_TOP_HEADERS}")
  set(view ${PROJECT_BINARY_DIR}/layers/${name})
  add_library(disttest_${name} OBJECT ${ARG_SOURCES})
  target_compile_features(disttest_${name} PUBLIC cxx_std_20)
  target_include_directories(disttest_${name} PRIVATE ${view}/src
                             ${view}/include)
  # fmt in every layer: its definitions are the precompiled header's.
  target_link_libraries(disttest_${name} PRIVATE fmt::fmt ${ARG_LIBS})
  if(DISTTEST_NCCL_BUILT)
    target_compile_definitions(disttest_${name} PRIVATE DISTTEST_HAVE_NCCL=1)
    target_link_libraries(disttest_${name} PRIVATE CUDA::cudart NCCL::nccl)
  endif()
  set_target_properties(disttest_${name} PROPERTIES
    POSITION_INDEPENDENT_CODE ON)
  disttest_set_warnings(disttest_${name})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    _disttest_layers_pch()
    target_precompile_headers(disttest_${name} REUSE_FROM disttest_layers_pch_)
    set_target_properties(disttest_${name} PROPERTIES PCH_WARN_INVALID OFF)
  endif()
endfunction()
