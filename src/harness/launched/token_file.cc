// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/token_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/own_files.h"
#include "disttest/env/names.h"
#include "disttest/error.h"

namespace disttest::internal::launched {

std::string TokenFilePath(const LauncherEnv& env) {
  if (const char* file = std::getenv(env::kTokenFile);
      file != nullptr && *file != '\0') {
    return file;
  }
  std::string addr = env.master_addr;
  for (char& c : addr) {
    if (c == '/' || c == ':') c = '_';
  }
  // Every rank on this node (MASTER_ADDR is the node's own name): a
  // directory of this user's in TMPDIR, which needs no home at all.
  if (env.local_size && *env.local_size == env.world_size) {
    const char* tmp = std::getenv("TMPDIR");
    return fmt::format("{}/disttest-{}/store-token-{}-{}",
                       tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", geteuid(),
                       addr, env.master_port);
  }
  const char* home = std::getenv("HOME");
  const std::string dir =
      home != nullptr && *home != '\0' ? std::string(home) : "/tmp";
  return fmt::format("{}/.disttest/store-token-{}-{}", dir, addr,
                     env.master_port);
}

void WriteTokenFile(const std::string& path, const std::string& token) {
  const std::filesystem::path file(path);
  const std::string parent = file.parent_path().string();
  std::string why = MakeOwnDirectory(parent.empty() ? "." : parent);
  const std::string temp = fmt::format("{}.{}", path, getpid());
  const int fd = why.empty() ? CreateOwnFile(temp, /*append=*/false, &why) : -1;
  if (fd < 0) {
    throw ConfigError(fmt::format(
        "rank 0 cannot keep the store's token in {} ({}): set {} to one "
        "secret on every rank, or {} to a file every rank can read",
        path, why, env::kStoreToken, env::kTokenFile));
  }
  // fchmod: a leftover temporary file of a wider mode is made 0600 too.
  bool written =
      fchmod(fd, 0600) == 0 && write(fd, token.data(), token.size()) ==
                                   static_cast<ssize_t>(token.size());
  int error = written ? 0 : errno;
  close(fd);
  if (written && std::rename(temp.c_str(), path.c_str()) != 0) {
    written = false;
    error = errno;
  }
  if (!written) {
    std::remove(temp.c_str());
    throw ConfigError(
        fmt::format("rank 0 cannot write the store's token to "
                    "{}: {}",
                    path, std::strerror(error)));
  }
}

std::string ReadTokenFile(const std::string& path, std::string* error) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *error = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return "";
  }
  struct stat st {};
  char buffer[256];
  const ssize_t n = fstat(fd, &st) == 0 ? read(fd, buffer, sizeof buffer) : -1;
  close(fd);
  if (n < 0) {
    *error = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return "";
  }
  if (st.st_uid != geteuid()) {
    *error = fmt::format("{} is owned by uid {}, not by this user (uid {})",
                         path, st.st_uid, geteuid());
    return "";
  }
  if ((st.st_mode & 077) != 0) {
    *error = fmt::format("{} can be read by other users (mode {:o})", path,
                         st.st_mode & 0777);
    return "";
  }
  if (n == 0 || n == static_cast<ssize_t>(sizeof buffer)) {
    *error = fmt::format("{} does not hold a token", path);
    return "";
  }
  return std::string(buffer, static_cast<std::size_t>(n));
}

void RemoveTokenFile(const std::string& path) {
  std::remove(path.c_str());
  // Its directory too, once empty (another run's file keeps it).
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (!parent.empty()) rmdir(parent.c_str());
}

}  // namespace disttest::internal::launched
