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
#ifndef DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_
#define DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_

#include <sys/types.h>

#include <map>
#include <set>

namespace disttest::internal {

// From now on, communicators note their sockets (it costs two scans of
// /proc/self/fd a communicator made).
void WatchCommunicatorSockets();
bool WatchingCommunicatorSockets();
// A communicator connected: the TCP sockets new since `before` are its.
void NoteCommunicatorSockets(const std::map<ino_t, int>& before);
// The inodes of every communicator's sockets noted so far.
std::set<ino_t> CommunicatorSockets();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_COMMUNICATOR_SOCKETS_H_
