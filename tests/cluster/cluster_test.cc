// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest across nodes, on a simulated cluster. For each test
// tests/cluster/cluster.sh makes two "nodes": network namespaces with
// their own hostnames (node1, node2), addresses in 198.18.0.0/24 on eth0
// and each other's names in /etc/hosts, linked through a bridge in a
// namespace of its own with no route out of the machine; the test removes
// them after, whatever happened. launched_child_ then runs across them:
// under mpirun (an rsh agent that enters the node, as ssh would), and under
// a torchrun- or Slurm-style launcher started on each node, and under real
// Slurm (slurmctld and a slurmd per node: ClusterSlurmTest). Then the
// network fails: a node's link goes down mid-test, a node points at an
// address nobody has, a firewall drops the store's port, the links get
// 20 ms of latency and 1% loss. Skips where namespaces cannot be made (not
// root, no CAP_NET_ADMIN), saying so.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "env/knobs.h"
#include "self/child_process.h"

namespace disttest::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr int kPort = 29500;  // Each test's nodes are new: nothing holds it.

std::string NodeAddress(int node) {
  return fmt::format("198.18.0.{}", 10 + node);
}

// A bound on a time to verdict, in ms: `seconds` on the regular build,
// scaled for a sanitizer build (whose ranks run 3 to 5 times slower).
std::chrono::milliseconds Bound(int seconds) {
  return std::chrono::milliseconds(
      static_cast<long long>(1000 * seconds * std::max(1.0, SlowBuildScale())));
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The value of property `name` in a gtest XML <testcase> element.
std::string Property(const std::string& testcase, const std::string& name) {
  const std::string key = "<property name=\"" + name + "\" value=\"";
  const auto at = testcase.find(key);
  if (at == std::string::npos) return "<no property " + name + ">";
  const auto from = at + key.size();
  return testcase.substr(from, testcase.find('"', from) - from);
}

// The names of the network namespaces of cluster `id` that exist.
std::vector<std::string> Namespaces(const std::string& id) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename();
    if (name.rfind("disttest-" + id + "-", 0) == 0) found.push_back(name);
  }
  return found;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ChildRun check = RunChild({DISTTEST_CLUSTER_SCRIPT, "check"});
    if (check.exit_code != 0) {
      GTEST_SKIP() << "no simulated cluster here: " << Trim(check.err);
    }
    static int made = 0;
    id_ = fmt::format("u{}x{}", getpid(), made++);
  }

  void TearDown() override {
    if (!up_) return;
    ChildRun down = RunChild({DISTTEST_CLUSTER_SCRIPT, "down", id_});
    EXPECT_EQ(down.exit_code, 0) << down.err;
    // Nothing outlives the test: namespaces, their hosts files, processes.
    EXPECT_THAT(Namespaces(id_), IsEmpty());
    EXPECT_FALSE(std::filesystem::exists("/etc/netns/disttest-" + id_ + "-n1"));
    EXPECT_THAT(KillOrphans(), IsEmpty());
  }

  // Two nodes, linked by a kernel bridge or by the user-space hub that can
  // delay and drop (tests/cluster/netem_switch.cc).
  void Up(const std::string& mode = "bridge") {
    std::vector<std::string> args = {DISTTEST_CLUSTER_SCRIPT, "up", id_, "2",
                                     mode};
    if (mode == "switch") args.push_back(DISTTEST_NETEM_SWITCH);
    up_ = true;
    ChildRun up =
        RunChild(args, {{"DISTTEST_CLUSTER_OWNER", std::to_string(getpid())}});
    ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  }

  ChildRun Cluster(const std::vector<std::string>& args) {
    std::vector<std::string> all = {DISTTEST_CLUSTER_SCRIPT};
    all.insert(all.end(), args.begin(), args.end());
    return RunChild(all);
  }

  // `command` on node `node` (1 or 2), as a process of that node.
  ChildRun OnNode(int node, const std::vector<std::string>& command,
                  const Env& env = {},
                  std::chrono::seconds timeout = std::chrono::seconds(120),
                  const OutputWatch& watch = nullptr) {
    std::vector<std::string> args = {DISTTEST_CLUSTER_SCRIPT, "exec", id_,
                                     std::to_string(node)};
    args.insert(args.end(), command.begin(), command.end());
    return RunChild(args, env, timeout, watch);
  }

  std::vector<std::string> Child(const std::string& filter,
                                 const std::string& xml) {
    return {DISTTEST_LAUNCHED_CHILD, "--gtest_filter=" + filter,
            "--gtest_color=no", "--gtest_output=xml:" + xml};
  }

  // mpirun on node1 with 2 ranks on each node: the rsh agent starts
  // Open MPI's daemon on node2; everything goes over 198.18.0.0/24.
  ChildRun Mpirun(const std::string& filter, const std::string& xml,
                  const Env& extra = {}, const OutputWatch& watch = nullptr) {
    return MpirunProgram(Child(filter, xml), extra, watch);
  }
  ChildRun MpirunProgram(const std::vector<std::string>& program,
                         const Env& extra = {},
                         const OutputWatch& watch = nullptr) {
    std::vector<std::string> args = {"mpirun",
                                     "--allow-run-as-root",
                                     "-H",
                                     "node1:2,node2:2",
                                     "-np",
                                     "4",
                                     "--mca",
                                     "plm_rsh_agent",
                                     DISTTEST_RSH_AGENT,
                                     "--mca",
                                     "oob_tcp_if_include",
                                     "198.18.0.0/24",
                                     "-x",
                                     "MASTER_ADDR=node1",
                                     "-x",
                                     fmt::format("MASTER_PORT={}", kPort)};
    for (const auto& [k, v] : extra) {
      args.push_back("-x");
      args.push_back(k + "=" + v);
    }
    for (const std::string& a : program) args.push_back(a);
    return OnNode(1, args, {{"DISTTEST_CLUSTER_ID", id_}},
                  std::chrono::seconds(240), watch);
  }

  // A launcher on each node, as torchrun's agents or srun's step daemons:
  // node1's run (ranks 0 and 1, rank 0's report) and node2's.
  struct TwoNodes {
    ChildRun node1, node2;
    Clock::time_point start;  // Each run's end: start + its elapsed.
  };
  TwoNodes PerNode(const std::string& style, const std::string& filter,
                   const std::string& xml, const Env& extra = {},
                   const OutputWatch& watch1 = nullptr,
                   const std::map<int, Env>& per_node = {}) {
    auto run = [&](int node, const OutputWatch& watch) {
      // The store's token, where the launcher gives no secret, in the
      // directory the nodes share (rather than this machine's $HOME).
      Env env = {{"NODE_RANK", std::to_string(node - 1)},
                 {"NNODES", "2"},
                 {"MASTER_ADDR", "node1"},
                 {"MASTER_PORT", std::to_string(kPort)},
                 {"NODELIST", "node[1-2]"},
                 {"JOB_ID", "4242"},
                 {"DISTTEST_TOKEN_FILE", Shared("store-token")}};
      env.insert(env.end(), extra.begin(), extra.end());
      if (auto it = per_node.find(node); it != per_node.end()) {
        env.insert(env.end(), it->second.begin(), it->second.end());
      }
      std::vector<std::string> args = {DISTTEST_LOCAL_LAUNCHER, style, "2"};
      for (const std::string& a :
           Child(filter, node == 1 ? xml : xml + ".node2")) {
        args.push_back(a);
      }
      return OnNode(node, args, env, std::chrono::seconds(120), watch);
    };
    TwoNodes both;
    both.start = Clock::now();
    auto second = std::async(std::launch::async, run, 2, nullptr);
    both.node1 = run(1, watch1);
    both.node2 = second.get();
    return both;
  }

  // Takes node2's link down once rank 0 runs Launched.RunsUntilTheLinkGoes
  // (its marker on stderr), and notes when in `down_at`.
  OutputWatch LinkDownOnceRunning(Clock::time_point& down_at) {
    return [this, &down_at](pid_t, const std::string&, const std::string& err) {
      if (down_at == Clock::time_point{} &&
          err.find("marker-link-test-runs 0") != std::string::npos) {
        ChildRun link = Cluster({"link", id_, "2", "down"});
        EXPECT_EQ(link.exit_code, 0) << link.err;
        down_at = Clock::now();
      }
    };
  }

  // The directory every node sees (as an NFS mount would be); each node's
  // TMPDIR is its own (cluster.sh).
  std::string SharedDir() const {
    return "/run/disttest-cluster/" + id_ + "/shared";
  }
  std::string Shared(const std::string& name) const {
    return SharedDir() + "/" + name;
  }

  std::string id_;
  bool up_ = false;
};

