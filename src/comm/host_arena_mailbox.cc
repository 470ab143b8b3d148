// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Point-to-point messages (host_arena.h): a rank's sends and receives in
// flight (its Mailbox), how they post and take the pieces in the sender's
// ring and heap, and the wait that moves them all on.
#include "comm/host_arena_mailbox.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/unordered_reads.h"
#include "comm/host_arena.h"
#include "comm/host_arena_layout.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest {

namespace {

// "8 x float32 with tag 1"
std::string Describe(std::uint64_t count, DataType type, std::uint32_t tag) {
  return fmt::format("{} x {} with tag {}", count, Name(type), tag);
}

}  // namespace

unsigned char* HostArena::Heap(int rank) {
  return static_cast<unsigned char*>(memory_) + HeaderBytes(world_) +
         static_cast<std::size_t>(world_) * 2 * kSlotBytes +
         static_cast<std::size_t>(rank) * kHeapBytes;
}

namespace {
// A post as a reader that does not own it saw it: whole, or not at all.
struct PostView {
  std::int32_t to = -1;
  std::uint64_t count = 0;
  DataType type = DataType::kUint8;
  std::uint32_t tag = 0;
  std::uint64_t number = 0, offset = 0, bytes = 0, heap_at = 0;
  std::uint32_t state = 0;
};
}  // namespace

HostArena::Mailbox& HostArena::MailboxOf(int rank) {
  const std::lock_guard<std::mutex> lock(mailboxes_made_);
  std::unique_ptr<Mailbox>& box = mailboxes_[static_cast<std::size_t>(rank)];
  if (box == nullptr) box = std::make_unique<Mailbox>();
  return *box;
}

namespace {
template <typename PostT>
bool ReadPost(const PostT& p, std::uint64_t index, PostView* view) {
  const internal::UnorderedReads seqlock;
  if (p.stamp.load(std::memory_order_acquire) != index + 1) return false;
  view->to = p.to;
  view->count = p.message.count;
  view->type = p.message.type;
  view->tag = p.message.tag;
  view->number = p.number;
  view->offset = p.offset;
  view->bytes = p.bytes;
  view->heap_at = p.heap_at;
  view->state = p.state.load(std::memory_order_acquire);
  std::atomic_thread_fence(std::memory_order_acquire);
  // Reused meanwhile (it was taken, and its sender moved on): not this one.
  return p.stamp.load(std::memory_order_relaxed) == index + 1;
}
}  // namespace

void HostArena::ProgressSends(int rank, Mailbox& box) {
  PerRank& me = ranks_[rank];
  std::uint64_t next = me.posted.load(std::memory_order_relaxed);
  std::uint64_t reclaimed = me.reclaimed.load(std::memory_order_relaxed);
  // What the receivers took or refused since.
  for (std::uint64_t i = reclaimed; i < next; ++i) {
    Mailbox::Sent& sent = box.sent[i % kPosts];
    if (sent.settled) continue;
    const Post& p = me.posts[i % kPosts];
    const std::uint32_t state = p.state.load(std::memory_order_acquire);
    if (state == Post::kOpen) continue;
    sent.settled = true;
    auto op = box.Find(sent.id);
    if (op == box.ops.end()) continue;
    ++op->settled;
    if (state == Post::kRefused && op->error.empty()) {
      op->error = fmt::format(
          "rank {} sent {}; rank {} expected {}", rank,
          Describe(op->message.count, op->message.type, op->message.tag),
          op->peer,
          Describe(p.expected.count, p.expected.type, p.expected.tag));
    }
  }
  // Posts and heap bytes come back in the order they went.
  while (reclaimed < next && box.sent[reclaimed % kPosts].settled) {
    box.heap_freed = box.sent[reclaimed % kPosts].heap_end;
    ++reclaimed;
  }
  me.reclaimed.store(reclaimed, std::memory_order_release);
  // Sends post their pieces in the order they were made, as room allows.
  for (Mailbox::Op& op : box.ops) {
    if (!op.send || !op.error.empty()) continue;
    while (op.posted < op.pieces) {
      if (next - reclaimed >= kPosts) return;
      const std::uint64_t offset = op.posted * kPieceBytes;
      const std::uint64_t n =
          std::min<std::uint64_t>(kPieceBytes, op.bytes - offset);
      // A piece is never split at the heap's end.
      std::uint64_t at = box.heap_used % kHeapBytes;
      const std::uint64_t skip = at + n > kHeapBytes ? kHeapBytes - at : 0;
      if (box.heap_used + skip + n - box.heap_freed > kHeapBytes) return;
      box.heap_used += skip;
      at = box.heap_used % kHeapBytes;
      if (n > 0) std::memcpy(Heap(rank) + at, op.data + offset, n);
      box.heap_used += n;
      Post& p = me.posts[next % kPosts];
      p.state.store(Post::kOpen, std::memory_order_relaxed);
      p.to = op.peer;
      p.message = op.message;
      p.number = op.number;
      p.offset = offset;
      p.bytes = n;
      p.heap_at = at;
      p.stamp.store(next + 1, std::memory_order_release);
      box.sent[next % kPosts] = {op.id, box.heap_used, false};
      ++next;
      ++op.posted;
      me.posted.store(next, std::memory_order_release);
      Ring(op.peer);
    }
  }
}

