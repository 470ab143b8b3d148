// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/create.h"

#include <fmt/format.h>

#include "disttest/error.h"

namespace disttest {

std::unique_ptr<Communicator> CreateCommunicator(Backend backend, Store& store,
                                                 int rank, int size,
                                                 const GlooOptions& options) {
  switch (backend) {
    case Backend::kNccl:
      throw CommError(fmt::format(
          "[rank {}/{}] backend nccl is not available: disttest was built "
          "without CUDA and NCCL",
          rank, size));
    case Backend::kAuto:  // Without NCCL in the build, auto means gloo.
    case Backend::kGloo:
      return GlooCommunicator::Create(store, rank, size, options);
  }
  throw CommError(fmt::format("unknown backend {}", static_cast<int>(backend)));
}

}  // namespace disttest
