// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator: the CPU backend, Gloo's TCP transport over a Store.
//
//   disttest::TcpStore store(env.master_addr, env.master_port);
//   auto comm = disttest::GlooCommunicator::Create(
//       store, env.rank, env.world_size, {.hostname = "127.0.0.1"});
//   comm->barrier();
//
// Create() is collective: every rank calls it with the same store and prefix.
// The full mesh is built under `prefix` in the store, so several
// communicators can share one store as long as their prefixes differ.
// Fork caveat: Gloo starts an event-loop thread per device; create the
// communicator in the process that uses it, never before fork().
#ifndef DISTTEST_COMM_GLOO_COMMUNICATOR_H_
#define DISTTEST_COMM_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "disttest/comm/comm_options.h"
#include "disttest/comm/communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

// CommOptions (prefix "gloo" here, timeout, arena) and the address to bind.
// With an arena (the harness gives one to the ranks of one host), every
// operation goes through its shared memory and no socket is connected.
struct GlooOptions : CommOptions {
  GlooOptions() { prefix = "gloo"; }
  // Address the rank's sockets bind to; loopback keeps tests off the network.
  std::string hostname = "127.0.0.1";
};

class GlooCommunicator : public Communicator {
 public:
  // Connects the full mesh (without an arena, or with one that only checks
  // calls); throws CommError "[rank 0/2] cannot connect the gloo mesh: ..."
  // on failure. Collective: `where` (the caller's line) names the wait for
  // the other ranks in a report.
  static std::unique_ptr<GlooCommunicator> Create(
      Store& store, int rank, int size, const GlooOptions& options,
      CallSite where = CallSite::current());
  ~GlooCommunicator() override;

  int rank() const override;
  int size() const override;
  const char* backend_name() const override { return "gloo"; }
  bool failed() const override;
  void Park() override { PauseEventLoop(); }

  // Gloo's event-loop thread wakes every 10 ms even when nothing happens.
  // For a communicator that will sit idle (a pooled rank between tests),
  // PauseEventLoop() lets it sleep until ResumeEventLoop() or the next
  // operation, which resumes it first. Pending socket events wait meanwhile.
  void PauseEventLoop();
  void ResumeEventLoop();
  bool event_loop_paused() const;

  // Whether the operations go through a HostArena (GlooOptions::arena).
  bool uses_host_arena() const;

 protected:
  void DoBarrier() override;
  void DoAllReduce(void* data, std::size_t count, DataType type,
                   ReduceOp op) override;
  void DoBroadcast(void* data, std::size_t count, DataType type,
                   int root) override;
  void DoAllGather(const void* in, void* out, std::size_t count,
                   DataType type) override;
  void DoSend(const void* data, std::size_t count, DataType type, int peer,
              std::uint32_t tag) override;
  void DoRecv(void* data, std::size_t count, DataType type, int peer,
              std::uint32_t tag) override;
  // Each is one allreduce, broadcast or allgather of the arena or of Gloo
  // (compared across the ranks as the call it is), through a scratch buffer
  // of up to size() times the data.
  void DoReduce(const void* in, void* out, std::size_t count, DataType type,
                ReduceOp op, int root) override;
  void DoReduceScatter(const void* in, void* out, std::size_t count,
                       DataType type, ReduceOp op) override;
  void DoGather(const void* in, void* out, std::size_t count, DataType type,
                int root) override;
  void DoScatter(const void* in, void* out, std::size_t count, DataType type,
                 int root) override;
  void DoAllToAll(const void* in, void* out, std::size_t count,
                  DataType type) override;
  void DoAllGatherV(const void* in, void* out,
                    std::span<const std::size_t> counts,
                    DataType type) override;
  // The counts of every rank (one allgather: every rank checks every pair),
  // then every rank's input, padded to the largest (another).
  void DoAllToAllV(const void* in, std::span<const std::size_t> in_counts,
                   void* out, std::span<const std::size_t> out_counts,
                   DataType type) override;
  // One allgather of every rank's color and key; each new communicator is
  // a Gloo mesh of its own (without an arena: the ledger's digests compare
  // its calls when the test ends).
  std::unique_ptr<Communicator> DoSplit(int color, int key) override;
  std::unique_ptr<RequestState> DoISend(const void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;
  std::unique_ptr<RequestState> DoIRecv(void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;
  void DoSetTimeout(std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  explicit GlooCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_GLOO_COMMUNICATOR_H_
