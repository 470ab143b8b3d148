// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/ledger.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <unordered_map>

#include "comm/shared_memory.h"
#include "disttest/error.h"
#include "env/text.h"

namespace disttest::internal {

// One entry, a cache line pair. `stamp` is written last (release) and read
// first (acquire); `state` and `ended_ns` change once more, at the end.
struct alignas(64) Entry {
  std::atomic<std::uint64_t> stamp{0};  // index + 1; 0 while written.
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int64_t entered_ns = 0;
  std::atomic<std::int64_t> ended_ns{0};
  std::uint32_t comm = 0;
  std::uint32_t tag = 0;
  std::uint32_t line = 0;
  std::int32_t peer = -1;
  std::uint8_t op = 0;
  std::uint8_t type = 0;
  std::uint8_t reduce = 0;
  std::uint8_t harness = 0;
  std::atomic<std::uint8_t> state{0};
  std::uint16_t ranks = 0;  // An allgatherv's (kept to 65535).
  std::uint32_t counts[LedgerMemory::kCountsKept] = {};  // Its first counts.
  char file[LedgerMemory::kFileBytes] = {};
};
static_assert(sizeof(Entry) == 128, "a ledger entry is two cache lines");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free,
              "the ledger's atomics must work across processes");

// A rank's area: this header, then its ring of entries.
struct LedgerMemory::Area {
  alignas(64) std::atomic<std::uint64_t> written{0};  // Entries begun.
  std::atomic<std::uint64_t> test_first{0};           // The test's first entry.
  std::atomic<std::int64_t> phase_ns[kPhases] = {};
  std::atomic<std::uint32_t> named{0};  // Names written (≤ kComms).
  char names[kComms][kNameBytes] = {};
  std::uint64_t keys[kComms] = {};
  // Per communicator: the test's collectives, and a digest of their calls
  // (operation, type, count, reduce op, root) in order.
  std::atomic<std::uint64_t> calls[kComms] = {};
  std::atomic<std::uint64_t> digest[kComms] = {};
  // The process that installed this area (0: none yet), for SignalRank.
  std::atomic<std::int32_t> pid{0};
  // Per communicator: this rank's rank in it, and its size, so that a
  // reader can tell which rank a peer of a send is.
  std::int32_t comm_rank[kComms] = {};
  std::int32_t comm_size[kComms] = {};
  // The entry (index + 1) of the blocking call the rank's thread is in now
  // (a send, a receive, a wait, a collective); 0 in none.
  std::atomic<std::uint64_t> blocked{0};
  // That call's timeout (ms): it gives up by itself that long after it
  // began.
  std::atomic<std::int64_t> blocked_timeout_ms{0};
  // The thread that made the test's calls; `threads` is set once another
  // did too (then a blocked call may wait for a thread that runs).
  std::atomic<std::int32_t> caller{0};
  std::atomic<std::uint8_t> threads{0};
};
static_assert(sizeof(LedgerMemory::Area) % alignof(Entry) == 0);

namespace {

bool HasReduceOp(LedgerOp op) {
  return op == LedgerOp::kAllReduce || op == LedgerOp::kReduce ||
         op == LedgerOp::kReduceScatter;
}
bool HasRoot(LedgerOp op) {
  return op == LedgerOp::kBroadcast || op == LedgerOp::kReduce ||
         op == LedgerOp::kGather || op == LedgerOp::kScatter;
}

// What two ranks' calls of one collective must agree on, in 64 bits.
std::uint64_t CallHash(const Ledger::Call& c) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<std::uint64_t>(c.op));
  if (c.op == LedgerOp::kAllToAllV) {
    mix(static_cast<std::uint64_t>(c.type));
  } else if (c.op != LedgerOp::kBarrier && c.op != LedgerOp::kSplit) {
    mix(static_cast<std::uint64_t>(c.type));
    mix(c.count);
  }
  if (HasReduceOp(c.op)) mix(static_cast<std::uint64_t>(c.reduce));
  if (HasRoot(c.op)) {
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.peer)));
  }
  if (c.op == LedgerOp::kAllGatherV) mix(c.tag);
  return h;
}

Entry* EntriesOf(const LedgerMemory::Area& a) {
  return reinterpret_cast<Entry*>(
      reinterpret_cast<char*>(const_cast<LedgerMemory::Area*>(&a)) +
      sizeof(LedgerMemory::Area));
}

}  // namespace

namespace {

std::mutex& InstallMutex() {
  static std::mutex mu;
  return mu;
}

// Ledgers replaced by a later Install(): a communicator may still hold one.
std::vector<std::unique_ptr<Ledger>>& Retired() {
  static auto* retired = new std::vector<std::unique_ptr<Ledger>>;
  return *retired;
}

}  // namespace

std::atomic<Ledger*> Ledger::current_{nullptr};

std::int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* Name(RankPhase phase) {
  switch (phase) {
    case RankPhase::kStarted:
      return "started";
    case RankPhase::kConnecting:
      return "connecting";
    case RankPhase::kConnected:
      return "connected";
    case RankPhase::kSetUp:
      return "set-up";
    case RankPhase::kBody:
      return "body";
    case RankPhase::kTearDown:
      return "tear-down";
    case RankPhase::kCheckingLeaks:
      return "leak-check";
    case RankPhase::kFinished:
      return "finished";
  }
  return "unknown";
}

