// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GPUs, with DISTTEST_GPUS and CTest's variables standing in for a GPU
// machine and a resource spec file (verdicts.h).
#include <filesystem>
#include <regex>

#include "disttest/comm/create.h"
#include "verdicts.h"

namespace disttest::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Why a case that reads a rank's CUDA_VISIBLE_DEVICES is not for threads.
#define SKIP_FOR_THREADS_SEEING_DEVICES() \
  SKIP_FOR_THREADS(                       \
      "CUDA_VISIBLE_DEVICES is one per process, not per rank thread")

// Whether ranks that share a GPU get NCCL host ids (NCCL before 2.30), which
// makes rank threads run as processes.
bool HostIds() { return NcclBuilt() && NcclVersion() < 23000; }

// Four ranks on two stand-in GPUs, sharing them.
const Env kSharedTwo{{"DISTTEST_GPUS", "GPU-a,GPU-b"},
                     {"VERDICTS_GPUS_PER_RANK", "1"},
                     {"VERDICTS_SHARE_GPUS", "1"}};

// CTest's variables for one group per rank, e.g. {"3", "0;2"} (rank 1 gets
// ids 0 and 2).
Env CtestGroups(const std::vector<std::string>& groups) {
  Env env{{"CTEST_RESOURCE_GROUP_COUNT", std::to_string(groups.size())}};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::string name = "CTEST_RESOURCE_GROUP_" + std::to_string(i);
    env.emplace_back(name, "gpus");
    std::string entries;
    std::stringstream ids(groups[i]);
    for (std::string id; std::getline(ids, id, ';');) {
      entries +=
          (entries.empty() ? "" : ";") + std::string("id:") + id + ",slots:1";
    }
    env.emplace_back(name + "_GPUS", entries);
  }
  return env;
}

Env Plus(Env a, const Env& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string DevicesLine(int rank, const std::string& devices) {
  return "[rank " + std::to_string(rank) + "] marker-devices " + devices + "\n";
}

TEST_P(VerdictsTest, EachRankSeesOnlyItsOwnGpus) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c,GPU-d"},
                   {"VERDICTS_GPUS_PER_RANK", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "GPU-a")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "GPU-b")));
  EXPECT_THAT(
      TestCaseXml(v.xml, "ShowsItsDevices/2ranks"),
      HasSubstr("<property name=\"disttest_gpus\" value=\"rank 0: GPU-a, "
                "rank 1: GPU-b (DISTTEST_GPUS)\"/>"));
}

