// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Communicator: the collectives a rank uses to talk to its peers.
//
//   std::vector<float> v(8, float(comm.rank() + 1));
//   comm.allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
//   comm.broadcast(v.data(), v.size(), /*root=*/0);
//   comm.barrier();
//
// Contract (as for MPI and NCCL): every rank calls the same collectives in the
// same order with the same counts. Point-to-point send/recv pair up by peer
// and tag. Every call may throw CommError, whose message names the rank, the
// operation and the cause: "[rank 1/4] allreduce of 8 float32 failed: ...".
// A Communicator is not safe for concurrent use from several threads.
//
// Each operation takes the caller's CallSite (file:line) as a defaulted last
// argument (callers never pass it). In a harness rank every operation is
// recorded, with that file:line, in the rank's collective ledger: at a hang
// the verdict says which collective each rank is in and who called it. A
// backend implements the protected Do*() methods; the public ones record
// around them.
//
// Backends live behind this one front: Gloo (CPU, TCP), always built,
// NCCL (GPUs; nccl_communicator.h), built when CUDA and NCCL are found, and
// MPI (Backend::kMpi), in programs that link disttest::mpi.
//
// The element types and reduce ops (data_type.h) and Request (request.h)
// have headers of their own; this one includes both.
#ifndef DISTTEST_COMM_COMMUNICATOR_H_
#define DISTTEST_COMM_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "disttest/comm/data_type.h"
#include "disttest/comm/request.h"

namespace disttest {

// Which communicator a rank gets.
enum class Backend {
  kGloo,  // CPU, TCP; always available.
  kNccl,  // GPUs. Only when built with CUDA and NCCL (NcclBuilt()).
  kAuto,  // NCCL when built and every rank has a GPU, else Gloo.
  // MPI (CPU): the ranks are processes of an MPI job, and each operation
  // is MPI's, for code that uses disttest's communicator and MPI both.
  // Only in programs that link disttest::mpi (built where CMake finds MPI);
  // a harness test's ranks are then started by mpirun (or srun --mpi=pmix)
  // or, in a plain run, by mpiexec (LaunchMode::kMpiexec).
  kMpi,
};

// "gloo", "nccl", "auto", "mpi"
const char* Name(Backend backend);

namespace internal {
class Ledger;
class SelfMessages;
}  // namespace internal

// Where a call was made, taken as a defaulted argument: as
// std::source_location, which clang before 15 cannot build with libstdc++.
class CallSite {
 public:
  static constexpr CallSite current(const char* file = __builtin_FILE(),
                                    unsigned line = __builtin_LINE()) noexcept {
    return CallSite(file, line);
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }

 private:
  constexpr CallSite(const char* file, unsigned line)
      : file_(file), line_(line) {}
  const char* file_;
  unsigned line_;
};

class Communicator {
 public:
  // Where an operation was called from: every operation takes it as a
  // defaulted last argument, for the harness's collective ledger, which
  // says at a hang which rank is in which collective and who called it.
  using Where = CallSite;

  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo", "nccl" or "mpi".
  virtual const char* backend_name() const = 0;
  // Whether an operation of this communicator has failed (thrown CommError)
  // since it was created: it may be unusable, or out of step with its peers.
  virtual bool failed() const { return false; }
  // A hint that the communicator sits idle until its next operation (a
  // pooled rank between tests): a backend may stop waking meanwhile (Gloo's
  // event loop sleeps). The next operation wakes it. The default does
  // nothing.
  virtual void Park() {}
  // What the harness's reports call this communicator: CommOptions::name,
  // or, without one, `communicator "<prefix>"` (its CommOptions::prefix),
  // "unnamed communicator" without either.
  const std::string& name() const { return name_; }

  // Blocks until every rank has called barrier().
  void barrier(Where where = Where::current());

  // In place: data[i] = op over every rank's data[i].
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op,
                 Where where = Where::current());
  // Out of place: out[i] = op over every rank's in[i]; in is unchanged
  // (in == out is the in-place form).
  void allreduce(const void* in, void* out, std::size_t count, DataType type,
                 ReduceOp op, Where where = Where::current());
  // In place: every rank receives root's `count` elements.
  void broadcast(void* data, std::size_t count, DataType type, int root,
                 Where where = Where::current());
  // Out of place: every rank's out receives root's in; in is read on the
  // root only (in == out is the in-place form).
  void broadcast(const void* in, void* out, std::size_t count, DataType type,
                 int root, Where where = Where::current());
  // out holds size() * count elements: rank r's input at offset r * count.
  void allgather(const void* in, void* out, std::size_t count, DataType type,
                 Where where = Where::current());
  // Blocking point-to-point transfer; pairs with the peer's recv/send of the
  // same tag and count. send() returns once the peer has received the data
  // (like MPI_Ssend, it is not buffered): order sends and receives so that
  // two ranks never both wait to send to each other.
  void send(const void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag = 0, Where where = Where::current());
  void recv(void* data, std::size_t count, DataType type, int peer,
            std::uint32_t tag = 0, Where where = Where::current());