// Where each rank ran, from rank 0's XML: the host, the node-local rank and
// size, and that the store's and Gloo's connections went over the nodes'
// addresses (the store's to node1's, from the rank's own node), never lo.
// `port`: the store's (Slurm's comes from the job id).
void ExpectRanksOnTheirNodes(const std::string& xml, int port = kPort) {
  const std::string tc = TestCaseXml(xml, "WhereEachRankRuns/4ranks");
  ASSERT_THAT(tc, HasSubstr("result=\"completed\"")) << xml;
  for (int q = 0; q < 4; ++q) {
    SCOPED_TRACE(fmt::format("rank {}", q));
    const int node = q < 2 ? 1 : 2;
    const std::string r = fmt::format("rank{}.", q);
    EXPECT_EQ(Property(tc, r + "host"), fmt::format("node{}", node));
    EXPECT_EQ(Property(tc, r + "local_rank"), std::to_string(q % 2));
    EXPECT_EQ(Property(tc, r + "local_size"), "2");
    EXPECT_EQ(Property(tc, r + "master"), fmt::format("node1:{}", port));
    const std::string tcp = Property(tc, r + "tcp");
    // The store: from this node's address to node1's.
    const auto quoted = [](std::string a) {
      for (auto at = a.find('.'); at != std::string::npos;
           at = a.find('.', at + 2)) {
        a.insert(at, "\\");
      }
      return a;
    };
    EXPECT_THAT(tcp, ContainsRegex(fmt::format("{}:[0-9]+~{}:{}",
                                               quoted(NodeAddress(node)),
                                               quoted(NodeAddress(1)), port)))
        << tcp;
    EXPECT_THAT(tcp, Not(HasSubstr(fmt::format("127.0.0.1:{}", port)))) << tcp;
    // Gloo: a connection to a rank of the other node.
    EXPECT_THAT(tcp, HasSubstr("~" + NodeAddress(3 - node) + ":")) << tcp;
  }
}