void HostArena::ProgressRecvs(int rank, Mailbox& box) {
  for (auto it = box.ops.begin(); it != box.ops.end(); ++it) {
    Mailbox::Op& op = *it;
    if (op.send || !op.error.empty() || op.done()) continue;
    PerRank& sender = ranks_[op.peer];
    const std::uint64_t posted = sender.posted.load(std::memory_order_acquire);
    const std::uint64_t from = sender.reclaimed.load(std::memory_order_acquire);
    if (op.number == 0) {
      // Receives from one peer with one tag match its messages in order:
      // one made earlier that has none yet gets the next.
      const bool earlier = std::any_of(box.ops.begin(), it, [&](const auto& o) {
        return !o.send && o.peer == op.peer &&
               o.message.tag == op.message.tag && o.number == 0 &&
               o.error.empty();
      });
      if (earlier) continue;
      for (std::uint64_t i = from; i < posted; ++i) {
        PostView v;
        if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
        if (v.to != rank || v.offset != 0 || v.state != Post::kOpen ||
            v.tag != op.message.tag) {
          continue;
        }
        Post& p = sender.posts[i % kPosts];  // This rank's to settle now.
        if (v.count != op.message.count || v.type != op.message.type) {
          p.expected = op.message;
          p.state.store(Post::kRefused, std::memory_order_release);
          Ring(op.peer);
          op.error = fmt::format(
              "rank {} sent {}; rank {} expected {}", op.peer,
              Describe(v.count, v.type, v.tag), rank,
              Describe(op.message.count, op.message.type, op.message.tag));
          break;
        }
        op.number = v.number;
        break;
      }
      if (op.number == 0) continue;
    }
    // Its pieces, in order.
    while (op.received < op.pieces) {
      bool took = false;
      for (std::uint64_t i = from; i < posted && !took; ++i) {
        PostView v;
        if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
        if (v.to != rank || v.number != op.number ||
            v.offset != op.received * kPieceBytes || v.state != Post::kOpen) {
          continue;
        }
        if (v.bytes > 0) {
          std::memcpy(op.data + v.offset, Heap(op.peer) + v.heap_at, v.bytes);
        }
        sender.posts[i % kPosts].state.store(Post::kTaken,
                                             std::memory_order_release);
        Ring(op.peer);
        ++op.received;
        took = true;
      }
      if (!took) break;
    }
  }
}

void HostArena::Progress(int rank) {
  Mailbox& box = MailboxOf(rank);
  ProgressRecvs(rank, box);
  ProgressSends(rank, box);
}

