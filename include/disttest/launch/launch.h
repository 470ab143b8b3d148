// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// launch(): InternLM's start-up sequence for a C++ program.
//
//   disttest::Context ctx = disttest::launch(
//       disttest::Config::FromFile("train.json"), rank, world_size,
//       "10.0.0.1", 29500, disttest::Backend::kGloo);
//   ctx.group(disttest::ParallelMode::kTensor).allreduce(...);
//   std::mt19937_64 rng(ctx.seed(disttest::ParallelMode::kTensor));
//
// In order: validate the config against the world (Layout, config.h);
// rendezvous (rank 0 hosts the store on host:port, the others connect,
// retrying until it is up); the global communicator; every parallel group
// (every rank walks every mode in kAllParallelModes order and joins its own
// group of each, so no rank waits on one that is elsewhere); the node: the
// hostnames of all ranks give the processes on this node and, when not
// given, the local rank; the device (NCCL: local_rank, or global rank %
// device count; -1 on Gloo); the seeds (seed(mode), config.h's ModeSeed;
// std::srand(seed) too); and global rank 0 prints one line:
//   [disttest] distributed environment is initialised: world 8 (data 2 x
//   pipeline 2 x tensor 2, zero1 2), backend gloo, 4 processes on this node
//
// launch_from_env() reads rank, sizes and the store's address from the
// launcher (torchrun, srun, mpirun; launcher_env.h) and calls launch().
//
// Errors throw disttest::Error subclasses: ConfigError for the config, the
// arguments and the environment, StoreError when rendezvous fails, CommError
// from the backend.
#ifndef DISTTEST_LAUNCH_LAUNCH_H_
#define DISTTEST_LAUNCH_LAUNCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/launch/config.h"
#include "disttest/launch/launcher_env.h"
#include "disttest/rendezvous/store.h"

namespace disttest {
namespace internal {
struct ContextAccess;
}  // namespace internal

class Context {
 public:
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  int rank() const;
  int world_size() const;
  // This process's index among the ranks on its node, and their number.
  int local_rank() const;
  int local_size() const;
  // The CUDA device this rank uses (NCCL); -1 on Gloo.
  int device() const;

  const Config& config() const;
  const Layout& layout() const;

  // The communicator of this rank's group of `mode`.
  Communicator& group(ParallelMode mode);
  int rank_in(ParallelMode mode) const;
  int size(ParallelMode mode) const;

  // The base seed (the same on every rank) and the seed of a mode.
  std::uint64_t seed() const;
  std::uint64_t seed(ParallelMode mode) const;

  // The store every rank reached at rendezvous.
  Store& store();

 private:
  friend struct internal::ContextAccess;  // launch() builds one.
  struct State;
  explicit Context(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

Context launch(const Config& config, int rank, int world_size,
               const std::string& host, int port,
               Backend backend = Backend::kNccl,
               std::optional<int> local_rank = std::nullopt,
               std::uint64_t seed = 1024);

Context launch_from_env(const Config& config, Backend backend = Backend::kNccl,
                        std::uint64_t seed = 1024);

}  // namespace disttest

#endif  // DISTTEST_LAUNCH_LAUNCH_H_
