// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How Communicator::Recorded (communicator_recorded.h) keeps an operation
// in the ledger: its entry, its end, and whom a timed-out one waited for.
#include "comm/communicator_recorded.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <thread>

#include "base/threads.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest {

Communicator::Recorded::Recorded(Communicator& comm, bool collective,
                                 const internal::Ledger::Call& call,
                                 const Where& where, std::uint64_t entry,
                                 std::uint64_t seq)
    : ledger_(internal::ThreadsRank() < 0 && internal::RanksAreThreads()
                  ? comm.ledger_
                  : internal::Ledger::Current()),
      file_(where.file_name()),
      line_(where.line()) {
  if (collective && entry == kNoEntry) {
    // One thread at a time: a backend serves one caller per communicator
    // (Gloo's pairs and NCCL's stream interleave two callers' data, and the
    // calls still match across the ranks, so nothing else would see it).
    const std::thread::id me = std::this_thread::get_id();
    std::thread::id none{};
    if (comm.collective_thread_.compare_exchange_strong(
            none, me, std::memory_order_acq_rel)) {
      holds_ = &comm;
    } else if (none != me) {
      internal::LedgerRecord what;
      what.op = call.op;
      what.type = call.type;
      what.reduce = call.reduce;
      what.count = call.count;
      what.peer = call.peer;
      what.tag = call.tag;
      // A test that catches it and goes on fails all the same.
      throw internal::BugOfTheProgram(
          fmt::format(
              "[rank {}/{}] {} on {}: another thread of this rank is in a "
              "collective of this communicator: its collectives must come "
              "from one thread at a time (its backend serves one caller, and "
              "two interleave each other's data); give each thread a "
              "communicator of its own (split(), CreateCommunicator())",
              comm.rank(), comm.size(), what.str(), comm.name_),
          "Collectives of one communicator from two threads at once are a "
          "bug of the program",
          where.file_name(), where.line(),
          // Its ledger's slot: the world rank whose it is (the
          // communicator's rank is another on a split).
          ledger_ != nullptr ? ledger_->slot() : -1);
    }
  }
  if (ledger_ == nullptr) return;
  if (entry != kNoEntry) {
    if (comm.ledger_ != ledger_) {
      ledger_ = nullptr;  // Made under another ledger: not this one's.
      return;
    }
    index_ = entry;
    comm_ = comm.ledger_id_;
    call_ = call;
    seq_ = seq;
    rank_ = comm.rank();
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
        comm.rank(), comm.size(), comm.name_, internal::LedgerMemory::kComms));
  }
  // Numbered from 0: a collective as the host arena numbers them (the
  // world's #0 is disttest's barrier before the body, a test's first
  // collective #1); a send or receive in its pair, the order they pair in.
  seq_ = collective ? ledger_->NextSeq(comm.ledger_id_)
                    : ledger_->NextInPair(comm.ledger_id_,
                                          call.op == internal::LedgerOp::kSend,
                                          call.peer, call.tag);
  index_ = ledger_->Begin(comm.ledger_id_, seq_, call, where);
  comm_ = comm.ledger_id_;
  call_ = call;
  collective_ = collective;
  rank_ = comm.rank();
  size_ = comm.size();
  timeout_ = comm.timeout();
  shortened_ = comm.timeout() < comm.made_timeout_;
}

Communicator::Recorded::~Recorded() {
  if (holds_ != nullptr) {
    holds_->collective_thread_.store(std::thread::id{},
                                     std::memory_order_release);
  }
  if (ledger_ == nullptr || pending_) return;
  ledger_->End(index_, completed_ ? internal::LedgerState::kCompleted
                                  : internal::LedgerState::kFailed);
  // Only calls that returned go into the digest: a call a rank expected
  // to throw, or one it was killed in, is no difference of calls. A send
  // or receive that returned goes into the transfers, whose balance over
  // the ranks says whether every message was received as it was sent.
  if (!completed_) {
    // Its number in its pair is taken: the pair's balance says nothing now.
    if (!collective_ && seq_ != internal::Ledger::kNoSeq) {
      ledger_->TransferFailed(comm_);
    }
    return;
  }
  if (collective_) {
    ledger_->Digest(comm_, call_);
  } else if (seq_ != internal::Ledger::kNoSeq) {
    ledger_->Transferred(comm_, rank_, call_, seq_);
  }
}

std::string Communicator::Recorded::Missing(std::string_view what) const {
  // (A wait() ends the entry its isend or irecv made: no number of its
  // own, which only a collective needs.)
  if (ledger_ == nullptr || ledger_->memory().ranks() < 2 ||
      (collective_ && seq_ == internal::Ledger::kNoSeq)) {
    return "";
  }
  const bool timed_out = what.find("Timed out") != std::string_view::npos ||
                         what.find("timed out") != std::string_view::npos;
  // A send or receive whose peer's process closed its end (Gloo's
  // "Connection reset by peer"): whether it finished its test or died.
  const bool closed =
      !collective_ &&
      (what.find("Connection reset by peer") != std::string_view::npos ||
       what.find("Connection closed by peer") != std::string_view::npos);
  if (!(timed_out || closed) ||
      what.find("waiting for rank") != std::string_view::npos) {
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

}  // namespace disttest
