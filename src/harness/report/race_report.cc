// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/race_report.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "base/threads.h"

#if defined(__SANITIZE_THREAD__)
#define DISTTEST_BUILT_WITH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DISTTEST_BUILT_WITH_TSAN 1
#endif
#endif
#ifndef DISTTEST_BUILT_WITH_TSAN
#define DISTTEST_BUILT_WITH_TSAN 0
#endif

// Code the runtime calls inside its report: not instrumented at all (clang's
// no_sanitize still instruments atomics and function entries).
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define DISTTEST_IN_TSAN_REPORT \
  __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef DISTTEST_IN_TSAN_REPORT
#define DISTTEST_IN_TSAN_REPORT __attribute__((no_sanitize("thread")))
#endif

// ThreadSanitizer's interface for debuggers (what LLDB reads a report
// with), and the sanitizers' symbolizer: null without the runtime.
extern "C" {
__attribute__((weak)) int __tsan_get_report_data(
    void* report, const char** description, int* count, int* stack_count,
    int* mop_count, int* loc_count, int* mutex_count, int* thread_count,
    int* unique_tid_count, void** sleep_trace, std::uintptr_t trace_size);
__attribute__((weak)) int __tsan_get_report_mop(
    void* report, std::uintptr_t idx, int* tid, void** addr, int* size,
    int* write, int* atomic, void** trace, std::uintptr_t trace_size);
__attribute__((weak)) int __tsan_get_report_thread(
    void* report, std::uintptr_t idx, int* tid, std::uint64_t* os_id,
    int* running, const char** name, int* parent_tid, void** trace,
    std::uintptr_t trace_size);
__attribute__((weak)) int __tsan_get_report_loc(
    void* report, std::uintptr_t idx, const char** type, void** addr,
    std::uintptr_t* start, std::uintptr_t* size, int* tid, int* fd,
    int* suppressable, void** trace, std::uintptr_t trace_size);
__attribute__((weak)) void __sanitizer_symbolize_pc(void* pc, const char* fmt,
                                                    char* out,
                                                    std::size_t size);
__attribute__((weak)) void __sanitizer_symbolize_global(void* data,
                                                        const char* fmt,
                                                        char* out,
                                                        std::size_t size);
// The runtime calls it after it has printed each report (a weak no-op of
// its own otherwise).
__attribute__((visibility("default"))) void __tsan_on_report(void* report);
}

namespace disttest::internal {
namespace {

constexpr bool kBuiltWithThreadSanitizer = DISTTEST_BUILT_WITH_TSAN != 0;

// What a report is kept as, written inside the runtime's report: fixed
// sizes, no allocation, nothing the sanitizer would check.
constexpr int kFrames = 12;    // Of each access's stack, kept.
constexpr int kShown = 4;      // Of those, shown: the code's own.
constexpr int kNotes = 16;     // Reports kept whole; the rest are counted.
constexpr int kNameSize = 24;  // "rank 1023", or the thread's own name.

struct Access {
  int tid = -1;  // ThreadSanitizer's thread number (T3).
  char thread[kNameSize] = {};
  bool write = false;
  bool atomic = false;
  int size = 0;
  void* addr = nullptr;
  void* pcs[kFrames] = {};
};

struct Note {
  std::atomic<bool> ready{false};
  bool taken = false;    // Under g_take.
  pid_t pid = 0;         // The process that found it (a fork copies notes).
  pid_t found_by = 0;    // The thread whose access found it,
  char finder[16] = {};  // and its name ("rank 2"; a thread inherits it).
  char kind[48] = {};
  int accesses = 0;
  Access access[2];
  char location[16] = {};          // "global", "heap", "stack", "tls", ...
  void* location_start = nullptr;  // A global's address.
};

Note g_notes[kNotes];
std::atomic<int> g_next{0};
std::mutex g_take;
int g_counted = 0;  // Reports told, kept whole or counted (under g_take).

[[maybe_unused]] DISTTEST_IN_TSAN_REPORT void CopyName(const char* from,
                                                       char* to, int size) {
  int i = 0;
  for (; from != nullptr && from[i] != '\0' && i + 1 < size; ++i) {
    to[i] = from[i];
  }
  to[i] = '\0';
}

[[maybe_unused]] DISTTEST_IN_TSAN_REPORT void NoteThread(void* report,
                                                         int threads,
                                                         Access& access) {
  for (int i = 0; i < threads; ++i) {
    int tid = -1;
    int running = 0;
    int parent = 0;
    std::uint64_t os_id = 0;
    const char* name = nullptr;
    void* none[1];  // Written before the size (0) is looked at.
    if (__tsan_get_report_thread(report, static_cast<std::uintptr_t>(i), &tid,
                                 &os_id, &running, &name, &parent, none,
                                 0) != 0 &&
        tid == access.tid) {
      CopyName(name, access.thread, kNameSize);
      return;
    }
  }
}

[[maybe_unused]] DISTTEST_IN_TSAN_REPORT void NoteAccess(void* report, int i,
                                                         int threads,
                                                         Access& access) {
  int write = 0;
  int atomic = 0;
  __tsan_get_report_mop(report, static_cast<std::uintptr_t>(i), &access.tid,
                        &access.addr, &access.size, &write, &atomic, access.pcs,
                        kFrames);
  access.write = write != 0;
  access.atomic = atomic != 0;
  NoteThread(report, threads, access);
}

[[maybe_unused]] DISTTEST_IN_TSAN_REPORT void NoteLocation(void* report,
                                                           Note& note) {
  const char* type = nullptr;
  void* addr = nullptr;
  std::uintptr_t start = 0;
  std::uintptr_t size = 0;
  int tid = 0;
  int fd = 0;
  int suppressable = 0;
  void* none[1];
  if (__tsan_get_report_loc(report, 0, &type, &addr, &start, &size, &tid, &fd,
                            &suppressable, none, 0) != 0) {
    CopyName(type, note.location, sizeof note.location);
    // A global's own address; a heap block's start.
    note.location_start = start != 0 ? reinterpret_cast<void*>(start) : addr;
  }
}

}  // namespace
}  // namespace disttest::internal

