// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "disttest/env/names.h"
#include "env/text.h"

namespace disttest::internal::keeper {
namespace {

// One child of the test process that the keeper ends if it outlives the
// test process: its pid and when it started (a pid alone may be another
// process's by then).
struct Slot {
  std::atomic<pid_t> pid;
  std::atomic<unsigned long long> start;
};
static_assert(std::atomic<pid_t>::is_always_lock_free &&
              std::atomic<unsigned long long>::is_always_lock_free);

// More than the ranks that run at once; a slot is taken again once its
// process is gone.
constexpr int kSlots = 4096;

// Shared with the keeper and the children (MAP_SHARED), each of which
// writes its own slot.
Slot* g_table = nullptr;
pid_t g_owner = -1;  // The process whose keeper g_keeper is.
pid_t g_keeper = -1;
int g_keeper_fd = -1;  // A pidfd of g_keeper.
bool g_cannot_start = false;
bool g_started = false;  // A keeper of this process ran.
int g_cursor = 0;
std::mutex g_mutex;

// Everything below, up to Reserve(), runs in a fork of a process that may
// run threads, or between fork and exec: system calls only, no allocation.

// Text into `at`, NUL-terminated; returns where the NUL is.
char* Put(char* at, const char* text) {
  while (*text != '\0') *at++ = *text++;
  *at = '\0';
  return at;
}

char* PutNumber(char* at, long n) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  while (count > 0) *at++ = digits[--count];
  *at = '\0';
  return at;
}

// "/proc/<pid>/<what>" into `out` (64 bytes).
void ProcPath(char* out, pid_t pid, const char* what) {
  Put(PutNumber(Put(out, "/proc/"), pid), what);
}

// The start of file `path` into `buffer` (NUL-terminated); its length, or
// -1 when it cannot be read.
ssize_t ReadSmall(const char* path, char* buffer, std::size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::size_t got = 0;
  while (got + 1 < size) {
    const ssize_t n = read(fd, buffer + got, size - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fd);
  buffer[got] = '\0';
  return static_cast<ssize_t>(got);
}

// The state letter and the start time (clock ticks since boot) of `pid`'s
// /proc/<pid>/stat ("self" when pid is 0); false when it cannot be read,
// with *gone set when that is because there is no such process.
bool ReadStat(pid_t pid, char* state, unsigned long long* start,
              bool* gone = nullptr) {
  char path[64];
  if (pid == 0) {
    std::strcpy(path, "/proc/self/stat");
  } else {
    ProcPath(path, pid, "/stat");
  }
  char stat[512];
  errno = 0;
  if (ReadSmall(path, stat, sizeof stat) <= 0) {
    if (gone != nullptr) *gone = errno == ENOENT || errno == ESRCH;
    return false;
  }
  // The name, in parentheses, may hold anything: the fields follow the
  // last ')'. The state is the first of them, the start time the 20th.
  const char* p = std::strrchr(stat, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  for (int field = 1; field < 20; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  unsigned long long n = 0;
  for (; *p >= '0' && *p <= '9'; ++p) n = n * 10 + (*p - '0');
  *start = n;
  return true;
}

unsigned long long StartTime(pid_t pid) {
  char state = 0;
  unsigned long long start = 0;
  return ReadStat(pid, &state, &start) ? start : 0;
}

// The keeper's view of what the test process left: the processes it ends
// (the ranks first), each once.
constexpr int kMaxFound = 32768;
pid_t g_found[kMaxFound];
int g_found_count = 0;
int g_ranks_found = 0;

bool Found(pid_t pid) {
  for (int i = 0; i < g_found_count; ++i) {
    if (g_found[i] == pid) return true;
  }
  return false;
}

void Add(pid_t pid) {
  if (pid <= 0 || g_found_count == kMaxFound || Found(pid)) return;
  g_found[g_found_count++] = pid;
}

// Adds the children of every thread of `pid` (/proc/<pid>/task/*/children).
void AddChildren(pid_t pid) {
  char path[64];
  ProcPath(path, pid, "/task");
  const int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) static char entries[8192];
  static char children[16384];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, entries, sizeof entries);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      // struct linux_dirent64: inode (8), offset (8), length (2), type (1),
      // then the name.
      unsigned short length = 0;
      std::memcpy(&length, entries + at + 16, sizeof length);
      const char* name = entries + at + 19;
      at += length;
      long tid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) {
        tid = tid * 10 + (*c - '0');
      }
      if (tid <= 0) continue;
      char task[96];
      Put(PutNumber(Put(Put(task, path), "/"), tid), "/children");
      if (ReadSmall(task, children, sizeof children) <= 0) continue;
      long child = 0;
      for (const char* c = children;; ++c) {
        if (*c >= '0' && *c <= '9') {
          child = child * 10 + (*c - '0');
          continue;
        }
        Add(static_cast<pid_t>(child));
        child = 0;
        if (*c == '\0') break;
      }
    }
  }
  close(dir);
}

