// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// PrefixStore: a view of another store in which every key is prefixed.
//
//   disttest::PrefixStore test_store("test-7", base);   // keys "test-7/..."
//   test_store.set("x", "1");                           // base sees "test-7/x"
//
// The view holds a reference: `base` must outlive it. Its timeout is the
// view's own and is applied to the base around every blocking call.
#ifndef DISTTEST_RENDEZVOUS_PREFIX_STORE_H_
#define DISTTEST_RENDEZVOUS_PREFIX_STORE_H_

#include <string>

#include "disttest/rendezvous/store.h"

namespace disttest {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& base);

  using Store::set;
  void set(std::string_view key, const std::vector<char>& value) override;
  std::vector<char> get(std::string_view key) override;
  int64_t add(std::string_view key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;
  bool remove(std::string_view key) override;
  // The base's scope, then this prefix and "/".
  std::string scope() const override;

  const std::string& prefix() const { return prefix_; }

 private:
  std::string Key(std::string_view key) const;
  std::vector<std::string> Keys(const std::vector<std::string>& keys) const;

  std::string prefix_;
  Store& base_;
};

}  // namespace disttest

#endif  // DISTTEST_RENDEZVOUS_PREFIX_STORE_H_