std::string LedgerRecord::str() const {
  switch (op) {
    case LedgerOp::kBarrier:
      return "barrier()";
    case LedgerOp::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case LedgerOp::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         peer);
    case LedgerOp::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case LedgerOp::kSend:
      return fmt::format("send({} x {} to rank {}, tag {})", count, Name(type),
                         peer, tag);
    case LedgerOp::kRecv:
      return fmt::format("recv({} x {} from rank {}, tag {})", count,
                         Name(type), peer, tag);
    case LedgerOp::kReduce:
      return fmt::format("reduce({} x {}, {}, root {})", count, Name(type),
                         Name(reduce), peer);
    case LedgerOp::kReduceScatter:
      return fmt::format("reduce_scatter({} x {}, {})", count, Name(type),
                         Name(reduce));
    case LedgerOp::kGather:
      return fmt::format("gather({} x {}, root {})", count, Name(type), peer);
    case LedgerOp::kScatter:
      return fmt::format("scatter({} x {}, root {})", count, Name(type), peer);
    case LedgerOp::kAllToAll:
      return fmt::format("alltoall({} x {})", count, Name(type));
    case LedgerOp::kAllGatherV:
      return fmt::format(
          "allgatherv({} x {}, counts {})", count, Name(type),
          CountsText(counts.data(), counts.empty() ? 0 : ranks, tag));
    case LedgerOp::kAllToAllV:
      return fmt::format("alltoallv({} x {} sent)", count, Name(type));
    case LedgerOp::kSplit:
      return peer == Communicator::kNoColor
                 ? fmt::format("split(no color, key {})",
                               static_cast<std::int32_t>(tag))
                 : fmt::format("split(color {}, key {})", peer,
                               static_cast<std::int32_t>(tag));
  }
  return "unknown operation";
}

std::string LedgerRecord::agreed() const {
  if (op == LedgerOp::kAllToAllV) {
    return fmt::format("alltoallv({})", Name(type));
  }
  if (op == LedgerOp::kSplit) return "split()";
  return str();
}

std::string LedgerRecord::where() const {
  if (harness) return "(disttest's, before the body)";
  const std::size_t slash = file.rfind('/');
  return fmt::format("at {}:{}",
                     slash == std::string::npos ? file : file.substr(slash + 1),
                     line);
}

bool LedgerRecord::SameCall(const LedgerRecord& o) const {
  if (op != o.op) return false;
  if (op == LedgerOp::kBarrier || op == LedgerOp::kSplit) return true;
  if (op == LedgerOp::kAllToAllV) return type == o.type;
  return type == o.type && count == o.count &&
         (!HasReduceOp(op) || reduce == o.reduce) &&
         (!HasRoot(op) || peer == o.peer) &&
         (op != LedgerOp::kAllGatherV || tag == o.tag);
}

RankPhase RankLedgerView::phase() const {
  for (std::size_t p = kPhases; p-- > 0;) {
    if (phase_ns[p] != 0) return static_cast<RankPhase>(p);
  }
  return RankPhase::kStarted;
}

std::string RankLedgerView::comm_name(std::uint32_t id) const {
  if (id < comms.size() && !comms[id].empty()) return comms[id];
  return fmt::format("communicator {}", id + 1);
}

std::uint64_t RankLedgerView::comm_key(std::uint32_t id) const {
  return id < keys.size() ? keys[id] : 0;
}

std::string MissingFromCollective(const LedgerMemory& memory, int self,
                                  std::uint64_t key, std::uint64_t seq,
                                  bool every_rank) {
  if (key == 0) return "";
  std::vector<int> missing;
  // What each missing rank did last on the communicator, with its ranks.
  std::map<std::string, std::vector<int>> last;
  std::vector<std::string> order;
  for (int q = 0; q < memory.ranks(); ++q) {
    if (q == self) continue;
    const RankLedgerView v = memory.Read(q);
    // A rank that never made the communicator is one of its members only
    // when every rank is.
    if (!every_rank &&
        std::find(v.keys.begin(), v.keys.end(), key) == v.keys.end()) {
      continue;
    }
    const LedgerRecord* newest = nullptr;
    for (const LedgerRecord& r : v.records) {
      if (!r.collective() || v.comm_key(r.comm) != key) continue;
      if (newest == nullptr || r.seq > newest->seq) newest = &r;
    }
    if (newest != nullptr && newest->seq >= seq) continue;  // It is in it.
    const std::string what =
        newest == nullptr ? std::string()
                          : fmt::format("#{} {}", newest->seq, newest->str());
    if (last.find(what) == last.end()) order.push_back(what);
    last[what].push_back(q);
    missing.push_back(q);
  }
  if (missing.empty()) return "";
  std::string text = fmt::format("waiting for {}: ", RanksText(missing));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string& what = order[i];
    const std::vector<int>& ranks = last[what];
    if (i > 0) text += "; ";
    const std::string who = RanksText(ranks);
    text += what.empty()
                ? fmt::format("{} {} entered no collective", who,
                              ranks.size() == 1 ? "has" : "have")
                : fmt::format("{}'s last collective was {}", who, what);
  }
  return text;
}

