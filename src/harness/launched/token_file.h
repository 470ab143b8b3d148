// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A store token for a launched job whose launcher passes no secret (torchrun,
// srun) and whose ranks span hosts: rank 0 makes a random token and keeps it
// in a file only its user can read, in a directory every rank of the job can
// read (the user's home, shared between the nodes as clusters do, or
// DISTTEST_TOKEN_FILE); the other ranks read it there. A stranger who
// reaches the store's port cannot read the file, so cannot present the
// token; a rank that cannot read it is refused, saying where the file is and
// how to do without it (DISTTEST_STORE_TOKEN).
//
//   std::string path = TokenFilePath(env);
//   if (env.rank == 0) WriteTokenFile(path, token);
//   else token = ReadTokenFile(path, &error);
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_TOKEN_FILE_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_TOKEN_FILE_H_

#include <string>

#include "disttest/launch/launcher_env.h"

namespace disttest::internal::launched {

// DISTTEST_TOKEN_FILE; else, when every rank is on this node,
// $TMPDIR/disttest-<uid>/store-token-<addr>-<port>; else
// $HOME/.disttest/store-token-<addr>-<port>.
std::string TokenFilePath(const LauncherEnv& env);

// Rank 0: writes `token` to `path` (0600, its directory 0700; replaced
// whole, never followed). Throws ConfigError saying what could not be done.
void WriteTokenFile(const std::string& path, const std::string& token);

// The other ranks: the token in `path`, or "" with `*error` saying why not
// (missing, another user's, readable by others, malformed).
std::string ReadTokenFile(const std::string& path, std::string* error);

// Rank 0, once every rank has joined (or at the end): the file, and its
// directory if that is left empty.
void RemoveTokenFile(const std::string& path);

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_TOKEN_FILE_H_
