// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The cases scripts/gpu-check.sh runs on a GPU machine and judges from the
// outside, as a user would read them: collectives at sizes the example does
// not reach, a mismatch, a crash and a hang in an NCCL collective (each must
// fail, naming what went wrong, in bounded time), and which GPU each rank
// sees. Built where disttest is built with NCCL; the script runs it.
//
// GPU_CHECK_BACKEND=gloo runs the same cases on Gloo, host buffers, for the
// script's own test on a machine without a GPU (gpu-check.sh --cpu); built
// without CUDA (GPU_CHECK_CUDA unset) it runs on Gloo only.
// GPU_CHECK_HANG_TIMEOUT_S is the hang case's timeout (seconds, 10);
// GPU_CHECK_UUIDS lists the machine's GPU UUIDs in DISTTEST_GPUS's order for
// OwnsItsGpu.
#include <disttest/disttest.h>
#if GPU_CHECK_CUDA
#include <cuda_runtime_api.h>
#endif
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

bool OnGloo() {
#if GPU_CHECK_CUDA
  const char* backend = std::getenv("GPU_CHECK_BACKEND");
  return backend != nullptr && std::string(backend) == "gloo";
#else
  return true;
#endif
}

int EnvSeconds(const char* name, int otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : otherwise;
}

// `n` Ts on the rank's GPU (NCCL) or in host memory (Gloo).
template <typename T>
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n), host_(OnGloo() ? n : 0) {
#if GPU_CHECK_CUDA
    if (!OnGloo() && n > 0 &&
        cudaMalloc(reinterpret_cast<void**>(&device_), n * sizeof(T)) !=
            cudaSuccess) {
      device_ = nullptr;
    }
#endif
  }
  ~Buffer() {
#if GPU_CHECK_CUDA
    if (device_ != nullptr) cudaFree(device_);
#endif
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool ok() const { return n_ == 0 || OnGloo() || device_ != nullptr; }
  T* get() { return OnGloo() ? host_.data() : device_; }
  std::size_t size() const { return n_; }

  void Upload(const std::vector<T>& values) {
    if (OnGloo()) {
      host_ = values;
      return;
    }
#if GPU_CHECK_CUDA
    if (n_ > 0) {
      cudaMemcpy(device_, values.data(), n_ * sizeof(T),
                 cudaMemcpyHostToDevice);
    }
#endif
  }
  std::vector<T> Download() const {
    if (OnGloo()) return host_;
    std::vector<T> values(n_);
#if GPU_CHECK_CUDA
    if (n_ > 0) {
      cudaMemcpy(values.data(), device_, n_ * sizeof(T),
                 cudaMemcpyDeviceToHost);
    }
#endif
    return values;
  }

 private:
  std::size_t n_;
  std::vector<T> host_;
  T* device_ = nullptr;
};

class GpuCheck : public disttest::DistributedTest {
 protected:
  GpuCheck() {
    options().backend =
        OnGloo() ? disttest::Backend::kGloo : disttest::Backend::kNccl;
    options().timeout = std::chrono::seconds(120);
  }
};

// Element i of rank r's input: small integers, exact in every type here.
std::int32_t Value(int r, std::size_t i) {
  return static_cast<std::int32_t>(r * 7 + i % 13);
}

