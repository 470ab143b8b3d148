// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "comm/ledger.h"
#include "comm/request_account.h"
#include "disttest/comm/collective_call.h"
#include "disttest/error.h"
#include "env/knobs.h"

namespace disttest {

std::size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kUint16:
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

const char* Name(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return "int8";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kInt16:
      return "int16";
    case DataType::kUint16:
      return "uint16";
    case DataType::kUint32:
      return "uint32";
    case DataType::kUint64:
      return "uint64";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBfloat16:
      return "bfloat16";
  }
  return "unknown";
}

bool IsFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 ||
         type == DataType::kFloat32 || type == DataType::kFloat64;
}

const char* Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

const char* Name(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
    case Backend::kAuto:
      return "auto";
  }
  return "unknown";
}

// One operation in the ledger, from its call to its return (completed) or
// its exception (failed).
class Communicator::Recorded {
 public:
  // `entry`: an operation recorded before (a non-blocking one's, whose wait
  // this is) that this one ends, instead of a new one.
  Recorded(Communicator& comm, bool collective,
           const internal::Ledger::Call& call, const Where& where,
           std::uint64_t entry = kNoEntry)
      : ledger_(internal::Ledger::Current()) {
    if (ledger_ == nullptr) return;
    if (entry != kNoEntry) {
      if (comm.ledger_ != ledger_) {
        ledger_ = nullptr;  // Made under another ledger: not this one's.
        return;
      }
      index_ = entry;
      comm_ = comm.ledger_id_;
      call_ = call;
      timeout_ = comm.timeout();
      shortened_ = comm.timeout() < comm.made_timeout_;
      return;
    }
    if (comm.ledger_ != ledger_) {
      // The first operation, or a ledger installed since: the communicator
      // gets its id there (a key is one communicator's: SetName()).
      comm.ledger_id_ = ledger_->AddCommunicator(comm.name_, comm.key_,
                                                 comm.rank(), comm.size());
      comm.ledger_ = ledger_;
    }
    if (comm.ledger_id_ >= internal::LedgerMemory::kComms) {
      // Its calls could not be compared across the ranks: refused, never
      // run unchecked.
      ledger_ = nullptr;
      throw CommError(fmt::format(
          "[rank {}/{}] {}: this rank has used {} communicators in this "
          "test, the most whose calls disttest compares across the ranks (a "
          "destroyed one's place is free again from the next test on); make "
          "fewer in one test",
          comm.rank(), comm.size(), comm.name_,
          internal::LedgerMemory::kComms));
    }
    // Numbered from 0, as the host arena numbers them: the world's #0 is
    // disttest's barrier before the body, a test's first collective #1.
    std::uint64_t seq = ledger_->NextSeq(comm.ledger_id_, collective);
    if (seq == internal::Ledger::kNoSeq) {
      seq = collective ? comm.collectives_++ : comm.transfers_++;
    }
    index_ = ledger_->Begin(comm.ledger_id_, seq, call, where);
    comm_ = comm.ledger_id_;
    call_ = call;
    seq_ = seq;
    collective_ = collective;
    size_ = comm.size();
    timeout_ = comm.timeout();
    shortened_ = comm.timeout() < comm.made_timeout_;
  }
  static constexpr std::uint64_t kNoEntry = UINT64_MAX;