std::string CountsText(const std::uint64_t* first, std::uint64_t ranks,
                       std::uint32_t hash) {
  if (ranks == 0) return fmt::format("#{:08x}", hash);
  std::string text = "{";
  for (std::uint64_t i = 0; i < ranks && i < LedgerMemory::kCountsKept; ++i) {
    text += fmt::format("{}{}", i == 0 ? "" : ", ", first[i]);
  }
  if (ranks <= LedgerMemory::kCountsKept) return text + "}";
  return fmt::format("{}, ...}} ({} ranks, #{:08x})", text, ranks, hash);
}

std::string WhereIsPeer(const LedgerMemory& memory, int self, std::uint64_t key,
                        int peer) {
  if (key == 0) return "";
  for (int q = 0; q < memory.ranks(); ++q) {
    if (q == self) continue;
    const RankLedgerView v = memory.Read(q);
    bool member = false;
    for (std::size_t id = 0; id < v.keys.size() && id < v.comm_ranks.size();
         ++id) {
      member = member || (v.keys[id] == key && v.comm_ranks[id] == peer);
    }
    if (!member) continue;
    const std::string who =
        q == peer ? fmt::format("rank {}", q)
                  : fmt::format("rank {} (rank {} there)", q, peer);
    const LedgerRecord* newest =
        v.records.empty() ? nullptr : &v.records.back();
    for (const LedgerRecord& r : v.records) {
      if (r.index + 1 != v.blocked) continue;
      return fmt::format("{} is in {} {}, for {} ms", who, r.str(), r.where(),
                         (v.read_ns - r.entered_ns) / 1000000);
    }
    if (v.phase() == RankPhase::kFinished) {
      return fmt::format("{} has finished its test", who);
    }
    if (newest == nullptr) {
      return fmt::format("{} has made no call of a communicator in this test",
                         who);
    }
    return fmt::format("{} is in no call of a communicator; its last was {} {}",
                       who, newest->str(), newest->where());
  }
  return "";
}

std::uint64_t LedgerKey(std::string_view identity) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : identity) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h == 0 ? 1 : h;
}

namespace {

// Combines the digests of several communicators of one name (in id order).
void Fold(CommDigest& into, const CommDigest& d) {
  if (d.calls == 0) return;
  if (into.calls == 0) {
    into = d;
    return;
  }
  into.calls += d.calls;
  into.digest += d.digest * 0x100000001b3ULL;
}

}  // namespace

CommDigest RankLedgerView::digest_of(std::uint64_t key) const {
  CommDigest out;
  for (std::size_t i = 0; i < keys.size() && i < digests.size(); ++i) {
    if (keys[i] == key) Fold(out, digests[i]);
  }
  return out;
}

// --- as text -----------------------------------------------------------
//
//   ledger 2 <rank> <dropped>
//   phases <age or -> x kPhases
//   comm <calls> <digest> <key> <name>   (one per communicator, by id)
//   op <index> <comm> <seq> <op> <type> <reduce> <state> <peer> <tag>
//      <count> <harness> <entered age> <ended age or -> <line> <file>

namespace {

std::string Age(std::int64_t read, std::int64_t t) {
  // A time after the read (another thread's operation began meanwhile)
  // is an age of 0.
  return t == 0 ? "-" : std::to_string(std::max<std::int64_t>(0, read - t));
}

// The numbers of `line` after its first word, `n` of them, then the rest.
bool Fields(std::string_view line, std::size_t n, std::vector<std::string>* out,
            std::string* rest) {
  out->clear();
  std::size_t at = line.find(' ');
  for (std::size_t i = 0; i < n; ++i) {
    if (at == std::string_view::npos) return false;
    const std::size_t next = line.find(' ', at + 1);
    out->emplace_back(line.substr(at + 1, next == std::string_view::npos
                                              ? std::string_view::npos
                                              : next - at - 1));
    at = next;
  }
  if (rest != nullptr) {
    *rest =
        at == std::string_view::npos ? "" : std::string(line.substr(at + 1));
  }
  return true;
}

bool Number(const std::string& text, std::int64_t lo, std::int64_t hi,
            std::int64_t* out) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || at != end || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

bool Unsigned(const std::string& text, std::uint64_t* out) {
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && at == end;
}

// A time from its age ("-": none), before a read at 0.
bool Time(const std::string& text, std::int64_t* out) {
  if (text == "-") {
    *out = 0;
    return true;
  }
  std::int64_t age = 0;
  if (!Number(text, 0, INT64_MAX / 2, &age)) return false;
  *out = -age;
  if (*out == 0) *out = -1;  // 0 means "none".
  return true;
}

}  // namespace

