// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/launch/launcher_env.h"

#include <fmt/format.h>

#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "env/text.h"
#include "launch/slurm.h"
#include "rendezvous/wire.h"

namespace disttest {
namespace {

constexpr std::size_t kMaxHosts = 65536;

struct Family {
  const char* launcher;
  const char* rank;
  std::vector<const char*> world;  // The first set one counts.
  const char* local_rank;
  std::vector<const char*> local_size;
};

const std::vector<Family>& Families() {
  static const std::vector<Family> families = {
      {"torchrun",
       "RANK",
       {"WORLD_SIZE"},
       "LOCAL_RANK",
       {"LOCAL_WORLD_SIZE", "LOCAL_SIZE"}},
      {"openmpi",
       "OMPI_COMM_WORLD_RANK",
       {"OMPI_COMM_WORLD_SIZE"},
       "OMPI_COMM_WORLD_LOCAL_RANK",
       {"OMPI_COMM_WORLD_LOCAL_SIZE"}},
      {"mpich",
       "PMI_RANK",
       {"PMI_SIZE"},
       "MPI_LOCALRANKID",
       {"MPI_LOCALNRANKS"}},
      {"mvapich2",
       "MV2_COMM_WORLD_RANK",
       {"MV2_COMM_WORLD_SIZE"},
       "MV2_COMM_WORLD_LOCAL_RANK",
       {"MV2_COMM_WORLD_LOCAL_SIZE"}},
      {"slurm",
       "SLURM_PROCID",
       {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"},
       "SLURM_LOCALID",
       {"SLURM_NTASKS_PER_NODE"}},
  };
  return families;
}

bool IsSet(const char* value) { return value != nullptr && *value != '\0'; }

// 64-bit FNV-1a of `text`, from `basis`.
std::uint64_t Fnv1a(std::string_view text, std::uint64_t basis) {
  std::uint64_t h = basis;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// DISTTEST_STORE_TOKEN, else a token derived from Open MPI's per-job secret
// (random, 128 bits, in the environment of the job's processes alone): not
// the secret itself, which the store's HELLO would carry in clear text.
std::string StoreToken(const EnvLookup& get) {
  if (const char* token = get(env::kStoreToken); IsSet(token)) {
    if (std::string_view(token).size() > internal::kMaxTokenBytes) {
      throw ConfigError(fmt::format("{} is longer than {} bytes",
                                    env::kStoreToken,
                                    internal::kMaxTokenBytes));
    }
    return token;
  }
  const char* secret = get("OMPI_MCA_orte_precondition_transports");
  if (!IsSet(secret)) return "";
  const std::string text = std::string("disttest store token:") + secret;
  return fmt::format("ompi-{:016x}{:016x}", Fnv1a(text, 0xcbf29ce484222325ULL),
                     Fnv1a(text, 0x84222325cbf29ce4ULL));
}

// Splits on commas outside brackets.
std::vector<std::string_view> SplitTopLevel(std::string_view list) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') ++depth;
    if (list[i] == ']') --depth;
    if (depth < 0 || (depth > 1)) {
      throw ConfigError(
          fmt::format("Slurm nodelist '{}': unbalanced brackets", list));
    }
    if (list[i] == ',' && depth == 0) {
      parts.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) {
    throw ConfigError(
        fmt::format("Slurm nodelist '{}': unbalanced brackets", list));
  }
  parts.push_back(list.substr(start));
  return parts;
}

long ParseNumber(std::string_view digits, std::string_view list) {
  if (digits.empty() || digits.size() > 9) {
    throw ConfigError(fmt::format(
        "Slurm nodelist '{}': '{}' is not a host number", list, digits));
  }
  long n = 0;
  for (char c : digits) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) {
      throw ConfigError(fmt::format(
          "Slurm nodelist '{}': '{}' is not a host number", list, digits));
    }
    n = n * 10 + (c - '0');
  }
  return n;
}

// The names one bracket body ("007-009,12") stands for.
std::vector<std::string> ExpandRanges(std::string_view body,
                                      std::string_view list) {
  std::vector<std::string> out;
  for (std::string_view item : internal::SplitOn(body, ',')) {
    std::size_t dash = item.find('-');
    std::string_view first = item.substr(0, dash);
    std::string_view last =
        dash == std::string_view::npos ? first : item.substr(dash + 1);
    long lo = ParseNumber(first, list);
    long hi = ParseNumber(last, list);
    if (hi < lo) {
      throw ConfigError(fmt::format(
          "Slurm nodelist '{}': range {} runs backwards", list, item));
    }
    if (static_cast<std::size_t>(hi - lo) + out.size() >= kMaxHosts) {
      throw ConfigError(fmt::format(
          "Slurm nodelist '{}' names more than {} hosts", list, kMaxHosts));
    }
    for (long n = lo; n <= hi; ++n) {
      // Zero padding: the width of the range's first number.
      out.push_back(fmt::format("{:0{}}", n, first.size()));
    }
  }
  return out;
}

void ExpandName(std::string_view name, std::string_view list,
                std::vector<std::string>* out) {
  std::vector<std::string> names = {""};
  std::size_t i = 0;
  while (i < name.size()) {
    std::size_t open = name.find('[', i);
    std::string_view literal = name.substr(i, open - i);
    for (std::string& n : names) n += literal;
    if (open == std::string_view::npos) break;
    std::size_t close = name.find(']', open);
    std::vector<std::string> items =
        ExpandRanges(name.substr(open + 1, close - open - 1), list);
    std::vector<std::string> next;
    if (names.size() * items.size() + out->size() > kMaxHosts) {
      throw ConfigError(fmt::format(
          "Slurm nodelist '{}' names more than {} hosts", list, kMaxHosts));
    }
    for (const std::string& prefix : names) {
      for (const std::string& item : items) next.push_back(prefix + item);
    }
    names = std::move(next);
    i = close + 1;
  }
  for (std::string& n : names) {
    if (n.empty()) {
      throw ConfigError(
          fmt::format("Slurm nodelist '{}' has an empty host name", list));
    }
    out->push_back(std::move(n));
  }
}

int ReadInt(const EnvLookup& get, const char* name, int min, int max) {
  return ParseIntVariable(name, get(name), min, max);
}

}  // namespace