// Counts of 0 and 1, one past NCCL's small-message protocols, and 16 MiB
// (a float allreduce in many chunks), against a serial reference.
DIST_TEST_F(GpuCheck, CollectivesAtEverySize, 1, 2, 4, 8) {
  const int n = world_size(), r = rank();
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{70000},
                            std::size_t{1} << 22}) {
    SCOPED_TRACE(testing::Message() << "count " << count);
    std::vector<std::int32_t> mine(count);
    for (std::size_t i = 0; i < count; ++i) mine[i] = Value(r, i);

    Buffer<float> sum(count);
    ASSERT_TRUE(sum.ok());
    sum.Upload(std::vector<float>(mine.begin(), mine.end()));
    comm().allreduce(sum.get(), count, disttest::ReduceOp::kSum);
    const std::vector<float> summed = sum.Download();
    for (std::size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(Value(q, i));
      ASSERT_EQ(summed[i], want) << "allreduce, element " << i;
    }

    Buffer<std::int32_t> root(count);
    ASSERT_TRUE(root.ok());
    root.Upload(mine);
    comm().broadcast(root.get(), count, n - 1);
    const std::vector<std::int32_t> got = root.Download();
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], Value(n - 1, i)) << "broadcast, element " << i;
    }

    // A quarter of the count each, to keep 8 ranks' gathers small.
    const std::size_t part = count / 4;
    Buffer<std::int32_t> in(part), all(part * n);
    ASSERT_TRUE(in.ok() && all.ok());
    in.Upload(std::vector<std::int32_t>(mine.begin(), mine.begin() + part));
    comm().allgather(in.get(), all.get(), part);
    const std::vector<std::int32_t> gathered = all.Download();
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < part; ++i) {
        ASSERT_EQ(gathered[q * part + i], Value(q, i))
            << "allgather, rank " << q << "'s element " << i;
      }
    }
  }
}

// Inputs that overlap their outputs otherwise than in NCCL's in-place
// forms (trial 12): an allgather's in == out (rank 1's input is where rank
// 0's part goes), a reduce-scatter's out == in, an allreduce's input one
// element past its output, an alltoall in place. Every rank gets what the
// CPU backends give: the input as it was at the call.
DIST_TEST_F(GpuCheck, OverlappingBuffers, 2, 4) {
  const int n = world_size(), r = rank();
  const std::size_t part = 1000, all = part * static_cast<std::size_t>(n);
  {
    Buffer<std::int32_t> buf(all);
    ASSERT_TRUE(buf.ok());
    std::vector<std::int32_t> v(all, -1);
    for (std::size_t i = 0; i < part; ++i) v[i] = Value(r, i);
    buf.Upload(v);
    comm().allgather(buf.get(), buf.get(), part);
    const std::vector<std::int32_t> got = buf.Download();
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < part; ++i) {
        ASSERT_EQ(got[q * part + i], Value(q, i))
            << "allgather with in == out, rank " << q << "'s element " << i;
      }
    }
  }
  {
    Buffer<float> buf(all);
    ASSERT_TRUE(buf.ok());
    std::vector<float> v(all);
    for (std::size_t j = 0; j < all; ++j)
      v[j] = static_cast<float>(Value(r, j));
    buf.Upload(v);
    comm().reduce_scatter(buf.get(), buf.get(), part, disttest::ReduceOp::kSum);
    const std::vector<float> got = buf.Download();
    for (std::size_t i = 0; i < part; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) {
        want += static_cast<float>(Value(q, r * part + i));
      }
      ASSERT_EQ(got[i], want) << "reduce_scatter with out == in, element " << i;
    }
  }
  {
    Buffer<float> buf(part + 1);
    ASSERT_TRUE(buf.ok());
    std::vector<float> v(part + 1, -1);
    for (std::size_t i = 0; i < part; ++i) {
      v[i + 1] = static_cast<float>(Value(r, i));
    }
    buf.Upload(v);
    comm().allreduce(buf.get() + 1, buf.get(), part, disttest::ReduceOp::kSum);
    const std::vector<float> got = buf.Download();
    for (std::size_t i = 0; i < part; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(Value(q, i));
      ASSERT_EQ(got[i], want) << "allreduce of in = out + 1, element " << i;
    }
  }
  {
    Buffer<std::int32_t> buf(all);
    ASSERT_TRUE(buf.ok());
    std::vector<std::int32_t> v(all);
    for (std::size_t j = 0; j < all; ++j) v[j] = Value(r, j);
    buf.Upload(v);
    comm().alltoall(buf.get(), buf.get(), part);
    const std::vector<std::int32_t> got = buf.Download();
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < part; ++i) {
        ASSERT_EQ(got[q * part + i], Value(q, r * part + i))
            << "alltoall in place, from rank " << q << ", element " << i;
      }
    }
  }
}