#if DISTTEST_BUILT_WITH_TSAN
extern "C" DISTTEST_IN_TSAN_REPORT void __tsan_on_report(void* report) {
  using namespace disttest::internal;
  if (&__tsan_get_report_data == nullptr || &__tsan_get_report_mop == nullptr ||
      &__tsan_get_report_thread == nullptr ||
      &__tsan_get_report_loc == nullptr) {
    return;
  }
  const int slot = g_next.fetch_add(1);
  if (slot >= kNotes) return;  // Counted: the output has it whole.
  Note& note = g_notes[slot];
  const char* description = nullptr;
  int count = 0, stacks = 0, mops = 0, locs = 0, mutexes = 0, threads = 0,
      unique_tids = 0;
  void* none[1];
  if (__tsan_get_report_data(report, &description, &count, &stacks, &mops,
                             &locs, &mutexes, &threads, &unique_tids, none,
                             0) == 0) {
    return;
  }
  note.pid = getpid();
  note.found_by = gettid();
  // The kernel's name of the thread: a thread a rank's thread started has
  // its "rank N" (ThreadSanitizer's names are not inherited). A raw system
  // call: prctl() itself is intercepted.
  syscall(SYS_prctl, PR_GET_NAME, note.finder, 0, 0, 0);
  note.finder[sizeof note.finder - 1] = '\0';
  CopyName(description, note.kind, sizeof note.kind);
  note.accesses = mops < 2 ? mops : 2;
  for (int i = 0; i < note.accesses; ++i) {
    NoteAccess(report, i, threads, note.access[i]);
  }
  if (locs > 0) NoteLocation(report, note);
  note.ready.store(true, std::memory_order_release);
}

// Under ThreadSanitizer, unless the program says otherwise (its own
// definitions replace these weak ones): no second's sleep at each exit of
// a process whose other threads still run (a rank's Gloo threads), and not
// gtest's saving and restoring of its global flags in every Test's own
// constructor and destructor (not the fixture's: a frame of those only),
// which rank threads run at once (the same values written back).
extern "C" __attribute__((weak)) const char* __tsan_default_options() {
  return "atexit_sleep_ms=0";
}
extern "C" __attribute__((weak)) const char* __tsan_default_suppressions() {
  return "race:testing::FLAGS_gtest_\n"
         "race:^testing::Test::Test()$\n"
         "race:^testing::Test::~Test()$\n";
}
#endif

