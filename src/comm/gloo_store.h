// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooStore: lets Gloo's rendezvous (connectFullMesh) run over a disttest
// Store.
//
//   disttest::PrefixStore prefixed("gloo/3", store);   // fresh namespace
//   disttest::internal::GlooStore adapter(prefixed);
//   context->connectFullMesh(adapter, device);
//
// Gloo calls get() without waiting first, so get() blocks (with the store's
// timeout) until the key is set. wait(keys, timeout) applies `timeout` to the
// store for that one call; Gloo's kNoTimeout (0) means the store's own
// timeout. disttest exceptions (TimeoutError, StoreError) propagate as they
// are; Gloo does not catch them. The adapter holds a reference: the store
// must outlive it. Not thread-safe, as the store it wraps.
#ifndef DISTTEST_SRC_COMM_GLOO_STORE_H_
#define DISTTEST_SRC_COMM_GLOO_STORE_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "disttest/rendezvous/store.h"

namespace disttest::internal {

class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(disttest::Store& store) : store_(store) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  disttest::Store& store_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_GLOO_STORE_H_
