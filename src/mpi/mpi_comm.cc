// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest::mpi_comm() (disttest/mpi.h): MPI started and ended with the
// launched run, and a communicator for each test of exactly its ranks;
// Backend::kMpi's factory handed to CreateCommunicator. In every program
// that links disttest::mpi (its link flags take this file's object).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm/mpi_backend.h"
#include "disttest/current_rank.h"
#include "disttest/error.h"
#include "disttest/mpi.h"
#include "glue/launched.h"
#include "mpi/mpi_communicator.h"
#include "mpi/mpi_state.h"

namespace disttest {
namespace {

struct MpiState {
  bool started_here = false;  // MPI_Init_thread was disttest's: it ends it.
  // Why no test of this run has a communicator: what follows the subject
  // ("disttest::mpi_comm()", "backend mpi") in the error.
  std::string unusable;
  std::string test;  // The test (and world size) of `comm`.
  MPI_Comm comm = MPI_COMM_NULL;
};

MpiState& State() {
  static MpiState state;
  return state;
}

}  // namespace

std::string internal::MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return fmt::format("MPI error {}", code);
  }
  return std::string(text, static_cast<std::size_t>(length));
}

namespace {

std::string MpiError(int code) { return internal::MpiErrorText(code); }

// Whether an MPI launcher started this process (MPI_Init finds its peers
// by these); another launcher's ranks would each be an MPI world of one.
bool StartedByAnMpiLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                           "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

// At the start of the run, in every rank (MPI_Init is collective over the
// whole MPI job: the ranks beyond a smaller test's world size too).
void StartMpi() {
  MpiState& s = State();
  const LauncherEnv* env = internal::LaunchedEnvOrNull();
  if (env == nullptr) {
    s.unusable =
        " needs ranks that an MPI launcher started: run "
        "the test binary under `mpirun -np N` (or `srun --mpi=pmix`); the "
        "ranks of a plain run are disttest's own processes, without MPI";
    return;
  }
  if (!StartedByAnMpiLauncher()) {
    s.unusable = fmt::format(
        ": this run's ranks were started by {}, which "
        "starts no MPI job: run it under `mpirun -np {}` (or `srun "
        "--mpi=pmix`)",
        env->launcher, env->world_size);
    return;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    const int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      s.unusable = fmt::format(": MPI_Init_thread: {}", MpiError(rc));
      return;
    }
    s.started_here = true;
  } else {
    MPI_Query_thread(&provided);  // As the program's own main() started it.
  }
  if (provided < MPI_THREAD_FUNNELED) {
    s.unusable = fmt::format(
        ": MPI runs without thread support (level {}; "
        "started with MPI_Init, or an MPI built without threads); disttest's "
        "ranks run a side thread and need MPI_THREAD_FUNNELED: start MPI "
        "with MPI_Init_thread, or let disttest start it",
        provided);
    return;
  }
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != env->rank || size != env->world_size) {
    s.unusable = fmt::format(
        ": MPI's world is rank {} of {}, but {} started "
        "this process as rank {} of {}: MPI and the launcher disagree on the "
        "ranks (srun without --mpi=pmix starts each rank as an MPI world of "
        "its own)",
        rank, size, env->launcher, env->rank, env->world_size);
  }
}

// A tag the ranks of a test agree on without a word: from its name (the
// ranks beyond a smaller world size skip tests, so no count would do).
int TagOf(const std::string& test) {
  std::uint32_t hash = 2166136261u;  // FNV-1a.
  for (char c : test) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  }
  return static_cast<int>(hash % 32768u);  // MPI_TAG_UB is at least 32767.
}

void FreeTestComm() {
  MpiState& s = State();
  if (s.comm != MPI_COMM_NULL) MPI_Comm_free(&s.comm);
  s.comm = MPI_COMM_NULL;
  s.test.clear();
}

void EndMpi() {
  FreeTestComm();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (State().started_here && finalized == 0) MPI_Finalize();
}

class MpiListener : public ::testing::EmptyTestEventListener {
  void OnTestProgramStart(const ::testing::UnitTest&) override { StartMpi(); }
  void OnTestEnd(const ::testing::TestInfo&) override { FreeTestComm(); }
  void OnTestProgramEnd(const ::testing::UnitTest&) override { EndMpi(); }
};

const bool kListening = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new MpiListener);
  internal::SetMpiCommunicatorFactory(&internal::MpiCommunicator::Create);
  return true;
}();

std::string CurrentTest() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr
             ? std::string()
             : fmt::format("{}.{}", info->test_suite_name(), info->name());
}

}  // namespace

std::string internal::WhyNoMpi() {
  const MpiState& s = State();
  if (!s.unusable.empty()) return "backend mpi" + s.unusable;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0) {
    return "backend mpi: MPI is not started (disttest starts it in a test "
           "program's ranks under an MPI launcher; elsewhere, call "
           "MPI_Init_thread with MPI_THREAD_FUNNELED first)";
  }
  if (finalized != 0) return "backend mpi: MPI has ended (MPI_Finalize)";
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_FUNNELED) {
    return fmt::format(
        "backend mpi: MPI runs without thread support (level {}); disttest "
        "needs MPI_THREAD_FUNNELED: start MPI with MPI_Init_thread",
        provided);
  }
  return "";
}

MPI_Comm mpi_comm() {
  const RankInfo* me = CurrentRankOrNull();
  if (me == nullptr) {
    throw Error(
        "disttest::mpi_comm() is called outside a rank's test: call it in a "
        "DIST_TEST_F body, SetUpRank() or TearDownRank()");
  }
  MpiState& s = State();
  if (!s.unusable.empty()) throw Error("disttest::mpi_comm()" + s.unusable);
  // A test's fixtures (DistributedFixture) may run on fewer ranks than its
  // body: a communicator for each world size of the test.
  const std::string test =
      fmt::format("{} of {}", CurrentTest(), me->world_size);
  if (s.comm != MPI_COMM_NULL && s.test == test) return s.comm;
  FreeTestComm();
  // Made by the test's ranks alone (the first world_size of MPI's world,
  // which are the launched ranks 0..N-1): the others are not in this test.
  MPI_Group world = MPI_GROUP_NULL;
  MPI_Group ranks = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int range[1][3] = {{0, me->world_size - 1, 1}};
  MPI_Group_range_incl(world, 1, range, &ranks);
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc =
      MPI_Comm_create_group(MPI_COMM_WORLD, ranks, TagOf(test), &comm);
  MPI_Group_free(&ranks);
  MPI_Group_free(&world);
  if (rc != MPI_SUCCESS) {
    throw Error(fmt::format(
        "disttest::mpi_comm(): MPI_Comm_create_group for the {} ranks of {}: "
        "{}",
        me->world_size, test, MpiError(rc)));
  }
  s.comm = comm;
  s.test = test;
  return comm;
}

}  // namespace disttest

// What a program that links disttest::mpi is made to take from it (the
// library's link flags ask for it: -u disttest_mpi_linked), so that its
// listener and its backend are there even where the program never names
// mpi_comm(): Backend::kMpi is only an enum's value.
extern "C" {
[[gnu::used]] int disttest_mpi_linked = 1;
}
