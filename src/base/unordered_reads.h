// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Reads that race by design: a seqlock's reader copies what a writer may be
// rewriting, then reads the stamp again and drops the copy if it changed; a
// scan of every descriptor of the process looks at those another thread
// may be opening. Under ThreadSanitizer (which would call them data races,
// and cannot see the fences that order a seqlock) they are not checked.
// Nothing without ThreadSanitizer.
//
//   bool Copy(const Entry& e, Record* out) {
//     const UnorderedReads seqlock;
//     ...read e, fence, read e.stamp again...
//   }
#ifndef DISTTEST_SRC_BASE_UNORDERED_READS_H_
#define DISTTEST_SRC_BASE_UNORDERED_READS_H_

extern "C" {
// ThreadSanitizer's dynamic annotations (null without it).
__attribute__((weak)) void AnnotateIgnoreReadsBegin(const char* file, int line);
__attribute__((weak)) void AnnotateIgnoreReadsEnd(const char* file, int line);
}

namespace disttest::internal {

class UnorderedReads {
 public:
  UnorderedReads() {
    if (&AnnotateIgnoreReadsBegin != nullptr) {
      AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    }
  }
  ~UnorderedReads() {
    if (&AnnotateIgnoreReadsEnd != nullptr) {
      AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
  }
  UnorderedReads(const UnorderedReads&) = delete;
  UnorderedReads& operator=(const UnorderedReads&) = delete;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_UNORDERED_READS_H_
