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
// Backends live behind this one front: Gloo (CPU, TCP), always built, and
// NCCL (GPUs; nccl_communicator.h), built when CUDA and NCCL are found.
#ifndef DISTTEST_COMM_COMMUNICATOR_H_
#define DISTTEST_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace disttest {

// Which communicator a rank gets.
enum class Backend {
  kGloo,  // CPU, TCP; always available.
  kNccl,  // GPUs. Only when built with CUDA and NCCL (NcclBuilt()).
  kAuto,  // NCCL when built and every rank has a GPU, else Gloo.
};

enum class ReduceOp { kSum, kProd, kMin, kMax };

enum class DataType { kInt8, kUint8, kInt32, kInt64, kFloat32, kFloat64 };

// Bytes per element of `type`.
std::size_t SizeOf(DataType type);
// "float32", "int64", ...
const char* Name(DataType type);
// "sum", "prod", "min", "max"
const char* Name(ReduceOp op);
// "gloo", "nccl", "auto"
const char* Name(Backend backend);

namespace internal {
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DataType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return DataType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DataType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DataType::kInt64;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DataType::kInt8;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DataType::kUint8;
  else
    static_assert(sizeof(T) == 0, "unsupported element type");
}
}  // namespace internal

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo" or "nccl".
  virtual const char* backend_name() const = 0;
  // Whether an operation of this communicator has failed (thrown CommError)
  // since it was created: it may be unusable, or out of step with its peers.
  virtual bool failed() const { return false; }
  // A hint that the communicator sits idle until its next operation (a
  // pooled rank between tests): a backend may stop waking meanwhile (Gloo's
  // event loop sleeps). The next operation wakes it. The default does
  // nothing.
  virtual void Park() {}

  // Blocks until every rank has called barrier().
  virtual void barrier() = 0;

  // In place: data[i] = op over every rank's data[i].
  virtual void allreduce(void* data, std::size_t count, DataType type,
                         ReduceOp op) = 0;
  // In place: every rank receives root's `count` elements.
  virtual void broadcast(void* data, std::size_t count, DataType type,
                         int root) = 0;
  // out holds size() * count elements: rank r's input at offset r * count.
  virtual void allgather(const void* in, void* out, std::size_t count,
                         DataType type) = 0;
  // Blocking point-to-point transfer; pairs with the peer's recv/send of the
  // same tag and count. send() returns once the peer has received the data
  // (like MPI_Ssend, it is not buffered): order sends and receives so that
  // two ranks never both wait to send to each other.
  virtual void send(const void* data, std::size_t count, DataType type,
                    int peer, std::uint32_t tag = 0) = 0;
  virtual void recv(void* data, std::size_t count, DataType type, int peer,
                    std::uint32_t tag = 0) = 0;

  // Typed conveniences.
  template <typename T>
  void allreduce(T* data, std::size_t count, ReduceOp op) {
    allreduce(data, count, internal::DataTypeOf<T>(), op);
  }
  template <typename T>
  void broadcast(T* data, std::size_t count, int root) {
    broadcast(data, count, internal::DataTypeOf<T>(), root);
  }
  template <typename T>
  void allgather(const T* in, T* out, std::size_t count) {
    allgather(in, out, count, internal::DataTypeOf<T>());
  }
  template <typename T>
  void send(const T* data, std::size_t count, int peer, std::uint32_t tag = 0) {
    send(data, count, internal::DataTypeOf<T>(), peer, tag);
  }
  template <typename T>
  void recv(T* data, std::size_t count, int peer, std::uint32_t tag = 0) {
    recv(data, count, internal::DataTypeOf<T>(), peer, tag);
  }
};

}  // namespace disttest

#endif  // DISTTEST_COMM_COMMUNICATOR_H_