  ~Recorded() {
    if (ledger_ == nullptr || pending_) return;
    ledger_->End(index_, completed_ ? internal::LedgerState::kCompleted
                                    : internal::LedgerState::kFailed);
    // Only calls that returned go into the digest: a call a rank expected
    // to throw, or one it was killed in, is no difference of calls.
    if (completed_) ledger_->Digest(comm_, call_);
  }
  Recorded(const Recorded&) = delete;
  Recorded& operator=(const Recorded&) = delete;
  // Runs the operation; it completed when `op` returns. A collective that
  // timed out without saying for whom (Gloo's "Timed out waiting 2700ms for
  // recv operation to complete") says it, as the host arena does, from the
  // ranks' ledgers: a rank spawned on this host can read its peers'.
  // `blocks`: the call waits for its peers (all but posting a request), so
  // that while it is in it the ledger says it waits.
  template <typename Op>
  void Run(Op&& op, bool blocks = true) {
    struct Blocked {
      internal::Ledger* ledger;
      Blocked(internal::Ledger* l, std::uint64_t index,
              std::chrono::milliseconds timeout)
          : ledger(l) {
        if (ledger != nullptr) ledger->Block(index, timeout);
      }
      ~Blocked() {
        if (ledger != nullptr) ledger->Unblock();
      }
      Blocked(const Blocked&) = delete;
      Blocked& operator=(const Blocked&) = delete;
    } blocked(blocks ? ledger_ : nullptr, index_,
              // A call whose timeout the test shortened (set_timeout,
              // ScopedTimeout) may be one it waits out on purpose: it is
              // never taken for a deadlock (0: it gives up at once).
              shortened_ ? std::chrono::milliseconds::zero() : timeout_);
    try {
      op();
    } catch (const CommError& e) {
      const std::string missing = Missing(e.what());
      if (missing.empty()) throw;
      throw CommError(
          fmt::format("{}; by the ranks' ledgers {}", e.what(), missing));
    }
    completed_ = true;
  }
  // The operation goes on after this call (isend, irecv): its entry stays
  // in flight until its wait ends it.
  void Pending() { pending_ = completed_; }
  // Its entry in the ledger, kNoEntry without one.
  std::uint64_t index() const { return ledger_ == nullptr ? kNoEntry : index_; }

 private:
  std::string Missing(std::string_view what) const {
    // (A wait() ends the entry its isend or irecv made: no number of its
    // own, which only a collective needs.)
    if (ledger_ == nullptr || ledger_->memory().ranks() < 2 ||
        (collective_ && seq_ == internal::Ledger::kNoSeq)) {
      return "";
    }
    const bool timed_out = what.find("Timed out") != std::string_view::npos ||
                           what.find("timed out") != std::string_view::npos;
    if (!timed_out || what.find("waiting for rank") != std::string_view::npos) {
      return "";
    }
    const internal::LedgerMemory& memory = ledger_->memory();
    if (!collective_) {
      // Gloo's "Timed out waiting 1000ms for recv operation to complete":
      // what its peer does meanwhile.
      if (what.find("same-host arena") != std::string_view::npos) return "";
      const std::string peer = internal::WhereIsPeer(
          memory, ledger_->slot(), ledger_->comm_key(comm_), call_.peer);
      return peer;
    }
    const std::string missing = internal::MissingFromCollective(
        memory, ledger_->slot(), ledger_->comm_key(comm_), seq_,
        size_ == memory.ranks());
    return missing.empty() ? "" : "it was " + missing;
  }

  internal::Ledger* ledger_;
  std::uint64_t index_ = 0;
  std::uint32_t comm_ = 0;
  internal::Ledger::Call call_{};
  std::uint64_t seq_ = internal::Ledger::kNoSeq;
  bool collective_ = false;
  int size_ = 0;
  std::chrono::milliseconds timeout_{0};
  bool shortened_ = false;  // The test set a shorter timeout than it had.
  bool completed_ = false;
  bool pending_ = false;
};

using internal::LedgerOp;

namespace {
// kAvg divides: only the floating-point types have it, on every backend.
void CheckReduceOp(const Communicator& comm, const char* op, DataType type,
                   ReduceOp reduce) {
  if (reduce != ReduceOp::kAvg || IsFloatingPoint(type)) return;
  throw CommError(fmt::format(
      "[rank {}/{}] {} of {}: avg is for the floating-point types (float16, "
      "bfloat16, float32, float64), not {}",
      comm.rank(), comm.size(), op, Name(type), Name(type)));
}
}  // namespace