std::string EncodeLedger(const RankLedgerView& view, std::size_t last) {
  const std::int64_t read = view.read_ns;
  const std::size_t from =
      view.records.size() > last ? view.records.size() - last : 0;
  std::string out =
      fmt::format("ledger 2 {} {}\nphases", view.rank, view.dropped + from);
  for (std::int64_t t : view.phase_ns) out += " " + Age(read, t);
  out += '\n';
  if (view.read_wall_ns > 0)
    out += fmt::format("clock {}\n", view.read_wall_ns);
  for (std::size_t i = 0; i < view.comms.size(); ++i) {
    const CommDigest d =
        i < view.digests.size() ? view.digests[i] : CommDigest{};
    out += fmt::format("comm {} {} {} {}\n", d.calls, d.digest,
                       view.comm_key(static_cast<std::uint32_t>(i)),
                       view.comms[i]);
  }
  for (std::size_t i = from; i < view.records.size(); ++i) {
    const LedgerRecord& r = view.records[i];
    out += fmt::format("op {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n",
                       r.index, r.comm, r.seq, static_cast<int>(r.op),
                       static_cast<int>(r.type), static_cast<int>(r.reduce),
                       static_cast<int>(r.state), r.peer, r.tag, r.count,
                       r.harness ? 1 : 0, Age(read, r.entered_ns),
                       Age(read, r.ended_ns), r.line, r.file);
  }
  return out;
}

std::optional<RankLedgerView> DecodeLedger(std::string_view text,
                                           std::string* error) {
  std::string why;
  auto fail = [&](std::string reason) -> std::optional<RankLedgerView> {
    if (error != nullptr) *error = std::move(reason);
    return std::nullopt;
  };
  RankLedgerView view;
  std::vector<std::string> f;
  std::size_t n = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? "" : text.substr(end + 1);
    const std::string_view word = line.substr(0, line.find(' '));
    std::int64_t v[13] = {};
    std::string rest;
    if (n++ == 0) {
      if (word != "ledger" || !Fields(line, 3, &f, nullptr) || f[0] != "2" ||
          !Number(f[1], 0, LedgerMemory::kMaxRanks * 1024, &v[0]) ||
          !Number(f[2], 0, INT64_MAX / 2, &v[1])) {
        return fail("it does not start with \"ledger 2 <rank> <dropped>\"");
      }
      view.rank = static_cast<int>(v[0]);
      view.dropped = static_cast<std::uint64_t>(v[1]);
    } else if (word == "phases") {
      if (!Fields(line, kPhases, &f, nullptr)) return fail("short phases");
      for (std::size_t p = 0; p < kPhases; ++p) {
        if (!Time(f[p], &view.phase_ns[p])) return fail("a bad phase time");
      }
    } else if (word == "clock") {
      if (!Fields(line, 1, &f, nullptr) ||
          !Number(f[0], 1, INT64_MAX / 2, &view.read_wall_ns)) {
        return fail("a bad clock");
      }
    } else if (word == "comm") {
      if (view.comms.size() >= LedgerMemory::kComms) {
        return fail("too many communicators");
      }
      std::int64_t calls = 0;
      std::uint64_t digest = 0;
      std::uint64_t key = 0;
      if (!Fields(line, 3, &f, &rest) ||
          !Number(f[0], 0, INT64_MAX / 2, &calls) || !Unsigned(f[1], &digest) ||
          !Unsigned(f[2], &key)) {
        return fail("a bad communicator");
      }
      view.digests.push_back({static_cast<std::uint64_t>(calls), digest});
      view.keys.push_back(key);
      view.comms.push_back(rest.substr(0, LedgerMemory::kNameBytes - 1));
    } else if (word == "op") {
      if (view.records.size() >= LedgerMemory::kMaxRing) {
        return fail("too many operations");
      }
      if (!Fields(line, 14, &f, &rest)) return fail("a short operation");
      const std::int64_t hi[11] = {INT64_MAX / 2,
                                   UINT32_MAX,
                                   INT64_MAX / 2,
                                   static_cast<int>(kLastLedgerOp),
                                   static_cast<int>(kLastDataType),
                                   static_cast<int>(kLastReduceOp),
                                   static_cast<int>(LedgerState::kFailed),
                                   INT32_MAX,
                                   UINT32_MAX,
                                   INT64_MAX / 2,
                                   1};
      for (std::size_t i = 0; i < 11; ++i) {
        const std::int64_t lo = i == 6 ? 1 : i == 7 ? INT32_MIN : 0;
        if (!Number(f[i], lo, hi[i], &v[i])) return fail("a bad operation");
      }
      LedgerRecord r;
      r.index = static_cast<std::uint64_t>(v[0]);
      r.comm = static_cast<std::uint32_t>(v[1]);
      r.seq = static_cast<std::uint64_t>(v[2]);
      r.op = static_cast<LedgerOp>(v[3]);
      r.type = static_cast<DataType>(v[4]);
      r.reduce = static_cast<ReduceOp>(v[5]);
      r.state = static_cast<LedgerState>(v[6]);
      r.peer = static_cast<std::int32_t>(v[7]);
      r.tag = static_cast<std::uint32_t>(v[8]);
      r.count = static_cast<std::uint64_t>(v[9]);
      r.harness = v[10] == 1;
      std::int64_t line_no = 0;
      if (!Time(f[11], &r.entered_ns) || !Time(f[12], &r.ended_ns) ||
          !Number(f[13], 0, UINT32_MAX, &line_no)) {
        return fail("a bad operation");
      }
      r.line = static_cast<std::uint32_t>(line_no);
      r.file = rest.substr(0, LedgerMemory::kFileBytes - 1);
      view.records.push_back(std::move(r));
    } else if (!line.empty()) {
      return fail(fmt::format("an unknown line \"{}\"", line.substr(0, 40)));
    }
  }
  if (n == 0) return fail("it is empty");
  return view;
}

