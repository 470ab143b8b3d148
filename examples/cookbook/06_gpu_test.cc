// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 6: one test for GPU runners and CPU runners.
//
// Backend::kAuto gives NCCL where disttest was built with it and every rank
// has a GPU, else Gloo; each rank sees only its own GPU. Write the test
// against comm() and it runs on both. A check that only means something on
// GPUs skips on every rank together when the backend is not NCCL.
#include <disttest/disttest.h>

#include <string>
#include <vector>

namespace {

class AnyDevice : public disttest::DistributedTest {
 protected:
  AnyDevice() { options().backend = disttest::Backend::kAuto; }
};

DIST_TEST_F(AnyDevice, AllreduceAgreesOnEveryBackend, 2, 4) {
  std::vector<float> v(1024, 1.0f);
  comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
  EXPECT_EQ(v.front(), static_cast<float>(world_size()));
  EXPECT_EQ(v.back(), static_cast<float>(world_size()));
}

DIST_TEST_F(AnyDevice, NcclOnlyCheck, 2) {
  if (std::string(comm().backend_name()) != "nccl") {
    GTEST_SKIP() << "needs NCCL and a GPU per rank; this run uses "
                 << comm().backend_name();
  }
  // ... device buffers, streams and NCCL-specific behaviour go here.
  comm().barrier();
}

}  // namespace