TEST_F(ClusterTest, NodesHaveTheirOwnNamesAddressesAndNoRouteOut) {
  Up();
  ChildRun run = OnNode(
      2, {"sh", "-c",
          "hostname; getent hosts node1; ip -o -4 addr show eth0; ip route"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("node2\n"));
  EXPECT_THAT(run.out, HasSubstr(NodeAddress(1) + "     node1"));
  EXPECT_THAT(run.out, HasSubstr("inet " + NodeAddress(2) + "/24"));
  EXPECT_THAT(run.out, Not(HasSubstr("default"))) << run.out;
}

// Each node's TMPDIR is its own and it sees no other node's, also when
// node1 starts a command on node2 (as mpirun's rsh agent does); the host's
// /tmp stays visible (a checkout there).
TEST_F(ClusterTest, NodesHaveTheirOwnTemporaryDirectories) {
  Up();
  const std::string state = "/run/disttest-cluster/" + id_;
  const std::string script =
      "echo \"TMPDIR=$TMPDIR\"; touch \"$TMPDIR/mark-$(hostname)\" && "
      "ls -A " +
      state + "/tmp-node1 " + state +
      "/tmp-node2 && "
      "test -d /tmp && echo tmp-visible";
  ChildRun direct = OnNode(1, {"sh", "-c", script});
  ASSERT_EQ(direct.exit_code, 0) << direct.out << direct.err;
  EXPECT_THAT(direct.out, HasSubstr("TMPDIR=" + state + "/tmp-node1\n"));
  EXPECT_THAT(direct.out, HasSubstr("tmp-visible"));
  // Through the rsh agent from node1: node2's own directory, writable.
  ChildRun nested = OnNode(1, {DISTTEST_RSH_AGENT, "node2", script},
                           {{"DISTTEST_CLUSTER_ID", id_}});
  ASSERT_EQ(nested.exit_code, 0) << nested.out << nested.err;
  EXPECT_THAT(nested.out, HasSubstr("TMPDIR=" + state + "/tmp-node2\n"));
  // Each saw only its own mark.
  EXPECT_EQ(Occurrences(direct.out + nested.out, "mark-node1"), 1u)
      << direct.out << nested.out;
  EXPECT_EQ(Occurrences(direct.out + nested.out, "mark-node2"), 1u)
      << direct.out << nested.out;
  for (int node : {1, 2}) {
    const std::string mark =
        fmt::format("{}/tmp-node{}/mark-node{}", state, node, node);
    EXPECT_TRUE(std::filesystem::exists(mark)) << mark;
    std::filesystem::remove(mark);
  }
}

// One report from rank 0 on node1 for the 4 ranks of 2 nodes.
TEST_F(ClusterTest, MpirunRunsTheSuiteAcrossTwoNodes) {
  Up();
  const std::string xml = Shared("report.xml");
  // The fixture's directory, in TMPDIR, must reach every node.
  ChildRun run = Mpirun(
      "Launched.Passes/*:Launched.WhereEachRankRuns/*:LaunchedWithFixture.*",
      xml, {{"TMPDIR", SharedDir()}});
  const std::string report = ReadFile(xml);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(Occurrences(run.out, "[==========] Running"), 1u) << run.out;
  EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 6 tests."));
  EXPECT_THAT(run.out,
              HasSubstr(fmt::format("serves the store on node1:{}", kPort)));
  ExpectRanksOnTheirNodes(report);
}

// The network fails, not a process. node2's link goes down while every
// rank runs collectives: rank 0 (node1) fails the test naming node2's ranks
// within the heartbeat bound (5 s without a heartbeat), the next test fails
// at once with the reason, and every process on both nodes ends by itself.
TEST_F(ClusterTest, LinkDownMidTestFailsNamingTheLostNodesRanks) {
  Up();
  const std::string xml = Shared("report.xml");
  Clock::time_point down_at{};
  OutputWatch watch = LinkDownOnceRunning(down_at);
  TwoNodes run = PerNode(
      "torchrun", "Launched.RunsUntilTheLinkGoes/*:Launched.AfterTheLinkWent/*",
      xml, {}, watch);
  ASSERT_NE(down_at, Clock::time_point{}) << run.node1.out << run.node1.err;
  const auto ms = [&](const ChildRun& r) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               run.start + r.elapsed - down_at)
        .count();
  };
  std::printf("link down -> node1's verdict: %lld ms, node2's end: %lld ms\n",
              static_cast<long long>(ms(run.node1)),
              static_cast<long long>(ms(run.node2)));
  RecordProperty("node1_verdict_ms", std::to_string(ms(run.node1)));
  RecordProperty("node2_end_ms", std::to_string(ms(run.node2)));
  const std::string all = run.node1.out + run.node1.err;
  EXPECT_NE(run.node1.exit_code, 0) << all;
  EXPECT_FALSE(run.node1.timed_out);
  EXPECT_FALSE(run.node2.timed_out);
  EXPECT_THAT(run.node1.out,
              HasSubstr("[  FAILED  ] Launched.RunsUntilTheLinkGoes/4ranks"));
  EXPECT_THAT(run.node1.out,
              HasSubstr("[  FAILED  ] Launched.AfterTheLinkWent/4ranks"));
  // The next test fails at once, saying why; node2's ranks fail too.
  EXPECT_THAT(run.node1.out,
              HasSubstr("not run: the launched ranks stopped working together "
                        "in an earlier test (rank "))
      << all;
  EXPECT_NE(run.node2.exit_code, 0) << run.node2.out << run.node2.err;
  // node2's own log says what its ranks saw, and their failures that
  // could not reach rank 0.
  for (int r : {2, 3}) {
    EXPECT_THAT(run.node2.err,
                HasSubstr(fmt::format("[ disttest ] rank {} of 4 on node2: "
                                      "Launched.RunsUntilTheLinkGoes/4ranks: ",
                                      r)))
        << run.node2.err;
    EXPECT_THAT(run.node2.err,
                HasSubstr(fmt::format(
                    "[ disttest ] rank {} of 4, Launched.RunsUntilTheLinkGoes/"
                    "4ranks (rank 0 may not have been told): ",
                    r)))
        << run.node2.err;
  }
  EXPECT_EQ(RanksNaming(run.node1.out, "heartbeat"), (std::set<int>{2, 3}))
      << all;
  // Within the heartbeat bound and the time to notice it, not the test's
  // timeout (60 s).
  EXPECT_LT(ms(run.node1), Bound(20).count()) << all;
  EXPECT_LT(ms(run.node2), Bound(40).count()) << run.node2.out << run.node2.err;
}

// node2 is pointed at an address no node has: its ranks fail within the
// connect deadline (DISTTEST_TIMEOUT, 4 s here) naming the address, the
// port and the node they ran on.
TEST_F(ClusterTest, UnreachableMasterIsAClearErrorNamingAddressPortAndNode) {
  Up();
  ChildRun run =
      OnNode(2,
             {DISTTEST_LOCAL_LAUNCHER, "torchrun", "2", DISTTEST_LAUNCHED_CHILD,
              "--gtest_filter=Launched.Passes/4ranks", "--gtest_color=no"},
             {{"NODE_RANK", "1"},
              {"NNODES", "2"},
              {"MASTER_ADDR", "198.18.0.99"},
              {"MASTER_PORT", std::to_string(kPort)},
              {"DISTTEST_TIMEOUT", "4"}},
             std::chrono::seconds(60));
  const std::string all = run.out + run.err;
  std::printf("unreachable master -> error after %lld ms\n",
              static_cast<long long>(run.elapsed.count()));
  EXPECT_NE(run.exit_code, 0) << all;
  for (int r : {2, 3}) {
    EXPECT_THAT(all, HasSubstr(fmt::format(
                         "rank {} of 4 on node2 (launched by torchrun) cannot "
                         "join the launched ranks: cannot connect to store at "
                         "198.18.0.99:{}",
                         r, kPort)))
        << all;
  }
  EXPECT_THAT(all, HasSubstr("this node must reach it there")) << all;
  EXPECT_LT(run.elapsed, Bound(20)) << all;
}