void Communicator::SetName(const std::string& name, const std::string& prefix,
                           const std::string& store_scope) {
  name_ = !name.empty()    ? name
          : prefix.empty() ? std::string("unnamed communicator")
                           : fmt::format("communicator \"{}\"", prefix);
  // The keys its rendezvous uses (a PrefixStore(prefix, store)'s) and how
  // many of those this process made before (one made again is another: its
  // numbers start at 0, as on every rank). Not its name: a name is a label
  // for reports, and ranks that name one communicator differently still
  // have their calls compared.
  const std::string identity = store_scope + prefix + "/\n";
  static std::mutex mu;
  static auto* made = new std::map<std::string, std::uint64_t>;
  std::uint64_t before = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    before = (*made)[identity]++;
  }
  key_ = internal::LedgerKey(fmt::format("{}\n{}", identity, before));
  // In the ledger from now on, before its first operation: a reader then
  // knows this rank's rank in it even if it never calls it (its peers' sends
  // to this rank wait for ever).
  if (internal::Ledger* ledger = internal::Ledger::Current()) {
    ledger_id_ = ledger->AddCommunicator(name_, key_, rank(), size());
    ledger_ = ledger;
  }
}

Communicator::~Communicator() {
  *alive_ = false;
  // Its id can go to another communicator from the next test on.
  if (ledger_ != nullptr) ledger_->Release(ledger_id_);
}

void Communicator::barrier(Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, -1, 0},
             where);
  r.Run([&] { DoBarrier(); });
}

void Communicator::allreduce(void* data, std::size_t count, DataType type,
                             ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kAllReduce, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "allreduce", type, op);
    DoAllReduce(data, count, type, op);
  });
}

void Communicator::allreduce(const void* in, void* out, std::size_t count,
                             DataType type, ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kAllReduce, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "allreduce", type, op);
    if (in == out) {
      DoAllReduce(out, count, type, op);
    } else {
      DoAllReduceOutOfPlace(in, out, count, type, op);
    }
  });
}

void Communicator::broadcast(void* data, std::size_t count, DataType type,
                             int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBroadcast, type, ReduceOp::kSum, count, root, 0},
             where);
  r.Run([&] { DoBroadcast(data, count, type, root); });
}

void Communicator::broadcast(const void* in, void* out, std::size_t count,
                             DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBroadcast, type, ReduceOp::kSum, count, root, 0},
             where);
  r.Run([&] {
    if (in == out) {
      DoBroadcast(out, count, type, root);
    } else {
      DoBroadcastOutOfPlace(in, out, count, type, root);
    }
  });
}

void Communicator::allgather(const void* in, void* out, std::size_t count,
                             DataType type, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kAllGather, type, ReduceOp::kSum, count, -1, 0}, where);
  r.Run([&] { DoAllGather(in, out, count, type); });
}

void Communicator::send(const void* data, std::size_t count, DataType type,
                        int peer, std::uint32_t tag, Where where) {
  Recorded r(*this, false,
             {LedgerOp::kSend, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { DoSend(data, count, type, peer, tag); });
}

void Communicator::recv(void* data, std::size_t count, DataType type, int peer,
                        std::uint32_t tag, Where where) {
  Recorded r(*this, false,
             {LedgerOp::kRecv, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { DoRecv(data, count, type, peer, tag); });
}

void Communicator::reduce(const void* in, void* out, std::size_t count,
                          DataType type, ReduceOp op, int root, Where where) {
  Recorded r(*this, true, {LedgerOp::kReduce, type, op, count, root, 0}, where);
  r.Run([&] {
    CheckReduceOp(*this, "reduce", type, op);
    DoReduce(in, out, count, type, op, root);
  });
}

void Communicator::reduce_scatter(const void* in, void* out, std::size_t count,
                                  DataType type, ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kReduceScatter, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "reduce_scatter", type, op);
    DoReduceScatter(in, out, count, type, op);
  });
}

void Communicator::gather(const void* in, void* out, std::size_t count,
                          DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kGather, type, ReduceOp::kSum, count, root, 0}, where);
  r.Run([&] { DoGather(in, out, count, type, root); });
}

