// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// netem_switch: the cluster's Ethernet hub in user space, for kernels without
// tc's netem (sch_netem): every frame a node sends reaches every other node
// after a delay, or is lost with a probability, both set at run time.
//
//   netem_switch <nodes> <tap prefix> <control fifo> <owner pid>
//
// Makes the TAP devices <prefix>1..<nodes> in its own network namespace and
// prints "ready" once they exist; cluster.sh then moves each into its node's
// namespace (the descriptors stay here and keep working). Lines on the
// control fifo: "delay <ms>", "loss <percent>", "quit". It also ends on
// SIGTERM, SIGINT or when the owner (the test that made the cluster) has
// ended. It touches no interface but its own TAP devices.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

int OpenTap(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    std::perror("netem_switch: cannot open /dev/net/tun");
    std::exit(1);
  }
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    std::fprintf(stderr, "netem_switch: cannot make TAP device %s: %s\n",
                 name.c_str(), std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

struct Frame {
  Clock::time_point due;
  std::vector<char> bytes;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: netem_switch <nodes> <tap prefix> <control fifo> "
                 "<owner pid>\n");
    return 2;
  }
  const int nodes = std::atoi(argv[1]);
  if (nodes < 2 || nodes > 16) {
    std::fprintf(stderr, "netem_switch: nodes must be 2 to 16, not '%s'\n",
                 argv[1]);
    return 2;
  }
  // Readable once the owner has ended (a killed test run): then so does
  // the hub, and cluster.sh's next `up` removes the rest.
  const int owner = static_cast<int>(
      syscall(SYS_pidfd_open, static_cast<pid_t>(std::atoi(argv[4])), 0));
  if (owner < 0) {
    std::fprintf(stderr, "netem_switch: no owner process %s: %s\n", argv[4],
                 std::strerror(errno));
    return 1;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::vector<int> taps;
  for (int i = 1; i <= nodes; ++i) {
    taps.push_back(OpenTap(argv[2] + std::to_string(i)));
  }
  // Read-write, so that the fifo never reports end of file between
  // writers.
  const int control = open(argv[3], O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (control < 0) {
    std::fprintf(stderr, "netem_switch: cannot open %s: %s\n", argv[3],
                 std::strerror(errno));
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);

  std::chrono::microseconds delay{0};
  double loss = 0;  // 0 to 1
  std::mt19937_64 random(12345);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<std::deque<Frame>> queues(taps.size());
  std::string commands;
  std::vector<char> buffer(65536);
  while (!stop) {
    // Wake for the next frame due, or every 100 ms.
    Clock::time_point next = Clock::now() + std::chrono::milliseconds(100);
    for (const auto& q : queues) {
      if (!q.empty() && q.front().due < next) next = q.front().due;
    }
    std::vector<pollfd> fds;
    for (int fd : taps) fds.push_back({fd, POLLIN, 0});
    fds.push_back({owner, POLLIN, 0});
    fds.push_back({control, POLLIN, 0});
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next - Clock::now());
    if (poll(fds.data(), fds.size(),
             static_cast<int>(std::max<long long>(0, wait.count()))) < 0 &&
        errno != EINTR) {
      std::perror("netem_switch: poll");
      return 1;
    }
    if (fds[taps.size()].revents & POLLIN) break;  // The owner ended.
    if (fds.back().revents & POLLIN) {
      char text[256];
      const ssize_t n = read(control, text, sizeof text);
      if (n > 0) commands.append(text, static_cast<std::size_t>(n));
      for (std::size_t end; (end = commands.find('\n')) != std::string::npos;) {
        const std::string line = commands.substr(0, end);
        commands.erase(0, end + 1);
        double value = 0;
        if (line == "quit") {
          stop = 1;
        } else if (std::sscanf(line.c_str(), "delay %lf", &value) == 1) {
          delay =
              std::chrono::microseconds(static_cast<long long>(value * 1000));
        } else if (std::sscanf(line.c_str(), "loss %lf", &value) == 1) {
          loss = value / 100;
        } else {
          std::fprintf(stderr, "netem_switch: unknown command '%s'\n",
                       line.c_str());
        }
      }
    }
    const Clock::time_point now = Clock::now();
    for (std::size_t from = 0; from < taps.size(); ++from) {
      if (!(fds[from].revents & POLLIN)) continue;
      for (;;) {
        const ssize_t n = read(taps[from], buffer.data(), buffer.size());
        if (n <= 0) break;
        for (std::size_t to = 0; to < taps.size(); ++to) {
          if (to == from || uniform(random) < loss) continue;
          queues[to].push_back(
              {now + delay,
               std::vector<char>(buffer.begin(), buffer.begin() + n)});
        }
      }
    }
    for (std::size_t to = 0; to < taps.size(); ++to) {
      auto& q = queues[to];
      while (!q.empty() && q.front().due <= Clock::now()) {
        // A node whose link is down takes nothing: the frame is lost.
        (void)!write(taps[to], q.front().bytes.data(), q.front().bytes.size());
        q.pop_front();
      }
    }
  }
  return 0;
}