// Rank n-1 reduces 8 elements, the others 4: every rank must fail, saying
// the calls differ, before NCCL reads past a buffer.
DIST_TEST_F(GpuCheck, CallsThatDiffer, 2, 4) {
  const std::size_t count = rank() == world_size() - 1 ? 8 : 4;
  Buffer<float> v(count);
  ASSERT_TRUE(v.ok());
  v.Upload(std::vector<float>(count, 1.0f));
  comm().allreduce(v.get(), count, disttest::ReduceOp::kSum);
  std::printf("gpu-check: rank %d passed a mismatched allreduce\n", rank());
}

// On a communicator split from the world's, whose calls no arena compares
// before NCCL runs them, the last rank reduces with max, the others with
// sum: NCCL completes it, and the ranks' ledgers, compared after the body,
// must fail the test, naming each call.
DIST_TEST_F(GpuCheck, SplitCallsThatDiffer, 2, 4) {
  std::unique_ptr<disttest::Communicator> split = comm().split(0, rank());
  Buffer<float> v(8);
  ASSERT_TRUE(v.ok());
  v.Upload(std::vector<float>(8, 1.0f));
  split->allreduce(v.get(), 8,
                   rank() == world_size() - 1 ? disttest::ReduceOp::kMax
                                              : disttest::ReduceOp::kSum);
  std::printf("gpu-check: rank %d passed a mismatched allreduce\n", rank());
}

