// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/gloo_store.h"

namespace disttest::internal {

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_.set(key, data);
}

std::vector<char> GlooStore::get(const std::string& key) {
  return store_.get(key);
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  store_.wait(keys);
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  if (timeout <= std::chrono::milliseconds::zero()) {
    store_.wait(keys);
    return;
  }
  const std::chrono::milliseconds saved = store_.timeout();
  store_.set_timeout(timeout);
  try {
    store_.wait(keys);
  } catch (...) {
    store_.set_timeout(saved);
    throw;
  }
  store_.set_timeout(saved);
}

}  // namespace disttest::internal
