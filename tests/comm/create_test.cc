// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CreateCommunicator and the build's NCCL switch, on a machine without GPUs:
// a CPU-only build names what is missing for Backend::kNccl, and an NCCL
// build fails on a machine without a CUDA device with a CommError that names
// the rank and the CUDA error, never a crash or a hang.
#include "disttest/comm/create.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "rendezvous/server_thread.h"

#if DISTTEST_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "disttest/comm/nccl_communicator.h"
#endif

namespace disttest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

TEST(CreateCommunicatorTest, NcclBuiltMatchesTheBuild) {
#if DISTTEST_HAVE_NCCL
  EXPECT_TRUE(NcclBuilt());
#else
  EXPECT_FALSE(NcclBuilt());
  EXPECT_EQ(CudaDeviceCount(), 0);
#endif
}

TEST(CreateCommunicatorTest, NcclInACpuBuildIsAClearError) {
  if (NcclBuilt()) GTEST_SKIP() << "disttest is built with NCCL";
  TcpStore store("127.0.0.1", 1, milliseconds(10));
  try {
    CreateCommunicator(Backend::kNccl, store, 0, 1, {});
    FAIL() << "no exception";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[rank 0/1] backend nccl is not "
                                    "available: disttest was built without "
                                    "CUDA and NCCL"));
  }
}

TEST(CreateCommunicatorTest, AutoWithoutACudaDeviceIsGloo) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  testing::ServerThread server;
  TcpStore client("127.0.0.1", server.port(), seconds(10));
  GlooOptions options;
  options.timeout = seconds(10);
  auto comm = CreateCommunicator(Backend::kAuto, client, 0, 1, options);
  EXPECT_STREQ(comm->backend_name(), "gloo");
  EXPECT_EQ(DeviceOf(*comm), -1);
  comm->barrier();
}

#if DISTTEST_HAVE_NCCL

// Skips where CUDA sees a device: these cases are about a machine without.
bool HasCudaDevice() {
  int count = 0;
  const bool has = cudaGetDeviceCount(&count) == cudaSuccess && count >= 1;
  cudaGetLastError();
  return has;
}

TEST(NcclCommunicatorTest, WithoutACudaDeviceCreateThrowsNamingRankAndCause) {
  if (HasCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  testing::ServerThread server;
  TcpStore client("127.0.0.1", server.port(), seconds(10));
  NcclOptions options;
  options.timeout = seconds(10);
  const auto start = std::chrono::steady_clock::now();
  try {
    NcclCommunicator::Create(client, 0, 1, options);
    FAIL() << "no exception";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("[rank 0/1] cannot create the nccl communicator on "
                          "device 0: cudaSetDevice(0) failed: "));
    EXPECT_THAT(e.what(), HasSubstr("(cudaError"));  // The CUDA error's name.
  }
  // Fails at once: nothing waits for the timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

TEST(NcclCommunicatorTest, WithoutACudaDeviceCreateCommunicatorThrowsToo) {
  if (HasCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  testing::ServerThread server;
  TcpStore client("127.0.0.1", server.port(), seconds(10));
  GlooOptions options;
  options.timeout = seconds(10);
  try {
    CreateCommunicator(Backend::kNccl, client, 0, 1, options, /*device=*/0);
    FAIL() << "no exception";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[rank 0/1] cannot create the nccl "
                                    "communicator on device 0: cudaSetDevice"));
  }
}

TEST(NcclCommunicatorTest, InvalidRankOrSizeIsAClearError) {
  TcpStore store("127.0.0.1", 1, milliseconds(10));
  try {
    NcclCommunicator::Create(store, 2, 2, {});
    FAIL() << "no exception";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[rank 2/2] cannot create the nccl "
                                    "communicator: invalid rank or size"));
  }
}

#endif  // DISTTEST_HAVE_NCCL

}  // namespace
}  // namespace disttest
