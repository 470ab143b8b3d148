// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MpiCommunicator (mpi_communicator.h): every operation an MPI non-blocking
// call, polled, after the ranks compared their calls.
#include "mpi/mpi_communicator.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "comm/communicator_sockets.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "comm/reduce_elements.h"
#include "comm/self_messages.h"
#include "comm/visit_type.h"
#include "disttest/error.h"
#include "env/text.h"
#include "mpi/mpi_state.h"

namespace disttest::internal {
namespace {

using Buffer = std::shared_ptr<std::vector<char>>;
using Clock = std::chrono::steady_clock;

Buffer NewBuffer(std::size_t bytes) {
  return std::make_shared<std::vector<char>>(bytes);
}

Buffer CopyOf(const void* data, std::size_t bytes) {
  Buffer b = NewBuffer(bytes);
  if (bytes > 0) std::memcpy(b->data(), data, bytes);
  return b;
}

// Requests given up (timed out, cut) with the buffers MPI may still write:
// MPI cannot cancel a collective, so both are kept until the process ends.
struct GivenUp {
  std::mutex mu;
  std::vector<std::pair<MPI_Request, std::vector<Buffer>>> requests;
};

GivenUp& GivenUpRequests() {
  static auto* given_up = new GivenUp;
  return *given_up;
}

// What a send carries before its data: what the recv compares with its own.
struct Header {
  std::uint32_t magic = kMagic;
  std::int32_t type = 0;
  std::uint64_t count = 0;
  static constexpr std::uint32_t kMagic = 0x6d707364;  // "dspm"
};

std::string Describe(const char* op, std::size_t count, DataType type) {
  return fmt::format("{} of {} {}", op, count, Name(type));
}

// MPI counts are int: a buffer of more bytes is refused, naming it.
int IntCount(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    throw CommError(fmt::format(
        "{} of {} elements or bytes is more than MPI's int counts hold ({})",
        what, n, INT_MAX));
  }
  return static_cast<int>(n);
}

// The MPI type of `type`'s size that its reductions (ElementOp below) are
// given; the half types have none of their own.
MPI_Datatype ReduceType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUint8:
    case DataType::kBool:  // On its bytes, 0 or 1 (LogicalOp).
      return MPI_UINT8_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kUint16:
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return MPI_UINT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kUint32:
      return MPI_UINT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUint64:
      return MPI_UINT64_T;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// disttest's own reduction (comm/reduce_elements.h), where MPI's own would
// give another result than every other backend's (Open MPI's AVX sums
// saturate 8- and 16-bit integers; its min and max keep or drop a NaN by
// the element's place), and for the half types, which MPI has not.
template <typename T, ReduceOp kOp>
void ElementOp(void* in, void* inout, int* len, MPI_Datatype*) {
  T* b = static_cast<T*>(inout);
  internal::ReduceElements(kOp, b, static_cast<const T*>(in), b,
                           static_cast<std::size_t>(*len));
}

template <typename T>
MPI_Op MakeOp(ReduceOp op) {
  MPI_User_function* fn = nullptr;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // The division comes after (DivideBy).
      fn = &ElementOp<T, ReduceOp::kSum>;
      break;
    case ReduceOp::kProd:
      fn = &ElementOp<T, ReduceOp::kProd>;
      break;
    case ReduceOp::kMin:
      fn = &ElementOp<T, ReduceOp::kMin>;
      break;
    case ReduceOp::kMax:
      fn = &ElementOp<T, ReduceOp::kMax>;
      break;
  }
  MPI_Op made = MPI_OP_NULL;
  MPI_Op_create(fn, /*commute=*/1, &made);
  return made;
}

MPI_Op ReduceOpOf(DataType type, ReduceOp op) {
  if (type == DataType::kBool) {
    type = DataType::kUint8;  // On its bytes, 0 or 1.
    op = LogicalOp(op);
  }
  // A sum or product of 4- or 8-byte elements is MPI's own, which wraps
  // (and is vectorized) as ours does.
  if ((op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProd) &&
      SizeOf(type) >= 4) {
    return op == ReduceOp::kProd ? MPI_PROD : MPI_SUM;
  }
  // Made once each, on the main thread (MPI's calls all are); never freed
  // (MPI_Finalize does).
  constexpr int kTypes = static_cast<int>(kLastDataType) + 1;
  constexpr int kOps = static_cast<int>(kLastReduceOp) + 1;
  static MPI_Op ops[kTypes][kOps];
  static bool made[kTypes][kOps] = {};
  const int t = static_cast<int>(type);
  const int o = static_cast<int>(op);
  if (!made[t][o]) {
    VisitType(type, [&]<typename T>(T*) {
      if constexpr (!std::is_same_v<T, bool>) ops[t][o] = MakeOp<T>(op);
    });
    made[t][o] = true;
  }
  return ops[t][o];
}