void OnThisClock(RankLedgerView* view) {
  if (view->read_wall_ns <= 0) return;
  // This process's read of the same instant, on its monotonic clock.
  const std::int64_t read = view->read_wall_ns - (RealtimeNs() - MonotonicNs());
  const std::int64_t by = read - view->read_ns;
  auto move = [by](std::int64_t& t) {
    if (t != 0) t += by;
  };
  for (std::int64_t& t : view->phase_ns) move(t);
  for (LedgerRecord& r : view->records) {
    move(r.entered_ns);
    move(r.ended_ns);
  }
  view->read_ns = read;
}

// --- memory ------------------------------------------------------------

std::size_t LedgerMemory::AreaBytes(std::size_t ring) {
  return sizeof(Area) + ring * sizeof(Entry);
}

// The memory starts with what it holds, for Attach() to check.
struct LedgerMemory::Shape {
  alignas(64) std::uint32_t magic;
  std::uint32_t ranks;
  std::uint64_t ring;
};
namespace {
constexpr std::uint32_t kLedgerMagic = 0x474c5444;  // "DTLG"
}  // namespace

std::size_t LedgerMemory::SizeFor(int ranks, std::size_t ring) {
  return sizeof(Shape) + AreaBytes(ring) * static_cast<std::size_t>(ranks);
}

std::shared_ptr<LedgerMemory> LedgerMemory::Create(int ranks,
                                                   std::size_t ring) {
  if (ranks < 1 || ranks > kMaxRanks) {
    throw Error(fmt::format("a collective ledger takes 1 to {} ranks, not {}",
                            kMaxRanks, ranks));
  }
  if (ring < 1 || ring > kMaxRing) {
    throw Error(fmt::format(
        "a collective ledger keeps 1 to {} operations per rank, not {}",
        kMaxRing, ring));
  }
  const std::size_t size = SizeFor(ranks, ring);
  const SharedMemory m =
      MapShared("disttest-ledger", size, "a collective ledger");
  const int fd = m.fd;
  void* memory = m.memory;
  // Fresh pages are zero, which is an empty ledger: nothing to write but
  // its shape, and the pages no rank touches cost nothing.
  auto* shape = static_cast<Shape*>(memory);
  shape->magic = kLedgerMagic;
  shape->ranks = static_cast<std::uint32_t>(ranks);
  shape->ring = ring;
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, ring, fd, memory, size));
}

std::shared_ptr<LedgerMemory> LedgerMemory::Attach(int fd, int ranks) {
  struct stat st {};
  Shape shape{};
  const std::size_t size =
      fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  const bool read =
      size >= sizeof(Shape) &&
      pread(fd, &shape, sizeof shape, 0) == static_cast<ssize_t>(sizeof shape);
  if (!read || shape.magic != kLedgerMagic ||
      shape.ranks != static_cast<std::uint32_t>(ranks) || shape.ring < 1 ||
      shape.ring > kMaxRing || SizeFor(ranks, shape.ring) != size) {
    close(fd);
    throw Error(fmt::format(
        "descriptor {} is not a collective ledger for {} ranks ({} bytes)", fd,
        ranks, size));
  }
  const auto ring = static_cast<std::size_t>(shape.ring);
  void* memory = MapInherited(fd, size, "the collective ledger");
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, ring, -1, memory, size));
}

LedgerMemory::LedgerMemory(int ranks, std::size_t ring, int fd, void* memory,
                           std::size_t size)
    : ranks_(ranks), ring_(ring), fd_(fd), memory_(memory), size_(size) {}

LedgerMemory::~LedgerMemory() {
  munmap(memory_, size_);
  if (fd_ >= 0) close(fd_);
}

LedgerMemory::Area& LedgerMemory::area(int rank) const {
  return *reinterpret_cast<Area*>(static_cast<char*>(memory_) + sizeof(Shape) +
                                  AreaBytes(ring_) *
                                      static_cast<std::size_t>(rank));
}

bool LedgerMemory::DigestsAgree() const {
  std::unordered_map<std::uint64_t, CommDigest> seen;
  std::unordered_map<std::uint64_t, CommDigest> mine;
  for (int r = 0; r < ranks_; ++r) {
    const Area& a = area(r);
    const std::uint32_t named = std::min<std::uint32_t>(
        a.named.load(std::memory_order_acquire), kComms);
    mine.clear();
    for (std::uint32_t i = 0; i < named; ++i) {
      const std::uint64_t key = a.keys[i];
      if (key == 0) continue;  // Not identified, or free: not compared.
      const CommDigest d{a.calls[i].load(std::memory_order_acquire),
                         a.digest[i].load(std::memory_order_relaxed)};
      auto [it, made] = mine.try_emplace(key, d);
      if (!made) Fold(it->second, d);
    }
    for (const auto& [key, d] : mine) {
      // A communicator it did not use in this test (made in an earlier one,
      // or one whose group it has left) says nothing.
      if (d.calls == 0) continue;
      auto [it, made] = seen.try_emplace(key, d);
      if (!made && !(it->second == d)) return false;
    }
  }
  return true;
}