namespace disttest::internal {
namespace {

// What ThreadSanitizer's headline says for the kind its interface names
// (the printed headline is matched against this: one failure, not two).
std::string_view Headline(std::string_view kind) {
  static constexpr std::pair<std::string_view, std::string_view> kHeadlines[] =
      {{"data-race", "data race"},
       {"data-race-vptr", "data race on vptr (ctor/dtor vs virtual call)"},
       {"heap-use-after-free-vptr",
        "heap-use-after-free (virtual call vs free)"},
       {"thread-leak", "thread leak"},
       {"lock-order-inversion", "lock-order-inversion (potential deadlock)"},
       {"mutex-double-lock", "double lock of a mutex"},
       {"locked-mutex-destroy", "destroy of a locked mutex"},
       {"signal-unsafe-call", "signal-unsafe call inside of a signal"},
       {"mutex-bad-unlock",
        "unlock of an unlocked mutex (or by a wrong thread)"},
       {"mutex-invalid-access",
        "use of an invalid mutex (e.g. uninitialized or destroyed)"},
       {"mutex-bad-read-lock", "read lock of a write locked mutex"},
       {"mutex-bad-read-unlock", "read unlock of a write locked mutex"},
       {"errno-in-signal-handler", "signal handler spoils errno"},
       {"external-race", "race on external object"}};
  for (const auto& [name, headline] : kHeadlines) {
    if (name == kind) return headline;
  }
  return kind;
}

// "rank 2", from the name NameThisRankThread gave; -1 for another thread.
int RankOfThread(const char* name) {
  constexpr std::string_view kPrefix = "rank ";
  const std::string_view s(name);
  if (!s.starts_with(kPrefix) || s.size() == kPrefix.size()) return -1;
  int rank = 0;
  for (char c : s.substr(kPrefix.size())) {
    if (c < '0' || c > '9' || rank > 1'000'000) return -1;
    rank = rank * 10 + (c - '0');
  }
  return rank;
}

std::string ThreadOf(const Access& a) {
  if (RankOfThread(a.thread) >= 0) return a.thread;
  if (a.tid == 0) return "the main thread";
  if (a.thread[0] != '\0')
    return fmt::format("thread T{} '{}'", a.tid, a.thread);
  return fmt::format("thread T{}", a.tid);
}

std::string Basename(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path
                                                     : path.substr(slash + 1));
}

// disttest's own sources ("/src/harness/report/race_report.cc" off this
// file's path, as its debug information names it).
std::string_view DisttestRoot() {
  constexpr std::string_view kThis = __FILE__;
  constexpr std::string_view kTail = "src/harness/report/race_report.cc";
  return kThis.ends_with(kTail) ? kThis.substr(0, kThis.size() - kTail.size())
                                : std::string_view();
}

// What calls the code: disttest (a test body's caller, a rank thread's
// start), after which nothing is the code's. Its headers are where they
// are installed or, in its own build tree, in a copy per layer.
bool CallsTheCode(std::string_view file) {
  if (file.find("/include/disttest/") != std::string_view::npos) return true;
  const std::string_view root = DisttestRoot();
  if (root.empty() || !file.starts_with(root)) return false;
  file.remove_prefix(root.size());
  return file.starts_with("src/") ||
         file.find("/layers/") != std::string_view::npos;
}

// The standard library between frames of the code (a thread's start,
// std::invoke), and frames the symbolizer cannot name.
bool Between(std::string_view function, std::string_view file) {
  return function.empty() || function == "<null>" ||
         file.find("/c++/") != std::string_view::npos ||
         function.starts_with("std::") || function.starts_with("__invoke");
}

// "    #0 BumpCalls() race_test.cc:20" for each frame shown.
std::string Frames(const Access& a) {
  std::string text;
  std::string last;
  int shown = 0;
  for (int i = 0; i < kFrames && a.pcs[i] != nullptr && shown < kShown; ++i) {
    char function[256] = "";
    char file[512] = "";
    char line[16] = "";
    if (&__sanitizer_symbolize_pc != nullptr) {
      __sanitizer_symbolize_pc(a.pcs[i], "%f", function, sizeof function);
      __sanitizer_symbolize_pc(a.pcs[i], "%s", file, sizeof file);
      __sanitizer_symbolize_pc(a.pcs[i], "%l", line, sizeof line);
    }
    if (i > 0 && CallsTheCode(file)) break;
    if (i > 0 && Between(function, file)) continue;
    std::string frame = function[0] != '\0' ? function : "??";
    if (file[0] != '\0' && std::string_view(file) != "<null>") {
      frame += fmt::format(" {}:{}", Basename(file), line);
    } else {
      frame += fmt::format(" ({})", a.pcs[i]);
    }
    if (frame == last) continue;  // Inlined frames of one call.
    last = frame;
    text += fmt::format("\n    #{} {}", shown++, frame);
  }
  return text;
}

std::string What(const Note& n) {
  std::string what;
  if (std::string_view(n.location) == "global" &&
      &__sanitizer_symbolize_global != nullptr) {
    char name[256] = "";
    __sanitizer_symbolize_global(n.location_start, "%g", name, sizeof name);
    if (name[0] != '\0') what = fmt::format("global '{}'", name);
  }
  if (what.empty() && n.location[0] != '\0') {
    what = fmt::format("{} memory", n.location);
  }
  if (what.empty()) what = "memory";
  if (n.accesses > 0) {
    what +=
        fmt::format(" ({} bytes at {})", n.access[0].size, n.access[0].addr);
  }
  return what;
}

std::string AccessLine(const Access& a, bool first) {
  const char* verb =
      first ? (a.write ? "writes" : "reads") : (a.write ? "wrote" : "read");
  return fmt::format("\n  {} {} it{}{}:{}", ThreadOf(a), verb,
                     a.atomic ? " (atomically)" : "",
                     first ? "" : " before, unordered with that", Frames(a));
}

std::string Describe(const Note& n) {
  const std::string_view headline = Headline(n.kind);
  std::string text = fmt::format("ThreadSanitizer: {}", headline);
  if (n.accesses == 2) {
    const Access& a = n.access[0];
    const Access& b = n.access[1];
    text += fmt::format(" on {}: {} and {}", What(n), ThreadOf(a), ThreadOf(b));
    text += AccessLine(a, true) + AccessLine(b, false);
    const int ra = RankOfThread(a.thread);
    const int rb = RankOfThread(b.thread);
    if (ra >= 0 && rb >= 0 && ra != rb &&
        std::string_view(n.location) == "global") {
      text +=
          "\n  The ranks are threads of one process here: a global or "
          "static is one variable for all of them (as processes each rank "
          "had its own). Make it the rank's (a fixture member, or indexed "
          "by rank()), or guard it.";
    }
  } else {
    for (int i = 0; i < n.accesses; ++i) {
      text += AccessLine(n.access[i], true);
    }
  }
  return text + "\n  (ThreadSanitizer's whole report is in the output)";
}

// The notes that `take` wants, taken and joined into one failure's text.
template <typename Take>
std::optional<std::string> TakeNotes(Take take) {
  const int made = g_next.load();
  std::string text;
  const std::lock_guard<std::mutex> lock(g_take);
  for (int i = 0; i < made && i < kNotes; ++i) {
    Note& n = g_notes[i];
    if (!n.ready.load(std::memory_order_acquire) || n.taken ||
        n.pid != getpid() || !take(n)) {
      continue;
    }
    n.taken = true;
    if (!text.empty()) text += "\n";
    text += Describe(n);
  }
  if (text.empty()) return std::nullopt;
  // Those past the kept ones, once: counted with the first text after them.
  const int told = std::max(g_counted, kNotes);
  if (made > told) {
    text +=
        fmt::format("\n  ({} more reports, in the output: {} are kept whole)",
                    made - told, kNotes);
  }
  g_counted = std::max(g_counted, made);
  return text;
}

// The rank a report is told to: its finder's (a thread a rank's thread
// started has its name), else that of either access's thread; -1: none's.
int RankOf(const Note& n) {
  int rank = RankOfThread(n.finder);
  for (int i = 0; rank < 0 && i < n.accesses; ++i) {
    rank = RankOfThread(n.access[i].thread);
  }
  return rank;
}

}  // namespace