// More ranks than GPUs, with options().share_gpus: round-robin on the GPUs
// there are, each rank told NCCL's way to share (this NCCL, before 2.30: a
// host id of its own; disttest without NCCL: nothing), NCCL's RAS off, and
// a note that says so.
TEST_P(VerdictsTest, RanksShareTheGpusThereAre) {
  const bool host_ids = HostIds();
  // A host id is per process: rank threads that need one run as processes.
  if (!host_ids) {
    SKIP_FOR_THREADS_SEEING_DEVICES();
  }
  Verdict v = Run("VerdictsGpus.ShowsItsSharing/4ranks", kSharedTwo);
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] note: VerdictsGpus.ShowsItsSharing/"
                        "4ranks: 4 ranks share the GPUs, up to 2 a GPU: "));
  // Its own communicator is Gloo's: NCCL's way is for those it makes.
  if (HostIds()) {
    EXPECT_THAT(v.run.out, HasSubstr("up to 2 a GPU: the test's communicator "
                                     "is gloo; NCCL communicators it makes "
                                     "share them so: NCCL over sockets"));
  }
  if (Threads()) {
    EXPECT_THAT(v.run.out, HasSubstr("; as processes, not threads (a host id "
                                     "is per process)"));
  }
  std::set<std::string> ids;
  for (int r = 0; r < 4; ++r) {
    const std::smatch m = [&] {
      std::smatch found;
      std::regex_search(
          v.run.out, found,
          std::regex("\\[rank " + std::to_string(r) +
                     "\\] marker-sharing (\\S+) host (\\S+) multi (\\S+) "
                     "ras (\\S+) log (\\S+)\n"));
      return found;
    }();
    ASSERT_FALSE(m.empty()) << r << v.run.out;
    EXPECT_EQ(m[1], r % 2 == 0 ? "GPU-a" : "GPU-b") << r;
    EXPECT_EQ(m[4], "0") << r;        // NCCL's RAS off: no port 28028 each.
    EXPECT_EQ(m[5], "(unset)") << r;  // No DISTTEST_LOG_DIR.
    if (host_ids) {
      EXPECT_EQ(m[2], fmt::format("disttest-{}-rank{}", v.run.pid, r));
      ids.insert(m[2]);
    } else if (NcclBuilt()) {
      EXPECT_EQ(m[3], "1") << r;
    } else {
      EXPECT_EQ(m[2], "(unset)") << r;
    }
  }
  if (host_ids) {
    EXPECT_EQ(ids.size(), 4u);
  }
  EXPECT_THAT(v.run.out,
              HasSubstr(host_ids ? "NCCL over sockets (a NCCL_HOSTID each), "
                                   "for correctness, not speed"
                        : NcclBuilt() ? "NCCL_MULTI_RANK_GPU_ENABLE=1"
                                      : "disttest has no NCCL"));
  EXPECT_THAT(
      TestCaseXml(v.xml, "ShowsItsSharing/4ranks"),
      HasSubstr("<property name=\"disttest_gpus\" value=\"rank 0: GPU-a, "
                "rank 1: GPU-b, rank 2: GPU-a, rank 3: GPU-b (DISTTEST_GPUS; "
                "2 ranks share a GPU)\"/>"));
}

// With DISTTEST_LOG_DIR, a rank whose NCCL logs at INFO (NCCL_DEBUG kept)
// writes that log beside its own, the path written as NCCL reads it (a %
// doubled); NCCL's warnings alone stay in the rank's output.
TEST_P(VerdictsTest, RanksKeepNcclsLogBesideTheirOwn) {
  if (!HostIds()) {
    SKIP_FOR_THREADS_SEEING_DEVICES();
  }
  const std::string dir = TempPath("-100%");
  const Env gpus = Plus(kSharedTwo, {{"DISTTEST_LOG_DIR", dir},
                                     {"DISTTEST_KEEP_NCCL_DEBUG", "1"}});
  Verdict info = Run("VerdictsGpus.ShowsItsSharing/4ranks",
                     Plus(gpus, {{"NCCL_DEBUG", "info"}}));
  EXPECT_EQ(info.run.exit_code, 0) << info.run.out;
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(info.run.out,
                HasSubstr(fmt::format("log {}%/VerdictsGpus.ShowsItsSharing/"
                                      "4ranks/rank-{}.nccl.log\n",
                                      dir, r)))
        << info.run.out;
  }
  Verdict warn = Run("VerdictsGpus.ShowsItsSharing/4ranks",
                     Plus(gpus, {{"NCCL_DEBUG", "WARN"}}));
  EXPECT_EQ(warn.run.exit_code, 0) << warn.run.out;
  EXPECT_THAT(warn.run.out, HasSubstr(" log (unset)\n")) << warn.run.out;
  EXPECT_THAT(warn.run.out, Not(HasSubstr(".nccl.log")));
  std::filesystem::remove_all(dir);
}

