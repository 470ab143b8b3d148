// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/token_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "disttest/error.h"

namespace disttest::internal::launched {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
         "/disttest-token-test-" + std::to_string(getpid());
}

// What a rank on another node reads is what rank 0 wrote, in a file only
// its user can read, in a directory only its user can enter.
TEST(TokenFileTest, RankZeroWritesWhatTheOthersRead) {
  const std::string dir = TempDir();
  const std::string path = dir + "/keys/store-token";
  WriteTokenFile(path, "0123456789abcdef");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir + "/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::string error;
  EXPECT_EQ(ReadTokenFile(path, &error), "0123456789abcdef");
  EXPECT_EQ(error, "");
  // A later run replaces it whole.
  WriteTokenFile(path, "fedcba9876543210");
  EXPECT_EQ(ReadTokenFile(path, &error), "fedcba9876543210");
  RemoveTokenFile(path);
  EXPECT_EQ(ReadTokenFile(path, &error), "");
  EXPECT_THAT(error,
              HasSubstr("cannot read " + path + ": No such file or directory"));
  std::filesystem::remove_all(dir);
}

// A token others could read is no secret; one another user wrote is not
// rank 0's; a link is not followed.
TEST(TokenFileTest, AFileOthersCanReadOrAnotherUsersIsRefused) {
  const std::string dir = TempDir();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/token";
  std::ofstream(path) << "0123456789abcdef";
  chmod(path.c_str(), 0644);
  std::string error;
  EXPECT_EQ(ReadTokenFile(path, &error), "");
  EXPECT_THAT(error, HasSubstr("can be read by other users (mode 644)"));
  chmod(path.c_str(), 0600);
  std::filesystem::create_symlink(path, dir + "/link");
  EXPECT_EQ(ReadTokenFile(dir + "/link", &error), "");
  EXPECT_THAT(error, HasSubstr("Too many levels of symbolic links"));
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    EXPECT_EQ(ReadTokenFile(path, &error), "");
    EXPECT_THAT(error, HasSubstr("is owned by uid 65534, not by this user"));
  }
  // Rank 0 cannot keep it where another user could replace it.
  std::filesystem::create_directories(dir + "/open");
  chmod((dir + "/open").c_str(), 0777);
  try {
    WriteTokenFile(dir + "/open/token", "0123456789abcdef");
    ADD_FAILURE() << "written into a directory anyone can write";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("other users can write to it"));
    EXPECT_THAT(e.what(), HasSubstr("set DISTTEST_STORE_TOKEN to one secret "
                                    "on every rank"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace disttest::internal::launched
