// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace disttest::testing {

ChildRun RunChild(const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env,
                  std::chrono::seconds timeout, const OutputWatch& watch) {
  ChildRun run;
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  // pipe2 + fork must not interleave with another thread's fork, or one
  // child would inherit the other's pipe ends and keep them open.
  static std::mutex spawn_mu;
  std::unique_lock<std::mutex> spawn_lock(spawn_mu);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return run;
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The environment is built before fork: other threads may be running.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& [k, v] : env) {
      const std::string name = k.rfind('!', 0) == 0 ? k.substr(1) : k;
      replaced |= entry.rfind(name + "=", 0) == 0;
    }
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env) {
    if (k.rfind('!', 0) != 0) env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  run.pid = pid;
  close(out[1]);
  close(err[1]);
  spawn_lock.unlock();
  auto deadline = start + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, n);
        if (watch) watch(pid, run.out, run.err);
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

std::vector<std::string> ShmLeftovers(pid_t pid) {
  std::vector<std::string> found;
  std::string prefix = "disttest-" + std::to_string(pid) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  return found;
}

std::vector<std::string> KillOrphans() {
  std::vector<std::string> found;
  std::string self = std::to_string(getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string status = ReadFile("/proc/" + pid + "/status");
    if (status.find("\nPPid:\t" + self + "\n") == std::string::npos) continue;
    // A process the harness killed with its group may still be dying: give
    // it a moment. One still alive after that was left behind.
    pid_t child = std::stoi(pid);
    std::string cmdline = ReadFile("/proc/" + pid + "/cmdline");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool dead = false;
    while (!dead && std::chrono::steady_clock::now() < deadline) {
      dead = waitpid(child, nullptr, WNOHANG) == child;
      if (!dead) poll(nullptr, 0, 5);
    }
    if (dead) continue;
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    found.push_back(pid + ": " + cmdline);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return found;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t Occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

std::string TestCaseXml(const std::string& xml, const std::string& name) {
  std::size_t start = xml.find("<testcase name=\"" + name + "\"");
  if (start == std::string::npos) return "";
  std::size_t open_end = xml.find('>', start);
  if (open_end == std::string::npos) return "";
  if (xml[open_end - 1] == '/') return xml.substr(start, open_end + 1 - start);
  std::size_t end = xml.find("</testcase>", open_end);
  if (end == std::string::npos) return "";
  return xml.substr(start, end + 11 - start);
}

std::string TempPath(const std::string& suffix) {
  static int n = 0;
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/disttest-selftest-" +
         std::to_string(getpid()) + "-" + std::to_string(++n) + suffix;
}

int LineIn(const std::string& path, const std::string& marker) {
  std::istringstream in(ReadFile(path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  ADD_FAILURE() << "marker " << marker << " not in " << path;
  return -1;
}

namespace {

// "3" or "0-2": adds the ranks to `out`; false if it is neither.
bool AddRanks(const std::string& item, std::set<int>* out) {
  const std::size_t dash = item.find('-');
  try {
    std::size_t used = 0;
    const int from = std::stoi(item.substr(0, dash), &used);
    if (used != item.substr(0, dash).size()) return false;
    const int to =
        dash == std::string::npos ? from : std::stoi(item.substr(dash + 1));
    if (from < 0 || to < from || to > 100000) return false;
    for (int r = from; r <= to; ++r) out->insert(r);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::set<int> RanksNaming(const std::string& text, const std::string& what) {
  std::set<int> ranks;
  // A label starts a line (of the output, or of an XML message: "&#x0A;").
  std::string lines = text;
  for (std::size_t at = lines.find("&#x0A;"); at != std::string::npos;
       at = lines.find("&#x0A;", at)) {
    lines.replace(at, 6, "\n");
  }
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind('[', 0) != 0 || line.find(what) == std::string::npos) {
      continue;
    }
    const std::size_t close = line.find(']');
    if (close == std::string::npos) continue;
    // A verdict's label, not the relay's "[rank 3] " before a rank's output.
    const std::string label = line.substr(1, close - 1);
    const std::size_t slash = label.find('/');
    const std::size_t of = label.find(" of ");
    if (label.rfind("rank ", 0) == 0 && slash != std::string::npos) {
      AddRanks(label.substr(5, slash - 5), &ranks);  // "rank 2/4"
    } else if (label.rfind("ranks ", 0) == 0 && of != std::string::npos) {
      std::istringstream list(label.substr(6, of - 6));  // "ranks 0-1, 3 of 4"
      for (std::string item; std::getline(list, item, ',');) {
        const std::size_t start = item.find_first_not_of(' ');
        if (start != std::string::npos) AddRanks(item.substr(start), &ranks);
      }
    }
  }
  return ranks;
}

}  // namespace disttest::testing