// Without it, more ranks than GPUs skip saying how to share them;
// DISTTEST_SHARE_GPUS=1 shares them for a whole run, and any other value
// than 0 or 1 is an error that names it.
TEST_P(VerdictsTest, MoreRanksThanGpusSkipSayingHowToShare) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  const Env gpus{{"DISTTEST_GPUS", "GPU-a,GPU-b"},
                 {"VERDICTS_GPUS_PER_RANK", "1"}};
  Verdict skipped = Run("VerdictsGpus.ShowsItsSharing/4ranks", gpus);
  EXPECT_EQ(skipped.run.exit_code, 0) << skipped.run.out;
  EXPECT_THAT(skipped.run.out,
              HasSubstr("needs 4 GPUs, found 2: GPU-a,GPU-b (DISTTEST_GPUS); "
                        "options().share_gpus (or DISTTEST_SHARE_GPUS=1) "
                        "places the ranks on the GPUs there are"));
  EXPECT_THAT(skipped.run.out, Not(HasSubstr("marker-sharing")));
  Verdict shared = Run("VerdictsGpus.ShowsItsSharing/4ranks",
                       Plus(gpus, {{"DISTTEST_SHARE_GPUS", "1"}}));
  EXPECT_EQ(shared.run.exit_code, 0) << shared.run.out;
  EXPECT_THAT(shared.run.out, HasSubstr("[rank 3] marker-sharing GPU-b "));
  Verdict bad = Run("VerdictsGpus.ShowsItsSharing/4ranks",
                    Plus(gpus, {{"DISTTEST_SHARE_GPUS", "yes"}}));
  EXPECT_NE(bad.run.exit_code, 0) << bad.run.out;
  EXPECT_THAT(bad.run.out, HasSubstr("DISTTEST_SHARE_GPUS"));
  EXPECT_THAT(bad.run.out, Not(HasSubstr("marker-sharing")));
}

TEST_P(VerdictsTest, TwoGpusPerRankAllRotated) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"DISTTEST_GPUS", "4"},
                   {"VERDICTS_GPUS_PER_RANK", "2"},
                   {"VERDICTS_ALL_ROTATED", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "0,1,2,3")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "2,3,0,1")));
}

TEST_P(VerdictsTest, GlooRanksWithoutGpusKeepTheInheritedDevices) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  {{"CUDA_VISIBLE_DEVICES", "5,6"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(0, "5,6")));
  EXPECT_THAT(v.run.out, HasSubstr(DevicesLine(1, "5,6")));
}

TEST_P(VerdictsTest, CtestResourceGroupsGiveEachRankItsIds) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  // A fake resource spec: ctest gave rank 0 the 4th GPU of the inherited
  // list and rank 1 the 2nd.
  const Env gpus{{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c,GPU-d"}};
  Verdict one = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                    Plus(Plus(gpus, CtestGroups({"3", "1"})),
                         {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out << one.run.err;
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(0, "GPU-d")));
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(1, "GPU-b")));
  // Two GPUs a rank: every id of the group is kept, in order.
  Verdict two = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                    Plus(Plus(gpus, CtestGroups({"3;0", "2;1"})),
                         {{"VERDICTS_GPUS_PER_RANK", "2"}}));
  EXPECT_EQ(two.run.exit_code, 0) << two.run.out << two.run.err;
  EXPECT_THAT(two.run.out, HasSubstr(DevicesLine(0, "GPU-d,GPU-a")));
  EXPECT_THAT(two.run.out, HasSubstr(DevicesLine(1, "GPU-c,GPU-b")));
  // All rotated: the others follow, after the rank's own.
  Verdict rotated = Run(
      "VerdictsGpus.ShowsItsDevices/2ranks",
      Plus(Plus(gpus, CtestGroups({"3", "1"})),
           {{"VERDICTS_GPUS_PER_RANK", "1"}, {"VERDICTS_ALL_ROTATED", "1"}}));
  EXPECT_THAT(rotated.run.out,
              HasSubstr(DevicesLine(0, "GPU-d,GPU-a,GPU-b,GPU-c")));
  EXPECT_THAT(rotated.run.out,
              HasSubstr(DevicesLine(1, "GPU-b,GPU-c,GPU-d,GPU-a")));
}

TEST_P(VerdictsTest, CtestGroupsOnOneGpuAreAClearFailure) {
  Verdict v = Run("VerdictsGpus.ShowsItsDevices/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "2"}}, CtestGroups({"1", "1"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("CTest gave GPU 1 to rank 0 and rank 1"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-devices")));
}

