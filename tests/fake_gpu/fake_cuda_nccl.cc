// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A stand-in for the CUDA runtime and NCCL, on host memory, for machines
// without a GPU: loaded with LD_PRELOAD into a binary built with the NCCL
// backend, it answers the CUDA and NCCL calls disttest makes, so that the
// harness's NCCL path (non-blocking creation, polling, staging, splitting,
// aborting when a peer ends or a deadline passes) runs with 2, 4 or 8 ranks
// in CI. It proves the harness, not NCCL or a GPU: scripts/gpu-check.sh on a
// real GPU does that.
//
//   DISTTEST_FAKE_GPUS=N   the machine's GPUs (default 1), named by index and
//                          by UUID (GPU-66616b65-0000-0000-0000-0000000000NN,
//                          NN = index + 1 in hex); CUDA_VISIBLE_DEVICES
//                          picks among them as CUDA does.
//
// "Device" memory is host memory; a stream is a thread that runs its work in
// order; an event marks a point of a stream. A communicator is a shared
// memory segment (a memfd of the rank that made it) holding a ring buffer from
// every rank to every other; a collective is built of sends and receives, a
// reduction in rank order. As NCCL: ranks that call different collectives
// hang or read garbage (the harness must catch it first), a peer's end is
// not noticed (the harness must), ncclCommAbort ends the work in flight,
// and two ranks of one communicator on one GPU of one host are refused
// ("Duplicate GPU detected") unless NCCL_MULTI_RANK_GPU_ENABLE=1 is set and
// the version (NCCL_VERSION_CODE, or DISTTEST_FAKE_NCCL_VERSION) is 2.30 or
// later.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------- devices

struct Devices {
  int total = 1;
  std::vector<int> visible;  // Their machine indexes, in CUDA's order.
  pid_t pid = getpid();      // The process that read them.
};

std::string UuidText(int index) {
  char text[64];
  std::snprintf(text, sizeof text, "GPU-66616b65-0000-0000-0000-%012x",
                index + 1);
  return text;
}

Devices LoadDevices() {
  Devices d;
  if (const char* n = std::getenv("DISTTEST_FAKE_GPUS")) {
    d.total = std::max(0, std::min(64, std::atoi(n)));
  }
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list == nullptr) {
    for (int i = 0; i < d.total; ++i) d.visible.push_back(i);
    return d;
  }
  // As CUDA: the entries up to the first that names no device.
  std::string s(list);
  std::size_t at = 0;
  while (at <= s.size()) {
    std::size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    std::string entry = s.substr(at, comma - at);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    int index = -1;
    if (!entry.empty() &&
        entry.find_first_not_of("0123456789") == std::string::npos &&
        entry.size() < 4) {
      index = std::atoi(entry.c_str());
    } else if (entry.rfind("GPU-", 0) == 0) {
      for (int i = 0; i < d.total; ++i) {
        if (UuidText(i).rfind(entry, 0) == 0) index = i;
      }
    }
    if (index < 0 || index >= d.total ||
        std::find(d.visible.begin(), d.visible.end(), index) !=
            d.visible.end()) {
      break;
    }
    d.visible.push_back(index);
    at = comma + 1;
  }
  return d;
}

// Read at the first call, as CUDA reads CUDA_VISIBLE_DEVICES; never freed
// (the stream threads may outlive static destructors).
const Devices& Devs() {
  static const Devices* devices = new Devices(LoadDevices());
  return *devices;
}

thread_local int tl_device = 0;
thread_local cudaError_t tl_last = cudaSuccess;

cudaError_t Note(cudaError_t error) {
  if (error != cudaSuccess) tl_last = error;
  return error;
}

// As CUDA: a process forked after its parent used CUDA cannot use it
// (cudaErrorInitializationError), whatever it asks.
cudaError_t Init() {
  return Devs().pid == getpid() ? cudaSuccess
                                : Note(cudaErrorInitializationError);
}

// ----------------------------------------------------------------- memory

struct Allocation {
  std::size_t bytes;
  int device;
};
std::mutex& MemoryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::uintptr_t, Allocation>& Memory() {
  static auto* memory = new std::map<std::uintptr_t, Allocation>;
  return *memory;
}

// The allocation that holds `p`: its start, or 0.
std::uintptr_t Holder(const void* p, Allocation* out) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard<std::mutex> lock(MemoryMutex());
  auto it = Memory().upper_bound(at);
  if (it == Memory().begin()) return 0;
  --it;
  if (at >= it->first + std::max<std::size_t>(it->second.bytes, 1)) return 0;
  if (out != nullptr) *out = it->second;
  return it->first;
}

bool Legacy(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

}  // namespace

// ---------------------------------------------------------------- streams

struct CUstream_st {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  bool busy = false;
  bool destroyed = false;

  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return !work.empty() || destroyed; });
      if (work.empty()) break;
      std::function<void()> next = std::move(work.front());
      work.pop_front();
      busy = true;
      lock.unlock();
      next();
      next = nullptr;
      lock.lock();
      busy = false;
      cv.notify_all();
    }
    lock.unlock();
    delete this;
  }

  bool Idle() {
    std::lock_guard<std::mutex> lock(mu);
    return work.empty() && !busy;
  }

  // Waits until its work so far has run.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return work.empty() && !busy; });
  }
};

struct CUevent_st {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t recorded = 0;
  std::uint64_t completed = 0;
};