namespace {

// Entry `i`, when it is whole (not being written, not written over).
bool Copy(const Entry& e, std::uint64_t i, LedgerRecord* out) {
  const std::uint64_t stamp = e.stamp.load(std::memory_order_acquire);
  if (stamp != i + 1) return false;
  LedgerRecord& r = *out;
  r.index = i;
  r.state = static_cast<LedgerState>(e.state.load(std::memory_order_acquire));
  r.ended_ns = e.ended_ns.load(std::memory_order_relaxed);
  r.seq = e.seq;
  r.count = e.count;
  r.entered_ns = e.entered_ns;
  r.comm = e.comm;
  r.tag = e.tag;
  r.line = e.line;
  r.peer = e.peer;
  r.op = static_cast<LedgerOp>(e.op);
  r.type = static_cast<DataType>(e.type);
  r.reduce = static_cast<ReduceOp>(e.reduce);
  r.harness = e.harness != 0;
  r.file.assign(e.file, strnlen(e.file, LedgerMemory::kFileBytes));
  if (r.op == LedgerOp::kAllGatherV) {
    r.ranks = e.ranks;
    r.counts.assign(
        e.counts,
        e.counts + std::min<std::size_t>(e.ranks, LedgerMemory::kCountsKept));
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.stamp.load(std::memory_order_relaxed) != stamp) return false;
  return r.state == LedgerState::kEntered ||
         r.state == LedgerState::kCompleted || r.state == LedgerState::kFailed;
}

}  // namespace

std::optional<LedgerRecord> LedgerMemory::OpenCollective(int rank) const {
  if (rank < 0 || rank >= ranks_) return std::nullopt;
  const Area& a = area(rank);
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  if (written == 0 || written <= a.test_first.load(std::memory_order_acquire)) {
    return std::nullopt;
  }
  LedgerRecord r;
  if (!Copy(EntriesOf(a)[(written - 1) % ring_], written - 1, &r) ||
      !r.collective() || r.state != LedgerState::kEntered) {
    return std::nullopt;
  }
  return r;
}

bool LedgerMemory::InCollectiveSince(int rank, std::int64_t before_ns) const {
  if (rank < 0 || rank >= ranks_) return false;
  const Area& a = area(rank);
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  if (written == 0 || written <= a.test_first.load(std::memory_order_acquire)) {
    return false;
  }
  const Entry& e = EntriesOf(a)[(written - 1) % ring_];
  const std::uint64_t stamp = e.stamp.load(std::memory_order_acquire);
  const auto op = static_cast<LedgerOp>(e.op);
  const auto state =
      static_cast<LedgerState>(e.state.load(std::memory_order_acquire));
  const std::int64_t entered = e.entered_ns;
  std::atomic_thread_fence(std::memory_order_acquire);
  return stamp == written && e.stamp.load(std::memory_order_relaxed) == stamp &&
         op != LedgerOp::kSend && op != LedgerOp::kRecv &&
         state == LedgerState::kEntered && entered < before_ns;
}

RankLedgerView LedgerMemory::Read(int rank, int as_rank) const {
  RankLedgerView view;
  view.rank = as_rank;
  if (rank < 0 || rank >= ranks_) return view;
  const Area& a = area(rank);
  view.read_ns = MonotonicNs();
  view.read_wall_ns = RealtimeNs();
  for (std::size_t p = 0; p < kPhases; ++p) {
    view.phase_ns[p] = a.phase_ns[p].load(std::memory_order_acquire);
  }
  const std::uint32_t named =
      std::min<std::uint32_t>(a.named.load(std::memory_order_acquire), kComms);
  for (std::uint32_t i = 0; i < named; ++i) {
    view.comms.emplace_back(a.names[i], strnlen(a.names[i], kNameBytes));
    view.keys.push_back(a.keys[i]);
    view.comm_ranks.push_back(a.comm_rank[i]);
    view.comm_sizes.push_back(a.comm_size[i]);
    // The count first: a digest read after it covers at least that many.
    const std::uint64_t calls = a.calls[i].load(std::memory_order_acquire);
    view.digests.push_back(
        {calls, a.digest[i].load(std::memory_order_relaxed)});
  }
  view.blocked = a.blocked.load(std::memory_order_acquire);
  view.threads = a.threads.load(std::memory_order_relaxed) != 0;
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  view.written = written;
  const std::uint64_t first =
      std::min(written, a.test_first.load(std::memory_order_acquire));
  const std::uint64_t from =
      std::max(first, written > ring_ ? written - ring_ : 0);
  view.dropped = from - first;
  for (std::uint64_t i = from; i < written; ++i) {
    LedgerRecord r;
    if (Copy(EntriesOf(a)[i % ring_], i, &r))
      view.records.push_back(std::move(r));
  }
  return view;
}

// --- the rank's side ---------------------------------------------------

