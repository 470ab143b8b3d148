// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/stack_dump.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/stacktrace.hpp>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/child_process.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;

bool IsEuStack(const std::string& tool) { return tool.ends_with("eu-stack"); }

// At most this long for the quick unwinding of every process (a
// millisecond each when it works).
constexpr std::chrono::milliseconds kQuickPass(2000);

// The whole stacks: functions, inlined frames and source lines (eu-stack
// also prints each frame's module and offset, for Signature()).
std::vector<std::string> ToolArgs(const std::string& tool, pid_t pid) {
  std::string p = std::to_string(pid);
  if (IsEuStack(tool)) return {tool, "-s", "-i", "-b", "-p", p};
  return {tool,  "-p",
          p,     "-batch",
          "-nx", "-q",
          "-ex", "set pagination off",
          "-ex", "thread apply all bt"};
}

// Only where each frame is, without symbols: fast (no debug information
// is read), for Signature().
std::vector<std::string> QuickArgs(const std::string& tool, pid_t pid) {
  return {tool, "-q", "-b", "-p", std::to_string(pid)};
}

// eu-stack -b's line under a frame: "    [<build-id>]@<load>+<offset>".
bool IsModuleLine(const std::string& line) {
  return line.starts_with("    [") && line.find("]@0x") != std::string::npos;
}

// Keeps the frames (and eu-stack's source lines under them) and drops the
// tools' chatter.
std::string Tidy(const std::string& raw) {
  std::stringstream in(raw);
  std::string line, out;
  while (std::getline(in, line)) {
    bool keep = line.starts_with("Thread ") || line.starts_with("#") ||
                line.starts_with("TID ") ||
                (line.starts_with("    ") && !IsModuleLine(line)) ||
                line.find("ptrace") != std::string::npos ||
                line.find("Operation not permitted") != std::string::npos;
    if (keep) out += line + "\n";
  }
  return out.empty() ? raw : out;
}

}  // namespace

std::string StackSignature(const std::string& raw,
                           std::vector<std::string>* threads) {
  std::stringstream in(raw);
  std::string line, out, last;
  bool frames = false;
  std::size_t numbered = 0, placed = 0;  // Frames, and those with a module.
  while (std::getline(in, line)) {
    if (line.starts_with("#")) ++numbered;
    if (line.starts_with("TID ")) {
      if (threads != nullptr) threads->push_back(line);
      out += "T\n";
      last.clear();
      continue;
    }
    if (!IsModuleLine(line)) continue;
    ++placed;
    // The module and the offset in it, not the load address (ASLR).
    const std::size_t id_end = line.find("]@0x");
    const std::size_t plus = line.find('+', id_end);
    if (plus == std::string::npos) continue;
    std::string at = line.substr(4, id_end - 3) + line.substr(plus);
    // An inlined frame has its caller's offset: once, as without -i.
    if (at == last) continue;
    last = at;
    out += at + "\n";
    frames = true;
  }
  // A frame of no module, or of one without a build-id, has no place to
  // compare: two processes there may be in different places.
  return frames && placed == numbered ? out : "";
}

std::string StackOfThread(const std::string& stacks, pid_t tid) {
  const std::string eu = fmt::format("TID {}:", tid);
  const std::string gdb = fmt::format("(LWP {})", tid);
  std::stringstream in(stacks);
  std::string line, out;
  bool mine = false;
  while (std::getline(in, line)) {
    if (line.starts_with("TID ") || line.starts_with("Thread ")) {
      mine = line.starts_with(eu) || line.find(gdb) != std::string::npos;
    }
    if (mine) out += line + "\n";
  }
  return out.empty() ? stacks : out;
}

