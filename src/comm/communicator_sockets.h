// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The TCP connections of the Gloo communicators a process made, once it
// asked for them: a launched rank's side thread cuts them when the run
// cannot go on (harness/launched/communicators.h), so that a body blocked
// in a collective of a communicator it made itself fails now, and no other
// connection of the process (a launcher's, MPI's) is touched.
//
//   WatchCommunicatorSockets();           // a launched rank, at its start
//   ... GlooCommunicator::Create notes the sockets it connected ...
//   for (ino_t inode : CommunicatorSockets()) ...
//   CutCommunicators("rank 2 is gone");  // MPI's waits end
#ifndef DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_
#define DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace disttest::internal {

// From now on, communicators note their sockets (it costs two scans of
// /proc/self/fd a communicator made).
void WatchCommunicatorSockets();
bool WatchingCommunicatorSockets();
// A communicator connected: the TCP sockets new since `before` are its.
void NoteCommunicatorSockets(const std::map<ino_t, int>& before);
// The inodes of every communicator's sockets noted so far.
std::set<ino_t> CommunicatorSockets();

// The side thread cut the communicators, saying why: a backend without
// sockets to cut (MPI, which waits by polling) ends its waits once the
// count of cuts changes, with the last reason. From any thread.
void CutCommunicators(const std::string& why);
std::uint64_t CommunicatorCuts();
std::string CommunicatorCutReason();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_
