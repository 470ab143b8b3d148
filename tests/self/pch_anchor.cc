// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The source that carries the test binaries' precompiled header
// (tests/CMakeLists.txt: disttest_tests_pch_); it has nothing of its own.