// A firewall on node1 drops the store's port for other nodes: node2's
// ranks fail naming the address, port and node; rank 0 names the ranks
// that never came. Both within the connect deadline.
TEST_F(ClusterTest, FirewalledStorePortIsAClearErrorOnBothNodes) {
  Up();
  ChildRun drop = Cluster({"drop-port", id_, "1", std::to_string(kPort)});
  if (drop.exit_code != 0) {
    GTEST_SKIP() << "no firewall here: " << Trim(drop.err);
  }
  TwoNodes run = PerNode("torchrun", "Launched.Passes/4ranks",
                         Shared("report.xml"), {{"DISTTEST_TIMEOUT", "4"}});
  const std::string all1 = run.node1.out + run.node1.err;
  const std::string all2 = run.node2.out + run.node2.err;
  std::printf("dropped port -> node1 after %lld ms, node2 after %lld ms\n",
              static_cast<long long>(run.node1.elapsed.count()),
              static_cast<long long>(run.node2.elapsed.count()));
  EXPECT_NE(run.node2.exit_code, 0) << all2;
  EXPECT_THAT(all2, HasSubstr(fmt::format(
                        "on node2 (launched by torchrun) cannot join the "
                        "launched ranks: cannot connect to store at node1:{} "
                        "within 4000 ms",
                        kPort)))
      << all2;
  EXPECT_NE(run.node1.exit_code, 0) << all1;
  // Rank 0 says which ranks never came, and does not wait for them at the
  // end.
  EXPECT_THAT(run.node1.out,
              HasSubstr(fmt::format(
                  "ranks 2, 3 did not arrive before the test's timeout; "
                  "ranks 2, 3 never reached the store at node1:{} (a "
                  "firewall between the nodes",
                  kPort)))
      << all1;
  EXPECT_THAT(run.node1.err,
              HasSubstr(fmt::format("rank 0: ranks 2-3 never reached the "
                                    "store at node1:{}; not waiting for them",
                                    kPort)))
      << all1;
  EXPECT_LT(run.node1.elapsed, Bound(20)) << all1;
  EXPECT_LT(run.node2.elapsed, Bound(20)) << all2;
}

// 20 ms each way and 1% of frames lost, through the user-space hub (this
// kernel may have no netem): the suite still passes; both times printed.
TEST_F(ClusterTest, SuitePassesOverLatencyAndLoss) {
  Up("switch");
  const std::string filter =
      "Launched.Passes/*:Launched.WhereEachRankRuns/*:LaunchedWithFixture.*";
  const std::string xml = Shared("report.xml");
  const Env shared = {{"TMPDIR", SharedDir()}};
  TwoNodes clean = PerNode("torchrun", filter, xml, shared);
  ChildRun impair = Cluster({"impair", id_, "20", "1"});
  ASSERT_EQ(impair.exit_code, 0) << impair.err;
  TwoNodes slow = PerNode("torchrun", filter, xml, shared);
  const std::string report = ReadFile(xml);
  std::printf(
      "suite across 2 nodes: %lld ms; with 20 ms and 1%% loss: %lld ms\n",
      static_cast<long long>(clean.node1.elapsed.count()),
      static_cast<long long>(slow.node1.elapsed.count()));
  RecordProperty("clean_ms", std::to_string(clean.node1.elapsed.count()));
  RecordProperty("impaired_ms", std::to_string(slow.node1.elapsed.count()));
  EXPECT_EQ(clean.node1.exit_code, 0) << clean.node1.out << clean.node1.err;
  EXPECT_EQ(clean.node2.exit_code, 0) << clean.node2.out << clean.node2.err;
  EXPECT_EQ(slow.node1.exit_code, 0) << slow.node1.out << slow.node1.err;
  EXPECT_EQ(slow.node2.exit_code, 0) << slow.node2.out << slow.node2.err;
  ExpectRanksOnTheirNodes(report);
}

