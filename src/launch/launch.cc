// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/launch/launch.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "disttest/rendezvous/tcp_store.h"
#include "launch/launch_internal.h"
#include "rendezvous/store_server_thread.h"

namespace disttest {
namespace internal {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string Hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

std::string BindHostFor(const std::string& master_addr) {
  if (IsLoopback(master_addr)) return "127.0.0.1";
  // The local address of the route to the store's host: the hostname may
  // resolve to 127.0.1.1 (Debian's /etc/hosts), which no other node can
  // reach. A UDP connect() sends nothing; it only picks the route.
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  std::string local;
  if (getaddrinfo(master_addr.c_str(), "9", &hints, &list) == 0) {
    for (addrinfo* ai = list; ai != nullptr && local.empty();
         ai = ai->ai_next) {
      int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      char text[INET6_ADDRSTRLEN] = {};
      if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
          getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
          getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, text,
                      sizeof text, nullptr, 0, NI_NUMERICHOST) == 0) {
        local = text;
      }
      close(fd);
    }
    freeaddrinfo(list);
  }
  return local.empty() ? Hostname() : local;
}

}  // namespace internal

namespace {

void CheckArguments(int rank, int world_size, std::optional<int> local_rank,
                    const std::string& host, int port) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    throw ConfigError(
        fmt::format("launch: world_size must be in [1, {}], got {}",
                    kMaxWorldSize, world_size));
  }
  if (rank < 0 || rank >= world_size) {
    throw ConfigError(fmt::format("launch: rank must be in [0, {}], got {}",
                                  world_size - 1, rank));
  }
  if (local_rank && (*local_rank < 0 || *local_rank >= world_size)) {
    throw ConfigError(
        fmt::format("launch: local_rank must be in [0, {}], got {}",
                    world_size - 1, *local_rank));
  }
  if (host.empty()) throw ConfigError("launch: host is empty");
  if (port < 1 || port > 65535) {
    throw ConfigError(
        fmt::format("launch: port must be in [1, 65535], got {}", port));
  }
}

}  // namespace

struct Context::State {
  // Declaration order is teardown order, reversed: the groups go first,
  // the store (and rank 0's store server) last.
  std::shared_ptr<void> keep_alive;
  Store* store = nullptr;
  std::vector<std::unique_ptr<PrefixStore>> prefixes;
  std::unique_ptr<Communicator> own_global;
  Communicator* global = nullptr;
  std::map<ParallelMode, std::unique_ptr<Communicator>> groups;

  Config config;
  std::optional<Layout> layout;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  int device = -1;
  std::uint64_t seed = 0;
};

Context::Context(std::unique_ptr<State> state) : state_(std::move(state)) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

int Context::rank() const { return state_->rank; }
int Context::world_size() const { return state_->world_size; }
int Context::local_rank() const { return state_->local_rank; }
int Context::local_size() const { return state_->local_size; }
int Context::device() const { return state_->device; }
const Config& Context::config() const { return state_->config; }
const Layout& Context::layout() const { return *state_->layout; }
Store& Context::store() { return *state_->store; }
std::uint64_t Context::seed() const { return state_->seed; }

Communicator& Context::group(ParallelMode mode) {
  if (mode == ParallelMode::kGlobal) return *state_->global;
  auto it = state_->groups.find(mode);
  if (it == state_->groups.end()) {
    throw ConfigError(fmt::format(
        "Context::group: ParallelMode {} is none of kGlobal, kData, kTensor, "
        "kPipeline and kZero1",
        static_cast<int>(mode)));
  }
  return *it->second;
}
int Context::rank_in(ParallelMode mode) const {
  return state_->layout->rank_in(mode, state_->rank);
}
int Context::size(ParallelMode mode) const {
  return state_->layout->size(mode);
}
std::uint64_t Context::seed(ParallelMode mode) const {
  return ModeSeed(mode, state_->seed, *state_->layout, state_->rank);
}