  // The collectives below are MPI's and NCCL's. Buffers of the form
  // size() * count hold one part of `count` elements per rank, rank r's at
  // offset r * count. `in` and `out` may be the same buffer, or overlap in
  // any way: every backend reads the input as it was at the call. NCCL's
  // in-place forms need no copy (in == out; an allgather's in at out +
  // rank() * count; a reduce_scatter's out at in + rank() * count); on
  // NCCL, device buffers that overlap otherwise are read from a copy.
  // A buffer a rank does not use may be null there.
  //
  // root's out (count) = op over every rank's in (count); out is unused on
  // the other ranks.
  void reduce(const void* in, void* out, std::size_t count, DataType type,
              ReduceOp op, int root, Where where = Where::current());
  // out (count) = part rank() of op over every rank's in (size() * count).
  void reduce_scatter(const void* in, void* out, std::size_t count,
                      DataType type, ReduceOp op,
                      Where where = Where::current());
  // root's out (size() * count): part r is rank r's in (count); out is
  // unused on the other ranks.
  void gather(const void* in, void* out, std::size_t count, DataType type,
              int root, Where where = Where::current());
  // out (count) = part rank() of root's in (size() * count); in is unused on
  // the other ranks.
  void scatter(const void* in, void* out, std::size_t count, DataType type,
               int root, Where where = Where::current());
  // out (size() * count): part q is part rank() of rank q's in (size() *
  // count).
  void alltoall(const void* in, void* out, std::size_t count, DataType type,
                Where where = Where::current());
  // out (the sum of counts): rank r's in (counts[r] elements) after rank
  // r - 1's. counts has size() entries, the same on every rank.
  void allgatherv(const void* in, void* out,
                  std::span<const std::size_t> counts, DataType type,
                  Where where = Where::current());
  // Each rank sends in_counts[q] elements to rank q (in holds them packed,
  // rank 0's part first) and receives out_counts[q] from rank q (out, packed
  // the same way). Both have size() entries; rank q's in_counts[r] must be
  // rank r's out_counts[q]. Where two ranks disagree, every rank fails at
  // once, naming them: "alltoallv: rank 0 sends 3 x int32 to rank 1, which
  // expects 4".
  void alltoallv(const void* in, std::span<const std::size_t> in_counts,
                 void* out, std::span<const std::size_t> out_counts,
                 DataType type, Where where = Where::current());

  // A collective: the ranks that pass the same `color` get a new
  // communicator of their own, ranked by `key` (then by their rank here),
  // as MPI_Comm_split and ncclCommSplit do. A rank that passes kNoColor
  // takes part but gets none (nullptr). The new communicator has this one's
  // backend and timeout; it meets its peers through the store this one was
  // made with, which must outlive it.
  static constexpr int kNoColor = -1;
  std::unique_ptr<Communicator> split(int color, int key = 0,
                                      Where where = Where::current());

  // Non-blocking send and receive: they return at once, with a Request to
  // wait() for. Several may be in flight at once, to and from any peers;
  // they pair up by peer and tag in the order they were made (messages
  // from one peer with one tag never overtake each other), and with the
  // blocking send() and recv() alike.
  Request isend(const void* data, std::size_t count, DataType type, int peer,
                std::uint32_t tag = 0, Where where = Where::current());
  Request irecv(void* data, std::size_t count, DataType type, int peer,
                std::uint32_t tag = 0, Where where = Where::current());

  // How long each operation may take from now on before it fails with
  // CommError (at first CommOptions::timeout: the harness's ranks get the
  // test's timeout). For one operation, a ScopedTimeout. One longer than
  // about 115 days (milliseconds::max() for none) is cut to that.
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The timeout it was made with again, undoing set_timeout(): a pooled
  // rank's communicator starts each test so.
  void restore_timeout();
  void set_timeout(std::chrono::milliseconds timeout);

