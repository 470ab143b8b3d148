// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MpiCommunicator: Backend::kMpi, disttest's Communicator over an MPI
// communicator of its own, for code under test that uses MPI and
// disttest's communicator both.
//
//   auto comm = CreateCommunicator(Backend::kMpi, store, rank, size, {});
//   comm->allreduce(v.data(), v.size(), ReduceOp::kSum);  // MPI_Iallreduce
//
// What it adds to MPI, as the other backends do:
// - Before each collective the ranks compare their calls (an allgather of
//   each rank's description, the operation, count, element type, reduce op
//   and root): a rank that calls another collective, or the same with
//   another count, fails every rank at once, naming each rank's call, before
//   any data is used. MPI leaves such a program undefined (wrong data, a
//   truncation error, or a hang).
// - A send carries its count and element type: a recv that expects others
//   fails, naming both, and writes nothing into its buffer.
// - Every operation is bounded by the communicator's timeout (MPI's
//   non-blocking calls, polled), and ends when the harness cuts the
//   communicators (a peer died or left, the test timed out), with the
//   harness's reason: a rank waits in MPI no longer than in Gloo. Data goes
//   through buffers of its own (an isend's is copied when it is posted), so
//   an operation given up never writes into the caller's memory afterwards;
//   the communicator then refuses every later operation (MPI may still
//   complete the one given up: its calls would be out of step). A receive
//   that timed out gives up nothing (it had not taken a message).
// - Making and splitting a communicator are MPI's blocking calls
//   (MPI_Comm_create_group, MPI_Comm_split), entered once every member has
//   arrived (through the store; the comparison's allgather).
// - MPI counts are int: a buffer of more bytes than INT_MAX is refused.
// MPI must run at MPI_THREAD_FUNNELED or above, and every operation is
// called from MPI's main thread.
#ifndef DISTTEST_SRC_MPI_MPI_COMMUNICATOR_H_
#define DISTTEST_SRC_MPI_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "disttest/comm/collective_call.h"
#include "disttest/comm/comm_options.h"
#include "disttest/comm/communicator.h"
#include "disttest/rendezvous/store.h"

namespace disttest::internal {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over the `size` ranks that call it with the same store and
  // options: each says its rank in MPI_COMM_WORLD under options.prefix, and
  // they make a communicator of their own (MPI_Comm_create_group), ranked
  // as given. Throws CommError where MPI cannot be used (not started by an
  // MPI launcher, no thread support), naming why.
  static std::unique_ptr<Communicator> Create(Store& store, int rank, int size,
                                              const CommOptions& options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "mpi"; }
  bool failed() const override { return failed_; }

  // The state of the receives in flight, shared with their requests.
  struct Receives;

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
  void DoAllToAllV(const void* in, std::span<const std::size_t> in_counts,
                   void* out, std::span<const std::size_t> out_counts,
                   DataType type) override;
  std::unique_ptr<Communicator> DoSplit(int color, int key) override;
  std::unique_ptr<RequestState> DoISend(const void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;
  std::unique_ptr<RequestState> DoIRecv(void* data, std::size_t count,
                                        DataType type, int peer,
                                        std::uint32_t tag) override;

 private:
  MpiCommunicator(MPI_Comm comm, int rank, int size, const CommOptions& options,
                  std::string scope);

  // Runs one operation: a CommError from it (or any MPI error) becomes
  // "[rank r/n] <what> failed: <why>", and the communicator failed().
  template <typename Op>
  void Guard(const std::string& what, Op&& op);
  // Every rank's call compared with this one's; throws, naming each rank's,
  // where they differ.
  void Agree(const CollectiveCall& call);
  // Waits for `request`, polling, at most the timeout, and not past a cut of
  // the harness's. `keep`: the buffers it uses, kept for ever if it is given
  // up (MPI may still write them).
  void Wait(MPI_Request& request,
            std::vector<std::shared_ptr<std::vector<char>>> keep = {});
  // The peer and tag a point-to-point operation may use, or CommError.
  void CheckPeer(int peer, std::uint32_t tag) const;
  // A send or receive in flight; `op` names it ("isend", "recv").
  std::unique_ptr<RequestState> PostSend(const void* data, std::size_t count,
                                         DataType type, int peer,
                                         std::uint32_t tag, const char* op);
  std::unique_ptr<RequestState> PostRecv(void* data, std::size_t count,
                                         DataType type, int peer,
                                         std::uint32_t tag, const char* op);

  MPI_Comm comm_;
  int rank_;
  int size_;
  CommOptions options_;
  std::string scope_;   // The store's, for the communicators split from it.
  std::uint64_t cuts_;  // The harness's cuts when it was made.
  std::uint64_t collectives_ = 0;  // Compared so far: their numbers.
  int splits_ = 0;
  bool failed_ = false;
  // Why an operation was given up with its MPI request still pending:
  // every later one is refused (the ranks are out of step).
  std::string broken_;
  std::shared_ptr<Receives> receives_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_MPI_MPI_COMMUNICATOR_H_
