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
