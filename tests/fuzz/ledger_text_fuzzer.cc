// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: DecodeLedger, which parses the collective ledger a
// launched rank sent with its verdict (through the store, from any process
// that can reach it). Arbitrary bytes must be decoded or refused with a
// reason, never read out of bounds; a decoded ledger must encode and decode
// to the same records, and the hang report made from it must not fail.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "comm/ledger.h"
#include "harness/report/collective_report.h"

namespace {

using disttest::internal::DecodeLedger;
using disttest::internal::EncodeLedger;
using disttest::internal::RankLedgerView;
using disttest::internal::RankState;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "ledger_text_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  std::optional<RankLedgerView> view = DecodeLedger(text, &error);
  if (!view) {
    if (error.empty()) Fail("refused without a reason");
    return 0;
  }
  const std::string again = EncodeLedger(*view, view->records.size());
  std::optional<RankLedgerView> back = DecodeLedger(again, &error);
  if (!back) Fail("its own encoding does not decode");
  if (back->records.size() != view->records.size() ||
      back->comms != view->comms || back->rank != view->rank ||
      back->comm_ranks != view->comm_ranks ||
      back->comm_sizes != view->comm_sizes ||
      back->transfers.size() != view->transfers.size()) {
    Fail("the round trip changed the ledger");
  }
  for (std::size_t i = 0; i < view->transfers.size(); ++i) {
    const auto& a = view->transfers[i];
    const auto& b = back->transfers[i];
    if (a.count != b.count || a.balance != b.balance || a.failed != b.failed) {
      Fail("the round trip changed a communicator's transfers");
    }
  }
  for (std::size_t i = 0; i < view->records.size(); ++i) {
    if (back->records[i].str() != view->records[i].str() ||
        back->records[i].where() != view->records[i].where()) {
      Fail("the round trip changed an operation");
    }
  }
  RankState one, two;
  one.rank = 0;
  one.ledger = view;
  two.rank = 1;
  two.ledger = back;
  (void)disttest::internal::CollectiveReport({one, two});
  (void)disttest::internal::MismatchedCalls({one, two});
  (void)disttest::internal::UnpairedMessages({one, two});
  return 0;
}