bool ThreadSanitizerRuns() { return &__tsan_get_report_data != nullptr; }

std::string WhyNotUnderThisSanitizer() {
  if (!ThreadSanitizerRuns() || kBuiltWithThreadSanitizer) return "";
  return "this program runs under ThreadSanitizer, but disttest was built "
         "without it: ThreadSanitizer cannot see disttest's own "
         "synchronization (a barrier, a message) and would call what it "
         "orders races, in every rank. Build disttest with -fsanitize=thread "
         "too: cmake -DDISTTEST_SANITIZE=thread for an installed disttest, "
         "or add_subdirectory()/FetchContent with your flags";
}

void NameThisRankThread(int rank) {
  char name[16];
  std::snprintf(name, sizeof name, "rank %d", rank);
  pthread_setname_np(pthread_self(), name);
}

std::optional<std::string> RacesOfThisRank() {
  if (!ThreadSanitizerRuns()) return std::nullopt;
  const bool threads = ThreadsRank() >= 0;
  const pid_t me = gettid();
  return TakeNotes([&](const Note& n) {
    return !threads || n.found_by == me || RankOf(n) == ThreadsRank();
  });
}

bool EveryRaceWasTold() {
  const int made = g_next.load();
  if (!ThreadSanitizerRuns() || made == 0) return false;
  const std::lock_guard<std::mutex> lock(g_take);
  for (int i = 0; i < made && i < kNotes; ++i) {
    const Note& n = g_notes[i];
    const bool ready = n.ready.load(std::memory_order_acquire);
    if (ready && n.pid != getpid()) continue;  // Its parent's, told there.
    if (!ready || !n.taken) return false;
  }
  return made <= kNotes || g_counted >= made;
}

std::vector<std::pair<int, std::string>> RacesNoRankTook() {
  std::vector<std::pair<int, std::string>> left;
  if (!ThreadSanitizerRuns()) return left;
  for (int i = 0; i < kNotes; ++i) {
    const Note& n = g_notes[i];
    if (!n.ready.load(std::memory_order_acquire)) continue;
    const int rank = std::max(RankOf(n), 0);
    if (std::optional<std::string> text =
            TakeNotes([&](const Note& m) { return &m == &n; })) {
      left.emplace_back(rank, std::move(*text));
    }
  }
  return left;
}

}  // namespace disttest::internal