namespace {

// The legacy stream (stream 0): a stream of its own, as in CUDA, that the
// process's streams (made non-blocking) do not wait for by themselves.
cudaStream_t LegacyStream() {
  static cudaStream_t legacy = [] {
    auto* s = new CUstream_st;
    std::thread([s] { s->Run(); }).detach();
    return s;
  }();
  return legacy;
}

cudaStream_t Resolve(cudaStream_t s) { return Legacy(s) ? LegacyStream() : s; }

// Runs `f` in the stream's order.
void OnStream(cudaStream_t s, std::function<void()> f) {
  s = Resolve(s);
  std::lock_guard<std::mutex> lock(s->mu);
  s->work.push_back(std::move(f));
  s->cv.notify_all();
}

// Data work on the legacy stream starts late (1 ms): work on another
// stream that reads its buffer without waiting for it (an event) reads it
// before it is written, as on a GPU it could.
void OnStreamLate(cudaStream_t s, std::function<void()> f) {
  if (!Legacy(s)) {
    OnStream(s, std::move(f));
    return;
  }
  OnStream(s, [f = std::move(f)] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    f();
  });
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    *count = 0;
    return e;
  }
  *count = static_cast<int>(Devs().visible.size());
  return *count == 0 ? Note(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  const int count = static_cast<int>(Devs().visible.size());
  if (count == 0) return Note(cudaErrorNoDevice);
  if (device < 0 || device >= count) return Note(cudaErrorInvalidDevice);
  tl_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  if (Devs().visible.empty()) return Note(cudaErrorNoDevice);
  *device = tl_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  const auto& visible = Devs().visible;
  if (device < 0 || device >= static_cast<int>(visible.size())) {
    return Note(cudaErrorInvalidDevice);
  }
  const int index = visible[static_cast<std::size_t>(device)];
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "disttest fake GPU %d", index);
  const unsigned char uuid[16] = {
      0x66, 0x61, 0x6b, 0x65, 0, 0, 0, 0,
      0,    0,    0,    0,    0, 0, 0, static_cast<unsigned char>(index + 1)};
  std::memcpy(prop->uuid.bytes, uuid, sizeof uuid);
  prop->totalGlobalMem = std::size_t{1} << 34;
  prop->major = 9;
  prop->multiProcessorCount = 1;
  prop->pciBusID = index + 1;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() { return std::exchange(tl_last, cudaSuccess); }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    default:
      return "unknown error";
  }
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  if (Devs().visible.empty()) return Note(cudaErrorNoDevice);
  void* memory = std::aligned_alloc(
      256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256);
  if (memory == nullptr) return Note(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(MemoryMutex());
  Memory()[reinterpret_cast<std::uintptr_t>(memory)] = {bytes, tl_device};
  *p = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(MemoryMutex());
    if (Memory().erase(reinterpret_cast<std::uintptr_t>(p)) == 0) {
      return Note(cudaErrorInvalidValue);
    }
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                     const void* p) {
  std::memset(attributes, 0, sizeof *attributes);
  Allocation a{};
  if (Holder(p, &a) != 0) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = a.device;
    attributes->devicePointer = const_cast<void*>(p);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(p);
  }
  return cudaSuccess;
}

