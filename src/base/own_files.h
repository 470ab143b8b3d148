// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Files the harness writes where a user points it (DISTTEST_LOG_DIR,
// DISTTEST_TRACE): created, never followed. A directory another user owns
// or can write, a symbolic link planted where a file is to be, or a file
// another user owns is refused with a sentence that names it, so that a
// neighbour on a shared machine cannot make a run (perhaps root's)
// truncate or overwrite a file of their choosing.
//
//   std::string why = MakeOwnDirectory(dir, "Suite.Test/2ranks");  // "":
//   usable int fd = CreateOwnFile(dir + "/rank-0.log", /*append=*/false, &why);
#ifndef DISTTEST_SRC_BASE_OWN_FILES_H_
#define DISTTEST_SRC_BASE_OWN_FILES_H_

#include <string>

namespace disttest::internal {

// Makes `root` and its missing parents, then each directory of the relative
// path `below` under it (new ones 0700), and checks `root` and those below
// it: each a directory owned by this user or root, which nobody else can
// write to unless it is sticky (as /tmp is); group-writable is fine when the
// group is this process's own (a user's private group). Returns "" when the
// last may be written in, else why not.
std::string MakeOwnDirectory(const std::string& root,
                             const std::string& below = "");

// Opens `path` for writing, created 0600 if missing: never through a
// symbolic link (O_NOFOLLOW), never a file that another user owns or that
// has other names (hard links); emptied unless `append`. Returns the
// descriptor (close-on-exec), or -1 with `*error` saying why.
int CreateOwnFile(const std::string& path, bool append, std::string* error);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_OWN_FILES_H_