  // Typed conveniences.
  template <typename T>
  void reduce(const T* in, T* out, std::size_t count, ReduceOp op, int root,
              Where where = Where::current()) {
    reduce(in, out, count, internal::DataTypeOf<T>(), op, root, where);
  }
  template <typename T>
  void reduce_scatter(const T* in, T* out, std::size_t count, ReduceOp op,
                      Where where = Where::current()) {
    reduce_scatter(in, out, count, internal::DataTypeOf<T>(), op, where);
  }
  template <typename T>
  void gather(const T* in, T* out, std::size_t count, int root,
              Where where = Where::current()) {
    gather(in, out, count, internal::DataTypeOf<T>(), root, where);
  }
  template <typename T>
  void scatter(const T* in, T* out, std::size_t count, int root,
               Where where = Where::current()) {
    scatter(in, out, count, internal::DataTypeOf<T>(), root, where);
  }
  template <typename T>
  void alltoall(const T* in, T* out, std::size_t count,
                Where where = Where::current()) {
    alltoall(in, out, count, internal::DataTypeOf<T>(), where);
  }
  template <typename T>
  void allgatherv(const T* in, T* out, std::span<const std::size_t> counts,
                  Where where = Where::current()) {
    allgatherv(in, out, counts, internal::DataTypeOf<T>(), where);
  }
  template <typename T>
  void allreduce(T* data, std::size_t count, ReduceOp op,
                 Where where = Where::current()) {
    allreduce(data, count, internal::DataTypeOf<T>(), op, where);
  }
  template <typename T>
  void allreduce(const T* in, T* out, std::size_t count, ReduceOp op,
                 Where where = Where::current()) {
    allreduce(static_cast<const void*>(in), static_cast<void*>(out), count,
              internal::DataTypeOf<T>(), op, where);
  }
  template <typename T>
  void broadcast(T* data, std::size_t count, int root,
                 Where where = Where::current()) {
    broadcast(data, count, internal::DataTypeOf<T>(), root, where);
  }
  template <typename T>
  void broadcast(const T* in, T* out, std::size_t count, int root,
                 Where where = Where::current()) {
    broadcast(static_cast<const void*>(in), static_cast<void*>(out), count,
              internal::DataTypeOf<T>(), root, where);
  }
  template <typename T>
  void alltoallv(const T* in, std::span<const std::size_t> in_counts, T* out,
                 std::span<const std::size_t> out_counts,
                 Where where = Where::current()) {
    alltoallv(in, in_counts, out, out_counts, internal::DataTypeOf<T>(), where);
  }
  template <typename T>
  Request isend(const T* data, std::size_t count, int peer,
                std::uint32_t tag = 0, Where where = Where::current()) {
    return isend(data, count, internal::DataTypeOf<T>(), peer, tag, where);
  }
  template <typename T>
  Request irecv(T* data, std::size_t count, int peer, std::uint32_t tag = 0,
                Where where = Where::current()) {
    return irecv(data, count, internal::DataTypeOf<T>(), peer, tag, where);
  }
  template <typename T>
  void allgather(const T* in, T* out, std::size_t count,
                 Where where = Where::current()) {
    allgather(in, out, count, internal::DataTypeOf<T>(), where);
  }
  template <typename T>
  void send(const T* data, std::size_t count, int peer, std::uint32_t tag = 0,
            Where where = Where::current()) {
    send(data, count, internal::DataTypeOf<T>(), peer, tag, where);
  }
  template <typename T>
  void recv(T* data, std::size_t count, int peer, std::uint32_t tag = 0,
            Where where = Where::current()) {
    recv(data, count, internal::DataTypeOf<T>(), peer, tag, where);
  }