namespace {

// `text` (a Tidy()ed stack) with its "TID n:" lines, in order, replaced by
// `threads`.
std::string WithThreads(const std::string& text,
                        const std::vector<std::string>& threads) {
  std::stringstream in(text);
  std::string line, out;
  std::size_t t = 0;
  while (std::getline(in, line)) {
    if (line.starts_with("TID ") && t < threads.size()) line = threads[t++];
    out += line + "\n";
  }
  return out;
}

struct ToolRun {
  bool started = false;
  bool late = false;
  std::string out;
};

// Runs one tool per argument list, all at once, until `until`.
std::vector<ToolRun> RunTools(const std::vector<std::vector<std::string>>& args,
                              const std::vector<std::string>& env,
                              Clock::time_point until) {
  std::vector<ChildProcess> tools;
  for (const auto& a : args) tools.push_back(ChildProcess::Start(a, env));
  std::vector<ToolRun> runs(tools.size());
  for (std::size_t i = 0; i < tools.size(); ++i) {
    ChildProcess& t = tools[i];
    if (!t.started()) continue;
    runs[i].started = true;
    runs[i].late = !t.Wait(until);
    if (runs[i].late) t.Kill();
    runs[i].out = t.Output();
  }
  return runs;
}

void PrintOwnStack(int) {
  // Best effort, in a process that is hung anyway: formatting a stack is not
  // async-signal-safe, but this is the fallback for machines without gdb.
  std::string s = boost::stacktrace::to_string(boost::stacktrace::stacktrace());
  (void)!write(STDERR_FILENO,
               "disttest: stack of the thread that got SIGUSR2:\n", 48);
  (void)!write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace

StackTool FindStackTool() {
  // eu-stack takes a process's stacks in tens of milliseconds; gdb, which
  // loads every symbol table first, takes seconds.
  std::string tool = FindProgram("eu-stack");
  if (tool.empty()) tool = FindProgram("gdb");
  return {tool, EnvironmentNow()};
}

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline) {
  return DumpStacks(pids, deadline, FindStackTool());
}

namespace {

// eu-stack's quick pass (no symbols) over `pids`: a signature of where each
// process is ("" where it could not be read in time), and its threads.
std::vector<std::string> QuickSignatures(
    const std::vector<pid_t>& pids, const StackTool& tool,
    Clock::time_point until, std::chrono::milliseconds deadline,
    std::vector<std::vector<std::string>>* threads) {
  std::vector<std::string> signatures(pids.size());
  std::vector<std::vector<std::string>> quick;
  for (pid_t pid : pids) quick.push_back(QuickArgs(tool.path, pid));
  // Its own part of the deadline: a process the quick pass cannot read
  // (in uninterruptible sleep) must not leave none for the whole stacks.
  const auto quick_until =
      std::min(until, Clock::now() + std::min<std::chrono::milliseconds>(
                                         deadline / 4, kQuickPass));
  std::vector<ToolRun> runs = RunTools(quick, tool.env, quick_until);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (runs[i].started && !runs[i].late) {
      signatures[i] = StackSignature(runs[i].out, &(*threads)[i]);
    }
  }
  return signatures;
}

// The first index of each signature, and each index without one; for every
// index, `first_of` the first of its signature (SIZE_MAX: itself).
std::vector<std::size_t> FirstOfEach(const std::vector<std::string>& signatures,
                                     std::vector<std::size_t>* first_of) {
  std::vector<std::size_t> whole;
  first_of->assign(signatures.size(), SIZE_MAX);
  for (std::size_t i = 0; i < signatures.size(); ++i) {
    if (!signatures[i].empty()) {
      for (std::size_t j : whole) {
        if (signatures[j] == signatures[i]) {
          (*first_of)[i] = j;
          break;
        }
      }
    }
    if ((*first_of)[i] == SIZE_MAX) whole.push_back(i);
  }
  return whole;
}

}  // namespace

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline,
                                    const StackTool& tool, StackStats* stats) {
  std::vector<std::string> stacks(pids.size());
  if (tool.path.empty()) {
    for (pid_t pid : pids) kill(pid, SIGUSR2);
    poll(nullptr, 0, 500);  // Time for the ranks to print.
    for (std::string& s : stacks) {
      s = "no gdb or eu-stack installed: the rank printed its own stack (one "
          "thread) to its stderr above";
    }
    return stacks;
  }
  const auto until = Clock::now() + deadline;
  auto text = [&](const ToolRun& run) {
    if (!run.started) return fmt::format("could not start {}", tool.path);
    std::string t = Tidy(run.out);
    if (run.late) {
      t += fmt::format("({} did not finish within {} ms)\n", tool.path,
                       deadline.count());
    }
    return t;
  };
  // Processes in the same places (a quick unwinding of each, without
  // symbols) share one whole stack: ranks that wait in one collective cost
  // one reading of the debug information, not one each. gdb has no quick
  // mode: one whole run per process.
  std::vector<std::vector<std::string>> threads(pids.size());
  const std::vector<std::string> signatures =
      IsEuStack(tool.path)
          ? QuickSignatures(pids, tool, until, deadline, &threads)
          : std::vector<std::string>(pids.size());
  // The processes whose whole stack is taken: the first of each signature,
  // and each one without a signature.
  std::vector<std::size_t> first_of;
  const std::vector<std::size_t> whole = FirstOfEach(signatures, &first_of);
  auto take = [&](const std::vector<std::size_t>& which) {
    std::vector<std::vector<std::string>> args;
    for (std::size_t i : which) args.push_back(ToolArgs(tool.path, pids[i]));
    return RunTools(args, tool.env, until);
  };
  std::vector<ToolRun> runs = take(whole);
  std::vector<const ToolRun*> run_of(pids.size(), nullptr);
  std::vector<bool> moved(pids.size(), false);
  for (std::size_t k = 0; k < whole.size(); ++k) {
    const std::size_t i = whole[k];
    stacks[i] = text(runs[k]);
    run_of[i] = &runs[k];
    // It was somewhere else by now (a rank that runs): the others of its
    // signature get their own.
    moved[i] = !signatures[i].empty() &&
               StackSignature(runs[k].out, nullptr) != signatures[i];
  }
  std::vector<std::size_t> again;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const std::size_t j = first_of[i];
    if (j == SIZE_MAX) continue;
    if (moved[j] || !run_of[j]->started || run_of[j]->late) {
      again.push_back(i);
    } else {
      stacks[i] = WithThreads(stacks[j], threads[i]);
    }
  }
  if (!again.empty()) {
    std::vector<ToolRun> more = take(again);
    for (std::size_t k = 0; k < again.size(); ++k) {
      stacks[again[k]] = text(more[k]);
    }
  }
  if (stats != nullptr) stats->whole = whole.size() + again.size();
  return stacks;
}

void InstallStackSignalHandler() {
  // Yama ptrace_scope=1 lets only ancestors attach; the parent's stack tool
  // is the parent's child, not this rank's ancestor.
  prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
  InstallStackFallback();
}

void InstallStackFallback() {
  struct sigaction old {};
  if (sigaction(SIGUSR2, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) {
    return;  // The program's own use of SIGUSR2 stays.
  }
  struct sigaction sa {};
  sa.sa_handler = PrintOwnStack;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
}

}  // namespace disttest::internal