namespace internal {

int SelectDevice(std::optional<int> local_rank, int rank, int device_count) {
  if (device_count <= 0) return -1;
  if (local_rank) return *local_rank % device_count;
  return rank % device_count;
}

int LaunchedDevice(Backend backend, std::optional<int> local_rank, int rank) {
  if (backend == Backend::kGloo || backend == Backend::kMpi) return -1;
  return SelectDevice(local_rank, rank, CudaDeviceCount());
}

namespace {

// Every rank's hostname, through the global communicator.
std::vector<std::string> AllHostnames(Communicator& global) {
  constexpr std::size_t kWidth = 256;
  std::string mine = internal::Hostname();
  std::vector<std::uint8_t> in(kWidth, 0);
  std::memcpy(in.data(), mine.data(), std::min(mine.size(), kWidth - 1));
  std::vector<std::uint8_t> all(kWidth *
                                static_cast<std::size_t>(global.size()));
  global.allgather(in.data(), all.data(), kWidth);
  std::vector<std::string> names;
  for (int r = 0; r < global.size(); ++r) {
    const char* at = reinterpret_cast<const char*>(all.data()) + r * kWidth;
    names.emplace_back(at, strnlen(at, kWidth));
  }
  return names;
}

// Throws ConfigError on every rank when any was given another seed or other
// parallel sizes than rank 0 (each rank reads its own config and seed: a
// file that differs between nodes made groups that never met, "rank 1 of 2
// never came", or silently other seeds).
void CheckEveryRankAgrees(Communicator& global, const Layout& layout,
                          std::uint64_t seed) {
  constexpr std::size_t kWords = 5;
  const std::uint64_t mine[kWords] = {
      seed, static_cast<std::uint64_t>(layout.size(ParallelMode::kData)),
      static_cast<std::uint64_t>(layout.size(ParallelMode::kTensor)),
      static_cast<std::uint64_t>(layout.size(ParallelMode::kPipeline)),
      static_cast<std::uint64_t>(layout.size(ParallelMode::kZero1))};
  std::vector<std::uint64_t> all(kWords *
                                 static_cast<std::size_t>(global.size()));
  global.allgather(mine, all.data(), kWords);
  auto text = [&](int r) {
    const std::uint64_t* w = all.data() + kWords * static_cast<std::size_t>(r);
    return fmt::format("seed {}, data {}, tensor {}, pipeline {}, zero1 {}",
                       w[0], w[1], w[2], w[3], w[4]);
  };
  for (int r = 1; r < global.size(); ++r) {
    if (!std::equal(all.begin(), all.begin() + kWords,
                    all.begin() + kWords * static_cast<std::size_t>(r))) {
      throw ConfigError(fmt::format(
          "launch(): rank {} was given another seed or config than rank 0: "
          "{} (rank 0: {}); every rank must pass the same seed and the same "
          "parallel sizes",
          r, text(r), text(0)));
    }
  }
}

}  // namespace

// What builds a Context (its constructor is private).
struct ContextAccess {
  using State = Context::State;
  static Context Make(std::unique_ptr<State> state) {
    return Context(std::move(state));
  }
};

Context LaunchOnStore(const LaunchRequest& request, Store& store,
                      Communicator* global) {
  auto state = std::make_unique<ContextAccess::State>();
  state->config = request.config;
  state->layout.emplace(request.world_size, request.config.parallel);
  state->rank = request.rank;
  state->world_size = request.world_size;
  state->seed = request.seed;
  state->store = &store;
  state->keep_alive = request.keep_alive;

  GlooOptions gloo;
  gloo.hostname = request.bind_host;
  gloo.timeout = request.timeout;
  auto prefixed = [&](ParallelMode mode, int index) -> Store& {
    state->prefixes.push_back(std::make_unique<PrefixStore>(
        fmt::format("launch/{}/{}", Name(mode), index), store));
    return *state->prefixes.back();
  };
  // An NCCL rank's device: the given global communicator's, else the one
  // SelectDevice picks among the devices this process sees.
  const int device =
      global != nullptr
          ? DeviceOf(*global)
          : LaunchedDevice(request.backend, request.local_rank, request.rank);
  if (global == nullptr) {
    gloo.name = "world";
    state->own_global = CreateCommunicator(
        request.backend, prefixed(ParallelMode::kGlobal, 0), request.rank,
        request.world_size, gloo, std::max(device, 0));
    global = state->own_global.get();
  }
  state->global = global;
  CheckEveryRankAgrees(*global, *state->layout, request.seed);
  // The groups follow the global communicator's backend (kAuto resolved).
  const std::string global_backend = global->backend_name();
  const Backend groups_backend = global_backend == "nccl"  ? Backend::kNccl
                                 : global_backend == "mpi" ? Backend::kMpi
                                                           : Backend::kGloo;

  const Layout& layout = *state->layout;
  for (ParallelMode mode : kAllParallelModes) {
    if (mode == ParallelMode::kGlobal) continue;
    const int index = layout.group_index(mode, request.rank);
    gloo.name = fmt::format("{} group {}", Name(mode), index);
    state->groups[mode] =
        CreateCommunicator(groups_backend, prefixed(mode, index),
                           layout.rank_in(mode, request.rank),
                           layout.size(mode), gloo, std::max(device, 0));
  }

  const std::vector<std::string> hosts = AllHostnames(*global);
  const std::string& mine = hosts[static_cast<std::size_t>(request.rank)];
  int on_node = 0, before_me = 0;
  for (int r = 0; r < request.world_size; ++r) {
    if (hosts[static_cast<std::size_t>(r)] != mine) continue;
    ++on_node;
    if (r < request.rank) ++before_me;
  }
  state->local_size = request.local_size.value_or(on_node);
  state->local_rank = request.local_rank.value_or(before_me);
  // A Gloo or MPI rank has no device.
  state->device = global_backend == "nccl" ? device : -1;
  std::srand(static_cast<unsigned>(request.seed));
  global->barrier();
  if (request.log && request.rank == 0) {
    fmt::print(
        "[disttest] distributed environment is initialised: world {} ({}), "
        "backend {}, {} process{} on this node\n",
        request.world_size, layout.str(), global->backend_name(), on_node,
        on_node == 1 ? "" : "es");
    std::fflush(stdout);
  }
  return ContextAccess::Make(std::move(state));
}

}  // namespace internal

