# Every dependency comes from the system (Debian packages), through
# find_package: no vendored copies, no downloads at configure time.
include(GNUInstallDirs)
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
find_package(fmt REQUIRED)
find_package(Boost REQUIRED)            # Interprocess is header-only.
find_package(nlohmann_json REQUIRED)    # launch(): JSON configs.
find_package(Gloo REQUIRED)             # Debian: imported target `gloo`.
if(NOT TARGET gloo)
  message(FATAL_ERROR "Gloo was found but defines no target `gloo`")
endif()
# Optional: CUDA Toolkit and NCCL for the GPU backend (DISTTEST_WITH_NCCL).
include(DisttestCuda)

# Taken in with add_subdirectory(): the project around us links disttest,
# whose usage requirements name these targets, and uses GTest::gtest_main
# itself, as it would after find_package(disttest). Imported targets are
# visible only in the directory that found them unless made global.
if(NOT PROJECT_IS_TOP_LEVEL)
  get_directory_property(_disttest_imported IMPORTED_TARGETS)
  foreach(_disttest_target IN LISTS _disttest_imported)
    get_target_property(_disttest_global ${_disttest_target} IMPORTED_GLOBAL)
    if(NOT _disttest_global)
      set_property(TARGET ${_disttest_target} PROPERTY IMPORTED_GLOBAL TRUE)
    endif()
  endforeach()
endif()