// A tag the members of a new communicator agree on without a word.
int TagOf(const std::string& text) {
  std::uint32_t hash = 2166136261u;  // FNV-1a.
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<int>(hash % 32768u);  // MPI_TAG_UB is at least 32767.
}

// Sleeps a little longer each time nothing happened: MPI progresses in the
// calls that poll it, and a rank that waits long gives its core away.
void Pause(int round) {
  if (round < 64) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::min(1000, 10 * (round - 63))));
  }
}

// Polls `request` to its end; "" when it completed, else why it did not
// (MPI's error, the timeout, the harness's cut). `progress` runs between
// polls (the posted receives).
std::string Poll(MPI_Request& request, std::chrono::milliseconds timeout,
                 std::uint64_t cuts, const std::function<void()>& progress) {
  const auto deadline = Clock::now() + timeout;
  for (int round = 0;; ++round) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiErrorText(rc);
    if (done != 0) return "";
    if (progress) progress();
    if (CommunicatorCuts() != cuts) {
      return fmt::format("disttest cut the communicators: {}",
                         CommunicatorCutReason());
    }
    if (Clock::now() >= deadline) {
      return fmt::format("timed out after {} ms", timeout.count());
    }
    Pause(round);
  }
}

void GiveUp(MPI_Request request, std::vector<Buffer> keep) {
  GivenUp& g = GivenUpRequests();
  std::lock_guard<std::mutex> lock(g.mu);
  g.requests.emplace_back(request, std::move(keep));
}

}  // namespace

// The receives posted and not yet matched, in the order they were posted:
// a message goes to the first one of its peer and tag (MPI's order), however
// the requests are waited for.
struct MpiCommunicator::Receives {
  struct Posted {
    int peer = 0;
    std::uint32_t tag = 0;
    void* data = nullptr;
    std::size_t count = 0;
    DataType type = DataType::kUint8;
    bool done = false;
    std::string error;  // Set with done: what was wrong with the message.
  };
  MPI_Comm comm = MPI_COMM_NULL;
  std::deque<std::shared_ptr<Posted>> posted;

  // Takes each message that has come for the first posted receive of its
  // peer and tag; "" or MPI's error.
  std::string Progress() {
    std::vector<std::pair<int, std::uint32_t>> seen;
    for (auto it = posted.begin(); it != posted.end();) {
      Posted& p = **it;
      const std::pair<int, std::uint32_t> key{p.peer, p.tag};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        ++it;
        continue;
      }
      seen.push_back(key);
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      int rc = MPI_Improbe(p.peer, static_cast<int>(p.tag), comm, &flag,
                           &message, &status);
      if (rc != MPI_SUCCESS) return MpiErrorText(rc);
      if (flag == 0) {
        ++it;
        continue;
      }
      int bytes = 0;
      MPI_Get_count(&status, MPI_BYTE, &bytes);
      std::vector<char> got(static_cast<std::size_t>(std::max(bytes, 0)));
      rc = MPI_Mrecv(got.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return MpiErrorText(rc);
      Accept(p, got);
      it = posted.erase(it);
    }
    return "";
  }

  static void Accept(Posted& p, const std::vector<char>& got) {
    p.done = true;
    Header h;
    if (got.size() >= sizeof h) std::memcpy(&h, got.data(), sizeof h);
    if (got.size() < sizeof h || h.magic != Header::kMagic) {
      p.error = fmt::format(
          "rank {} sent a message of {} bytes with tag {} that no send of "
          "disttest's made (MPI code of the test's own on this communicator?)",
          p.peer, got.size(), p.tag);
      return;
    }
    const auto type = static_cast<DataType>(h.type);
    if (type != p.type || h.count != p.count) {
      p.error = fmt::format(
          "rank {} sent {} {} with tag {}; this rank expected {} {}: a send "
          "and its recv must agree on the count and the element type",
          p.peer, h.count, Name(type), p.tag, p.count, Name(p.type));
      return;
    }
    const std::size_t bytes = p.count * SizeOf(p.type);
    if (got.size() != sizeof h + bytes) {
      p.error = fmt::format("rank {}'s message of {} bytes is not {} {}",
                            p.peer, got.size(), p.count, Name(p.type));
      return;
    }
    if (bytes > 0) std::memcpy(p.data, got.data() + sizeof h, bytes);
  }