std::vector<std::string> ExpandSlurmNodelist(std::string_view list) {
  std::vector<std::string> hosts;
  for (std::string_view part : SplitTopLevel(list)) {
    ExpandName(part, list, &hosts);
  }
  return hosts;
}

int SlurmTasksOnNode(std::string_view list, int node) {
  int index = 0;
  for (std::string_view item : internal::SplitOn(list, ',')) {
    std::size_t paren = item.find("(x");
    std::string_view count = item.substr(0, paren);
    long repeat = 1;
    if (paren != std::string_view::npos) {
      if (item.back() != ')') {
        throw ConfigError(fmt::format(
            "Slurm tasks per node '{}': '{}' is malformed", list, item));
      }
      repeat =
          ParseNumber(item.substr(paren + 2, item.size() - paren - 3), list);
    }
    long tasks = ParseNumber(count, list);
    if (node < index + repeat) return static_cast<int>(tasks);
    index += static_cast<int>(repeat);
  }
  throw ConfigError(fmt::format(
      "Slurm tasks per node '{}' has no entry for node {}", list, node));
}

namespace {

// Whether the process runs in a Slurm step (srun, or an MPI program srun
// started), not only in an allocation's shell (salloc, sbatch).
bool InSlurmStep(const EnvLookup& get) {
  return IsSet(get("SLURM_STEP_ID")) || IsSet(get("SLURM_STEPID")) ||
         IsSet(get("SLURM_STEP_NUM_TASKS"));
}

// The first launcher whose rank variable is set.
const Family& FindFamily(const EnvLookup& get) {
  for (const Family& f : Families()) {
    if (!IsSet(get(f.rank))) continue;
    // A batch script's own shell has SLURM_PROCID=0 and the job's task
    // count too; only a process srun started is one of the step's tasks.
    if (std::string(f.launcher) == "slurm" && !InSlurmStep(get)) {
      continue;
    }
    return f;
  }
  throw ConfigError(
      "no launcher found in the environment: set RANK and WORLD_SIZE "
      "(torchrun), or start the program with srun (SLURM_PROCID, "
      "SLURM_NTASKS), Open MPI's mpirun (OMPI_COMM_WORLD_RANK, "
      "OMPI_COMM_WORLD_SIZE), MPICH (PMI_RANK, PMI_SIZE) or MVAPICH2 "
      "(MV2_COMM_WORLD_RANK, MV2_COMM_WORLD_SIZE)");
}

// The world size, the rank, and where the launcher says them the local
// size and the local rank.
void ReadRanks(const EnvLookup& get, const Family& found,
               const char* world_name, LauncherEnv* env) {
  env->world_size = ReadInt(get, world_name, 1, kMaxWorldSize);
  env->rank = ReadInt(get, found.rank, 0, env->world_size - 1);
  for (const char* name : found.local_size) {
    if (IsSet(get(name))) {
      env->local_size = ReadInt(get, name, 1, env->world_size);
      break;
    }
  }
  const bool slurm = env->launcher == std::string("slurm");
  // The step's own count first: SLURM_NTASKS_PER_NODE is the job's.
  if (slurm && IsSet(get("SLURM_NODEID")) &&
      IsSet(get("SLURM_STEP_TASKS_PER_NODE"))) {
    env->local_size =
        SlurmTasksOnNode(get("SLURM_STEP_TASKS_PER_NODE"),
                         ReadInt(get, "SLURM_NODEID", 0, INT_MAX));
  }
  if (slurm && !env->local_size && IsSet(get("SLURM_NODEID"))) {
    for (const char* name :
         {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      if (IsSet(get(name))) {
        env->local_size = SlurmTasksOnNode(
            get(name), ReadInt(get, "SLURM_NODEID", 0, INT_MAX));
        break;
      }
    }
  }
  // Read from a list, not a number: in range all the same (trial 11:
  // "local 0 of 0", and of 999999 in a world of 1).
  if (slurm && env->local_size &&
      (*env->local_size < 1 || *env->local_size > env->world_size)) {
    const char* list = IsSet(get("SLURM_STEP_TASKS_PER_NODE"))
                           ? "SLURM_STEP_TASKS_PER_NODE"
                           : "SLURM_TASKS_PER_NODE";
    const char* value = get(list);
    throw ConfigError(fmt::format(
        "{}='{}' gives this node {} tasks, out of range [1, {}] (the step's "
        "tasks)",
        list, value != nullptr ? value : "", *env->local_size,
        env->world_size));
  }
  if (IsSet(get(found.local_rank))) {
    env->local_rank =
        ReadInt(get, found.local_rank, 0,
                env->local_size ? *env->local_size - 1 : env->world_size - 1);
  }
}

// Whether the Slurm job's variables choose the store's host and port: in a
// step, or under an MPI launcher in an allocation (mpirun in sbatch: its
// ranks on mpirun's node are in no step). Not torchrun's ranks in an salloc
// or sbatch shell, whose SLURM_JOB_* every program there inherits.
bool SlurmChooses(const EnvLookup& get, const LauncherEnv& env) {
  return InSlurmStep(get) || env.launcher != "torchrun";
}

// Rank 0's host: MASTER_ADDR, else the Slurm step's first node, else this
// host when every rank is on it.
std::string MasterAddr(const EnvLookup& get, const LauncherEnv& env) {
  if (IsSet(get("MASTER_ADDR"))) return get("MASTER_ADDR");
  for (const char* name :
       {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (SlurmChooses(get, env) && IsSet(get(name))) {
      return ExpandSlurmNodelist(get(name)).front();
    }
  }
  if (env.world_size == 1 ||
      (env.local_size && *env.local_size == env.world_size)) {
    return "127.0.0.1";
  }
  throw ConfigError(
      "MASTER_ADDR is not set, and the ranks are not all on this node; "
      "set MASTER_ADDR to the host of rank 0");
}

int MasterPort(const EnvLookup& get, const LauncherEnv& env) {
  if (IsSet(get("DISTTEST_MASTER_PORT"))) {
    return ReadInt(get, "DISTTEST_MASTER_PORT", 1, 65535);
  }
  if (IsSet(get("MASTER_PORT"))) {
    int port = ReadInt(get, "MASTER_PORT", 1, 65535);
    // torchrun's agent serves its own store on MASTER_PORT: the next one.
    if (!IsSet(get("TORCHELASTIC_RUN_ID"))) return port;
    if (port == 65535) {
      throw ConfigError(
          "MASTER_PORT=65535 leaves no port after torchrun's own store; "
          "set DISTTEST_MASTER_PORT");
    }
    return port + 1;
  }
  if (SlurmChooses(get, env) && IsSet(get("SLURM_JOB_ID"))) {
    std::string job = get("SLURM_JOB_ID");
    if (job.size() > 4) job = job.substr(job.size() - 4);
    int port = ParseIntVariable("SLURM_JOB_ID", job.c_str(), 0, 9999);
    // Steps of one job that run at once get ports of their own.
    for (const char* step : {"SLURM_STEP_ID", "SLURM_STEPID"}) {
      if (IsSet(get(step))) {
        port = (port + ReadInt(get, step, 0, INT_MAX) % 10000) % 10000;
        break;
      }
    }
    return 15000 + port;
  }
  if (const char* secret = get("OMPI_MCA_orte_precondition_transports");
      IsSet(secret)) {
    // Two mpirun jobs at once must not both take 29500: a port from the
    // job's secret, the same on every rank, below the kernel's ephemeral
    // range (32768 and up), where no bind(0) or connect() takes it.
    return 20000 +
           static_cast<int>(Fnv1a(std::string("disttest port:") + secret,
                                  0xcbf29ce484222325ULL) %
                            10000);
  }
  return 29500;
}

}  // namespace

LauncherEnv DetectLauncherEnv(const EnvLookup& lookup) {
  EnvLookup get = internal::OrProcessEnvironment(lookup);
  const Family& found = FindFamily(get);
  LauncherEnv env;
  env.launcher = found.launcher;
  const char* world_name = nullptr;
  for (const char* name : found.world) {
    if (IsSet(get(name))) {
      world_name = name;
      break;
    }
  }
  if (world_name == nullptr) {
    throw ConfigError(fmt::format("launcher {}: {} is set, but {} is not",
                                  env.launcher, found.rank,
                                  found.world.front()));
  }
  try {
    ReadRanks(get, found, world_name, &env);
    env.master_addr = MasterAddr(get, env);
    env.master_port = MasterPort(get, env);
    env.store_token = StoreToken(get);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("launcher {}: {}", env.launcher, e.what()));
  }
  return env;
}

}  // namespace disttest