void Ledger::Install(std::shared_ptr<LedgerMemory> memory, int slot) {
  if (memory == nullptr || slot < 0 || slot >= memory->ranks()) {
    throw Error(fmt::format("no ledger area {} to install", slot));
  }
  std::lock_guard<std::mutex> lock(InstallMutex());
  auto* ledger = new Ledger(std::move(memory), slot);
  Ledger* old = current_.exchange(ledger, std::memory_order_acq_rel);
  if (old != nullptr) Retired().emplace_back(old);
}

Ledger::Ledger(std::shared_ptr<LedgerMemory> memory, int slot)
    : memory_(std::move(memory)),
      slot_(slot),
      area_(&memory_->area(slot)),
      ring_(memory_->ring()) {
  comms_ = area_->named.load(std::memory_order_relaxed);
  area_->pid.store(static_cast<std::int32_t>(getpid()),
                   std::memory_order_release);
}

pid_t LedgerMemory::Pid(int rank) const {
  if (rank < 0 || rank >= ranks_) return 0;
  return area(rank).pid.load(std::memory_order_acquire);
}

RankPhase LedgerMemory::Phase(int rank) const {
  if (rank < 0 || rank >= ranks_) return RankPhase::kStarted;
  const Area& a = area(rank);
  for (std::size_t p = kPhases; p-- > 0;) {
    if (a.phase_ns[p].load(std::memory_order_acquire) != 0) {
      return static_cast<RankPhase>(p);
    }
  }
  return RankPhase::kStarted;
}

std::string ShortName(std::string_view name, std::size_t most) {
  if (name.size() <= most) return std::string(name);
  // At a space, so that no word is cut ("world split 0 (color 1) split 0
  // (color 1) split 1 ..." rather than "... split 0 (color "), with "...".
  constexpr std::string_view kMore = " ...";
  std::size_t end = name.rfind(' ', most - kMore.size());
  if (end == std::string_view::npos || end == 0) end = most - kMore.size();
  return std::string(name.substr(0, end)) + std::string(kMore);
}

void Ledger::BeginTest() {
  {
    // The ids of communicators that are gone are free now: no entry of
    // this test names them.
    std::lock_guard<std::mutex> lock(add_mu_);
    for (const std::uint32_t id : released_) {
      area_->keys[id] = 0;
      area_->names[id][0] = '\0';
      next_[2 * id].store(0, std::memory_order_relaxed);
      next_[2 * id + 1].store(0, std::memory_order_relaxed);
      free_.push_back(id);
    }
    released_.clear();
  }
  area_->test_first.store(area_->written.load(std::memory_order_relaxed),
                          std::memory_order_release);
  for (auto& p : area_->phase_ns) p.store(0, std::memory_order_relaxed);
  area_->blocked.store(0, std::memory_order_relaxed);
  area_->caller.store(0, std::memory_order_relaxed);
  area_->threads.store(0, std::memory_order_relaxed);
  // Only the ids ever named can hold a count (a few pages at most).
  const std::uint32_t named = std::min<std::uint32_t>(
      area_->named.load(std::memory_order_relaxed), LedgerMemory::kComms);
  for (std::uint32_t i = 0; i < named; ++i) {
    area_->calls[i].store(0, std::memory_order_relaxed);
    area_->digest[i].store(0, std::memory_order_relaxed);
  }
  phase_.store(0, std::memory_order_relaxed);
  Enter(RankPhase::kStarted);
}

void Ledger::Enter(RankPhase phase) {
  phase_.store(static_cast<std::uint8_t>(phase), std::memory_order_relaxed);
  area_->phase_ns[static_cast<std::size_t>(phase)].store(
      MonotonicNs(), std::memory_order_release);
}

std::uint32_t Ledger::AddCommunicator(std::string_view name, std::uint64_t key,
                                      int rank, int size) {
  std::lock_guard<std::mutex> lock(add_mu_);
  LedgerMemory::Area& a = *area_;
  const std::uint32_t known = comms_.load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; key != 0 && i < known && i < LedgerMemory::kComms;
       ++i) {
    if (a.keys[i] == key) return i;
  }
  std::uint32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = comms_.fetch_add(1, std::memory_order_relaxed);
  }
  if (id < LedgerMemory::kComms) {
    char* out = a.names[id];
    const std::string kept = ShortName(name, LedgerMemory::kNameBytes - 1);
    const std::size_t n = kept.size();
    std::memcpy(out, kept.data(), n);
    out[n] = '\0';
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';  // One line of text.
    }
    a.keys[id] = key;
    a.comm_rank[id] = rank;
    a.comm_size[id] = size;
    if (id >= a.named.load(std::memory_order_relaxed)) {
      a.named.store(id + 1, std::memory_order_release);
    }
  }
  return id;
}

void Ledger::Release(std::uint32_t id) {
  if (id >= LedgerMemory::kComms) return;
  std::lock_guard<std::mutex> lock(add_mu_);
  if (std::find(released_.begin(), released_.end(), id) == released_.end()) {
    released_.push_back(id);
  }
}

std::string Ledger::comm_name(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  if (id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                   LedgerMemory::kComms)) {
    return std::string(a.names[id],
                       strnlen(a.names[id], LedgerMemory::kNameBytes));
  }
  return fmt::format("communicator {}", id + 1);
}

