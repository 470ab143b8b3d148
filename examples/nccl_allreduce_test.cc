// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NCCL on GPUs: one GPU per rank, collectives on device buffers, at world
// sizes 1, 2, 4 and 8. Built only when disttest is built with CUDA and NCCL.
//
//   ./build/examples/nccl_allreduce_test
//   ./build/examples/nccl_allreduce_test --gtest_filter='*RawNccl*'
//
// A world size needs as many GPUs as ranks; one the machine cannot give is
// skipped ("needs 8 GPUs, found 2") while the smaller sizes still run.
// comm() is an NcclCommunicator: its portable ops take device pointers (host
// pointers work too, staged through the GPU), and a dynamic_cast reaches the
// raw ncclComm_t and cudaStream_t for NCCL calls of the test's own.
#include <cuda_runtime_api.h>
#include <disttest/comm/nccl_communicator.h>
#include <disttest/disttest.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

namespace {

// A device array of `n` Ts, freed when it goes out of scope.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (cudaMalloc(&data_, n * sizeof(T)) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

  cudaError_t Upload(const std::vector<T>& host) {
    return cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  std::size_t n_;
  T* data_ = nullptr;
};

// Every test of this fixture runs on NCCL, each rank on its own GPU.
class Nccl : public disttest::DistributedTest {
 protected:
  Nccl() {
    options().backend = disttest::Backend::kNccl;
    options().timeout = std::chrono::seconds(120);
  }
};

DIST_TEST_F(Nccl, AllReduceSumsADeviceBuffer, 1, 2, 4, 8) {
  const int n = world_size();
  DeviceBuffer<float> values(1024);
  ASSERT_NE(values.get(), nullptr);
  ASSERT_EQ(values.Upload(std::vector<float>(1024, float(rank() + 1))),
            cudaSuccess);
  comm().allreduce(values.get(), values.size(), disttest::ReduceOp::kSum);
  EXPECT_EQ(values.Download(), std::vector<float>(1024, n * (n + 1) / 2.0f));
}

// cudaMemset runs on stream 0; the communicator's stream waits for it.
DIST_TEST_F(Nccl, AllReduceAfterCudaMemset, 1, 2, 4, 8) {
  DeviceBuffer<std::uint8_t> ones(4096);
  ASSERT_NE(ones.get(), nullptr);
  ASSERT_EQ(cudaMemset(ones.get(), 1, ones.bytes()), cudaSuccess);
  comm().allreduce(ones.get(), ones.size(), disttest::ReduceOp::kSum);
  EXPECT_EQ(ones.Download(),
            std::vector<std::uint8_t>(4096, std::uint8_t(world_size())));
}

DIST_TEST_F(Nccl, BroadcastFromTheLastRank, 1, 2, 4, 8) {
  const int root = world_size() - 1;
  DeviceBuffer<double> values(333);
  ASSERT_NE(values.get(), nullptr);
  ASSERT_EQ(values.Upload(std::vector<double>(333, rank() == root ? 2.5 : -1)),
            cudaSuccess);
  comm().broadcast(values.get(), values.size(), root);
  EXPECT_EQ(values.Download(), std::vector<double>(333, 2.5));
}

DIST_TEST_F(Nccl, AllGatherPlacesEachRankAtItsOffset, 1, 2, 4, 8) {
  const int n = world_size();
  DeviceBuffer<std::int32_t> mine(16), all(16 * static_cast<std::size_t>(n));
  ASSERT_NE(mine.get(), nullptr);
  ASSERT_NE(all.get(), nullptr);
  ASSERT_EQ(mine.Upload(std::vector<std::int32_t>(16, rank())), cudaSuccess);
  comm().allgather(mine.get(), all.get(), mine.size());
  std::vector<std::int32_t> expected;
  for (int r = 0; r < n; ++r) expected.insert(expected.end(), 16, r);
  EXPECT_EQ(all.Download(), expected);
}

// Host buffers work as on Gloo; they are copied through the GPU.
DIST_TEST_F(Nccl, HostBuffersAreStagedThroughTheGpu, 1, 2, 4, 8) {
  std::vector<std::int64_t> v(100, rank());
  comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kMax);
  EXPECT_EQ(v, std::vector<std::int64_t>(100, world_size() - 1));
}