bool Gone(char state) { return state == 'Z' || state == 'X'; }

// Stops everything in g_found and what it started, until no new process
// turns up (a stopped process starts none).
void StopAll() {
  for (int round = 0; round < 64; ++round) {
    const int before = g_found_count;
    for (int i = 0; i < g_found_count; ++i) kill(g_found[i], SIGSTOP);
    // Until each has stopped (a signal is taken when the process next
    // runs), for at most half a second.
    for (int wait = 0; wait < 250; ++wait) {
      bool all = true;
      for (int i = 0; i < g_found_count && all; ++i) {
        char state = 0;
        unsigned long long start = 0;
        if (ReadStat(g_found[i], &state, &start)) {
          all = state == 'T' || state == 't' || Gone(state);
        }
      }
      if (all) break;
      const timespec two_ms{0, 2'000'000};
      nanosleep(&two_ms, nullptr);
    }
    for (int i = 0; i < g_found_count; ++i) AddChildren(g_found[i]);
    if (g_found_count == before) break;
  }
}

// The note the keeper leaves on stderr, in one write.
char g_note[8192];
std::size_t g_note_length = 0;

void Say(const char* text) {
  while (*text != '\0' && g_note_length + 1 < sizeof g_note) {
    g_note[g_note_length++] = *text++;
  }
}

void SayNumber(long n) {
  char text[24];
  PutNumber(text, n);
  Say(text);
}

// "4250 (sleep)", the name as /proc/<pid>/comm had it before the kill.
void SayProcess(pid_t pid, const char* name) {
  SayNumber(pid);
  if (*name == '\0') return;
  Say(" (");
  Say(name);
  Say(")");
}

constexpr int kNamed = 8;  // Processes named in the note; then a count.
char g_names[kNamed][17];

[[noreturn]] void EndWhatWasLeft(pid_t parent) {
  if (g_table != nullptr) {
    for (int i = 0; i < kSlots; ++i) {
      const pid_t pid = g_table[i].pid.load(std::memory_order_acquire);
      const unsigned long long start =
          g_table[i].start.load(std::memory_order_relaxed);
      char state = 0;
      unsigned long long now = 0;
      if (pid <= 0 || start == 0 || !ReadStat(pid, &state, &now) ||
          now != start || Gone(state)) {
        continue;
      }
      Add(pid);
    }
  }
  g_ranks_found = g_found_count;
  if (g_found_count == 0) _exit(0);
  StopAll();
  // What the ranks started is named (the ranks are the test's binary).
  int named = 0;
  for (int i = g_ranks_found; i < g_found_count && named < kNamed; ++i) {
    char path[64];
    ProcPath(path, g_found[i], "/comm");
    char* name = g_names[named++];
    if (ReadSmall(path, name, sizeof g_names[0]) <= 0) name[0] = '\0';
    for (char* c = name; *c != '\0'; ++c) {
      if (*c == '\n') *c = '\0';
    }
  }
  for (int i = 0; i < g_found_count; ++i) kill(g_found[i], SIGKILL);
  Say("[ disttest ] the test process ");
  SayNumber(parent);
  Say(" ended while its ranks ran (it was killed, crashed, or exited "
      "without ending them); its keeper ended ");
  SayNumber(g_ranks_found);
  Say(g_ranks_found == 1 ? " process of its ranks ("
                         : " processes of its ranks (");
  for (int i = 0; i < g_ranks_found && i < kNamed; ++i) {
    if (i > 0) Say(", ");
    SayNumber(g_found[i]);
  }
  if (g_ranks_found > kNamed) Say(", ...");
  Say(")");
  const int others = g_found_count - g_ranks_found;
  if (others > 0) {
    Say(" and ");
    SayNumber(others);
    Say(others == 1 ? " process they had started: "
                    : " processes they had started: ");
    for (int i = 0; i < named; ++i) {
      if (i > 0) Say(", ");
      SayProcess(g_found[g_ranks_found + i], g_names[i]);
    }
    if (others > named) Say(", ...");
  }
  Say("\n");
  if (write(STDERR_FILENO, g_note, g_note_length) < 0) {
    // Nowhere to say it: the processes are gone all the same.
  }
  _exit(0);
}

