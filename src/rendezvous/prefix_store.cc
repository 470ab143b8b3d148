// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/rendezvous/prefix_store.h"

#include <chrono>
#include <utility>

namespace disttest {

namespace {

// Applies the view's timeout to the base for one call. Every call is
// covered, not only get and wait: on a remote store even a set may block
// while connecting, and the view's owner chose the view's timeout for that.
class ScopedTimeout {
 public:
  ScopedTimeout(Store& store, std::chrono::milliseconds timeout)
      : store_(store), saved_(store.timeout()) {
    store_.set_timeout(timeout);
  }
  ~ScopedTimeout() { store_.set_timeout(saved_); }
  ScopedTimeout(const ScopedTimeout&) = delete;
  ScopedTimeout& operator=(const ScopedTimeout&) = delete;

 private:
  Store& store_;
  std::chrono::milliseconds saved_;
};

}  // namespace

// The view starts with the base's timeout so that wrapping a store does not
// silently change how long its calls may block.
PrefixStore::PrefixStore(std::string prefix, Store& base)
    : prefix_(std::move(prefix)), base_(base) {
  set_timeout(base.timeout());
}

std::string PrefixStore::scope() const { return base_.scope() + Key(""); }

std::string PrefixStore::Key(std::string_view key) const {
  std::string full;
  full.reserve(prefix_.size() + 1 + key.size());
  full.append(prefix_).append("/").append(key);
  return full;
}

std::vector<std::string> PrefixStore::Keys(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& key : keys) full.push_back(Key(key));
  return full;
}

void PrefixStore::set(std::string_view key, const std::vector<char>& value) {
  ScopedTimeout scoped(base_, timeout());
  base_.set(Key(key), value);
}

std::vector<char> PrefixStore::get(std::string_view key) {
  ScopedTimeout scoped(base_, timeout());
  return base_.get(Key(key));
}

int64_t PrefixStore::add(std::string_view key, int64_t delta) {
  ScopedTimeout scoped(base_, timeout());
  return base_.add(Key(key), delta);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  ScopedTimeout scoped(base_, timeout());
  return base_.check(Keys(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys) {
  ScopedTimeout scoped(base_, timeout());
  base_.wait(Keys(keys));
}

bool PrefixStore::remove(std::string_view key) {
  ScopedTimeout scoped(base_, timeout());
  return base_.remove(Key(key));
}

}  // namespace disttest