std::uint64_t Ledger::comm_key(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  return id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                      LedgerMemory::kComms)
             ? a.keys[id]
             : 0;
}

namespace {
// A number of the calling thread's own, never 0, distinct from every other
// thread's of the process (a forked child's go on from its parent's).
std::int32_t ThisThread() {
  static std::atomic<std::int32_t> threads{0};
  thread_local const std::int32_t id =
      threads.fetch_add(1, std::memory_order_relaxed) + 1;
  return id;
}
}  // namespace

// The first thread to call in a test is its caller; another one marks the
// rank as calling from several threads. A load and a compare a call.
void Ledger::NoteCaller(LedgerMemory::Area& a) {
  const std::int32_t me = ThisThread();
  std::int32_t caller = a.caller.load(std::memory_order_relaxed);
  if (caller == me) return;
  if (caller == 0 &&
      a.caller.compare_exchange_strong(caller, me, std::memory_order_relaxed)) {
    return;
  }
  if (caller != me) a.threads.store(1, std::memory_order_relaxed);
}

std::uint64_t Ledger::Begin(std::uint32_t comm, std::uint64_t seq,
                            const Call& call, const CallSite& where) {
  LedgerMemory::Area& a = *area_;
  const std::uint64_t index = a.written.fetch_add(1, std::memory_order_relaxed);
  Entry& e = EntriesOf(a)[index % ring_];
  e.stamp.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.seq = seq;
  e.count = call.count;
  e.comm = comm;
  e.tag = call.tag;
  e.peer = call.peer;
  e.op = static_cast<std::uint8_t>(call.op);
  e.type = static_cast<std::uint8_t>(call.type);
  e.reduce = static_cast<std::uint8_t>(call.reduce);
  const auto phase =
      static_cast<RankPhase>(phase_.load(std::memory_order_relaxed));
  e.harness = phase < RankPhase::kSetUp || phase == RankPhase::kFinished;
  if (e.harness == 0) NoteCaller(a);
  e.line = where.line();
  e.ranks =
      static_cast<std::uint16_t>(std::min<std::size_t>(call.ranks, 65535));
  for (std::size_t i = 0; i < LedgerMemory::kCountsKept; ++i) {
    e.counts[i] = i < call.ranks && call.counts != nullptr
                      ? static_cast<std::uint32_t>(
                            std::min<std::size_t>(call.counts[i], UINT32_MAX))
                      : 0;
  }
  const char* file = where.file_name();
  std::size_t n = std::strlen(file);
  if (n >= LedgerMemory::kFileBytes) {
    file += n - (LedgerMemory::kFileBytes - 1);
    n = LedgerMemory::kFileBytes - 1;
  }
  std::memcpy(e.file, file, n);
  e.file[n] = '\0';
  e.ended_ns.store(0, std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(LedgerState::kEntered),
                std::memory_order_relaxed);
  e.entered_ns = MonotonicNs();
  e.stamp.store(index + 1, std::memory_order_release);
  return index;
}

void Ledger::Block(std::uint64_t index, std::chrono::milliseconds timeout) {
  // A thread that only waits (a Request's wait() or destructor makes no new
  // entry) is a caller too.
  NoteCaller(*area_);
  // No clock read: the reader bounds when the call began by its looks.
  area_->blocked_timeout_ms.store(timeout.count(), std::memory_order_relaxed);
  area_->blocked.store(index + 1, std::memory_order_release);
}

void Ledger::Unblock() { area_->blocked.store(0, std::memory_order_release); }

Progress LedgerMemory::ProgressOf(int rank) const {
  if (rank < 0 || rank >= ranks_) return {};
  const Area& a = area(rank);
  Progress p;
  p.written = a.written.load(std::memory_order_acquire);
  p.blocked = a.blocked.load(std::memory_order_acquire);
  p.timeout_ms = a.blocked_timeout_ms.load(std::memory_order_relaxed);
  p.threads = a.threads.load(std::memory_order_relaxed) != 0;
  return p;
}

void Ledger::Digest(std::uint32_t comm, const Call& call) {
  if (call.op == LedgerOp::kSend || call.op == LedgerOp::kRecv ||
      comm >= LedgerMemory::kComms) {
    return;
  }
  // Only this thread writes a communicator's digest (one communicator is
  // not used from two threads at once).
  LedgerMemory::Area& a = *area_;
  const std::uint64_t h =
      a.digest[comm].load(std::memory_order_relaxed) ^ CallHash(call);
  a.digest[comm].store(h * 0x100000001b3ULL, std::memory_order_relaxed);
  a.calls[comm].fetch_add(1, std::memory_order_release);
}

void Ledger::End(std::uint64_t index, LedgerState state) {
  Entry& e = EntriesOf(*area_)[index % ring_];
  // Written over already (kRing later operations of other threads): the
  // ring has its end no longer.
  if (e.stamp.load(std::memory_order_relaxed) != index + 1) return;
  e.ended_ns.store(MonotonicNs(), std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(state), std::memory_order_release);
}

}  // namespace disttest::internal