std::string HostArena::Unreceived(int rank, int peer) const {
  const PerRank& sender = ranks_[peer];
  const std::uint64_t posted = sender.posted.load(std::memory_order_acquire);
  const std::uint64_t reclaimed =
      sender.reclaimed.load(std::memory_order_acquire);
  std::vector<std::string> messages;
  std::uint64_t held = 0;  // Bytes of its heap that its posts hold.
  for (std::uint64_t i = reclaimed; i < posted; ++i) {
    PostView v;
    if (!ReadPost(sender.posts[i % kPosts], i, &v)) continue;
    held += v.bytes;  // Taken or not: the heap is freed in order.
    if (v.to == rank && v.offset == 0 && v.state == Post::kOpen) {
      messages.push_back(Describe(v.count, v.type, v.tag));
    }
  }
  if (messages.empty()) return "";
  // The first few, and how many more.
  constexpr std::size_t kListed = 8;
  const std::size_t more =
      messages.size() > kListed ? messages.size() - kListed : 0;
  if (more > 0) messages.resize(kListed);
  std::string text =
      fmt::format("; rank {} has sent this rank {}{}, which no receive took",
                  peer, fmt::join(messages, ", "),
                  more > 0 ? fmt::format(" and {} more", more) : std::string());
  // Its mailbox full of them: what it sent after them waits for room there.
  if (posted - reclaimed >= kPosts || held + kPieceBytes > kHeapBytes) {
    text += fmt::format(
        "; they fill its host-arena mailbox ({} pieces or {} KiB at once, for "
        "all its receivers), "
        "so a message it sent after them may wait for room there while this "
        "receive waits for it: receive in the order sent, or keep fewer in "
        "flight (DISTTEST_NO_HOST_ARENA=1 sends through Gloo, which holds "
        "them all)",
        kPosts, kHeapBytes / 1024);
  }
  return text;
}

std::uint64_t HostArena::PostSend(int rank, const void* data, std::size_t count,
                                  DataType type, int peer, std::uint32_t tag) {
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  Mailbox& box = MailboxOf(rank);
  const std::lock_guard<std::mutex> lock(box.mu);
  Mailbox::Op op;
  op.id = box.next_id++;
  op.send = true;
  op.peer = peer;
  op.message = {count, type, tag};
  op.data = static_cast<unsigned char*>(const_cast<void*>(data));
  op.bytes = count * SizeOf(type);
  op.pieces =
      std::max<std::uint64_t>(1, (op.bytes + kPieceBytes - 1) / kPieceBytes);
  op.number = box.next_number++;
  box.ops.push_back(std::move(op));
  in_flight_[rank].fetch_add(1, std::memory_order_relaxed);
  // What fits goes at once: a receiver need not wait for this rank's wait.
  ProgressSends(rank, box);
  return box.ops.back().id;
}

std::uint64_t HostArena::PostRecv(int rank, void* data, std::size_t count,
                                  DataType type, int peer, std::uint32_t tag) {
  if (!carry_data_) {
    throw CommError("the host arena carries no data (DISTTEST_NO_HOST_ARENA)");
  }
  ThrowIfUnusable();
  Mailbox& box = MailboxOf(rank);
  const std::lock_guard<std::mutex> lock(box.mu);
  Mailbox::Op op;
  op.id = box.next_id++;
  op.peer = peer;
  op.message = {count, type, tag};
  op.data = static_cast<unsigned char*>(data);
  op.bytes = count * SizeOf(type);
  op.pieces =
      std::max<std::uint64_t>(1, (op.bytes + kPieceBytes - 1) / kPieceBytes);
  box.ops.push_back(std::move(op));
  in_flight_[rank].fetch_add(1, std::memory_order_relaxed);
  return box.ops.back().id;
}

bool HostArena::ProgressWhileInACollective(int rank) {
  if (in_flight_[rank].load(std::memory_order_relaxed) == 0) return false;
  Mailbox& box = MailboxOf(rank);
  const std::lock_guard<std::mutex> lock(box.mu);
  Progress(rank);
  return std::any_of(box.ops.begin(), box.ops.end(), [](const Mailbox::Op& op) {
    return op.error.empty() && !op.done();
  });
}