// send() waits until NCCL has sent, so even ranks send first and odd ranks
// receive first (as with Gloo); a ring needs two ranks or more.
DIST_TEST_F(Nccl, SendRecvRing, 2, 4, 8) {
  const int n = world_size();
  const int next = (rank() + 1) % n;
  const int prev = (rank() + n - 1) % n;
  DeviceBuffer<float> out(256), in(256);
  ASSERT_NE(out.get(), nullptr);
  ASSERT_NE(in.get(), nullptr);
  ASSERT_EQ(out.Upload(std::vector<float>(256, float(rank()))), cudaSuccess);
  if (rank() % 2 == 0) {
    comm().send(out.get(), out.size(), next);
    comm().recv(in.get(), in.size(), prev);
  } else {
    comm().recv(in.get(), in.size(), prev);
    comm().send(out.get(), out.size(), next);
  }
  EXPECT_EQ(in.Download(), std::vector<float>(256, float(prev)));
}

// The raw handles: an NCCL call of the test's own on the communicator's
// stream. The communicator is non-blocking, so the call may answer
// ncclInProgress; Synchronize() waits for it and for the stream.
DIST_TEST_F(Nccl, RawNcclOnTheCommunicatorsStream, 1, 2, 4, 8) {
  auto& nccl = dynamic_cast<disttest::NcclCommunicator&>(comm());
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, nccl.device());

  const std::vector<float> host(512, float(rank()));
  DeviceBuffer<float> values(host.size());
  ASSERT_NE(values.get(), nullptr);
  ASSERT_EQ(cudaMemcpyAsync(values.get(), host.data(), values.bytes(),
                            cudaMemcpyHostToDevice, nccl.stream()),
            cudaSuccess);
  ncclResult_t result =
      ncclAllReduce(values.get(), values.get(), values.size(), ncclFloat32,
                    ncclMax, nccl.nccl_comm(), nccl.stream());
  ASSERT_TRUE(result == ncclSuccess || result == ncclInProgress)
      << ncclGetErrorString(result);
  nccl.Synchronize();
  EXPECT_EQ(values.Download(),
            std::vector<float>(512, float(world_size() - 1)));
}

// The collectives after allgather, on device buffers and host buffers
// alike, against a serial reference.
DIST_TEST_F(Nccl, ReduceScatterGatherScatterAllToAll, 1, 2, 4, 8) {
  const int n = world_size(), r = rank();
  const std::size_t count = 1000;
  std::vector<std::int32_t> in(count * n);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = r * 100000 + i;
  DeviceBuffer<std::int32_t> d_in(in.size()), d_out(count);
  ASSERT_EQ(d_in.Upload(in), cudaSuccess);
  comm().reduce_scatter(d_in.get(), d_out.get(), count,
                        disttest::ReduceOp::kSum);
  const std::vector<std::int32_t> part = d_out.Download();
  for (std::size_t i = 0; i < count; ++i) {
    std::int32_t want = 0;
    for (int q = 0; q < n; ++q) want += q * 100000 + r * count + i;
    ASSERT_EQ(part[i], want) << i;
  }
  // Host buffers, staged.
  std::vector<std::int32_t> gathered(r == 0 ? count * n : 0);
  comm().gather(in.data(), gathered.data(), count, /*root=*/0);
  if (r == 0) {
    for (int q = 0; q < n; ++q) ASSERT_EQ(gathered[q * count], q * 100000);
  }
  std::vector<std::int32_t> mine(count);
  comm().scatter(in.data(), mine.data(), count, /*root=*/n - 1);
  EXPECT_EQ(mine[0], (n - 1) * 100000 + static_cast<std::int32_t>(r * count));
  std::vector<std::int32_t> swapped(count * n);
  comm().alltoall(in.data(), swapped.data(), count);
  for (int q = 0; q < n; ++q) {
    ASSERT_EQ(swapped[q * count],
              q * 100000 + static_cast<std::int32_t>(r * count));
  }
}

