// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Whether this process is a rank of a launched run, and the job it joins
// (launched_detection.cc), for the run of a launched test (launched.cc).
#ifndef DISTTEST_SRC_GLUE_LAUNCHED_DETECTION_H_
#define DISTTEST_SRC_GLUE_LAUNCHED_DETECTION_H_

#include <string>

#include "harness/launched/job.h"

namespace disttest::internal {

// Why the launcher's environment is unusable though this process is a rank
// of a launched run; "" when it is usable.
const std::string& LauncherEnvError();

// The job, joined at the first call (a failure to join is remembered and
// thrown again); once joined, this rank says goodbye at the end of the run.
launched::LaunchedJob& JoinLaunchedJob();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_GLUE_LAUNCHED_DETECTION_H_