void Communicator::scatter(const void* in, void* out, std::size_t count,
                           DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kScatter, type, ReduceOp::kSum, count, root, 0}, where);
  r.Run([&] { DoScatter(in, out, count, type, root); });
}

void Communicator::alltoall(const void* in, void* out, std::size_t count,
                            DataType type, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kAllToAll, type, ReduceOp::kSum, count, -1, 0}, where);
  r.Run([&] { DoAllToAll(in, out, count, type); });
}

void Communicator::allgatherv(const void* in, void* out,
                              std::span<const std::size_t> counts,
                              DataType type, Where where) {
  std::uint64_t total = 0;
  for (std::size_t c : counts) total += c;
  const std::uint64_t hash =
      CollectiveCall::CountsHash(counts.data(), counts.size());
  Recorded r(*this, true,
             {LedgerOp::kAllGatherV, type, ReduceOp::kSum, total, -1,
              static_cast<std::uint32_t>(hash ^ (hash >> 32)), counts.data(),
              counts.size()},
             where);
  r.Run([&] { DoAllGatherV(in, out, counts, type); });
}

void Communicator::alltoallv(const void* in,
                             std::span<const std::size_t> in_counts, void* out,
                             std::span<const std::size_t> out_counts,
                             DataType type, Where where) {
  std::uint64_t sent = 0;
  for (std::size_t c : in_counts) sent += c;
  Recorded r(*this, true,
             {LedgerOp::kAllToAllV, type, ReduceOp::kSum, sent, -1, 0}, where);
  r.Run([&] { DoAllToAllV(in, in_counts, out, out_counts, type); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key,
                                                  Where where) {
  Recorded r(*this, true,
             {LedgerOp::kSplit, DataType::kUint8, ReduceOp::kSum, 0, color,
              static_cast<std::uint32_t>(key)},
             where);
  std::unique_ptr<Communicator> made;
  r.Run([&] {
    if (color < 0 && color != kNoColor) {
      throw CommError(fmt::format(
          "[rank {}/{}] split: color {} is negative (kNoColor, -1, is the "
          "only one: this rank then joins no communicator)",
          rank(), size(), color));
    }
    made = DoSplit(color, key);
  });
  return made;
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout <= std::chrono::milliseconds::zero()) {
    throw CommError(fmt::format(
        "[rank {}/{}] set_timeout({} ms): a timeout must be positive", rank(),
        size(), timeout.count()));
  }
  timeout_ = std::min(timeout, kLongestTimeout);
  DoSetTimeout(timeout_);
}

void Communicator::InitTimeout(std::chrono::milliseconds timeout) {
  timeout_ = std::min(timeout, kLongestTimeout);
  made_timeout_ = timeout_;
}

namespace {
// "isend(8 x float32 to rank 1, tag 7) on communicator \"grads\"" (without
// " on ..." for an empty `comm`).
std::string DescribeRequest(bool send, std::size_t count, DataType type,
                            int peer, std::uint32_t tag,
                            const std::string& comm) {
  return fmt::format("{}({} x {} {} rank {}, tag {}){}{}",
                     send ? "isend" : "irecv", count, Name(type),
                     send ? "to" : "from", peer, tag,
                     comm.empty() ? "" : " on ", comm);
}
}  // namespace

Request Communicator::isend(const void* data, std::size_t count, DataType type,
                            int peer, std::uint32_t tag, Where where) {
  Request request;
  // Posting is recorded as the send itself: what a hang shows is its wait.
  Recorded r(*this, false,
             {LedgerOp::kSend, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { request.state_ = DoISend(data, count, type, peer, tag); },
        /*blocks=*/false);
  r.Pending();
  request.comm_ = this;
  request.send_ = true;
  request.type_ = type;
  request.count_ = count;
  request.peer_ = peer;
  request.tag_ = tag;
  request.file_ = where.file_name();
  request.line_ = where.line();
  request.entry_ = r.index();
  request.id_ = internal::RequestMade(
      DescribeRequest(true, count, type, peer, tag, name_), where.file_name(),
      where.line());
  request.comm_alive_ = alive_;
  return request;
}

Request Communicator::irecv(void* data, std::size_t count, DataType type,
                            int peer, std::uint32_t tag, Where where) {
  Request request;
  Recorded r(*this, false,
             {LedgerOp::kRecv, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { request.state_ = DoIRecv(data, count, type, peer, tag); },
        /*blocks=*/false);
  r.Pending();
  request.comm_ = this;
  request.send_ = false;
  request.type_ = type;
  request.count_ = count;
  request.peer_ = peer;
  request.tag_ = tag;
  request.file_ = where.file_name();
  request.line_ = where.line();
  request.entry_ = r.index();
  request.id_ = internal::RequestMade(
      DescribeRequest(false, count, type, peer, tag, name_), where.file_name(),
      where.line());
  request.comm_alive_ = alive_;
  return request;
}

namespace {
[[noreturn]] void NotInBackend(const Communicator& comm, const char* op) {
  throw CommError(
      fmt::format("[rank {}/{}] {} is not supported by the {} "
                  "backend",
                  comm.rank(), comm.size(), op, comm.backend_name()));
}
}  // namespace

void Communicator::DoReduce(const void*, void*, std::size_t, DataType, ReduceOp,
                            int) {
  NotInBackend(*this, "reduce");
}
void Communicator::DoReduceScatter(const void*, void*, std::size_t, DataType,
                                   ReduceOp) {
  NotInBackend(*this, "reduce_scatter");
}
void Communicator::DoGather(const void*, void*, std::size_t, DataType, int) {
  NotInBackend(*this, "gather");
}
void Communicator::DoScatter(const void*, void*, std::size_t, DataType, int) {
  NotInBackend(*this, "scatter");
}
void Communicator::DoAllToAll(const void*, void*, std::size_t, DataType) {
  NotInBackend(*this, "alltoall");
}
void Communicator::DoAllGatherV(const void*, void*,
                                std::span<const std::size_t>, DataType) {
  NotInBackend(*this, "allgatherv");
}
void Communicator::DoAllToAllV(const void*, std::span<const std::size_t>, void*,
                               std::span<const std::size_t>, DataType) {
  NotInBackend(*this, "alltoallv");
}
std::unique_ptr<Communicator> Communicator::DoSplit(int, int) {
  NotInBackend(*this, "split");
}
std::unique_ptr<RequestState> Communicator::DoISend(const void*, std::size_t,
                                                    DataType, int,
                                                    std::uint32_t) {
  NotInBackend(*this, "isend");
}
std::unique_ptr<RequestState> Communicator::DoIRecv(void*, std::size_t,
                                                    DataType, int,
                                                    std::uint32_t) {
  NotInBackend(*this, "irecv");
}
void Communicator::DoAllReduceOutOfPlace(const void* in, void* out,
                                         std::size_t count, DataType type,
                                         ReduceOp op) {
  if (count > 0) std::memmove(out, in, count * SizeOf(type));
  DoAllReduce(out, count, type, op);
}
void Communicator::DoBroadcastOutOfPlace(const void* in, void* out,
                                         std::size_t count, DataType type,
                                         int root) {
  if (rank() == root && count > 0) {
    std::memmove(out, in, count * SizeOf(type));
  }
  DoBroadcast(out, count, type, root);
}

RequestState::~RequestState() = default;

Request::Request(Request&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)),
      state_(std::move(other.state_)),
      send_(other.send_),
      type_(other.type_),
      count_(other.count_),
      peer_(other.peer_),
      tag_(other.tag_),
      file_(other.file_),
      line_(other.line_),
      entry_(other.entry_),
      id_(std::exchange(other.id_, 0)),
      comm_alive_(std::move(other.comm_alive_)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Finish();
    comm_ = std::exchange(other.comm_, nullptr);
    state_ = std::move(other.state_);
    send_ = other.send_;
    type_ = other.type_;
    count_ = other.count_;
    peer_ = other.peer_;
    tag_ = other.tag_;
    file_ = other.file_;
    line_ = other.line_;
    entry_ = other.entry_;
    id_ = std::exchange(other.id_, 0);
    comm_alive_ = std::move(other.comm_alive_);
  }
  return *this;
}

Request::~Request() { Finish(); }

// Whether the communicator of a request in flight is gone: its state is
// then left as it is (its backend went with it), out of the account.
bool Request::Orphaned() noexcept {
  if (state_ == nullptr || comm_alive_ == nullptr || *comm_alive_) {
    return false;
  }
  internal::RequestWaited(std::exchange(id_, 0));
  (void)state_.release();  // Its backend's memory went with the communicator.
  return true;
}

void Request::Finish() noexcept {
  if (state_ == nullptr || comm_ == nullptr) return;
  if (Orphaned()) {
    // Destroyed without wait() after its communicator: the test is told
    // here (wait() throws instead).
    internal::RequestDroppedAndFailed(
        DescribeRequest(send_, count_, type_, peer_, tag_, ""), file_, line_,
        "its communicator was destroyed first (wait for a Request before "
        "its communicator goes)");
    return;
  }
  try {
    comm_->WaitFor(*this);
  } catch (const std::exception& e) {
    // Marked on the communicator by the backend (failed()) and in the
    // ledger; a destructor cannot throw, so the rank runtime fails the test
    // with it after the body (an error nobody sees would pass).
    internal::RequestDroppedAndFailed(
        DescribeRequest(send_, count_, type_, peer_, tag_, comm_->name()),
        file_, line_, e.what());
  }
}

void Request::wait() {
  if (state_ == nullptr) return;
  if (Orphaned()) {
    throw CommError(
        fmt::format("wait() of {}: its communicator was destroyed first",
                    DescribeRequest(send_, count_, type_, peer_, tag_, "")));
  }
  comm_->WaitFor(*this);
}

void Communicator::WaitFor(Request& request) {
  // The wait is the operation a hang shows: recorded as the send or
  // receive it waits for, at the line that made it.
  Recorded r(*this, false,
             {request.send_ ? LedgerOp::kSend : LedgerOp::kRecv, request.type_,
              ReduceOp::kSum, request.count_, request.peer_, request.tag_},
             CallSite::current(request.file_, request.line_), request.entry_);
  std::unique_ptr<RequestState> state = std::move(request.state_);
  internal::RequestWaited(std::exchange(request.id_, 0));
  r.Run([&] { state->Wait(timeout_); });
}

std::uint64_t CollectiveCall::CountsHash(const std::size_t* counts,
                                         std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ n;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= counts[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string CollectiveCall::str() const {
  switch (op) {
    case Op::kBarrier:
      return "barrier()";
    case Op::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case Op::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         root);
    case Op::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case Op::kReduce:
      return fmt::format("reduce({} x {}, {}, root {})", count, Name(type),
                         Name(reduce), root);
    case Op::kReduceScatter:
      return fmt::format("reduce_scatter({} x {}, {})", count, Name(type),
                         Name(reduce));
    case Op::kGather:
      return fmt::format("gather({} x {}, root {})", count, Name(type), root);
    case Op::kScatter:
      return fmt::format("scatter({} x {}, root {})", count, Name(type), root);
    case Op::kAllToAll:
      return fmt::format("alltoall({} x {})", count, Name(type));
    case Op::kAllGatherV:
      return fmt::format("allgatherv({} x {}, counts {})", count, Name(type),
                         internal::CountsText(first_counts.data(), ranks,
                                              static_cast<std::uint32_t>(
                                                  shape ^ (shape >> 32))));
    case Op::kAllToAllV:
      return fmt::format("alltoallv({})", Name(type));
    case Op::kSplit:
      return "split()";
    case Op::kEndOfTest:
      return "no collective (its body has returned)";
  }
  return fmt::format("unknown collective {}", static_cast<int>(op));
}

}  // namespace disttest