// The last rank leaving a collective does not mean that the others have:
// on a busy machine a peer may still be in it. Before the last rank
// crashes, each other rank says with a file that it completed the first
// allreduce, and the last waits for those files (at most 5 s) and removes
// them: the others then wait for it in the second, as the script expects.
// The files are in ${TMPDIR:-/tmp}/gpu-check-meeting-<uid>-<MASTER_PORT>;
// the last rank removes any left there before the first allreduce, which
// no rank can leave before it has entered it.
class Meeting {
 public:
  explicit Meeting(int last) : last_(last) {
    const char* tmp = std::getenv("TMPDIR");
    const char* port = std::getenv("MASTER_PORT");
    if (port != nullptr) {
      dir_ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
             "/gpu-check-meeting-" + std::to_string(::geteuid()) + "-" + port;
    }
  }
  // The last rank, before the first allreduce: files of an earlier run
  // that used the same port are not this one's.
  void Clear() const {
    if (dir_.empty()) return;
    for (int r = 0; r < last_; ++r) ::unlink(File(r).c_str());
    ::rmdir(dir_.c_str());
  }
  void Arrive(int rank) const {
    if (dir_.empty()) return;
    ::mkdir(dir_.c_str(), 0700);  // The first to arrive makes it.
    const int fd = ::open(File(rank).c_str(),
                          O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  // The last rank waits until ranks 0 to last - 1 have arrived.
  void AwaitOthers() const {
    if (dir_.empty()) return;
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (int r = 0; r < last_;) {
      if (::access(File(r).c_str(), F_OK) == 0) {
        ++r;
      } else if (std::chrono::steady_clock::now() >= give_up) {
        std::printf("gpu-check: rank %d gave up waiting for rank %d at %s\n",
                    last_, r, dir_.c_str());
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    Clear();
  }

 private:
  std::string File(int rank) const { return dir_ + "/" + std::to_string(rank); }
  int last_;
  std::string dir_;
};

// Every rank of `c` allreduces 1024 floats twice, except that between the
// two the last rank crashes (SIGSEGV), when the others have completed the
// first, or hangs (for ten minutes).
// `second_timeout` (0: the communicator's own) bounds the others' wait in
// the second.
enum class TheLastRank { kCrashes, kHangs };
void ReduceTwice(
    disttest::Communicator& c, TheLastRank last,
    std::chrono::milliseconds second_timeout = std::chrono::milliseconds(0)) {
  Buffer<float> v(1024);
  ASSERT_TRUE(v.ok());
  v.Upload(std::vector<float>(1024, 1.0f));
  const Meeting meeting(c.size() - 1);
  if (c.rank() == c.size() - 1 && last == TheLastRank::kCrashes) {
    meeting.Clear();
  }
  c.allreduce(v.get(), 1024, disttest::ReduceOp::kSum);
  if (c.rank() == c.size() - 1) {
    if (last == TheLastRank::kCrashes) {
      meeting.AwaitOthers();
      std::raise(SIGSEGV);
    }
    std::this_thread::sleep_for(std::chrono::minutes(10));
  } else if (last == TheLastRank::kCrashes) {
    meeting.Arrive(c.rank());
  }
  std::optional<disttest::ScopedTimeout> bound;
  if (second_timeout.count() > 0) bound.emplace(c, second_timeout);
  c.allreduce(v.get(), 1024, disttest::ReduceOp::kSum);
}

// Rank n-1 is killed while the others wait for it in their second
// allreduce: the test fails naming the signal, and ends in bounded time.
DIST_TEST_F(GpuCheck, RankThatCrashesInACollective, 2, 4) {
  ReduceTwice(comm(), TheLastRank::kCrashes);
}

// A long failure grace: a rank that is not stopped by its own
// communicator shows it by being killed 30 s after its peer died.
class GpuCheckPatient : public GpuCheck {
 protected:
  GpuCheckPatient() { options().failure_grace = std::chrono::seconds(30); }
};

// Rank 0 waits in a receive from rank n-1, which on NCCL nothing checks
// before NCCL waits, while rank n-1 ends: killed (SIGSEGV), or failing an
// assertion and returning.
enum class TheSender { kCrashes, kFails };
void ReceiveFromAPeerThatEnds(disttest::Communicator& c, TheSender how) {
  Buffer<float> v(1024);
  ASSERT_TRUE(v.ok());
  c.barrier();
  if (c.rank() == 0) {
    c.recv(v.get(), 1024, c.size() - 1);
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (how == TheSender::kCrashes) std::raise(SIGSEGV);
  FAIL() << "gpu-check: rank " << c.rank() << " fails on purpose";
}

// Rank 0 stops waiting when the harness says its peer ended, its
// communicator aborted, not when the harness ends it after the failure
// grace.
DIST_TEST_F(GpuCheckPatient, RankThatDiesWhileAPeerReceives, 2) {
  ReceiveFromAPeerThatEnds(comm(), TheSender::kCrashes);
}

// Rank 0 stops at once, its peer named as one that ended, not as one that
// passed its test (whose data it would wait a moment more for).
DIST_TEST_F(GpuCheckPatient, RankThatFailsWhileAPeerReceives, 2) {
  ReceiveFromAPeerThatEnds(comm(), TheSender::kFails);
}

class GpuCheckHang : public GpuCheck {
 protected:
  GpuCheckHang() {
    options().timeout =
        std::chrono::seconds(EnvSeconds("GPU_CHECK_HANG_TIMEOUT_S", 10));
  }
};

// Rank n-1 never comes to the second allreduce, which the others wait in on
// their GPUs: the test fails at its timeout, naming the collective and the
// rank that is not in it.
DIST_TEST_F(GpuCheckHang, HangInACollective, 2, 4) {
  ReduceTwice(comm(), TheLastRank::kHangs);
}

// The same two on a communicator split from the world's, whose calls no
// arena compares first: the ranks wait in NCCL itself. A hang must end at
// the communicator's own deadline, aborted, naming the collective.
// Its wait is bounded by a third of the test's timeout: the communicator's
// own deadline (the test's, less a margin) counts from the operation's
// start, which on a GPU comes seconds into the test (CUDA's context, NCCL's
// two inits over sockets), after the harness's deadline for the test.
DIST_TEST_F(GpuCheckHang, HangInNcclItself, 2) {
  ReduceTwice(*comm().split(0, rank()), TheLastRank::kHangs,
              options().timeout / 3);
}

// A crash there: the survivor waits in NCCL itself, and stops when the
// harness marks its peer ended (the split communicator knows its members'
// world ranks), not when the harness kills it after the failure grace.
DIST_TEST_F(GpuCheckPatient, CrashInNcclItself, 2) {
  ReduceTwice(*comm().split(0, rank()), TheLastRank::kCrashes);
}

// Pooled ranks (options().reuse_workers) run one test after another in the
// same processes: the second test runs where the first did (the pool was
// used), and each sees exactly its own data, sent, received and reduced.
class GpuCheckPooled : public GpuCheck {
 protected:
  GpuCheckPooled() { options().reuse_workers = true; }

  // Rank 1 sends rank()+1+`offset` to rank 0; then all sum it.
  void SendThenReduce(float offset) {
    Buffer<float> v(1024);
    ASSERT_TRUE(v.ok());
    v.Upload(std::vector<float>(1024, rank() + 1 + offset));
    if (rank() == 1) comm().send(v.get(), 1024, 0);
    if (rank() == 0) comm().recv(v.get(), 1024, 1);
    comm().allreduce(v.get(), 1024, disttest::ReduceOp::kSum);
    EXPECT_EQ(v.Download(), std::vector<float>(1024, 2 * (2 + offset)));
  }
  static pid_t first_pid;  // Per rank process: the pool keeps it.
};
pid_t GpuCheckPooled::first_pid = 0;

DIST_TEST_F(GpuCheckPooled, First, 2) {
  first_pid = getpid();
  SendThenReduce(0);
}

DIST_TEST_F(GpuCheckPooled, SecondInTheSameProcesses, 2) {
  EXPECT_EQ(first_pid, getpid()) << "not the first test's process: no pool";
  SendThenReduce(10);
}

// Fault tolerance: the last rank is killed, as every rank declared it
// would. Its end stops the world's barrier, naming it; the others go on, on
// a communicator split without it, whose waits its end must not stop.
DIST_TEST_F(GpuCheck, SurvivorsOfAnExpectedEndGoOnWithoutIt, 3) {
  const int last = world_size() - 1;
  ExpectRankToEnd(last, disttest::RankEnd::KilledBy(SIGKILL));
  std::unique_ptr<disttest::Communicator> rest = comm().split(
      rank() == last ? disttest::Communicator::kNoColor : 0, rank());
  if (rank() == last) {
    for (;;) pause();
  }
  if (rank() == 0) SignalRank(last, SIGKILL);
  EXPECT_THROW(comm().barrier(), disttest::CommError);
  Buffer<float> v(1024);
  ASSERT_TRUE(v.ok());
  v.Upload(std::vector<float>(1024, 1.0f));
  rest->allreduce(v.get(), 1024, disttest::ReduceOp::kSum);
  EXPECT_EQ(v.Download(), std::vector<float>(1024, 2.0f));
}

// --- No false pass off the collectives: what NCCL runs without a word. ---

// Rank 0 sends 8 floats; rank 1 receives 8 int32s: the same 32 bytes, which
// NCCL (no tags, no types on the wire) delivers. Each must fail, naming
// both calls.
void SendFloatsReceiveInts(disttest::Communicator& c) {
  Buffer<float> out(8);
  Buffer<std::int32_t> in(8);
  ASSERT_TRUE(out.ok() && in.ok());
  out.Upload(std::vector<float>(8, 1.0f));
  if (c.rank() == 0) c.send(out.get(), 8, 1);
  if (c.rank() == 1) c.recv(in.get(), 8, 0);
  std::printf("gpu-check: rank %d passed a mismatched send and receive\n",
              c.rank());
}

DIST_TEST_F(GpuCheck, SendAndReceiveThatDifferOnTheWorld, 2) {
  SendFloatsReceiveInts(comm());
}

DIST_TEST_F(GpuCheck, SendAndReceiveThatDifferOnASplit, 2) {
  std::unique_ptr<disttest::Communicator> split = comm().split(0, rank());
  SendFloatsReceiveInts(*split);
}

// Rank 0 isends to rank 1, which never receives it, and keeps the Request
// past the test: the test's end must fail it, in flight, at its line.
DIST_TEST_F(GpuCheck, IsendNeverWaited, 2) {
  static Buffer<float>* out = new Buffer<float>(8);  // Past the test too.
  ASSERT_TRUE(out->ok());
  if (rank() == 0) {
    static auto* kept =
        new disttest::Request(comm().isend(out->get(), 8, 1));  // never-waited
    (void)kept;
  }
}

// Rank 0's isend is dropped without wait(): its destructor waits, NCCL
// sends to a rank that never receives, and the wait's 2 s timeout must
// abort the communicator and fail the test at the isend's line.
DIST_TEST_F(GpuCheck, IsendDroppedWithoutWait, 2) {
  disttest::ScopedTimeout quick(comm(), std::chrono::seconds(2));
  Buffer<float> out(8);
  ASSERT_TRUE(out.ok());
  if (rank() == 0) {
    disttest::Request r = comm().isend(out.get(), 8, 1);  // dropped
  }
  comm().barrier();
}

// Floats that differ in the last bit, compared across the ranks (through an
// NCCL allgather of their bytes) on the world's communicator and on a
// split one: each assertion must fail, showing both values.
DIST_TEST_F(GpuCheck, AllEqInTheLastBit, 2) {
  float x = 1.0f;
  if (rank() == 1) x = std::nextafter(x, 2.0f);
  DIST_EXPECT_ALL_EQ(x);
  std::unique_ptr<disttest::Communicator> split = comm().split(0, rank());
  DIST_EXPECT_ALL_EQ_ON(*split, x);
  // The control: equal values agree.
  DIST_EXPECT_ALL_EQ_ON(*split, rank() >= 0);
}

#if GPU_CHECK_CUDA
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L writes it.
std::string UuidOf(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return "?";
  const auto* b = reinterpret_cast<const unsigned char*>(properties.uuid.bytes);
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b[i]);
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> items;
  std::size_t at = 0;
  while (at <= list.size()) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (comma > at) items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

// A rank sees its own GPU alone, as device 0: the one of GPU_CHECK_UUIDS
// that round-robin placement gives it (DISTTEST_GPUS lists them by index or
// by UUID, in that order).
DIST_TEST_F(GpuCheck, OwnsItsGpu, 1, 2, 4) {
  if (OnGloo()) GTEST_SKIP() << "needs a GPU (GPU_CHECK_BACKEND=gloo)";
  const std::vector<std::string> uuids = Split(
      std::getenv("GPU_CHECK_UUIDS") ? std::getenv("GPU_CHECK_UUIDS") : "");
  ASSERT_FALSE(uuids.empty()) << "GPU_CHECK_UUIDS is not set";
  int count = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::printf(
      "gpu-check: rank %d sees %d device(s), device 0 is %s, "
      "CUDA_VISIBLE_DEVICES=%s\n",
      rank(), count, UuidOf(0).c_str(), visible ? visible : "(unset)");
  EXPECT_EQ(count, 1);
  EXPECT_EQ(UuidOf(0), uuids[rank() % uuids.size()]);
  comm().barrier();
}

// Run with CUDA_VISIBLE_DEVICES empty: no GPU, so kAuto takes Gloo, and the
// rank sees no device.
class GpuCheckAuto : public disttest::DistributedTest {
 protected:
  GpuCheckAuto() { options().backend = disttest::Backend::kAuto; }
};

DIST_TEST_F(GpuCheckAuto, WithoutAGpuSeesNone, 2) {
  int count = -1;
  const cudaError_t error = cudaGetDeviceCount(&count);
  std::printf("gpu-check: rank %d on %s: cudaGetDeviceCount says %s, %d\n",
              rank(), comm().backend_name(), cudaGetErrorName(error), count);
  EXPECT_STREQ(comm().backend_name(), "gloo");
  EXPECT_TRUE(error != cudaSuccess || count == 0);
}

#endif  // GPU_CHECK_CUDA

}  // namespace
