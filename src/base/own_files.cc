// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/own_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace disttest::internal {
namespace {

// Why a directory or file with `st` is not this process's to write in or
// to; "" when it is.
std::string NotOurs(const struct stat& st) {
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return fmt::format("it is owned by uid {}, not by this user (uid {})",
                       st.st_uid, me);
  }
  return "";
}

// Why `dir` is not a directory this process may write in; "" when it is.
// Unless `follow`, a symbolic link is refused (one planted below the
// directory the user named would lead anywhere).
std::string CheckDirectory(const std::string& dir, bool follow) {
  struct stat st {};
  if ((follow ? stat(dir.c_str(), &st) : lstat(dir.c_str(), &st)) != 0) {
    return fmt::format("cannot create {}: {}", dir, std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return fmt::format(
        "refused {}: it is a symbolic link, which disttest does not follow",
        dir);
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir);
  if (std::string why = NotOurs(st); !why.empty()) {
    return fmt::format("refused the directory {}: {}", dir, why);
  }
  // Group-writable is this user's alone where the group is its own (the
  // private group of a umask 002, Debian's default for users).
  const bool others_write =
      (st.st_mode & S_IWOTH) != 0 ||
      ((st.st_mode & S_IWGRP) != 0 && st.st_gid != getegid());
  if (others_write && (st.st_mode & S_ISVTX) == 0) {
    return fmt::format(
        "refused the directory {}: other users can write to it (mode {:o}) "
        "and it is not sticky, so they could replace a file in it",
        dir, st.st_mode & 07777);
  }
  return "";
}

// mkdir(2) of `dir` unless it exists, noted in `made` when made here; ""
// or why not.
std::string MakeOne(const std::filesystem::path& dir,
                    std::vector<std::filesystem::path>& made) {
  if (mkdir(dir.c_str(), 0700) == 0) {
    made.push_back(dir);
  } else if (errno != EEXIST) {
    return fmt::format("cannot create {}: {}", dir.string(),
                       std::strerror(errno));
  }
  return "";
}

// MakeOwnDirectory's work; `made` gets what it made, `root_made` how many
// of those are root's and above once root stands.
std::string MakeOwnDirectoryOrSome(const std::string& root,
                                   const std::string& below,
                                   std::vector<std::filesystem::path>& made,
                                   std::size_t& root_made);

}  // namespace

std::string MakeOwnDirectory(const std::string& root,
                             const std::string& below) {
  // Where a part cannot be made (a name too long, a file in the way), the
  // directories made for it go again, newest first: nothing is left for a
  // path that was refused.
  std::vector<std::filesystem::path> made;
  std::size_t root_made = SIZE_MAX;
  std::string why = MakeOwnDirectoryOrSome(root, below, made, root_made);
  if (!why.empty()) {
    // Where `root` itself stands, only what was made below it goes: another
    // process of the run may be making its own part there (ctest -j with
    // one DISTTEST_LOG_DIR).
    const std::size_t keep = root_made == SIZE_MAX ? 0 : root_made;
    for (std::size_t i = made.size(); i > keep; --i) {
      rmdir(made[i - 1].c_str());
    }
  }
  return why;
}

namespace {

std::string MakeOwnDirectoryOrSome(const std::string& root,
                                   const std::string& below,
                                   std::vector<std::filesystem::path>& made,
                                   std::size_t& root_made) {
  // New directories are this user's alone: logs and traces hold what tests
  // printed. Above `root` only what is missing is made; nothing is judged.
  std::filesystem::path p;
  for (const std::filesystem::path& part : std::filesystem::path(root)) {
    p /= part;
    if (std::string why = MakeOne(p, made); !why.empty()) return why;
  }
  if (std::string why = CheckDirectory(root, /*follow=*/true); !why.empty()) {
    return why;
  }
  root_made = made.size();
  for (const std::filesystem::path& part : std::filesystem::path(below)) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return fmt::format("{}: \"..\" is refused", below);
    p /= part;
    if (std::string why = MakeOne(p, made); !why.empty()) return why;
    if (std::string why = CheckDirectory(p.string(), /*follow=*/false);
        !why.empty()) {
      return why;
    }
  }
  return "";
}

}  // namespace

int CreateOwnFile(const std::string& path, bool append, std::string* error) {
  const int fd = open(path.c_str(),
                      O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
                          (append ? O_APPEND : 0),
                      0600);
  if (fd < 0) {
    const int e = errno;
    *error = e == ELOOP
                 ? fmt::format(
                       "refused {}: it is a symbolic link, "
                       "which disttest does not follow",
                       path)
                 : fmt::format("cannot write {}: {}", path, std::strerror(e));
    return -1;
  }
  struct stat st {};
  std::string why;
  if (fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else if (st.st_nlink > 1) {
    why = fmt::format("it has {} names (hard links)", st.st_nlink);
  } else {
    why = NotOurs(st);
  }
  if (why.empty() && !append && ftruncate(fd, 0) != 0) {
    why = std::strerror(errno);
  }
  if (!why.empty()) {
    close(fd);
    *error = fmt::format("refused {}: {}", path, why);
    return -1;
  }
  return fd;
}

}  // namespace disttest::internal