void HostArena::Forget(int rank, std::uint64_t id) noexcept {
  if (in_flight_[rank].load(std::memory_order_relaxed) == 0) return;
  Mailbox& box = MailboxOf(rank);
  const std::lock_guard<std::mutex> lock(box.mu);
  auto op = box.Find(id);
  if (op == box.ops.end()) return;
  box.ops.erase(op);
  in_flight_[rank].fetch_sub(1, std::memory_order_relaxed);
}

void HostArena::WaitFor(int rank, std::uint64_t id,
                        std::chrono::milliseconds timeout) {
  const Deadline deadline(timeout);
  Mailbox& box = MailboxOf(rank);
  std::unique_lock<std::mutex> lock(box.mu);
  PerRank& me = ranks_[rank];
  // Ends the wait: the operation is forgotten (its pieces still posted
  // stay there; a send's unposted ones are never posted).
  const auto finish = [&](std::string error, bool give_up,
                          bool mismatch = false) {
    me.waiting_on.store(-1, std::memory_order_relaxed);
    auto op = box.Find(id);
    if (op != box.ops.end()) {
      box.ops.erase(op);
      in_flight_[rank].fetch_sub(1, std::memory_order_relaxed);
    }
    if (error.empty()) return;
    // What this rank had posted or taken half-way cannot be trusted.
    if (give_up) GiveUp(rank);
    if (mismatch) throw internal::MismatchOfCalls(error, rank);
    throw CommError(error);
  };
  for (;;) {
    const std::uint32_t bell = me.doorbell.load(std::memory_order_seq_cst);
    Progress(rank);
    auto op = box.Find(id);
    if (op == box.ops.end()) {
      throw CommError(
          fmt::format("no send or receive {} of rank {} in flight", id, rank));
    }
    // (Its only error: the pair's calls differ.)
    if (!op->error.empty()) return finish(op->error, false, true);
    if (op->done()) return finish("", false);
    try {
      ThrowIfUnusable();
    } catch (const CommError& e) {
      finish(e.what(), false);
    }
    const int peer = op->peer;
    const bool send = op->send;
    const char* waiting = send ? "to receive it" : "to send it";
    me.waiting_on.store(peer, std::memory_order_seq_cst);
    // What the peer did before it went counts: once more, then fail.
    const auto gone = [&](const char* how) {
      Progress(rank);
      auto again = box.Find(id);
      if (again != box.ops.end() && again->error.empty() && again->done()) {
        return finish("", false);
      }
      finish(fmt::format("rank {} {} while this rank waited for it {}", peer,
                         how, waiting),
             true);
    };
    if (ranks_[peer].ended.load(std::memory_order_seq_cst) != 0) {
      return gone("ended");
    }
    if (ranks_[peer].left.load(std::memory_order_seq_cst) != 0) {
      return gone("returned from its body");
    }
    const auto left = deadline.at - Clock::now();
    if (left <= Clock::duration::zero()) {
      finish(fmt::format("timed out after {} ms waiting for rank {} {} "
                         "(same-host arena){}",
                         deadline.timeout.count(), peer, waiting,
                         send ? std::string() : Unreceived(rank, peer)),
             true);
    }
    // Checks the deadline and a failed arena now and then without a wake.
    lock.unlock();
    internal::FutexWait(
        &me.doorbell, bell,
        std::min<long long>(std::chrono::nanoseconds(left).count(),
                            100'000'000));
    lock.lock();
    me.waiting_on.store(-1, std::memory_order_relaxed);
  }
}

void HostArena::Send(int rank, const void* data, std::size_t count,
                     DataType type, int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  WaitFor(rank, PostSend(rank, data, count, type, peer, tag), timeout);
}

void HostArena::Recv(int rank, void* data, std::size_t count, DataType type,
                     int peer, std::uint32_t tag,
                     std::chrono::milliseconds timeout) {
  WaitFor(rank, PostRecv(rank, data, count, type, peer, tag), timeout);
}

}  // namespace disttest