  void Forget(const std::shared_ptr<Posted>& p) {
    posted.erase(std::remove(posted.begin(), posted.end(), p), posted.end());
  }
};

namespace {

// Every MpiCommunicator's receives: any wait takes the messages that came
// for all of them, as MPI matches a posted receive while the rank waits in
// anything else (a rank that posted an irecv on one communicator and waits
// in a recv on another must not keep the first one's sender waiting). On
// MPI's main thread only, as every operation.
std::vector<std::weak_ptr<MpiCommunicator::Receives>>& AllReceives() {
  static auto* all = new std::vector<std::weak_ptr<MpiCommunicator::Receives>>;
  return *all;
}

// "" or MPI's error from the first communicator that had one.
std::string ProgressAllReceives() {
  std::string error;
  auto& all = AllReceives();
  for (auto it = all.begin(); it != all.end();) {
    if (auto receives = it->lock()) {
      if (!receives->posted.empty()) {
        std::string why = receives->Progress();
        if (error.empty()) error = std::move(why);
      }
      ++it;
    } else {
      it = all.erase(it);
    }
  }
  return error;
}

// A non-blocking send or receive of an MpiCommunicator.
class MpiRequest : public RequestState {
 public:
  using WaitFn = std::function<void(std::chrono::milliseconds)>;
  explicit MpiRequest(WaitFn wait, std::function<void()> forget = {})
      : wait_(std::move(wait)), forget_(std::move(forget)) {}
  ~MpiRequest() override {
    if (forget_) forget_();
  }
  void Wait(std::chrono::milliseconds timeout) override { wait_(timeout); }

 private:
  WaitFn wait_;
  std::function<void()> forget_;
};

}  // namespace

std::unique_ptr<Communicator> MpiCommunicator::Create(
    Store& store, int rank, int size, const CommOptions& options) {
  const std::string who = fmt::format("[rank {}/{}]", rank, size);
  if (std::string why = WhyNoMpi(); !why.empty()) {
    throw CommError(fmt::format("{} {}", who, why));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    throw CommError(fmt::format("{} backend mpi: invalid rank or size", who));
  }
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  if (main_thread == 0) {
    throw CommError(fmt::format(
        "{} backend mpi: made on a thread other than MPI's main thread (MPI "
        "runs at MPI_THREAD_FUNNELED)",
        who));
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Each member's rank in MPI's world, through the store: who is in it.
  const std::string base = options.prefix + "/mpi/";
  const std::string mine = std::to_string(world_rank);
  store.set(base + std::to_string(rank),
            std::vector<char>(mine.begin(), mine.end()));
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const std::vector<char> value = store.get(base + std::to_string(r));
    members[static_cast<std::size_t>(r)] =
        std::stoi(std::string(value.begin(), value.end()));
  }
  MPI_Group world = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, size, members.data(), &group);
  MPI_Comm comm = MPI_COMM_NULL;
  // Every member has said it is here: none waits long in this blocking call.
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group,
                                       TagOf(store.scope() + base), &comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (rc != MPI_SUCCESS) {
    throw CommError(fmt::format("{} backend mpi: MPI_Comm_create_group: {}",
                                who, MpiErrorText(rc)));
  }
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(comm, rank, size, options, store.scope()));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int rank, int size,
                                 const CommOptions& options, std::string scope)
    : comm_(comm),
      rank_(rank),
      size_(size),
      options_(options),
      scope_(std::move(scope)),
      cuts_(CommunicatorCuts()),
      receives_(std::make_shared<Receives>()) {
  // Errors come back as codes (CommError), never abort the MPI job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  receives_->comm = comm_;
  AllReceives().push_back(receives_);
  SetName(options.name, options.prefix, scope_);
  InitTimeout(options.timeout);
}

