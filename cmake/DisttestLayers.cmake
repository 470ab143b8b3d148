# The layers (README, "How it works"), one object library each, and the
# arrows between them enforced by the compiler: a layer's sources see only a view of the
# tree, build/layers/<layer>/, with links to its own and its lower layers'
# folders (src/<layer> and include/disttest/<layer>). An include of a higher
# layer's header is "file not found", at the line that has it.
#
#   disttest_layer(comm SOURCES src/comm/create.cc ... BELOW base env rendezvous
#                  LIBS gloo)
#
# Every layer sees include/disttest/error.h; the gtest glue (src/glue) also
# sees the
# headers at the top of include/disttest/ (distributed_test.h, ...) and
# include/disttest/internal/.

# The view of `layer` on the tree: its own folders and those of `below`.
function(_disttest_layer_view layer below extra)
  set(view ${PROJECT_BINARY_DIR}/layers/${layer})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view}/src ${view}/include/disttest)
  foreach(l IN LISTS below ITEMS ${layer})
    foreach(pair "src/${l};src/${l}" "include/disttest/${l};include/disttest/${l}")
      list(GET pair 0 from)
      list(GET pair 1 to)
      if(EXISTS ${PROJECT_SOURCE_DIR}/${from})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${from} ${view}/${to} SYMBOLIC)
      endif()
    endforeach()
  endforeach()
  foreach(entry error.h ${extra})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/disttest/${entry}
         ${view}/include/disttest/${entry} SYMBOLIC)
  endforeach()
endfunction()

# disttest_layer(name SOURCES ... [BELOW layers...] [LIBS targets...]
#                [TOP_HEADERS entries of include/disttest/...])
function(disttest_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;BELOW;LIBS;TOP_HEADERS" ${ARGN})
  _disttest_layer_view(${name} "${ARG_BELOW}" "${ARG_TOP_HEADERS}")
  set(view ${PROJECT_BINARY_DIR}/layers/${name})
  add_library(disttest_${name} OBJECT ${ARG_SOURCES})
  target_compile_features(disttest_${name} PUBLIC cxx_std_20)
  target_include_directories(disttest_${name} PRIVATE ${view}/src
                             ${view}/include)
  target_link_libraries(disttest_${name} PRIVATE ${ARG_LIBS})
  if(DISTTEST_NCCL_BUILT)
    target_compile_definitions(disttest_${name} PRIVATE DISTTEST_HAVE_NCCL=1)
    target_link_libraries(disttest_${name} PRIVATE CUDA::cudart NCCL::nccl)
  endif()
  set_target_properties(disttest_${name} PROPERTIES
    POSITION_INDEPENDENT_CODE ON)
  disttest_set_warnings(disttest_${name})
endfunction()