namespace {

// What launch() keeps beside the groups: rank 0's server outlives the
// client, which outlives every communicator (State destroys it last).
struct Rendezvous {
  std::unique_ptr<internal::StoreServerThread> server;
  std::unique_ptr<TcpStore> client;
};

Context LaunchWithStore(internal::LaunchRequest request,
                        const std::string& host, int port) {
  CheckArguments(request.rank, request.world_size, request.local_rank, host,
                 port);
  Layout check(request.world_size, request.config.parallel);  // No I/O yet.
  (void)check;
  request.bind_host = internal::BindHostFor(host);
  if (auto timeout = SecondsVariable(env::kTimeout)) request.timeout = *timeout;
  auto rendezvous = std::make_shared<Rendezvous>();
  if (request.rank == 0) {
    try {
      rendezvous->server = std::make_unique<internal::StoreServerThread>(
          host, port, request.store_token);
    } catch (const std::exception& e) {
      throw StoreError(fmt::format(
          "launch: rank 0 cannot host the store on {}:{} (another job on "
          "the port? choose a MASTER_PORT): {}",
          host, port, e.what()));
    }
  }
  rendezvous->client = std::make_unique<TcpStore>(host, port, request.timeout,
                                                  request.store_token);
  // Each process counts itself in as its rank on this launch's store: a
  // second with the same rank (RANK given twice, or a rank of another job
  // on the port) ends here saying so, where Gloo would fail to connect or
  // wait out its timeout several times over (trial 11).
  // The same thread of the same process again (a launch() retried while
  // the store lives) keeps its claim; another thread is another rank's
  // (ranks as threads of one program).
  TcpStore& client = *rendezvous->client;
  const std::string me =
      fmt::format("{}@{}/{}", getpid(), internal::Hostname(), gettid());
  const std::string claimer = fmt::format("launch/claimer/{}", request.rank);
  if (client.add(fmt::format("launch/claims/{}", request.rank), 1) == 1) {
    client.set(claimer, std::string_view(me));
  } else if (!client.check({claimer}) || client.get_string(claimer) != me) {
    throw ConfigError(fmt::format(
        "launch(): two processes came to the store at {}:{} as rank {} of "
        "{}: this one (process {} on {}) came second and ends here: give "
        "each process its own rank (RANK), each job its own port, and call "
        "launch() again only once every rank has left the last one",
        host, port, request.rank, request.world_size, getpid(),
        internal::Hostname()));
  }
  request.keep_alive = rendezvous;
  return internal::LaunchOnStore(request, *rendezvous->client, nullptr);
}

}  // namespace

Context launch(const Config& config, int rank, int world_size,
               const std::string& host, int port, Backend backend,
               std::optional<int> local_rank, std::uint64_t seed) {
  internal::LaunchRequest request;
  request.config = config;
  request.rank = rank;
  request.world_size = world_size;
  request.local_rank = local_rank;
  request.backend = backend;
  request.seed = seed;
  return LaunchWithStore(std::move(request), host, port);
}

Context launch_from_env(const Config& config, Backend backend,
                        std::uint64_t seed) {
  LauncherEnv env = DetectLauncherEnv();
  internal::LaunchRequest request;
  request.config = config;
  request.rank = env.rank;
  request.world_size = env.world_size;
  request.local_rank = env.local_rank;
  request.local_size = env.local_size;
  request.backend = backend;
  request.seed = seed;
  request.store_token = env.store_token;
  return LaunchWithStore(std::move(request), env.master_addr, env.master_port);
}

}  // namespace disttest