MpiCommunicator::~MpiCommunicator() {
  receives_->posted.clear();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0 && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

template <typename Op>
void MpiCommunicator::Guard(const std::string& what, Op&& op) {
  try {
    if (!broken_.empty()) {
      throw CommError(fmt::format(
          "this communicator gave up an operation before ({}); MPI may still "
          "complete it, so its calls are out of step with its peers': make a "
          "new communicator",
          broken_));
    }
    int main_thread = 0;
    MPI_Is_thread_main(&main_thread);
    if (main_thread == 0) {
      throw CommError(
          "called from a thread other than MPI's main thread (MPI runs at "
          "MPI_THREAD_FUNNELED)");
    }
    op();
  } catch (const std::exception& e) {
    failed_ = true;
    throw CommError(fmt::format("[rank {}/{}] {} failed: {}", rank_, size_,
                                what, e.what()));
  }
}

void MpiCommunicator::Wait(MPI_Request& request, std::vector<Buffer> keep) {
  const std::string why =
      Poll(request, timeout(), cuts_, [] { ProgressAllReceives(); });
  if (why.empty()) return;
  if (request != MPI_REQUEST_NULL) {
    GiveUp(request, std::move(keep));
    broken_ = why;
  }
  throw CommError(why);
}

void MpiCommunicator::Agree(const CollectiveCall& call) {
  struct Entry {
    CollectiveCall call;
    std::uint64_t seq;
  };
  static_assert(std::is_trivially_copyable_v<Entry>);
  const std::uint64_t seq = collectives_++;
  Entry mine;
  // No stray padding bytes on the wire (fields are assigned one by one).
  std::memset(static_cast<void*>(&mine), 0, sizeof mine);
  mine.call = call;
  mine.seq = seq;
  Buffer in = CopyOf(&mine, sizeof mine);
  Buffer all = NewBuffer(sizeof mine * static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(in->data(), sizeof mine, MPI_BYTE, all->data(),
                                sizeof mine, MPI_BYTE, comm_, &request);
  if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
  Wait(request, {in, all});
  std::vector<std::pair<Entry, std::vector<int>>> groups;
  for (int q = 0; q < size_; ++q) {
    Entry theirs;
    std::memcpy(&theirs, all->data() + sizeof theirs * q, sizeof theirs);
    auto same = std::find_if(groups.begin(), groups.end(), [&](auto& g) {
      return g.first.seq == theirs.seq && g.first.call == theirs.call;
    });
    if (same == groups.end()) {
      groups.push_back({theirs, {q}});
    } else {
      same->second.push_back(q);
    }
  }
  if (groups.size() == 1) return;
  // Numbered as the ledger numbers it (from #0 in each test, as the hang
  // paragraph does), where there is one; this communicator's count else.
  std::uint64_t shown = seq;
  if (const Ledger* ledger = Ledger::Current()) {
    if (const auto open = ledger->OpenCollective()) shown = open->seq;
  }
  std::string calls;
  for (const auto& [entry, ranks] : groups) {
    if (!calls.empty()) calls += "; ";
    calls += fmt::format("{}: {}", RanksText(ranks), entry.call.str());
    if (entry.seq != seq) {
      calls += fmt::format(" as its collective #{}",
                           shown + entry.seq - seq);  // Out of step.
    }
  }
  throw MismatchOfCalls(
      fmt::format("collective #{} does not match across the {} ranks: {}",
                  shown, size_, calls));
}

void MpiCommunicator::DoBarrier() {
  // Every rank's call comes in before any leaves it: a barrier.
  Guard("barrier", [&] { Agree(CollectiveCall::Barrier()); });
}

void MpiCommunicator::DoAllReduce(void* data, std::size_t count, DataType type,
                                  ReduceOp op) {
  Guard(fmt::format("{} ({})", Describe("allreduce", count, type), Name(op)),
        [&] {
          Agree(CollectiveCall::AllReduce(count, type, op));
          const std::size_t bytes = count * SizeOf(type);
          Buffer buffer = CopyOf(data, bytes);
          MPI_Request request = MPI_REQUEST_NULL;
          const int rc = MPI_Iallreduce(
              MPI_IN_PLACE, buffer->data(), IntCount(count, "allreduce"),
              ReduceType(type), ReduceOpOf(type, op), comm_, &request);
          if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
          Wait(request, {buffer});
          if (op == ReduceOp::kAvg)
            DivideBy(buffer->data(), count, type, size_);
          if (bytes > 0) std::memcpy(data, buffer->data(), bytes);
        });
}

void MpiCommunicator::DoBroadcast(void* data, std::size_t count, DataType type,
                                  int root) {
  Guard(
      fmt::format("{} from rank {}", Describe("broadcast", count, type), root),
      [&] {
        Agree(CollectiveCall::Broadcast(count, type, root));
        if (root < 0 || root >= size_) {
          throw CommError(fmt::format("invalid root rank {}", root));
        }
        const std::size_t bytes = count * SizeOf(type);
        Buffer buffer = CopyOf(data, bytes);
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = MPI_Ibcast(buffer->data(), IntCount(bytes, "broadcast"),
                                  MPI_BYTE, root, comm_, &request);
        if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
        Wait(request, {buffer});
        if (bytes > 0) std::memcpy(data, buffer->data(), bytes);
      });
}

void MpiCommunicator::DoAllGather(const void* in, void* out, std::size_t count,
                                  DataType type) {
  Guard(Describe("allgather", count, type), [&] {
    Agree(CollectiveCall::AllGather(count, type));
    const std::size_t bytes = count * SizeOf(type);
    Buffer from = CopyOf(in, bytes);
    Buffer to = NewBuffer(bytes * static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    const int n = IntCount(bytes, "allgather");
    const int rc = MPI_Iallgather(from->data(), n, MPI_BYTE, to->data(), n,
                                  MPI_BYTE, comm_, &request);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    Wait(request, {from, to});
    if (!to->empty()) std::memcpy(out, to->data(), to->size());
  });
}

void MpiCommunicator::DoReduce(const void* in, void* out, std::size_t count,
                               DataType type, ReduceOp op, int root) {
  Guard(fmt::format("{} ({}, root {})", Describe("reduce", count, type),
                    Name(op), root),
        [&] {
          Agree(CollectiveCall::Reduce(count, type, op, root));
          if (root < 0 || root >= size_) {
            throw CommError(fmt::format("invalid root rank {}", root));
          }
          const std::size_t bytes = count * SizeOf(type);
          Buffer from = CopyOf(in, bytes);
          Buffer to = NewBuffer(rank_ == root ? bytes : 0);
          MPI_Request request = MPI_REQUEST_NULL;
          const int rc = MPI_Ireduce(
              from->data(), to->data(), IntCount(count, "reduce"),
              ReduceType(type), ReduceOpOf(type, op), root, comm_, &request);
          if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
          Wait(request, {from, to});
          if (rank_ != root) return;
          if (op == ReduceOp::kAvg) DivideBy(to->data(), count, type, size_);
          if (bytes > 0) std::memcpy(out, to->data(), bytes);
        });
}

void MpiCommunicator::DoReduceScatter(const void* in, void* out,
                                      std::size_t count, DataType type,
                                      ReduceOp op) {
  Guard(
      fmt::format("{} ({})", Describe("reduce_scatter", count, type), Name(op)),
      [&] {
        Agree(CollectiveCall::ReduceScatter(count, type, op));
        const std::size_t bytes = count * SizeOf(type);
        Buffer from = CopyOf(in, bytes * static_cast<std::size_t>(size_));
        Buffer to = NewBuffer(bytes);
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = MPI_Ireduce_scatter_block(
            from->data(), to->data(), IntCount(count, "reduce_scatter"),
            ReduceType(type), ReduceOpOf(type, op), comm_, &request);
        if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
        Wait(request, {from, to});
        if (op == ReduceOp::kAvg) DivideBy(to->data(), count, type, size_);
        if (bytes > 0) std::memcpy(out, to->data(), bytes);
      });
}

void MpiCommunicator::DoGather(const void* in, void* out, std::size_t count,
                               DataType type, int root) {
  Guard(fmt::format("{} to rank {}", Describe("gather", count, type), root),
        [&] {
          Agree(CollectiveCall::Gather(count, type, root));
          if (root < 0 || root >= size_) {
            throw CommError(fmt::format("invalid root rank {}", root));
          }
          const std::size_t bytes = count * SizeOf(type);
          Buffer from = CopyOf(in, bytes);
          Buffer to = NewBuffer(
              rank_ == root ? bytes * static_cast<std::size_t>(size_) : 0);
          const int n = IntCount(bytes, "gather");
          MPI_Request request = MPI_REQUEST_NULL;
          const int rc = MPI_Igather(from->data(), n, MPI_BYTE, to->data(), n,
                                     MPI_BYTE, root, comm_, &request);
          if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
          Wait(request, {from, to});
          if (!to->empty()) std::memcpy(out, to->data(), to->size());
        });
}

void MpiCommunicator::DoScatter(const void* in, void* out, std::size_t count,
                                DataType type, int root) {
  Guard(fmt::format("{} from rank {}", Describe("scatter", count, type), root),
        [&] {
          Agree(CollectiveCall::Scatter(count, type, root));
          if (root < 0 || root >= size_) {
            throw CommError(fmt::format("invalid root rank {}", root));
          }
          const std::size_t bytes = count * SizeOf(type);
          Buffer from =
              rank_ == root
                  ? CopyOf(in, bytes * static_cast<std::size_t>(size_))
                  : NewBuffer(0);
          Buffer to = NewBuffer(bytes);
          const int n = IntCount(bytes, "scatter");
          MPI_Request request = MPI_REQUEST_NULL;
          const int rc = MPI_Iscatter(from->data(), n, MPI_BYTE, to->data(), n,
                                      MPI_BYTE, root, comm_, &request);
          if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
          Wait(request, {from, to});
          if (bytes > 0) std::memcpy(out, to->data(), bytes);
        });
}

void MpiCommunicator::DoAllToAll(const void* in, void* out, std::size_t count,
                                 DataType type) {
  Guard(Describe("alltoall", count, type), [&] {
    Agree(CollectiveCall::AllToAll(count, type));
    const std::size_t bytes = count * SizeOf(type);
    const std::size_t total = bytes * static_cast<std::size_t>(size_);
    Buffer from = CopyOf(in, total);
    Buffer to = NewBuffer(total);
    const int n = IntCount(bytes, "alltoall");
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Ialltoall(from->data(), n, MPI_BYTE, to->data(), n,
                                 MPI_BYTE, comm_, &request);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    Wait(request, {from, to});
    if (total > 0) std::memcpy(out, to->data(), total);
  });
}

void MpiCommunicator::DoAllGatherV(const void* in, void* out,
                                   std::span<const std::size_t> counts,
                                   DataType type) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  const CollectiveCall call =
      CollectiveCall::AllGatherV(type, counts.data(), counts.size());
  Guard(Describe("allgatherv", total, type), [&] {
    // Counts of another length than the peers' differ from theirs: the
    // comparison fails every rank.
    Agree(call);
    if (counts.size() != static_cast<std::size_t>(size_)) {
      throw CommError(fmt::format("{} counts given, one per rank is {}",
                                  counts.size(), size_));
    }
    const std::size_t size = SizeOf(type);
    std::vector<int> bytes(counts.size());
    std::vector<int> at(counts.size());
    std::size_t offset = 0;
    for (std::size_t q = 0; q < counts.size(); ++q) {
      bytes[q] = IntCount(counts[q] * size, "allgatherv");
      at[q] = IntCount(offset, "allgatherv");
      offset += counts[q] * size;
    }
    const std::size_t me = static_cast<std::size_t>(rank_);
    Buffer from = CopyOf(in, counts[me] * size);
    Buffer to = NewBuffer(offset);
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc =
        MPI_Iallgatherv(from->data(), bytes[me], MPI_BYTE, to->data(),
                        bytes.data(), at.data(), MPI_BYTE, comm_, &request);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    Wait(request, {from, to});
    if (offset > 0) std::memcpy(out, to->data(), offset);
  });
}

void MpiCommunicator::DoAllToAllV(const void* in,
                                  std::span<const std::size_t> in_counts,
                                  void* out,
                                  std::span<const std::size_t> out_counts,
                                  DataType type) {
  std::uint64_t sent = 0;
  for (std::size_t c : in_counts) sent += c;
  const std::size_t world = static_cast<std::size_t>(size_);
  Guard(fmt::format("alltoallv of {} {} sent", sent, Name(type)), [&] {
    Agree(CollectiveCall::AllToAllV(type));
    // Every rank's counts, both ways, so that every rank checks every pair
    // and all fail alike. A rank whose counts are not one per rank sends
    // UINT64_MAX for each (its peers wait in this allgather too).
    const bool one_each =
        in_counts.size() == world && out_counts.size() == world;
    std::vector<std::uint64_t> mine(2 * world, UINT64_MAX);
    if (one_each) {
      for (std::size_t q = 0; q < world; ++q) {
        mine[q] = in_counts[q];
        mine[world + q] = out_counts[q];
      }
    }
    Buffer from = CopyOf(mine.data(), mine.size() * sizeof mine[0]);
    Buffer all = NewBuffer(from->size() * world);
    MPI_Request request = MPI_REQUEST_NULL;
    const int n = IntCount(from->size(), "alltoallv");
    int rc = MPI_Iallgather(from->data(), n, MPI_BYTE, all->data(), n, MPI_BYTE,
                            comm_, &request);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    Wait(request, {from, all});
    const auto* counts = reinterpret_cast<const std::uint64_t*>(all->data());
    for (std::size_t a = 0; a < world; ++a) {
      if (counts[a * 2 * world] == UINT64_MAX) {
        throw CommError(fmt::format(
            "rank {} gave {}; one per rank is {}", a,
            a == static_cast<std::size_t>(rank_)
                ? fmt::format("{} in_counts and {} out_counts",
                              in_counts.size(), out_counts.size())
                : std::string("in_counts or out_counts of another length"),
            world));
      }
    }
    const auto sends = [&](std::size_t from_rank, std::size_t to_rank) {
      return counts[from_rank * 2 * world + to_rank];
    };
    const auto expects = [&](std::size_t at, std::size_t from_rank) {
      return counts[at * 2 * world + world + from_rank];
    };
    const std::size_t size = SizeOf(type);
    for (std::size_t a = 0; a < world; ++a) {
      std::uint64_t out_of_a = 0, into_a = 0;
      for (std::size_t b = 0; b < world; ++b) {
        if (sends(a, b) != expects(b, a)) {
          throw CommError(
              fmt::format("rank {} sends {} x {} to rank {}, which expects {}",
                          a, sends(a, b), Name(type), b, expects(b, a)));
        }
        out_of_a += sends(a, b);
        into_a += expects(a, b);
      }
      // Every rank checks every rank's totals: all fail alike.
      if (std::max(out_of_a, into_a) * size >
          static_cast<std::uint64_t>(INT_MAX)) {
        throw CommError(fmt::format(
            "rank {} sends {} and receives {} x {}: more bytes than MPI's int "
            "counts hold ({})",
            a, out_of_a, into_a, Name(type), INT_MAX));
      }
    }
    std::vector<int> send_bytes(world), send_at(world);
    std::vector<int> recv_bytes(world), recv_at(world);
    std::size_t send_total = 0, recv_total = 0;
    for (std::size_t q = 0; q < world; ++q) {
      send_bytes[q] = IntCount(in_counts[q] * size, "alltoallv");
      send_at[q] = IntCount(send_total, "alltoallv");
      send_total += in_counts[q] * size;
      recv_bytes[q] = IntCount(out_counts[q] * size, "alltoallv");
      recv_at[q] = IntCount(recv_total, "alltoallv");
      recv_total += out_counts[q] * size;
    }
    Buffer send = CopyOf(in, send_total);
    Buffer recv = NewBuffer(recv_total);
    request = MPI_REQUEST_NULL;
    rc = MPI_Ialltoallv(send->data(), send_bytes.data(), send_at.data(),
                        MPI_BYTE, recv->data(), recv_bytes.data(),
                        recv_at.data(), MPI_BYTE, comm_, &request);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    Wait(request, {send, recv});
    if (recv_total > 0) std::memcpy(out, recv->data(), recv_total);
  });
}

std::unique_ptr<Communicator> MpiCommunicator::DoSplit(int color, int key) {
  std::unique_ptr<Communicator> made;
  Guard(fmt::format("split (color {}, key {})", color, key), [&] {
    Agree(CollectiveCall::Split());
    const int round = splits_++;
    // Every rank is in the split now (the comparison was an allgather):
    // MPI's blocking split waits for none for long. MPI ranks the members
    // by key, then by their rank here, as Communicator::split says.
    MPI_Comm comm = MPI_COMM_NULL;
    const int rc = MPI_Comm_split(
        comm_, color == kNoColor ? MPI_UNDEFINED : color, key, &comm);
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
    if (comm == MPI_COMM_NULL) return;
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    CommOptions sub = options_;
    sub.prefix =
        fmt::format("{}/split{}/color{}", options_.prefix, round, color);
    sub.name = fmt::format("{} split {} (color {})", name(), round, color);
    sub.timeout = timeout();
    sub.arena = nullptr;
    made.reset(new MpiCommunicator(comm, rank, size, sub, scope_));
  });
  return made;
}

void MpiCommunicator::CheckPeer(int peer, std::uint32_t tag) const {
  if (peer == rank_) {
    throw CommError(internal::kBlockingToItself);
  }
  if (peer < 0 || peer >= size_) {
    throw CommError(fmt::format("invalid peer rank {} (the ranks are 0 to {})",
                                peer, size_ - 1));
  }
  // MPI_COMM_WORLD's: Open MPI puts the attribute on no communicator made
  // from it.
  static const int upper = [] {
    void* value = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag);
    return flag != 0 ? *static_cast<int*>(value) : 32767;
  }();
  if (tag > static_cast<std::uint32_t>(upper)) {
    throw CommError(fmt::format(
        "tag {} is above this MPI's largest (MPI_TAG_UB, {})", tag, upper));
  }
}

std::unique_ptr<RequestState> MpiCommunicator::PostSend(const void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag,
                                                        const char* op) {
  const std::string what = fmt::format("{} to rank {} (tag {})",
                                       Describe(op, count, type), peer, tag);
  auto buffer = std::make_shared<Buffer>();
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  Guard(what, [&] {
    CheckPeer(peer, tag);
    const std::size_t bytes = count * SizeOf(type);
    Header h;
    h.type = static_cast<std::int32_t>(type);
    h.count = count;
    *buffer = NewBuffer(sizeof h + bytes);
    std::memcpy((*buffer)->data(), &h, sizeof h);
    if (bytes > 0) std::memcpy((*buffer)->data() + sizeof h, data, bytes);
    // Synchronous: complete once the peer's receive has taken it.
    const int rc =
        MPI_Issend((*buffer)->data(), IntCount((*buffer)->size(), "send"),
                   MPI_BYTE, peer, static_cast<int>(tag), comm_, request.get());
    if (rc != MPI_SUCCESS) throw CommError(MpiErrorText(rc));
  });
  return std::make_unique<MpiRequest>(
      [this, what, buffer, request](std::chrono::milliseconds) {
        Guard(what, [&] { Wait(*request, {*buffer}); });
      });
}

std::unique_ptr<RequestState> MpiCommunicator::DoISend(const void* data,
                                                       std::size_t count,
                                                       DataType type, int peer,
                                                       std::uint32_t tag) {
  return PostSend(data, count, type, peer, tag, "isend");
}

void MpiCommunicator::DoSend(const void* data, std::size_t count, DataType type,
                             int peer, std::uint32_t tag) {
  PostSend(data, count, type, peer, tag, "send")->Wait(timeout());
}

std::unique_ptr<RequestState> MpiCommunicator::PostRecv(void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag,
                                                        const char* op) {
  auto posted = std::make_shared<Receives::Posted>();
  posted->peer = peer;
  posted->tag = tag;
  posted->data = data;
  posted->count = count;
  posted->type = type;
  receives_->posted.push_back(posted);
  std::weak_ptr<Receives> receives = receives_;
  const std::string what = fmt::format("{} from rank {} (tag {})",
                                       Describe(op, count, type), peer, tag);
  return std::make_unique<MpiRequest>(
      [this, what, posted](std::chrono::milliseconds) {
        Guard(what, [&] {
          const auto deadline = Clock::now() + timeout();
          for (int round = 0;; ++round) {
            if (std::string error = ProgressAllReceives(); !error.empty()) {
              throw CommError(error);
            }
            if (posted->done) {
              // (Its errors: the message is not what the receive is.)
              if (!posted->error.empty()) {
                throw MismatchOfCalls(posted->error);
              }
              return;
            }
            if (CommunicatorCuts() != cuts_) {
              throw CommError(fmt::format("disttest cut the communicators: {}",
                                          CommunicatorCutReason()));
            }
            if (Clock::now() >= deadline) {
              throw CommError(
                  fmt::format("timed out after {} ms", timeout().count()));
            }
            Pause(round);
          }
        });
      },
      // Never matched later, into a buffer that may be gone.
      [receives, posted] {
        if (auto r = receives.lock()) r->Forget(posted);
      });
}

std::unique_ptr<RequestState> MpiCommunicator::DoIRecv(void* data,
                                                       std::size_t count,
                                                       DataType type, int peer,
                                                       std::uint32_t tag) {
  const std::string what = fmt::format(
      "{} from rank {} (tag {})", Describe("irecv", count, type), peer, tag);
  Guard(what, [&] { CheckPeer(peer, tag); });
  return PostRecv(data, count, type, peer, tag, "irecv");
}

void MpiCommunicator::DoRecv(void* data, std::size_t count, DataType type,
                             int peer, std::uint32_t tag) {
  const std::string what = fmt::format(
      "{} from rank {} (tag {})", Describe("recv", count, type), peer, tag);
  Guard(what, [&] { CheckPeer(peer, tag); });
  PostRecv(data, count, type, peer, tag, "recv")->Wait(timeout());
}

}  // namespace disttest::internal