// Synchronous: after the legacy stream's work so far (as CUDA's is).
cudaError_t cudaMemcpy(void* to, const void* from, std::size_t bytes,
                       cudaMemcpyKind) {
  LegacyStream()->Drain();
  if (bytes > 0) std::memmove(to, from, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* to, const void* from, std::size_t bytes,
                            cudaMemcpyKind, cudaStream_t stream) {
  if (bytes > 0) OnStreamLate(stream, [=] { std::memmove(to, from, bytes); });
  return cudaSuccess;
}

// On device memory CUDA's returns before the bytes are set: on stream 0.
cudaError_t cudaMemset(void* p, int value, std::size_t bytes) {
  if (bytes > 0) OnStreamLate(nullptr, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes,
                            cudaStream_t stream) {
  if (bytes > 0) OnStreamLate(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  if (Devs().visible.empty()) return Note(cudaErrorNoDevice);
  auto* s = new CUstream_st;
  std::thread([s] { s->Run(); }).detach();
  *stream = s;
  return cudaSuccess;
}

// As CUDA: the work queued runs to its end, then the stream goes.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (Legacy(stream)) return Note(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->mu);
  stream->destroyed = true;
  stream->cv.notify_all();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return Resolve(stream)->Idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  if (cudaError_t e = Init(); e != cudaSuccess) {
    return e;
  }
  *event = new CUevent_st;
  return cudaSuccess;
}

// The event stays (a few bytes): work queued on a stream may still name it.
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return event == nullptr ? Note(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::uint64_t mark = 0;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    mark = ++event->recorded;
  }
  OnStream(stream, [event, mark] {
    std::lock_guard<std::mutex> lock(event->mu);
    event->completed = std::max(event->completed, mark);
    event->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  std::uint64_t mark = 0;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    mark = event->recorded;
  }
  OnStream(stream, [event, mark] {
    std::unique_lock<std::mutex> lock(event->mu);
    event->cv.wait(lock, [&] { return event->completed >= mark; });
  });
  return cudaSuccess;
}

}  // extern "C"

// ------------------------------------------------------------------- NCCL

namespace {

thread_local std::string tl_nccl_error;

ncclResult_t NcclFail(ncclResult_t result, const std::string& why) {
  tl_nccl_error = why;
  return result;
}

int FakeVersion() {
  if (const char* v = std::getenv("DISTTEST_FAKE_NCCL_VERSION")) {
    return std::atoi(v);
  }
  return NCCL_VERSION_CODE;
}

// The segment: a slot a rank, then a ring buffer from every rank
// to every other (and itself).
constexpr int kMaxRanks = 512;
constexpr int kSplitsKept = 4;

// Where a communicator's segment is: a memfd of the process that made it,
// which the others open through /proc. Nothing has a name: nothing is left
// behind, whoever ends how.
struct SegmentId {
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t tag;  // In the memfd's name.
};

struct SplitEntry {
  std::atomic<std::uint64_t> number;  // The split's number + 1.
  std::int32_t color;
  std::int32_t key;
  // Written by the new communicator's rank 0, once it made the segment.
  std::atomic<std::uint64_t> made;  // The split's number + 1.
  SegmentId where;
};

struct alignas(64) Slot {
  std::atomic<std::uint32_t> attached;
  std::int32_t device;  // The machine index of its GPU.
  char host[96];
  SplitEntry splits[kSplitsKept];
};

struct alignas(64) Ring {
  std::atomic<std::uint64_t> head;  // Bytes taken by the receiver.
  char pad[56];
  std::atomic<std::uint64_t> tail;  // Bytes put in by the sender.
  char pad2[56];
};

// A multiple of 64: every ring's head and tail stay aligned.
std::size_t RingBytes(int n) {
  const std::size_t bytes =
      n <= 8 ? std::size_t{1} << 20
             : std::max<std::size_t>(
                   std::size_t{64} << 10,
                   (std::size_t{8} << 20) / static_cast<std::size_t>(n));
  return bytes / 64 * 64;
}

// The slots at the start, then the rings from the next page on.
struct Layout {
  std::size_t ring_bytes, rings, ring_stride, total;
  explicit Layout(int n) {
    const auto un = static_cast<std::size_t>(n);
    ring_bytes = RingBytes(n);
    rings = (un * sizeof(Slot) + 4095) / 4096 * 4096;
    ring_stride = sizeof(Ring) + ring_bytes;
    total = rings + un * un * ring_stride;
  }
};

// One rank's view of a communicator's segment, kept alive by the handle and
// by the work on its stream.
struct State {
  SegmentId id{};
  int rank = 0;
  int n = 1;
  char* base = nullptr;
  Layout layout{1};
  std::atomic<bool> aborted{false};

  ~State() {
    if (base != nullptr) munmap(base, layout.total);
  }
  Slot* slot(int r) const { return reinterpret_cast<Slot*>(base) + r; }
  Ring* ring(int from, int to) const {
    return reinterpret_cast<Ring*>(base + layout.rings +
                                   static_cast<std::size_t>(from * n + to) *
                                       layout.ring_stride);
  }
  char* data(Ring* r) const { return reinterpret_cast<char*>(r + 1); }
};

std::string HostId() {
  if (const char* id = std::getenv("NCCL_HOSTID")) return id;
  char host[96] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

int MachineIndex(int device) {
  const auto& visible = Devs().visible;
  if (device < 0 || device >= static_cast<int>(visible.size())) return -1;
  return visible[static_cast<std::size_t>(device)];
}

std::string SegmentName(std::uint64_t tag) {
  char name[64];
  std::snprintf(name, sizeof name, "dtfake-nccl-%016llx",
                static_cast<unsigned long long>(tag));
  return name;
}

// The memfds this process made, open until every rank has mapped theirs.
std::mutex& MadeMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::uint64_t, int>& Made() {
  static auto* made = new std::map<std::uint64_t, int>;
  return *made;
}

ncclResult_t MakeSegment(SegmentId* id) {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device random;
  const std::uint64_t tag =
      (static_cast<std::uint64_t>(random()) << 32 ^ random()) + counter++;
  const int fd = memfd_create(SegmentName(tag).c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return NcclFail(ncclSystemError,
                    std::string("fake NCCL: memfd_create: ") + strerror(errno));
  }
  std::lock_guard<std::mutex> lock(MadeMutex());
  Made()[tag] = fd;
  *id = {static_cast<std::int32_t>(getpid()), fd, tag};
  return ncclSuccess;
}

// Every rank has mapped the segment: its maker's descriptor goes.
void Forget(const SegmentId& id) {
  if (id.pid != getpid()) return;
  std::lock_guard<std::mutex> lock(MadeMutex());
  auto it = Made().find(id.tag);
  if (it == Made().end()) return;
  close(it->second);
  Made().erase(it);
}

// Maps the segment `id` as rank `rank` of `n` and says it is there.
ncclResult_t Attach(const SegmentId& id, int n, int rank,
                    std::shared_ptr<State>* out) {
  auto s = std::make_shared<State>();
  s->id = id;
  s->rank = rank;
  s->n = n;
  s->layout = Layout(n);
  // The maker's descriptor, if it is still the segment (a number is reused
  // once closed; the name says whose it is).
  const std::string path =
      "/proc/" + std::to_string(id.pid) + "/fd/" + std::to_string(id.fd);
  char link[256] = {};
  const ssize_t length = readlink(path.c_str(), link, sizeof link - 1);
  const std::string want = "/memfd:" + SegmentName(id.tag);
  if (length <= 0 ||
      std::string(link, static_cast<std::size_t>(length)).rfind(want, 0) != 0) {
    return NcclFail(ncclSystemError,
                    "fake NCCL: the communicator's segment is gone (its "
                    "maker, pid " +
                        std::to_string(id.pid) +
                        ", ended or made it long ago)");
  }
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return NcclFail(ncclSystemError,
                    "fake NCCL: open(" + path + "): " + strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 ||
      (static_cast<std::size_t>(st.st_size) < s->layout.total &&
       ftruncate(fd, static_cast<off_t>(s->layout.total)) != 0)) {
    const int e = errno;
    close(fd);
    return NcclFail(ncclSystemError,
                    "fake NCCL: sizing " + path + ": " + strerror(e));
  }
  void* base =
      mmap(nullptr, s->layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return NcclFail(ncclSystemError,
                    "fake NCCL: mmap of " + path + ": " + strerror(errno));
  }
  s->base = static_cast<char*>(base);
  Slot* mine = s->slot(rank);
  mine->device = MachineIndex(tl_device);
  std::snprintf(mine->host, sizeof mine->host, "%s", HostId().c_str());
  mine->attached.store(1, std::memory_order_release);
  *out = std::move(s);
  return ncclSuccess;
}

}  // namespace

struct ncclComm {
  std::mutex mu;
  ncclResult_t result = ncclInProgress;
  std::string error;
  bool blocking = true;
  std::shared_ptr<State> state;  // Null while a split finds its group.
  // A split in progress: the parent, this split's number, color and key.
  std::shared_ptr<State> parent;
  std::uint64_t split_number = 0;
  int color = 0;
  int key = 0;
  int device = 0;
  std::uint64_t splits = 0;  // Splits made of this communicator.
  // Work launched without blocking: the next query says ncclInProgress.
  bool launching = false;
  // A split of this communicator in progress (this one is in progress until
  // it ends, as in NCCL): the new communicator (null for
  // NCCL_SPLIT_NOCOLOR), where it goes once made, and the split's number.
  bool splitting = false;
  ncclComm* split_child = nullptr;
  ncclComm** split_out = nullptr;
  std::uint64_t split_at = 0;

  ~ncclComm() {
    if (state != nullptr) Forget(state->id);
    delete split_child;
  }

  // Moves everything in progress on as far as it can go. Under mu.
  ncclResult_t Progress() {
    if (result == ncclInProgress && Create() == ncclInProgress) {
      return ncclInProgress;
    }
    if (result != ncclSuccess) return result;
    if (launching) {
      launching = false;
      return ncclInProgress;
    }
    if (splitting) {
      if (split_child == nullptr) {
        // Without a color, the split ends when every rank has come.
        for (int r = 0; r < state->n; ++r) {
          if (state->slot(r)->splits[split_at % kSplitsKept].number.load(
                  std::memory_order_acquire) < split_at + 1) {
            return ncclInProgress;
          }
        }
      } else {
        ncclResult_t made;
        {
          std::lock_guard<std::mutex> lock(split_child->mu);
          made = split_child->Progress();
        }
        if (made == ncclInProgress) return ncclInProgress;
        if (made != ncclSuccess) {
          error = split_child->error;
          delete split_child;
          split_child = nullptr;
          splitting = false;
          return result = made;
        }
        *split_out = split_child;  // NCCL writes it once made.
        split_child = nullptr;
      }
      splitting = false;
    }
    return ncclSuccess;
  }

  // Moves creation on as far as it can go; ncclInProgress until every rank
  // has come. Under mu.
  ncclResult_t Create() {
    if (result != ncclInProgress) return result;
    if (parent != nullptr) {
      struct Member {
        int key, rank;
      };
      std::vector<Member> members;
      for (int r = 0; r < parent->n; ++r) {
        SplitEntry& e = parent->slot(r)->splits[split_number % kSplitsKept];
        if (e.number.load(std::memory_order_acquire) != split_number + 1) {
          return ncclInProgress;
        }
        if (e.color == color) members.push_back({e.key, r});
      }
      std::stable_sort(
          members.begin(), members.end(), [](const Member& a, const Member& b) {
            return a.key != b.key ? a.key < b.key : a.rank < b.rank;
          });
      int rank = 0;
      while (members[static_cast<std::size_t>(rank)].rank != parent->rank) {
        ++rank;
      }
      // The new rank 0 makes the segment and says where; the others wait.
      SplitEntry& maker = parent->slot(members.front().rank)
                              ->splits[split_number % kSplitsKept];
      if (rank == 0) {
        if (const ncclResult_t made = MakeSegment(&maker.where);
            made != ncclSuccess) {
          error = tl_nccl_error;
          parent = nullptr;
          return result = made;
        }
        maker.made.store(split_number + 1, std::memory_order_release);
      } else if (maker.made.load(std::memory_order_acquire) !=
                 split_number + 1) {
        return ncclInProgress;
      }
      const int saved = tl_device;
      tl_device = device;
      const ncclResult_t attached =
          Attach(maker.where, static_cast<int>(members.size()), rank, &state);
      tl_device = saved;
      parent = nullptr;
      if (attached != ncclSuccess) {
        if (rank == 0) Forget(maker.where);
        error = tl_nccl_error;
        return result = attached;
      }
    }
    for (int r = 0; r < state->n; ++r) {
      if (state->slot(r)->attached.load(std::memory_order_acquire) == 0) {
        return ncclInProgress;
      }
    }
    Forget(state->id);
    const char* multi = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    const bool shared_ok =
        FakeVersion() >= 23000 && multi != nullptr && std::string(multi) == "1";
    for (int a = 0; a < state->n && !shared_ok; ++a) {
      for (int b = a + 1; b < state->n; ++b) {
        const Slot* x = state->slot(a);
        const Slot* y = state->slot(b);
        if (x->device == y->device && std::strcmp(x->host, y->host) == 0) {
          error = "Duplicate GPU detected : rank " + std::to_string(a) +
                  " and rank " + std::to_string(b) + " both on CUDA device " +
                  std::to_string(x->device);
          return result = ncclInvalidUsage;
        }
      }
    }
    return result = ncclSuccess;
  }

  // As NCCL's ncclCommEnsureReady: a communicator still being made is not
  // to be used (its rank and size included). Under mu.
  ncclResult_t EnsureReady() {
    const ncclResult_t r = Progress();
    if (r == ncclInProgress) {
      return NcclFail(ncclInvalidArgument,
                      "Attempt to use communicator before the previous "
                      "operation returned ncclSuccess");
    }
    if (r != ncclSuccess) return NcclFail(r, error);
    return r;
  }

  // Waits until creation ends (a blocking communicator). Under mu.
  ncclResult_t Ready() {
    for (;;) {
      ncclResult_t r = Progress();
      if (r != ncclInProgress) return r;
      mu.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      mu.lock();
    }
  }
};

namespace {

std::size_t TypeBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t FloatToHalf(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    return static_cast<std::uint16_t>(sign | 0x7c00u |
                                      (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // A subnormal half, or zero.
    const int shift = 113 - static_cast<int>(abs >> 23);
    if (shift > 24) return sign;
    const std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    std::uint32_t h = man >> (shift + 13);
    const std::uint32_t rest = man & ((1u << (shift + 13)) - 1);
    const std::uint32_t half = 1u << (shift + 12);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float Bf16ToFloat(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t FloatToBf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

template <typename T>
T Combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd:
      return static_cast<T>(a * b);
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:
      return static_cast<T>(a + b);  // ncclSum, ncclAvg
  }
}

template <typename T>
void ReduceInto(void* acc, const void* in, std::size_t count, ncclRedOp_t op) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < count; ++i) a[i] = Combine(a[i], b[i], op);
}

template <typename T>
void Divide(void* acc, std::size_t count, int n) {
  auto* a = static_cast<T*>(acc);
  for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<T>(a[i] / n);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void Reduce16(void* acc, const void* in, std::size_t count, ncclRedOp_t op,
              int divide_by) {
  auto* a = static_cast<std::uint16_t*>(acc);
  const auto* b = static_cast<const std::uint16_t*>(in);
  for (std::size_t i = 0; i < count; ++i) {
    float v = ToFloat(a[i]);
    if (b != nullptr) v = Combine(v, ToFloat(b[i]), op);
    if (divide_by > 1) v /= static_cast<float>(divide_by);
    a[i] = FromFloat(v);
  }
}

// acc = acc (op) in; with `in` null, acc /= divide_by (ncclAvg's end).
void Reduce(void* acc, const void* in, std::size_t count, ncclDataType_t type,
            ncclRedOp_t op, int divide_by = 0) {
  const bool end = in == nullptr;
  switch (type) {
#define DISTTEST_FAKE_CASE(NcclType, T)  \
  case NcclType:                         \
    if (end) {                           \
      Divide<T>(acc, count, divide_by);  \
    } else {                             \
      ReduceInto<T>(acc, in, count, op); \
    }                                    \
    break;
    DISTTEST_FAKE_CASE(ncclInt8, std::int8_t)
    DISTTEST_FAKE_CASE(ncclUint8, std::uint8_t)
    DISTTEST_FAKE_CASE(ncclInt32, std::int32_t)
    DISTTEST_FAKE_CASE(ncclUint32, std::uint32_t)
    DISTTEST_FAKE_CASE(ncclInt64, std::int64_t)
    DISTTEST_FAKE_CASE(ncclUint64, std::uint64_t)
    DISTTEST_FAKE_CASE(ncclFloat32, float)
    DISTTEST_FAKE_CASE(ncclFloat64, double)
#undef DISTTEST_FAKE_CASE
    case ncclFloat16:
      Reduce16<HalfToFloat, FloatToHalf>(acc, in, count, op, divide_by);
      break;
    case ncclBfloat16:
      Reduce16<Bf16ToFloat, FloatToBf16>(acc, in, count, op, divide_by);
      break;
    default:
      break;
  }
}

// A send or receive of one operation: the bytes go through the ring from
// the sender to the receiver, in order with the others on that ring.
struct Transfer {
  bool send;
  char* buffer;
  std::size_t bytes;
  int peer;
  std::size_t done = 0;
};

// Moves every transfer to its end, all at once (a rank may send to and
// receive from a peer in one group); false when the communicator is
// aborted first.
bool Move(const State& s, std::vector<Transfer>& transfers) {
  int idle = 0;
  for (;;) {
    bool all_done = true;
    bool moved = false;
    std::vector<std::pair<bool, int>> busy;  // Rings an earlier one holds.
    for (Transfer& t : transfers) {
      if (t.done == t.bytes) continue;
      all_done = false;
      const std::pair<bool, int> ring_id{t.send, t.peer};
      if (std::find(busy.begin(), busy.end(), ring_id) != busy.end()) continue;
      busy.push_back(ring_id);
      Ring* ring = t.send ? s.ring(s.rank, t.peer) : s.ring(t.peer, s.rank);
      char* data = s.data(ring);
      const std::uint64_t head = ring->head.load(std::memory_order_acquire);
      const std::uint64_t tail = ring->tail.load(std::memory_order_acquire);
      std::size_t room =
          t.send ? s.layout.ring_bytes - (tail - head) : tail - head;
      std::size_t now = std::min(room, t.bytes - t.done);
      if (now == 0) continue;
      const std::uint64_t at = (t.send ? tail : head) % s.layout.ring_bytes;
      const std::size_t first =
          std::min<std::size_t>(now, s.layout.ring_bytes - at);
      if (t.send) {
        std::memcpy(data + at, t.buffer + t.done, first);
        std::memcpy(data, t.buffer + t.done + first, now - first);
        ring->tail.store(tail + now, std::memory_order_release);
      } else {
        std::memcpy(t.buffer + t.done, data + at, first);
        std::memcpy(t.buffer + t.done + first, data, now - first);
        ring->head.store(head + now, std::memory_order_release);
      }
      t.done += now;
      moved = true;
    }
    if (all_done) return true;
    if (moved) {
      idle = 0;
      continue;
    }
    if (s.aborted.load()) return false;
    if (++idle < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::min(1000, 10 * (idle - 63))));
    }
  }
}

bool MoveOne(const State& s, bool send, const void* buffer, std::size_t bytes,
             int peer) {
  std::vector<Transfer> t{
      {send, static_cast<char*>(const_cast<void*>(buffer)), bytes, peer}};
  return bytes == 0 || Move(s, t);
}

// The operations, as the stream runs them.
struct Op {
  enum Kind {
    kAllReduce,
    kReduce,
    kBroadcast,
    kAllGather,
    kReduceScatter,
    kSend,
    kRecv
  } kind;
  const void* in;
  void* out;
  std::size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;  // Or the peer.
};

bool ReduceTo(const State& s, const void* in, void* out, std::size_t count,
              ncclDataType_t type, ncclRedOp_t op, int root) {
  const std::size_t bytes = count * TypeBytes(type);
  if (s.rank != root) return MoveOne(s, true, in, bytes, root);
  // The sum of rank 0's, 1's, ... in that order, whoever the root is.
  std::vector<char> own(static_cast<const char*>(in),
                        static_cast<const char*>(in) + bytes);
  std::vector<char> theirs(bytes);
  for (int r = 0; r < s.n; ++r) {
    const void* part = own.data();
    if (r != root) {
      if (!MoveOne(s, false, theirs.data(), bytes, r)) return false;
      part = theirs.data();
    }
    if (r == 0) {
      if (bytes > 0) std::memcpy(out, part, bytes);
    } else {
      Reduce(out, part, count, type, op);
    }
  }
  if (op == ncclAvg) Reduce(out, nullptr, count, type, op, s.n);
  return true;
}

bool BroadcastFrom(const State& s, const void* in, void* out, std::size_t bytes,
                   int root) {
  if (s.rank != root) return MoveOne(s, false, out, bytes, root);
  if (bytes > 0 && in != out) std::memmove(out, in, bytes);
  std::vector<Transfer> sends;
  for (int r = 0; r < s.n; ++r) {
    if (r != root) sends.push_back({true, static_cast<char*>(out), bytes, r});
  }
  return Move(s, sends);
}

bool Run(const State& s, const Op& op) {
  const std::size_t size = TypeBytes(op.type);
  const std::size_t bytes = op.count * size;
  switch (op.kind) {
    case Op::kAllReduce:
      if (s.rank != 0) {
        return ReduceTo(s, op.in, nullptr, op.count, op.type, op.op, 0) &&
               BroadcastFrom(s, nullptr, op.out, bytes, 0);
      }
      return ReduceTo(s, op.in, op.out, op.count, op.type, op.op, 0) &&
             BroadcastFrom(s, op.out, op.out, bytes, 0);
    case Op::kReduce:
      return ReduceTo(s, op.in, op.out, op.count, op.type, op.op, op.root);
    case Op::kBroadcast:
      return BroadcastFrom(s, op.in, op.out, bytes, op.root);
    case Op::kAllGather: {
      auto* out = static_cast<char*>(op.out);
      const std::size_t mine = static_cast<std::size_t>(s.rank) * bytes;
      if (bytes > 0 && out + mine != op.in) {
        std::memmove(out + mine, op.in, bytes);
      }
      std::vector<Transfer> t;
      for (int r = 0; r < s.n; ++r) {
        if (r == s.rank) continue;
        t.push_back({true, out + mine, bytes, r});
        t.push_back(
            {false, out + static_cast<std::size_t>(r) * bytes, bytes, r});
      }
      return Move(s, t);
    }
    case Op::kReduceScatter: {
      const auto* in = static_cast<const char*>(op.in);
      std::vector<std::vector<char>> parts(static_cast<std::size_t>(s.n));
      std::vector<Transfer> t;
      for (int r = 0; r < s.n; ++r) {
        auto& part = parts[static_cast<std::size_t>(r)];
        const char* chunk = in + static_cast<std::size_t>(r) * bytes;
        if (r == s.rank) {
          part.assign(chunk, chunk + bytes);
          continue;
        }
        part.resize(bytes);
        t.push_back({true, const_cast<char*>(chunk), bytes, r});
        t.push_back({false, part.data(), bytes, r});
      }
      if (!Move(s, t)) return false;
      if (bytes > 0) std::memcpy(op.out, parts[0].data(), bytes);
      for (int r = 1; r < s.n; ++r) {
        Reduce(op.out, parts[static_cast<std::size_t>(r)].data(), op.count,
               op.type, op.op);
      }
      if (op.op == ncclAvg)
        Reduce(op.out, nullptr, op.count, op.type, op.op, s.n);
      return true;
    }
    case Op::kSend:
      return MoveOne(s, true, op.in, bytes, op.root);
    case Op::kRecv:
      return MoveOne(s, false, op.out, bytes, op.root);
  }
  return false;
}

// Sends and receives of a group move together; its collectives follow, in
// order.
void RunGroup(const State& s, const std::vector<Op>& ops) {
  std::vector<Transfer> t;
  for (const Op& op : ops) {
    const std::size_t bytes = op.count * TypeBytes(op.type);
    if (op.kind == Op::kSend) {
      t.push_back(
          {true, static_cast<char*>(const_cast<void*>(op.in)), bytes, op.root});
    } else if (op.kind == Op::kRecv) {
      t.push_back({false, static_cast<char*>(op.out), bytes, op.root});
    }
  }
  if (!Move(s, t)) return;
  for (const Op& op : ops) {
    if (op.kind != Op::kSend && op.kind != Op::kRecv && !Run(s, op)) return;
  }
}

struct Grouped {
  ncclComm* comm;
  std::shared_ptr<State> state;
  cudaStream_t stream;
  std::vector<Op> ops;
};
thread_local int tl_group_depth = 0;
thread_local std::vector<Grouped>* tl_grouped = nullptr;
// The first error of the group being made: it is then dropped, as NCCL's.
thread_local ncclResult_t tl_group_error = ncclSuccess;

// A buffer an operation reads or writes: device memory of the
// communicator's device, all `bytes` of it in one allocation. NCCL does not
// check (unless NCCL_CHECK_POINTERS=1); a GPU would fault.
ncclResult_t CheckBuffer(const char* which, const void* p, std::size_t bytes,
                         int device) {
  if (bytes == 0) return ncclSuccess;
  char why[200];
  Allocation a{};
  const std::uintptr_t start = Holder(p, &a);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (start == 0) {
    std::snprintf(why, sizeof why,
                  "fake NCCL: the %s buffer %p is not device memory "
                  "(cudaMalloc): a GPU would fault",
                  which, p);
  } else if (at + bytes > start + a.bytes) {
    std::snprintf(why, sizeof why,
                  "fake NCCL: the %s buffer %p of %zu bytes runs past its "
                  "allocation",
                  which, p, bytes);
  } else if (a.device != device) {
    std::snprintf(why, sizeof why,
                  "fake NCCL: the %s buffer %p is on device %d, the "
                  "communicator's is %d",
                  which, p, a.device, device);
  } else {
    return ncclSuccess;
  }
  return NcclFail(ncclInvalidArgument, why);
}

ncclResult_t CheckBuffers(const Op& op, const State& s, int device) {
  const std::size_t bytes = op.count * TypeBytes(op.type);
  const std::size_t all = bytes * static_cast<std::size_t>(s.n);
  const bool root = s.rank == op.root;
  std::size_t in = bytes, out = bytes;
  switch (op.kind) {
    case Op::kAllReduce:
      break;
    case Op::kReduce:
      out = root ? bytes : 0;
      break;
    case Op::kBroadcast:
      in = root ? bytes : 0;
      break;
    case Op::kAllGather:
      out = all;
      break;
    case Op::kReduceScatter:
      in = all;
      break;
    case Op::kSend:
      out = 0;
      break;
    case Op::kRecv:
      in = 0;
      break;
  }
  if (const ncclResult_t r = CheckBuffer("send", op.in, in, device);
      r != ncclSuccess) {
    return r;
  }
  if (const ncclResult_t r = CheckBuffer("receive", op.out, out, device);
      r != ncclSuccess) {
    return r;
  }
  // NCCL reads the send buffer while it writes the receive buffer: the two
  // may overlap only as its in-place forms (sendbuff == recvbuff; an
  // allgather's sendbuff at recvbuff + rank * count, a reduce-scatter's
  // recvbuff at sendbuff + rank * count). Another overlap gives garbage on
  // a GPU; the stand-in refuses it, so that a harness that passed one
  // through fails here too.
  if (in == 0 || out == 0) return ncclSuccess;
  const auto send = reinterpret_cast<std::uintptr_t>(op.in);
  const auto receive = reinterpret_cast<std::uintptr_t>(op.out);
  if (send + in <= receive || receive + out <= send) return ncclSuccess;
  const std::uintptr_t mine = bytes * static_cast<std::size_t>(s.rank);
  const bool in_place = op.kind == Op::kAllGather       ? send == receive + mine
                        : op.kind == Op::kReduceScatter ? receive == send + mine
                                                        : send == receive;
  if (in_place) return ncclSuccess;
  return NcclFail(ncclInvalidArgument,
                  "fake NCCL: the send and receive buffers overlap otherwise "
                  "than in place (NCCL would read what it has overwritten)");
}

// A group's sends read while its receives write: on one rank they must
// not overlap (an alltoall in place, run as sends and receives, would send
// what it has received).
ncclResult_t CheckGroupBuffers(const std::vector<Op>& ops, const State& s) {
  for (const Op& a : ops) {
    if (a.kind != Op::kSend) continue;
    const auto send = reinterpret_cast<std::uintptr_t>(a.in);
    const std::size_t in = a.count * TypeBytes(a.type);
    for (const Op& b : ops) {
      if (b.kind != Op::kRecv) continue;
      const auto receive = reinterpret_cast<std::uintptr_t>(b.out);
      const std::size_t out = b.count * TypeBytes(b.type);
      if (in == 0 || out == 0 || send + in <= receive ||
          receive + out <= send) {
        continue;
      }
      // A rank's send to itself from where it receives from itself moves
      // nothing.
      if (a.root == s.rank && b.root == s.rank && send == receive) continue;
      return NcclFail(ncclInvalidArgument,
                      "fake NCCL: a send and a receive of one group overlap "
                      "(NCCL would send what it has received)");
    }
  }
  return ncclSuccess;
}

ncclResult_t Submit(ncclComm_t comm, cudaStream_t stream, const Op& op) {
  const ncclResult_t r = [&] {
    if (comm == nullptr) {
      return NcclFail(ncclInvalidArgument, "fake NCCL: comm is NULL");
    }
    if (TypeBytes(op.type) == 0) {
      return NcclFail(ncclInvalidArgument, "fake NCCL: unknown data type");
    }
    std::shared_ptr<State> state;
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      if (const ncclResult_t e = comm->EnsureReady(); e != ncclSuccess) {
        return e;
      }
      state = comm->state;
    }
    const bool p2p = op.kind == Op::kSend || op.kind == Op::kRecv;
    if (op.root < 0 || op.root >= state->n) {
      return NcclFail(ncclInvalidArgument,
                      p2p ? "fake NCCL: peer out of range"
                          : "fake NCCL: root out of range");
    }
    if (const ncclResult_t e = CheckBuffers(op, *state, comm->device);
        e != ncclSuccess) {
      return e;
    }
    if (tl_group_depth > 0) {
      if (tl_grouped == nullptr) tl_grouped = new std::vector<Grouped>;
      for (Grouped& g : *tl_grouped) {
        if (g.state == state && g.stream == stream) {
          g.ops.push_back(op);
          return ncclSuccess;
        }
      }
      tl_grouped->push_back({comm, state, stream, {op}});
      return ncclSuccess;
    }
    OnStream(stream, [state, op] { Run(*state, op); });
    // A communicator that does not block launches in the background: the
    // next query says ncclInProgress, and NCCL refuses a call meanwhile.
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->blocking) return ncclSuccess;
    comm->launching = true;
    return ncclInProgress;
  }();
  if (r != ncclSuccess && r != ncclInProgress && tl_group_depth > 0 &&
      tl_group_error == ncclSuccess) {
    tl_group_error = r;
  }
  return r;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = FakeVersion();
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return tl_nccl_error.c_str(); }