 protected:
  // Whether the buffers the operations take are in host memory, where the
  // front may read them (an isend's, to see it unchanged at its wait());
  // false for NCCL's, on the GPU.
  virtual bool BuffersOnHost() const { return true; }
  // A backend implements the operations; the public methods above record
  // each in the ledger around these.
  virtual void DoBarrier() = 0;
  virtual void DoAllReduce(void* data, std::size_t count, DataType type,
                           ReduceOp op) = 0;
  virtual void DoBroadcast(void* data, std::size_t count, DataType type,
                           int root) = 0;
  virtual void DoAllGather(const void* in, void* out, std::size_t count,
                           DataType type) = 0;
  virtual void DoSend(const void* data, std::size_t count, DataType type,
                      int peer, std::uint32_t tag) = 0;
  virtual void DoRecv(void* data, std::size_t count, DataType type, int peer,
                      std::uint32_t tag) = 0;
  // A backend without one of these throws CommError saying so (the
  // defaults).
  virtual void DoReduce(const void* in, void* out, std::size_t count,
                        DataType type, ReduceOp op, int root);
  virtual void DoReduceScatter(const void* in, void* out, std::size_t count,
                               DataType type, ReduceOp op);
  virtual void DoGather(const void* in, void* out, std::size_t count,
                        DataType type, int root);
  virtual void DoScatter(const void* in, void* out, std::size_t count,
                         DataType type, int root);
  virtual void DoAllToAll(const void* in, void* out, std::size_t count,
                          DataType type);
  virtual void DoAllGatherV(const void* in, void* out,
                            std::span<const std::size_t> counts, DataType type);
  virtual void DoAllToAllV(const void* in,
                           std::span<const std::size_t> in_counts, void* out,
                           std::span<const std::size_t> out_counts,
                           DataType type);
  virtual std::unique_ptr<Communicator> DoSplit(int color, int key);
  virtual std::unique_ptr<RequestState> DoISend(const void* data,
                                                std::size_t count,
                                                DataType type, int peer,
                                                std::uint32_t tag);
  virtual std::unique_ptr<RequestState> DoIRecv(void* data, std::size_t count,
                                                DataType type, int peer,
                                                std::uint32_t tag);
  // Out of place; the defaults copy in to out (host memory) and run the
  // in-place operation. A backend whose buffers are not host memory
  // overrides them.
  virtual void DoAllReduceOutOfPlace(const void* in, void* out,
                                     std::size_t count, DataType type,
                                     ReduceOp op);
  virtual void DoBroadcastOutOfPlace(const void* in, void* out,
                                     std::size_t count, DataType type,
                                     int root);
  // set_timeout() tells the backend; the default does nothing (a backend
  // that reads timeout() before each operation needs no more).
  virtual void DoSetTimeout(std::chrono::milliseconds) {}
  // A backend's Create() says what its timeout is at first.
  // (Cut to the longest deadline disttest keeps, about 115 days.)
  void InitTimeout(std::chrono::milliseconds timeout);
  // A backend's Create() names what it made on `store`: `name` is
  // CommOptions::name, `prefix` its prefix. The ledger tells communicators
  // apart by the keys they rendezvous through (the store's scope and the
  // prefix), their size, and how many this process made of those before:
  // ranks that made one communicator agree on all three, so their calls are
  // compared across the ranks, however each rank named it (two made alike
  // on two stores of one scope cannot be told apart: a test that uses both
  // fails saying so). One whose backend never calls SetName() is not
  // compared.
  void SetName(const std::string& name, const std::string& prefix = "",
               const std::string& store_scope = "");

 private:
  friend class Request;
  class Recorded;  // communicator_recorded.h
  void WaitFor(Request& request);
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
  // The timeout it was made with: a shorter one is the test's own choice.
  std::chrono::milliseconds made_timeout_{std::chrono::minutes(5)};
  // The ledger this communicator records into, and its id there; found on
  // the first operation (the harness installs the ledger before).
  internal::Ledger* ledger_ = nullptr;
  std::uint32_t ledger_id_ = 0;
  std::string name_;
  std::uint64_t key_ = 0;  // Who it is across the ranks (SetName).
  // Its place among the communicators of its identity its rank made
  // (SetName): given back when it goes.
  std::string numbered_as_;
  std::uint64_t number_ = 0;
  // Shared with its requests; false from its destructor on.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // The thread in one of its collectives now, if one is: a second thread
  // that calls one meanwhile is refused (Recorded).
  std::atomic<std::thread::id> collective_thread_{};
  // The isends and irecvs its rank posts to itself, paired here (made on
  // the first).
  internal::SelfMessages& Self();
  std::once_flag self_once_;
  std::shared_ptr<internal::SelfMessages> self_;
};

// Gives the operations of `comm` another timeout while it lives, then puts
// the one before back:
//
//   {
//     disttest::ScopedTimeout quick(comm(), std::chrono::milliseconds(200));
//     EXPECT_THROW(comm().recv(&x, 1, 3), disttest::CommError);
//   }
class ScopedTimeout {
 public:
  ScopedTimeout(Communicator& comm, std::chrono::milliseconds timeout)
      : comm_(comm), before_(comm.timeout()) {
    comm_.set_timeout(timeout);
  }
  ~ScopedTimeout() { comm_.set_timeout(before_); }
  ScopedTimeout(const ScopedTimeout&) = delete;
  ScopedTimeout& operator=(const ScopedTimeout&) = delete;

 private:
  Communicator& comm_;
  std::chrono::milliseconds before_;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_COMMUNICATOR_H_