// The keeper's life: waits for the test process to end (`parent_fd`, a
// pidfd of it), then ends what it left.
[[noreturn]] void Keep(pid_t parent, int parent_fd) {
  // Not in the test's group, nor in that of the ranks: a signal to either
  // (timeout(1) signals its group) leaves the keeper to do its work.
  setpgid(0, 0);
  prctl(PR_SET_NAME, "disttest-keeper");
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  struct sigaction ignore = dfl;
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, nullptr);  // A closed stderr: go on.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // The pidfd at 3, and nothing else of the test process's: no port, pipe
  // or terminal held open (stderr only, for the note).
  if (parent_fd != 3) {
    dup2(parent_fd, 3);
    close(parent_fd);
  }
  close(STDIN_FILENO);
  close(STDOUT_FILENO);
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
#endif
  {
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    const rlim_t last = files.rlim_cur < 65536 ? files.rlim_cur : 65536;
    for (rlim_t fd = 4; fd < last; ++fd) close(static_cast<int>(fd));
  }
  pollfd ended{3, POLLIN, 0};
  while (poll(&ended, 1, -1) < 0 && errno == EINTR) {
  }
  EndWhatWasLeft(parent);
}

// The keeper, a fork of a fork that exits: no child of this process (unless
// it is a subreaper now), so no wait() of the test's reaps it, and no
// wait for all children waits for it.
bool StartKeeper() {
#ifdef SYS_pidfd_open
  if (g_table == nullptr) {
    // The slots, and one more whose pid is the keeper's.
    void* table =
        mmap(nullptr, sizeof(Slot) * (kSlots + 1), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED) return false;
    g_table = static_cast<Slot*>(table);  // Zeroed: no slot taken.
  }
  std::atomic<pid_t>& started = g_table[kSlots].pid;
  started.store(0);
  const pid_t parent = getpid();
  const pid_t middle = fork();
  if (middle == 0) {
    // A pidfd of the parent while it is surely this process's parent (the
    // keeper's will be init's, or a subreaper's).
    const int parent_fd = static_cast<int>(syscall(SYS_pidfd_open, parent, 0));
    if (parent_fd < 0 || getppid() != parent) _exit(1);
    // The raw system call: fork() would run the handlers that libraries
    // registered with pthread_atfork, in a copy of a process whose other
    // threads may have held their locks.
    const pid_t keeper =
        static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (keeper == 0) Keep(parent, parent_fd);
    started.store(keeper, std::memory_order_release);
    _exit(keeper > 0 ? 0 : 1);
  }
  if (middle < 0) return false;
  while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  const pid_t keeper = started.load(std::memory_order_acquire);
  if (keeper <= 0) return false;
  // Close-on-exec, as every pidfd; polled to see whether it still runs.
  g_keeper_fd = static_cast<int>(syscall(SYS_pidfd_open, keeper, 0));
  if (g_keeper_fd < 0) return false;
  g_keeper = keeper;
  return true;
#else
  // The keeper waits on a pidfd: without (Linux before 5.3), children die
  // with their parent as before.
  return false;
#endif
}

bool Alive() {
  if (g_keeper_fd < 0) return false;
  pollfd ended{g_keeper_fd, POLLIN, 0};
  if (poll(&ended, 1, 0) == 0) return true;
    // Ended (killed from outside): the next rank group starts another.
#ifdef P_PIDFD
  // Reaped if it is this process's child (it started while this process
  // was a subreaper); by its pidfd, as its pid may be another's by now.
  siginfo_t info{};
  waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(g_keeper_fd), &info,
         WEXITED | WNOHANG);
#endif
  close(g_keeper_fd);
  g_keeper_fd = -1;
  g_keeper = -1;
  return false;
}

// In a fork of a process with a keeper: that keeper, its table and its
// pidfd are the parent's.
void ForgetTheParents() {
  if (g_owner == getpid()) return;
  g_owner = getpid();
  g_keeper = -1;
  g_keeper_fd = -1;
  g_table = nullptr;
  g_cursor = 0;
  g_cannot_start = false;
  g_started = false;
}

}  // namespace