// The id: a mark, then where the segment is (made now, sized by the first
// rank to come).
constexpr char kIdMark[] = "disttest fake NCCL";

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  SegmentId where{};
  if (const ncclResult_t made = MakeSegment(&where); made != ncclSuccess) {
    return made;
  }
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdMark, sizeof kIdMark);
  std::memcpy(id->internal + 32, &where, sizeof where);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int n, ncclUniqueId id,
                                    int rank, ncclConfig_t* config) {
  if (n < 1 || n > kMaxRanks || rank < 0 || rank >= n) {
    return NcclFail(ncclInvalidArgument,
                    "fake NCCL: rank " + std::to_string(rank) + " of " +
                        std::to_string(n) + " is out of range");
  }
  if (Init() != cudaSuccess || Devs().visible.empty()) {
    return NcclFail(ncclUnhandledCudaError,
                    "fake NCCL: no CUDA device (or CUDA used before a fork)");
  }
  if (std::memcmp(id.internal, kIdMark, sizeof kIdMark) != 0) {
    return NcclFail(ncclInvalidArgument,
                    "fake NCCL: the unique id is not the fake's");
  }
  SegmentId where{};
  std::memcpy(&where, id.internal + 32, sizeof where);
  auto* comm = new ncclComm;
  comm->blocking = config == nullptr || config->blocking != 0;
  comm->device = tl_device;
  const ncclResult_t attached = Attach(where, n, rank, &comm->state);
  if (attached != ncclSuccess) {
    delete comm;
    return attached;
  }
  *out = comm;
  std::lock_guard<std::mutex> lock(comm->mu);
  if (!comm->blocking) return ncclInProgress;
  const ncclResult_t ready = comm->Ready();
  return ready == ncclSuccess ? ncclSuccess : NcclFail(ready, comm->error);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mu);
  *error = comm->Progress();
  if (*error != ncclSuccess && *error != ncclInProgress) {
    tl_nccl_error = comm->error;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out,
                           ncclConfig_t* config) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::shared_ptr<State> parent;
  std::uint64_t number = 0;
  bool blocking = true;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (const ncclResult_t r = comm->EnsureReady(); r != ncclSuccess) return r;
    parent = comm->state;
    number = comm->splits++;
    blocking = config != nullptr ? config->blocking != 0 : comm->blocking;
  }
  SplitEntry& mine = parent->slot(parent->rank)->splits[number % kSplitsKept];
  mine.color = color;
  mine.key = key;
  mine.number.store(number + 1, std::memory_order_release);
  ncclComm* child = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    child = new ncclComm;
    child->blocking = blocking;
    child->parent = parent;
    child->split_number = number;
    child->color = color;
    child->key = key;
    child->device = tl_device;
  }
  // As NCCL: the new communicator comes back once made, and until then
  // (every rank's split, NCCL_SPLIT_NOCOLOR's too) this one is in progress.
  *out = nullptr;
  std::lock_guard<std::mutex> lock(comm->mu);
  comm->splitting = true;
  comm->split_child = child;
  comm->split_out = out;
  comm->split_at = number;
  if (!comm->blocking) return ncclInProgress;
  const ncclResult_t ready = comm->Ready();
  return ready == ncclSuccess ? ncclSuccess : NcclFail(ready, comm->error);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mu);
  if (const ncclResult_t r = comm->EnsureReady(); r != ncclSuccess) return r;
  *count = comm->state->n;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mu);
  if (const ncclResult_t r = comm->EnsureReady(); r != ncclSuccess) return r;
  *rank = comm->state->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm == nullptr ? ncclInvalidArgument : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;  // The segment goes with the work still holding it.
  return ncclSuccess;
}