DIST_TEST_F(Nccl, AllGatherVAndAllToAllV, 1, 2, 4) {
  const int n = world_size(), r = rank();
  std::vector<std::size_t> counts(n);
  for (int q = 0; q < n; ++q) counts[q] = q + 1;
  std::vector<float> in(counts[r], float(r));
  std::vector<float> out(std::accumulate(counts.begin(), counts.end(), 0ul));
  comm().allgatherv(in.data(), out.data(), counts);
  std::size_t at = 0;
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; i < counts[q]; ++i) ASSERT_EQ(out[at++], float(q));
  }
  // Rank a sends rank b (a + b) % 3 elements.
  std::vector<std::size_t> in_counts(n), out_counts(n);
  std::vector<float> send;
  for (int q = 0; q < n; ++q) {
    in_counts[q] = (r + q) % 3;
    out_counts[q] = (q + r) % 3;
    send.insert(send.end(), in_counts[q], float(r * 10 + q));
  }
  std::vector<float> got(
      std::accumulate(out_counts.begin(), out_counts.end(), 0ul));
  comm().alltoallv(send.data(), in_counts, got.data(), out_counts);
  at = 0;
  for (int q = 0; q < n; ++q) {
    for (std::size_t i = 0; i < out_counts[q]; ++i) {
      ASSERT_EQ(got[at++], float(q * 10 + r));
    }
  }
}

// NCCL's own average and half types; the out-of-place forms.
DIST_TEST_F(Nccl, AverageHalfTypesAndOutOfPlace, 1, 2, 4, 8) {
  const int n = world_size(), r = rank();
  std::vector<disttest::bfloat16> b(64, disttest::bfloat16(float(2 * r)));
  comm().allreduce(b.data(), b.size(), disttest::ReduceOp::kAvg);
  EXPECT_EQ(static_cast<float>(b[0]), float(n - 1));
  std::vector<disttest::float16> h(64, disttest::float16(1.0f)), sum(64);
  comm().allreduce(h.data(), sum.data(), h.size(), disttest::ReduceOp::kSum);
  EXPECT_EQ(static_cast<float>(sum[0]), float(n));
  EXPECT_EQ(static_cast<float>(h[0]), 1.0f);
  std::int64_t root_value = r == 0 ? 99 : -1, got = 0;
  comm().broadcast(&root_value, &got, 1, /*root=*/0);
  EXPECT_EQ(got, 99);
}

// ncclCommSplit: even and odd ranks.
DIST_TEST_F(Nccl, SplitByParity, 1, 2, 4, 8) {
  std::unique_ptr<disttest::Communicator> half =
      comm().split(rank() % 2, rank());
  ASSERT_NE(half, nullptr);
  std::int32_t x = rank();
  half->allreduce(&x, 1, disttest::ReduceOp::kSum);
  std::int32_t want = 0;
  for (int q = rank() % 2; q < world_size(); q += 2) want += q;
  EXPECT_EQ(x, want);
}

// isend and irecv go as one NCCL group at the first wait: both directions
// of a pair at once, without the even/odd order send() needs.
DIST_TEST_F(Nccl, NonBlockingExchange, 2, 4, 8) {
  const int n = world_size(), r = rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  DeviceBuffer<float> out(256), in(256);
  ASSERT_EQ(out.Upload(std::vector<float>(256, float(r))), cudaSuccess);
  disttest::Request s = comm().isend(out.get(), out.size(), next);
  disttest::Request q = comm().irecv(in.get(), in.size(), prev);
  q.wait();
  s.wait();
  EXPECT_EQ(in.Download(), std::vector<float>(256, float(prev)));
}

}  // namespace