void Start() {
  std::lock_guard<std::mutex> lock(g_mutex);
  ForgetTheParents();
  if (Alive() || g_cannot_start || SetToOne(env::kNoKeeper)) return;
  // Not in a process that is a subreaper already (a rank whose test starts
  // ranks of its own): the keeper would be its child, which it ends as one
  // its test left running.
  int subreaper = 0;
  if (prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || subreaper != 0) return;
  // Where it cannot start once (no pidfd_open), it cannot again.
  if (StartKeeper()) {
    g_started = true;
  } else {
    g_cannot_start = true;
  }
}

void Revive() {
  std::lock_guard<std::mutex> lock(g_mutex);
  ForgetTheParents();
  if (!g_started || g_cannot_start || Alive()) return;
  // The table is this process's: the new keeper maps it as the old did.
  if (!StartKeeper()) g_cannot_start = true;
}

int Fd() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_owner == getpid() ? g_keeper_fd : -1;
}

int Reserve() {
  // PR_SET_PDEATHSIG follows the thread that forks: a child of another
  // thread than the main one would stop when that thread ends, while this
  // process runs on (a pool's rank, parked, given the next test). It dies
  // then, as before.
  if (gettid() != getpid()) return -1;
  std::lock_guard<std::mutex> lock(g_mutex);
  ForgetTheParents();
  if (!Alive()) return -1;
  for (int tried = 0; tried < kSlots; ++tried) {
    const int slot = g_cursor;
    g_cursor = (g_cursor + 1) % kSlots;
    const pid_t pid = g_table[slot].pid.load(std::memory_order_acquire);
    // Free, or its process gone (this process reaped it): not one whose
    // /proc could not be read (no descriptor left), which may still run.
    char state = 0;
    unsigned long long start = 0;
    bool gone = false;
    const bool read = pid != 0 && ReadStat(pid, &state, &start, &gone);
    if (pid == 0 ||
        (read &&
         start != g_table[slot].start.load(std::memory_order_relaxed)) ||
        (!read && gone)) {
      g_table[slot].pid.store(0, std::memory_order_release);
      return slot;
    }
  }
  return -1;
}

bool Record(int slot, pid_t pid) {
  if (slot < 0 || slot >= kSlots || g_table == nullptr) return false;
  const unsigned long long start = StartTime(pid);
  if (start == 0) return false;
  g_table[slot].start.store(start, std::memory_order_relaxed);
  g_table[slot].pid.store(pid, std::memory_order_release);
  return true;
}

namespace {

pid_t g_hangup_parent = -1;
pid_t g_hangup_owner = -1;

void OnHangup(int) {
  const int saved_errno = errno;
  if (getpid() != g_hangup_owner || getppid() == g_hangup_parent) {
    // A child of the rank, or a rank whose parent runs: SIGHUP's own end.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGHUP, &dfl, nullptr);
    raise(SIGHUP);  // Taken once this handler returns.
  }
  errno = saved_errno;
}

}  // namespace

void GuardAgainstOrphanedHangup(pid_t parent) {
  int on_parent_death = 0;
  if (prctl(PR_GET_PDEATHSIG, &on_parent_death) != 0 ||
      on_parent_death != SIGSTOP) {
    return;
  }
  struct sigaction now {};
  if (sigaction(SIGHUP, nullptr, &now) != 0 ||
      (now.sa_handler != SIG_DFL && now.sa_handler != OnHangup) ||
      (now.sa_flags & SA_SIGINFO) != 0) {
    return;
  }
  g_hangup_parent = parent;
  g_hangup_owner = getpid();
  struct sigaction guard {};
  guard.sa_handler = OnHangup;
  // Nothing else while it runs: a SIGHUP it raises again is taken first.
  sigfillset(&guard.sa_mask);
  guard.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &guard, nullptr);
}

bool DieWithParent(pid_t parent, int slot) {
  int signal = SIGKILL;
  if (slot == kRecorded) {
    signal = SIGSTOP;
  } else if (slot >= 0 && slot < kSlots && g_table != nullptr) {
    const unsigned long long start = StartTime(0);
    if (start != 0) {
      g_table[slot].start.store(start, std::memory_order_relaxed);
      g_table[slot].pid.store(getpid(), std::memory_order_release);
      signal = SIGSTOP;
    }
  }
  if (prctl(PR_SET_PDEATHSIG, signal) != 0) return false;
  GuardAgainstOrphanedHangup(parent);
  return getppid() == parent;
}

pid_t Pid() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_owner == getpid() ? g_keeper : -1;
}

}  // namespace disttest::internal::keeper