// The work in flight stops waiting; its stream becomes idle.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->state != nullptr) comm->state->aborted = true;
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++tl_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (tl_group_depth == 0) {
    return NcclFail(ncclInvalidUsage, "fake NCCL: ncclGroupEnd without start");
  }
  if (--tl_group_depth > 0) return ncclSuccess;
  const ncclResult_t failed = std::exchange(tl_group_error, ncclSuccess);
  if (tl_grouped == nullptr) return failed;
  std::vector<Grouped> groups = std::move(*tl_grouped);
  tl_grouped->clear();
  if (failed != ncclSuccess) return failed;  // Nothing of it runs.
  for (const Grouped& g : groups) {
    if (const ncclResult_t e = CheckGroupBuffers(g.ops, *g.state);
        e != ncclSuccess) {
      return e;
    }
  }
  ncclResult_t result = ncclSuccess;
  for (Grouped& g : groups) {
    OnStream(g.stream, [state = g.state, ops = std::move(g.ops)] {
      RunGroup(*state, ops);
    });
    std::lock_guard<std::mutex> lock(g.comm->mu);
    if (!g.comm->blocking) {
      g.comm->launching = true;
      result = ncclInProgress;
    }
  }
  return result;
}

ncclResult_t ncclAllReduce(const void* in, void* out, std::size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return Submit(comm, stream, {Op::kAllReduce, in, out, count, type, op, 0});
}

ncclResult_t ncclReduce(const void* in, void* out, std::size_t count,
                        ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return Submit(comm, stream, {Op::kReduce, in, out, count, type, op, root});
}

ncclResult_t ncclBroadcast(const void* in, void* out, std::size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return Submit(comm, stream,
                {Op::kBroadcast, in, out, count, type, ncclSum, root});
}

ncclResult_t ncclAllGather(const void* in, void* out, std::size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return Submit(comm, stream,
                {Op::kAllGather, in, out, count, type, ncclSum, 0});
}

ncclResult_t ncclReduceScatter(const void* in, void* out, std::size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return Submit(comm, stream,
                {Op::kReduceScatter, in, out, count, type, op, 0});
}

ncclResult_t ncclSend(const void* in, std::size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return Submit(comm, stream,
                {Op::kSend, in, nullptr, count, type, ncclSum, peer});
}

ncclResult_t ncclRecv(void* out, std::size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return Submit(comm, stream,
                {Op::kRecv, nullptr, out, count, type, ncclSum, peer});
}

}  // extern "C"