// The job's store refuses a client from another namespace that has no
// token, and the run goes on: under mpirun the token comes from Open MPI's
// job secret; under torchrun from DISTTEST_STORE_TOKEN, else from a file
// that rank 0 writes and every rank reads (it was served there before).
TEST_F(ClusterTest, StoreRefusesAClientWithoutTheJobsToken) {
  Up();
  struct Case {
    const char* name;
    std::function<std::pair<int, std::string>(const OutputWatch&, const Env&)>
        run;
    bool refused;
  };
  const std::string xml = Shared("report.xml");
  const std::string filter = "Launched.WaitsForTheProbe/4ranks";
  const std::vector<Case> cases = {
      {"mpirun",
       [&](const OutputWatch& w, const Env& env) {
         ChildRun r = Mpirun(filter, xml, env, w);
         return std::make_pair(r.exit_code, r.out + r.err);
       },
       true},
      {"torchrun with DISTTEST_STORE_TOKEN",
       [&](const OutputWatch& w, const Env& env) {
         Env with = env;
         with.push_back({"DISTTEST_STORE_TOKEN", "s3cret-of-this-job"});
         TwoNodes r = PerNode("torchrun", filter, xml, with, w);
         // Both nodes' exit: node2's ranks must pass too.
         return std::make_pair(
             r.node1.exit_code != 0 ? r.node1.exit_code : r.node2.exit_code,
             r.node1.out + r.node1.err);
       },
       true},
      {"torchrun without a token: rank 0 makes one, in a file",
       [&](const OutputWatch& w, const Env& env) {
         TwoNodes r = PerNode("torchrun", filter, xml, env, w);
         // Both nodes' exit: node2's ranks must pass too.
         return std::make_pair(
             r.node1.exit_code != 0 ? r.node1.exit_code : r.node2.exit_code,
             r.node1.out + r.node1.err);
       },
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string done = Shared("probed");
    std::string probe;
    OutputWatch watch = [&](pid_t, const std::string&, const std::string& err) {
      if (probe.empty() && err.find("marker-probe-now") != std::string::npos) {
        ChildRun p =
            OnNode(2, {DISTTEST_STORE_PROBE, "node1", std::to_string(kPort)});
        probe = Trim(p.out + p.err);
        std::ofstream(done) << "1";
      }
    };
    auto [exit_code, all] = c.run(watch, {{"LAUNCHED_PROBE_DONE", done}});
    std::filesystem::remove(done);
    EXPECT_EQ(exit_code, 0) << all;
    EXPECT_TRUE(c.refused);
    EXPECT_THAT(probe, HasSubstr("refused: store at node1:29500 closed the "
                                 "connection"));
    if (std::string(c.name).find("file") != std::string::npos) {
      EXPECT_THAT(all, HasSubstr("torchrun passes no secret: the store takes "
                                 "only clients with the token rank 0 keeps "
                                 "in " +
                                 Shared("store-token")));
    }
  }
  // Rank 0 removes the file at the end.
  EXPECT_FALSE(std::filesystem::exists(Shared("store-token")));
}

// Where the nodes do not share the token's file, the other node's ranks are
// refused, saying where the file is and what to do instead; the run fails
// rather than let a client without the token in.
TEST_F(ClusterTest, RanksThatCannotReadTheTokenFileAreRefusedSayingWhy) {
  Up();
  // Node1's TMPDIR, which node2 cannot see (cluster.sh).
  const std::string file =
      fmt::format("/run/disttest-cluster/{}/tmp-node1/store-token", id_);
  TwoNodes r =
      PerNode("torchrun", "Launched.Passes/4ranks", Shared("x.xml"),
              {{"DISTTEST_TOKEN_FILE", file}, {"DISTTEST_TIMEOUT", "3"}});
  EXPECT_NE(r.node1.exit_code, 0);
  EXPECT_NE(r.node2.exit_code, 0);
  EXPECT_THAT(
      r.node2.err,
      HasSubstr("cannot join the launched ranks: the store at "
                "node1:29500 takes only clients with its token, and "
                "torchrun passes no secret: rank 0 keeps one in " +
                file + ", which this rank could not use (cannot read " + file +
                ": No such file or directory); share that "
                "directory between the nodes"))
      << r.node2.err;
}

// A DistributedFixture across nodes: with a TMPDIR every node shares (the
// nodes here share one filesystem, so the default) its files reach every
// rank (LauncherOnEachNodeRunsTheSuite); with a TMPDIR of each node's own
// the test fails before the fixture or the body runs, saying why.
TEST_F(ClusterTest, FixtureWithoutASharedTmpdirFailsSayingSo) {
  Up();
  TwoNodes run =
      PerNode("torchrun", "LaunchedWithFixture.*:Values/LaunchedSweep.*",
              Shared("report.xml"));
  // Nothing left in either node's /tmp: rank 0 removed the fixture's
  // directory.
  for (int node : {1, 2}) {
    EXPECT_TRUE(std::filesystem::is_empty(
        fmt::format("/run/disttest-cluster/{}/tmp-node{}", id_, node)));
  }
  const std::string all = run.node1.out + run.node1.err;
  EXPECT_NE(run.node1.exit_code, 0) << all;
  EXPECT_THAT(
      run.node1.out,
      HasSubstr("[  FAILED  ] LaunchedWithFixture.ReadsTheShards/4ranks"))
      << all;
  // Said once, by rank 0 for all, before the fixture ran; then the next
  // test runs.
  EXPECT_THAT(run.node1.out,
              HasSubstr(fmt::format(
                  "ranks 2, 3 on node2 (TMPDIR {0}/tmp-node2) cannot see the "
                  "fixture directory {0}/tmp-node1/disttest-Shards-",
                  "/run/disttest-cluster/" + id_)))
      << all;
  EXPECT_THAT(run.node1.out,
              HasSubstr(", which rank 0 made on node1: under a launcher a "
                        "DistributedFixture needs a TMPDIR that every node "
                        "shares; set TMPDIR to one shared directory on every "
                        "node (the fixture did not run)"));
  // ReadsTheShardsOnTwo (ranks 0 and 1, both on node1) and the sweep pass.
  EXPECT_THAT(run.node1.out,
              HasSubstr("[       OK ] LaunchedWithFixture.ReadsTheShardsOnTwo/"
                        "2ranks"));
  EXPECT_THAT(run.node1.out, HasSubstr("[  PASSED  ] 5 tests."));
  EXPECT_EQ(run.node2.exit_code, 1) << run.node2.out << run.node2.err;
  EXPECT_LT(run.node1.elapsed, Bound(10)) << all;
  // The fixture (ranks 0 and 1) ran once, for the 2-rank test alone.
  EXPECT_EQ(Occurrences(all, "marker-shards-ran"), 2u) << all;
}

// A run killed mid-test leaves its cluster (the namespaces, the processes
// in them); the next run's first `up` removes it: its owner is gone.
TEST_F(ClusterTest, ClusterOfAKilledRunIsRemovedByTheNextRun) {
  // The killed run: a process that owns a cluster, with a process running
  // on one of its nodes.
  const pid_t owner = fork();
  if (owner == 0) {
    execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(owner, 0);
  const std::string dead = id_ + "d";
  // Whatever this test does, nothing of the "killed run" outlives it.
  struct Cleanup {
    pid_t owner;
    std::string dead;
    void EndOwner() {  // Once: a reaped pid may be another process's.
      if (owner <= 0) return;
      kill(owner, SIGKILL);
      waitpid(owner, nullptr, 0);
      owner = -1;
    }
    ~Cleanup() {
      EndOwner();
      RunChild({DISTTEST_CLUSTER_SCRIPT, "down", dead});
    }
  } cleanup{owner, dead};
  ChildRun up = RunChild({DISTTEST_CLUSTER_SCRIPT, "up", dead, "2"},
                         {{"DISTTEST_CLUSTER_OWNER", std::to_string(owner)}});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  auto on_node = std::async(std::launch::async, [&] {
    return RunChild(
        {DISTTEST_CLUSTER_SCRIPT, "exec", dead, "1", "sleep", "600"}, {},
        std::chrono::seconds(120));
  });
  // Until the process is in node1's namespace.
  // (RunChild takes a path: no PATH search.)
  const std::vector<std::string> pids = {
      "/bin/sh", "-c", "ip netns pids disttest-" + dead + "-n1"};
  for (int i = 0; i < 500 && Trim(RunChild(pids).out).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ChildRun listed = RunChild(pids);
  ASSERT_FALSE(Trim(listed.out).empty()) << listed.err;
  cleanup.EndOwner();
  EXPECT_THAT(Namespaces(dead), ::testing::SizeIs(3));  // Left behind.

  // The next run.
  std::vector<std::string> args = {DISTTEST_CLUSTER_SCRIPT, "up", id_, "2"};
  up_ = true;
  ChildRun next =
      RunChild(args, {{"DISTTEST_CLUSTER_OWNER", std::to_string(getpid())}});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_THAT(next.err, HasSubstr("removing cluster " + dead +
                                  ", left by a run that ended"));
  EXPECT_THAT(Namespaces(dead), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists("/run/disttest-cluster/" + dead));
  EXPECT_FALSE(std::filesystem::exists("/etc/netns/disttest-" + dead + "-n1"));
  // The process on its node was ended (by its pid, in the namespace).
  const ChildRun ended = on_node.get();
  EXPECT_FALSE(ended.timed_out);
  EXPECT_EQ(ended.signal, SIGKILL) << ended.exit_code << ended.err;
}

#if defined(DISTTEST_EXAMPLE_SUITES)
// The example suites, whole, on 2 nodes x 2 ranks under mpirun: every test
// passes or skips, one report, run by Open MPI.
TEST_F(ClusterTest, ExampleSuitesPassAcrossTwoNodesUnderMpirun) {
  Up();
  for (const char* suite : {DISTTEST_EXAMPLE_SUITES}) {
    SCOPED_TRACE(suite);
    const std::string xml = Shared("suite.xml");
    ChildRun run =
        MpirunProgram({suite, "--gtest_color=no", "--gtest_output=xml:" + xml},
                      {{"TMPDIR", SharedDir()}});
    const std::string report = ReadFile(xml);
    std::filesystem::remove(xml);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_FALSE(run.timed_out);
    EXPECT_EQ(Occurrences(run.out, "[==========] Running"), 1u);
    EXPECT_GT(Occurrences(report, "<testcase "), 10u) << report;
    EXPECT_EQ(Occurrences(report, "<failure "), 0u) << report;
    EXPECT_THAT(report,
                HasSubstr("name=\"disttest_launcher\" value=\"openmpi\""));
  }
}
#endif

class ClusterLauncherTest : public ClusterTest,
                            public ::testing::WithParamInterface<const char*> {
};

TEST_P(ClusterLauncherTest, LauncherOnEachNodeRunsTheSuite) {
  Up();
  const std::string xml = Shared("report.xml");
  TwoNodes run = PerNode(
      GetParam(),
      "Launched.Passes/*:Launched.WhereEachRankRuns/*:LaunchedWithFixture.*",
      xml, {{"TMPDIR", SharedDir()}});
  const std::string report = ReadFile(xml);
  EXPECT_EQ(run.node1.exit_code, 0) << run.node1.out << run.node1.err;
  EXPECT_EQ(run.node2.exit_code, 0) << run.node2.out << run.node2.err;
  EXPECT_EQ(Occurrences(run.node1.out, "[==========] Running"), 1u);
  EXPECT_THAT(run.node1.out, HasSubstr("[  PASSED  ] 6 tests."));
  // Ranks other than 0 print no report.
  EXPECT_THAT(run.node2.out, Not(HasSubstr("[==========]")));
  // Slurm's port: 15000 + the job id's last 4 digits (4242).
  ExpectRanksOnTheirNodes(report,
                          std::string(GetParam()) == "slurm" ? 19242 : kPort);
}

INSTANTIATE_TEST_SUITE_P(Styles, ClusterLauncherTest,
                         ::testing::Values("torchrun", "slurm"));

// Slurm itself on the cluster (cluster.sh slurm): Debian's slurmctld on
// node1 and a slurmd on each node, munge between them; srun on node1 starts
// the ranks through the slurmd of each node, as on a real cluster. Skips
// where Slurm is not installed (install-deps.sh installs it).
class ClusterSlurmTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (IsSkipped()) return;
    Up();
    ChildRun slurm = Cluster({"slurm", id_});
    if (slurm.exit_code != 0 &&
        slurm.err.find("Slurm is not installed") != std::string::npos) {
      GTEST_SKIP() << Trim(slurm.err);
    }
    ASSERT_EQ(slurm.exit_code, 0) << slurm.out << slurm.err;
  }

  // srun on node1: 4 ranks, 2 on each node, as job 4242 (cluster.sh's
  // first job id: the store's port is 19242), step 0.
  ChildRun Srun(const std::vector<std::string>& options,
                const std::string& filter, const std::string& xml,
                const Env& env = {}, const OutputWatch& watch = nullptr) {
    std::vector<std::string> args = {"srun", "-N", "2",
                                     "-n",   "4",  "--ntasks-per-node=2"};
    args.insert(args.end(), options.begin(), options.end());
    for (const std::string& a : Child(filter, xml)) args.push_back(a);
    // Slurm passes no secret: the store's token in the directory the nodes
    // share (rather than this machine's $HOME).
    Env all = {{"DISTTEST_TOKEN_FILE", Shared("store-token")}};
    all.insert(all.end(), env.begin(), env.end());
    return OnNode(1, args, all, std::chrono::seconds(180), watch);
  }

  // A run that Slurm's SIGTERM ended while Launched.WaitsForSignal ran:
  // that test failed with its report, saying what the signal was; the next
  // skipped; the XML written; nothing of the job left on either node.
  void ExpectEndedBySigtermWithItsReport(const ChildRun& run,
                                         const std::string& xml) {
    const std::string all = run.out + run.err;
    EXPECT_NE(run.exit_code, 0) << all;
    EXPECT_FALSE(run.timed_out) << all;
    EXPECT_THAT(run.out,
                HasSubstr("disttest got SIGTERM (Slurm ends a step at its "
                          "time limit, on scancel, or with --kill-on-bad-exit "
                          "once a task failed; or ctest's TIMEOUT) while "
                          "Launched.WaitsForSignal/4ranks ran"))
        << all;
    EXPECT_THAT(run.out, HasSubstr("recv of 8 float32 from rank 0 (tag 9)"))
        << all;
    // srun may return as soon as Slurm ends the step, before rank 0 has
    // written the XML: its process gone, the file is whole.
    EXPECT_THAT(JobProcessesLeft(), IsEmpty());
    const std::string report = ReadFile(xml);
    std::filesystem::remove(xml);
    EXPECT_THAT(TestCaseXml(report, "WaitsForSignal/4ranks"),
                HasSubstr("<failure"))
        << report;
    EXPECT_THAT(TestCaseXml(report, "AfterTheSignal/4ranks"),
                HasSubstr("result=\"skipped\""))
        << report;
  }

  // The processes of the job still on the nodes, as "node<k>: <name>
  // <pid>": ranks and Slurm's step daemons (slurmstepd), or those `names`
  // gives for a node. Waits (at most `wait`) for them to go: a step daemon
  // ends a moment after srun.
  using Names = std::map<int, std::set<std::string>>;
  std::vector<std::string> JobProcessesLeft(
      const Names& names = {{1, {"launched_child_", "slurmstepd"}},
                            {2, {"launched_child_", "slurmstepd"}}},
      std::chrono::seconds wait = std::chrono::seconds(30)) {
    std::vector<std::string> left;
    const auto deadline = Clock::now() + wait;
    do {
      left.clear();
      for (const auto& [node, watched] : names) {
        ChildRun pids =
            RunChild({"/bin/sh", "-c",
                      fmt::format("ip netns pids disttest-{}-n{}", id_, node)});
        std::istringstream in(pids.out);
        for (std::string pid; in >> pid;) {
          const std::string comm = Trim(ReadFile("/proc/" + pid + "/comm"));
          if (watched.count(comm)) {
            left.push_back(fmt::format("node{}: {} {}", node, comm, pid));
          }
        }
      }
      if (left.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (Clock::now() < deadline);
    return left;
  }
};

// srun -N 2 -n 4: one report from rank 0 on node1, each rank on its node
// with the node-local rank and size Slurm gave it, the store on node1 at
// the port the job id gives.
TEST_F(ClusterSlurmTest, SrunRunsTheSuiteAcrossTwoNodes) {
  const std::string xml = Shared("report.xml");
  ChildRun run = Srun(
      {},
      "Launched.Passes/*:Launched.WhereEachRankRuns/*:LaunchedWithFixture.*",
      xml, {{"TMPDIR", SharedDir()}});
  const std::string report = ReadFile(xml);
  std::printf("srun -N 2 -n 4: %lld ms\n",
              static_cast<long long>(run.elapsed.count()));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(Occurrences(run.out, "[==========] Running"), 1u) << run.out;
  EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 6 tests."));
  EXPECT_THAT(report, HasSubstr("name=\"disttest_launcher\" value=\"slurm\""));
  ExpectRanksOnTheirNodes(report, 19242);
  EXPECT_THAT(JobProcessesLeft(), IsEmpty());

  // A step smaller than a test's world size: that test is skipped, saying
  // so, on one node's 2 tasks as on any.
  std::vector<std::string> small = {"srun", "-N", "1", "-n", "2"};
  for (const std::string& a : Child("Launched.Passes/*", Shared("small.xml"))) {
    small.push_back(a);
  }
  ChildRun two =
      OnNode(1, small, {{"DISTTEST_TOKEN_FILE", Shared("store-token")}});
  EXPECT_EQ(two.exit_code, 0) << two.out << two.err;
  EXPECT_THAT(two.out, HasSubstr("needs 4 ranks, launched with 2")) << two.out;
  EXPECT_THAT(two.out, HasSubstr("[  PASSED  ] 2 tests.")) << two.out;
}

// scancel mid-test, as Slurm ends a job: SIGTERM to every rank (SIGKILL
// KillWait later). The test in flight fails with its report, saying what
// the signal was and where each rank waited, the rest are skipped, rank 0
// writes the XML, and nothing of the job stays on either node. Both ways
// that send SIGTERM: scancel of the job, and of the step with -s TERM.
// (scancel of a step without -s sends SIGKILL to every rank at once: no
// process is left to report; docs/launchers.md says so.)
TEST_F(ClusterSlurmTest, ScancelFailsTheTestWithItsReport) {
  struct Case {
    const char* name;
    std::vector<std::string> scancel;
  };
  // cluster.sh's jobs count from 4242: the first srun's job, then the next.
  for (const Case& c :
       {Case{"the job", {"scancel", "4242"}},
        Case{"the step, with -s TERM", {"scancel", "-s", "TERM", "4243.0"}}}) {
    SCOPED_TRACE(c.name);
    const std::string xml = Shared("report.xml");
    ChildRun cancel;
    Clock::time_point cancelled_at{};
    OutputWatch watch = [&](pid_t, const std::string& out, const std::string&) {
      if (cancelled_at == Clock::time_point{} &&
          out.find("marker-waits-for-signal 0") != std::string::npos) {
        cancel = OnNode(1, c.scancel);
        cancelled_at = Clock::now();
      }
    };
    ChildRun run =
        Srun({}, "Launched.WaitsForSignal/*:Launched.AfterTheSignal/4ranks",
             xml, {}, watch);
    const std::string all = run.out + run.err;
    ASSERT_NE(cancelled_at, Clock::time_point{}) << all;
    EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
    std::printf("scancel %s -> srun's end: %lld ms\n", c.name,
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        Clock::now() - cancelled_at)
                        .count()));
    ExpectEndedBySigtermWithItsReport(run, xml);
  }
}

// Slurm's time limit (whole minutes; slurmctld looks every 30 s): at the
// limit the step gets SIGTERM, and the test in flight fails with its
// report, as on scancel; srun says the step was cancelled for its time.
TEST_F(ClusterSlurmTest, TimeLimitFailsTheTestWithItsReport) {
  const std::string xml = Shared("report.xml");
  // The body waits longer than the limit (and the check after it).
  ChildRun run = Srun(
      {"--time=1"}, "Launched.WaitsForSignal/*:Launched.AfterTheSignal/4ranks",
      xml, {{"DISTTEST_TIMEOUT", "170"}});
  const std::string all = run.out + run.err;
  std::printf("time limit of 1 min -> srun's end: %lld ms\n",
              static_cast<long long>(run.elapsed.count()));
  EXPECT_THAT(run.err, ContainsRegex("STEP 4242\\.0 ON node[12] CANCELLED AT "
                                     "[-0-9T:]+ DUE TO TIME LIMIT"))
      << all;
  ExpectEndedBySigtermWithItsReport(run, xml);
}

// srun --kill-on-bad-exit and a rank that dies (SIGKILL, on node2): Slurm
// ends the step (SIGTERM to the others); rank 0's report names the dead
// rank, says what the SIGTERM was, skips the rest, and the XML is written.
TEST_F(ClusterSlurmTest, KillOnBadExitWithADeadRankReportsIt) {
  const std::string xml = Shared("report.xml");
  ChildRun run =
      Srun({"--kill-on-bad-exit=1"},
           "Launched.DiesOnRank2/*:Launched.AfterTheDeath/4ranks", xml);
  const std::string all = run.out + run.err;
  std::printf("--kill-on-bad-exit, rank 2 killed -> srun's end: %lld ms\n",
              static_cast<long long>(run.elapsed.count()));
  EXPECT_NE(run.exit_code, 0) << all;
  EXPECT_FALSE(run.timed_out) << all;
  // Its heartbeat's silence passed the bound before Slurm's SIGTERM, or
  // rank 0 stopped waiting after the SIGTERM first: either way, it died.
  // (Whether its first beat left before the SIGKILL is the machine's: it
  // stopped its heartbeat, or sent none since it joined.)
  EXPECT_THAT(run.out,
              ContainsRegex("\\[rank 2/4\\] (\\(first failure\\) )?"
                            "did not report its result: (none came in the "
                            "[0-9]+ ms after disttest got SIGTERM \\(Slurm "
                            "[^\n]*\\), and it )?(stopped its heartbeat "
                            "[0-9]+ ms ago|sent no heartbeat in the [0-9]+ "
                            "ms since it joined): it died"))
      << all;
  EXPECT_THAT(run.out, HasSubstr("SIGTERM (Slurm ends a step at its time "
                                 "limit, on scancel, or with "
                                 "--kill-on-bad-exit once a task failed"))
      << all;
  // As on scancel: the XML is whole once rank 0's process is gone.
  EXPECT_THAT(JobProcessesLeft(), IsEmpty());
  const std::string report = ReadFile(xml);
  EXPECT_THAT(TestCaseXml(report, "DiesOnRank2/4ranks"), HasSubstr("<failure"))
      << report;
  EXPECT_THAT(TestCaseXml(report, "AfterTheDeath/4ranks"),
              HasSubstr("result=\"skipped\""))
      << report;
}

// node2's link cut while every rank runs collectives: the same verdict as
// under the Slurm-style launcher (LinkDownMidTest... above): rank 0 names
// node2's ranks by their heartbeat within its bound, the next test fails
// at once. Slurm then finds node2 gone (SlurmdTimeout) and srun ends; node2's
// ranks end by themselves. Its step daemon, which cannot reach srun, is
// Slurm's to end (`down` does).
TEST_F(ClusterSlurmTest, LinkCutMidTestGivesTheVerdictOfTheSlurmStyleRun) {
  const std::string xml = Shared("report.xml");
  Clock::time_point down_at{};
  OutputWatch watch = LinkDownOnceRunning(down_at);
  Clock::time_point verdict_at{};
  OutputWatch both = [&](pid_t pid, const std::string& out,
                         const std::string& err) {
    watch(pid, out, err);
    if (verdict_at == Clock::time_point{} &&
        out.find("[  FAILED  ] Launched.RunsUntilTheLinkGoes/4ranks") !=
            std::string::npos) {
      verdict_at = Clock::now();
    }
  };
  ChildRun run = Srun(
      {}, "Launched.RunsUntilTheLinkGoes/*:Launched.AfterTheLinkWent/4ranks",
      xml, {}, both);
  const std::string all = run.out + run.err;
  ASSERT_NE(down_at, Clock::time_point{}) << all;
  ASSERT_NE(verdict_at, Clock::time_point{}) << all;
  const auto ms = [&](Clock::time_point t) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(t - down_at)
            .count());
  };
  std::printf("link down -> rank 0's verdict: %lld ms, srun's end: %lld ms\n",
              ms(verdict_at), ms(Clock::now()));
  EXPECT_NE(run.exit_code, 0) << all;
  EXPECT_FALSE(run.timed_out) << all;
  EXPECT_THAT(run.out,
              HasSubstr("not run: the launched ranks stopped working together "
                        "in an earlier test (rank "))
      << all;
  EXPECT_THAT(run.out,
              HasSubstr("[  FAILED  ] Launched.AfterTheLinkWent/4ranks"));
  EXPECT_EQ(RanksNaming(run.out, "heartbeat"), (std::set<int>{2, 3})) << all;
  EXPECT_THAT(run.err, HasSubstr("Node failure on node2")) << all;
  EXPECT_LT(ms(verdict_at), Bound(20).count()) << all;
  // No rank on either node; node1's step daemon ended with srun.
  EXPECT_THAT(JobProcessesLeft({{1, {"launched_child_", "slurmstepd"}},
                                {2, {"launched_child_"}}}),
              IsEmpty());
}

}  // namespace
}  // namespace disttest::testing
