// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The non-blocking sends and receives: Communicator::isend and irecv make a
// Request, recorded in the ledger and the account of requests in flight;
// its wait() or its destructor ends it through Communicator::WaitFor.
#include "disttest/comm/request.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "base/threads.h"
#include "comm/communicator_recorded.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "comm/request_account.h"
#include "comm/self_messages.h"
#include "disttest/comm/communicator.h"
#include "disttest/error.h"

namespace disttest {

using internal::LedgerOp;

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

// What the ledger records for an isend or irecv, and for the wait that
// completes it: the call the test made.
internal::Ledger::Call RequestCall(bool send, DataType type, std::size_t count,
                                   int peer, std::uint32_t tag) {
  return {.op = send ? LedgerOp::kSend : LedgerOp::kRecv,
          .type = type,
          .reduce = ReduceOp::kSum,
          .count = count,
          .peer = peer,
          .tag = tag,
          .nonblocking = true};
}

// A fingerprint of `bytes` bytes at `data`, 32 at a time in four
// independent lanes (about memory's speed), the rest a byte at a time.
std::uint64_t Fingerprint(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  constexpr std::uint64_t kMul = 0xff51afd7ed558ccdULL;
  std::uint64_t lane[4] = {0x9e3779b97f4a7c15ULL ^ bytes, 1, 2, 3};
  std::size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t word;
      std::memcpy(&word, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ word) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  }
  std::uint64_t h = lane[0];
  for (int k = 1; k < 4; ++k) h = (h ^ lane[k]) * kMul;
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
}  // namespace

Request Communicator::isend(const void* data, std::size_t count, DataType type,
                            int peer, std::uint32_t tag, Where where) {
  Request request;
  // Posting is recorded as the send itself: what a hang shows is its wait.
  Recorded r(*this, false, RequestCall(true, type, count, peer, tag), where);
  r.Run(
      [&] {
        // To this rank itself: paired here for every backend with host
        // buffers (NCCL's, on the GPU, refuses it).
        request.state_ = peer == rank() && BuffersOnHost()
                             ? Self().Send(data, count, type, tag)
                             : DoISend(data, count, type, peer, tag);
      },
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
  request.seq_ = r.seq();
  request.id_ = internal::RequestMade(
      DescribeRequest(true, count, type, peer, tag, name_), where.file_name(),
      where.line(), ledger_ != nullptr ? ledger_->slot() : -1);
  request.comm_alive_ = alive_;
  // A send's buffer must stay unchanged until its wait() returns: a backend
  // that copies it at once (the host arena) or sends it before the change
  // would pass a program that NCCL, MPI or Gloo, reading it later, break.
  if (BuffersOnHost() && data != nullptr && count != 0) {
    request.sent_ = data;
    request.sent_fingerprint_ = Fingerprint(data, count * SizeOf(type));
  }
  return request;
}

Request Communicator::irecv(void* data, std::size_t count, DataType type,
                            int peer, std::uint32_t tag, Where where) {
  Request request;
  Recorded r(*this, false, RequestCall(false, type, count, peer, tag), where);
  r.Run(
      [&] {
        request.state_ = peer == rank() && BuffersOnHost()
                             ? Self().Recv(data, count, type, tag)
                             : DoIRecv(data, count, type, peer, tag);
      },
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
  request.seq_ = r.seq();
  request.id_ = internal::RequestMade(
      DescribeRequest(false, count, type, peer, tag, name_), where.file_name(),
      where.line(), ledger_ != nullptr ? ledger_->slot() : -1);
  request.comm_alive_ = alive_;
  return request;
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
      seq_(other.seq_),
      id_(std::exchange(other.id_, 0)),
      sent_(other.sent_),
      sent_fingerprint_(other.sent_fingerprint_),
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
    seq_ = other.seq_;
    id_ = std::exchange(other.id_, 0);
    sent_ = other.sent_;
    sent_fingerprint_ = other.sent_fingerprint_;
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
  // Whose it is, before waiting takes it out of the account (a process
  // of one rank need not ask: it is the process's, -1).
  const int owner =
      internal::RanksAreThreads() ? internal::RequestOwner(id_) : -1;
  if (Orphaned()) {
    // Destroyed without wait() after its communicator: the test is told
    // here (wait() throws instead).
    internal::RequestDroppedAndFailed(
        owner, DescribeRequest(send_, count_, type_, peer_, tag_, ""), file_,
        line_,
        "its communicator was destroyed first (wait for a Request before "
        "its communicator goes)");
    return;
  }
  // Its buffer is not read again here: it may be gone by now (a Request
  // declared before it is destroyed after it).
  sent_ = nullptr;
  try {
    comm_->WaitFor(*this);
  } catch (const std::exception& e) {
    // Marked on the communicator by the backend (failed()) and in the
    // ledger; a destructor cannot throw, so the rank runtime fails the test
    // with it after the body (an error nobody sees would pass).
    internal::RequestDroppedAndFailed(
        owner,
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
             RequestCall(request.send_, request.type_, request.count_,
                         request.peer_, request.tag_),
             CallSite::current(request.file_, request.line_), request.entry_,
             request.seq_);
  std::unique_ptr<RequestState> state = std::move(request.state_);
  internal::RequestWaited(std::exchange(request.id_, 0));
  r.Run([&] { state->Wait(timeout_); });
  // The message went (the ledger says so); the program that sent it is
  // wrong all the same.
  if (request.sent_ != nullptr &&
      Fingerprint(request.sent_, request.count_ * SizeOf(request.type_)) !=
          request.sent_fingerprint_) {
    // A test that catches it (a retry around wait()) fails all the same.
    throw internal::BugOfTheProgram(
        fmt::format(
            "{} made at {}:{}: its buffer changed before its wait() "
            "returned; the receiver may get the old contents or the new (a "
            "backend may read it until then, as NCCL and Gloo do): change it "
            "only after wait()",
            DescribeRequest(true, request.count_, request.type_, request.peer_,
                            request.tag_, name_),
            std::filesystem::path(request.file_).filename().string(),
            request.line_),
        "A send buffer changed before its wait() returned is a bug of the "
        "program",
        request.file_, request.line_,
        ledger_ != nullptr ? ledger_->slot() : -1);
  }
}

}  // namespace disttest
