// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A rank's ledger view as text, for a reader on another host (comm/ledger.h):
// EncodeLedger, DecodeLedger, and OnThisClock for the decoded view's times.
//
//   ledger 3 <rank> <dropped>
//   phases <age or -> x kPhases
//   comm <calls> <digest> <transfers> <balance> <failed> <rank> <size> <key>
//        <name>
//     (one per communicator, by id: its CommDigest, its CommTransfers, this
//     rank's rank in it and its size)
//   op <index> <comm> <seq> <op> <type> <reduce> <state> <peer> <tag>
//      <count> <flags> <entered age> <ended age or -> <line> <file>
//     (flags: 1 made by disttest, 2 an isend or irecv)

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/ledger.h"

namespace disttest::internal {

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

// The first line's "3 <rank> <dropped>" (after "ledger"), into `view`.
bool DecodeHead(std::string_view line, RankLedgerView* view) {
  std::vector<std::string> f;
  std::int64_t v[2] = {};
  if (!Fields(line, 3, &f, nullptr) || f[0] != "3" ||
      !Number(f[1], 0, LedgerMemory::kMaxRanks * 1024, &v[0]) ||
      !Number(f[2], 0, INT64_MAX / 2, &v[1])) {
    return false;
  }
  view->rank = static_cast<int>(v[0]);
  view->dropped = static_cast<std::uint64_t>(v[1]);
  return true;
}

// A "comm" line, its communicator added to `view`.
bool DecodeComm(std::string_view line, RankLedgerView* view) {
  std::vector<std::string> f;
  std::string rest;
  std::int64_t calls = 0, transfers = 0, failed = 0, rank = 0, size = 0;
  std::uint64_t digest = 0, balance = 0, key = 0;
  if (!Fields(line, 8, &f, &rest) || !Number(f[0], 0, INT64_MAX / 2, &calls) ||
      !Unsigned(f[1], &digest) || !Number(f[2], 0, INT64_MAX / 2, &transfers) ||
      !Unsigned(f[3], &balance) || !Number(f[4], 0, INT64_MAX / 2, &failed) ||
      !Number(f[5], 0, LedgerMemory::kMaxRanks * 1024, &rank) ||
      !Number(f[6], 0, LedgerMemory::kMaxRanks * 1024, &size) ||
      !Unsigned(f[7], &key)) {
    return false;
  }
  view->digests.push_back({static_cast<std::uint64_t>(calls), digest});
  view->transfers.push_back({static_cast<std::uint64_t>(transfers), balance,
                             static_cast<std::uint64_t>(failed)});
  view->comm_ranks.push_back(static_cast<int>(rank));
  view->comm_sizes.push_back(static_cast<int>(size));
  view->keys.push_back(key);
  view->comms.push_back(rest.substr(0, LedgerMemory::kNameBytes - 1));
  return true;
}

// An "op" line as a record in `out`; why it is none (nullptr: it is one).
const char* DecodeOp(std::string_view line, LedgerRecord* out) {
  std::vector<std::string> f;
  std::string rest;
  std::int64_t v[11] = {};
  if (!Fields(line, 14, &f, &rest)) return "a short operation";
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
                               3};
  for (std::size_t i = 0; i < 11; ++i) {
    const std::int64_t lo = i == 6 ? 1 : i == 7 ? INT32_MIN : 0;
    if (!Number(f[i], lo, hi[i], &v[i])) return "a bad operation";
  }
  LedgerRecord& r = *out;
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
  r.harness = (v[10] & 1) != 0;
  r.nonblocking = (v[10] & 2) != 0;
  std::int64_t line_no = 0;
  if (!Time(f[11], &r.entered_ns) || !Time(f[12], &r.ended_ns) ||
      !Number(f[13], 0, UINT32_MAX, &line_no)) {
    return "a bad operation";
  }
  r.line = static_cast<std::uint32_t>(line_no);
  r.file = rest.substr(0, LedgerMemory::kFileBytes - 1);
  return nullptr;
}

}  // namespace

std::string EncodeLedger(const RankLedgerView& view, std::size_t last) {
  const std::int64_t read = view.read_ns;
  const std::size_t from =
      view.records.size() > last ? view.records.size() - last : 0;
  std::string out =
      fmt::format("ledger 3 {} {}\nphases", view.rank, view.dropped + from);
  for (std::int64_t t : view.phase_ns) out += " " + Age(read, t);
  out += '\n';
  if (view.read_wall_ns > 0)
    out += fmt::format("clock {}\n", view.read_wall_ns);
  for (std::size_t i = 0; i < view.comms.size(); ++i) {
    const CommDigest d =
        i < view.digests.size() ? view.digests[i] : CommDigest{};
    const CommTransfers t =
        i < view.transfers.size() ? view.transfers[i] : CommTransfers{};
    out += fmt::format("comm {} {} {} {} {} {} {} {} {}\n", d.calls, d.digest,
                       t.count, t.balance, t.failed,
                       i < view.comm_ranks.size() ? view.comm_ranks[i] : 0,
                       i < view.comm_sizes.size() ? view.comm_sizes[i] : 0,
                       view.comm_key(static_cast<std::uint32_t>(i)),
                       view.comms[i]);
  }
  for (std::size_t i = from; i < view.records.size(); ++i) {
    const LedgerRecord& r = view.records[i];
    out += fmt::format(
        "op {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n", r.index, r.comm,
        r.seq, static_cast<int>(r.op), static_cast<int>(r.type),
        static_cast<int>(r.reduce), static_cast<int>(r.state), r.peer, r.tag,
        r.count, (r.harness ? 1 : 0) | (r.nonblocking ? 2 : 0),
        Age(read, r.entered_ns), Age(read, r.ended_ns), r.line, r.file);
  }
  return out;
}

std::optional<RankLedgerView> DecodeLedger(std::string_view text,
                                           std::string* error) {
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
    if (n++ == 0) {
      if (word != "ledger" || !DecodeHead(line, &view)) {
        return fail("it does not start with \"ledger 3 <rank> <dropped>\"");
      }
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
      if (!DecodeComm(line, &view)) return fail("a bad communicator");
    } else if (word == "op") {
      if (view.records.size() >= LedgerMemory::kMaxRing) {
        return fail("too many operations");
      }
      LedgerRecord r;
      if (const char* bad = DecodeOp(line, &r)) return fail(bad);
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

}  // namespace disttest::internal