TEST_P(VerdictsTest, FailureNamesTheGpusAndTheRerunKeepsThem) {
  Verdict v = Run("VerdictsGpus.FailsOnRank1/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "GPU-a,GPU-b,GPU-c"}},
                            CtestGroups({"2", "0"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr(FailureAt("marker-gpu-failure", "[rank 1/2]")));
  EXPECT_THAT(v.run.out, HasSubstr("[ disttest ] GPUs: rank 0: GPU-c, rank 1: "
                                   "GPU-a (CTest resource groups)\n"));
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string("rerun this test alone: ") +
                        "DISTTEST_GPUS=GPU-c,GPU-a " + GetParam().binary));
}

// Ranks that share GPUs: the rerun lists each GPU once (a GPU listed twice
// is no inventory), and runs them so again.
TEST_P(VerdictsTest, RerunOfSharedGpusListsEachOnce) {
  Verdict v = Run("VerdictsGpus.FailsOnRank1/4ranks", kSharedTwo);
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out;
  EXPECT_THAT(v.run.out, HasSubstr("rerun this test alone: "
                                   "DISTTEST_GPUS=GPU-a,GPU-b "))
      << v.run.out;
  Verdict again = Run("VerdictsGpus.ShowsItsSharing/4ranks",
                      Plus(kSharedTwo, {{"DISTTEST_GPUS", "GPU-a,GPU-b"}}));
  EXPECT_EQ(again.run.exit_code, 0) << again.run.out << again.run.err;
}

TEST_P(VerdictsTest, RerunOfOneNumericGpuNamesItAsAList) {
  SKIP_FOR_THREADS_SEEING_DEVICES();
  // "DISTTEST_GPUS=3" would be a count of three; "3," is GPU 3.
  Verdict v = Run("VerdictsGpus.FailsOnRank1/2ranks",
                  Plus(Plus({{"DISTTEST_GPUS", "4"}}, CtestGroups({"3", "1"})),
                       {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_THAT(v.run.out,
              HasSubstr("rerun this test alone: DISTTEST_GPUS=3,1 "));
  Verdict one = Run("VerdictsGpus.ShowsItsDevices/1ranks",
                    Plus(Plus({{"DISTTEST_GPUS", "3,"}}, CtestGroups({"0"})),
                         {{"VERDICTS_GPUS_PER_RANK", "1"}}));
  EXPECT_EQ(one.run.exit_code, 0) << one.run.out << one.run.err;
  EXPECT_THAT(one.run.out, HasSubstr(DevicesLine(0, "3")));
}

TEST_P(VerdictsTest, TooFewGpusSkipsSayingHowMany) {
  Verdict v =
      Run("VerdictsNccl.NeedsAGpuPerRank/2ranks", {{"DISTTEST_GPUS", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(TestCaseXml(v.xml, "NeedsAGpuPerRank/2ranks"),
              HasSubstr("result=\"skipped\""));
  EXPECT_THAT(v.run.out, HasSubstr("needs 2 GPUs, found 1: 0 (DISTTEST_GPUS)"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-nccl-body")));
}

TEST_P(VerdictsTest, RequiredGpusMakeTooFewAFailure) {
  Verdict v = Run("VerdictsNccl.NeedsAGpuPerRank/2ranks",
                  {{"DISTTEST_GPUS", "0"}, {"DISTTEST_REQUIRE_GPUS", "1"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              HasSubstr("needs 2 GPUs, found 0 (DISTTEST_GPUS) "
                        "(DISTTEST_REQUIRE_GPUS=1 makes this a failure)"));
  EXPECT_THAT(v.run.out, Not(HasSubstr("marker-nccl-body")));
}

TEST_P(VerdictsTest, AutoWithoutGpusRunsOnGloo) {
  Verdict v =
      Run("VerdictsAuto.ChoosesTheBackend/2ranks", {{"DISTTEST_GPUS", "0"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out, HasSubstr(Out(1) + "marker-backend gloo\n"));
  EXPECT_THAT(
      TestCaseXml(v.xml, "ChoosesTheBackend/2ranks"),
      HasSubstr("<property name=\"disttest_backend\" value=\"gloo\"/>"));
}

}  // namespace
}  // namespace disttest::testing
