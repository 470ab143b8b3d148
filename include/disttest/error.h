// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The exceptions disttest throws. Every library error derives from
// disttest::Error, so one catch clause sees them all:
//
//   try {
//     store.get("key");
//   } catch (const disttest::TimeoutError& e) {
//     // "store get of key 'key' timed out after 30000 ms (127.0.0.1:41234)"
//   }
//
// Failed system calls are reported as fmt::system_error (a std::system_error)
// with messages of the form "cannot <verb> <object>".
#ifndef DISTTEST_ERROR_H_
#define DISTTEST_ERROR_H_

#include <stdexcept>
#include <string>

namespace disttest {

// Root of every exception that disttest throws on its own account.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The key-value store failed: the connection broke, the server answered with
// an error, or a request was malformed.
class StoreError : public Error {
 public:
  using Error::Error;
};

// A blocking operation ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A rank process could not be started.
class SpawnError : public Error {
 public:
  using Error::Error;
};

// A collective or point-to-point operation failed.
class CommError : public Error {
 public:
  using Error::Error;
};

// An option, a configuration value or an environment variable is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

}  // namespace disttest

#endif  // DISTTEST_ERROR_H_
