// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the harness needs of the process it runs in, whatever started it: a
// wrapper that closed stdout (`>&-`), ignored SIGCHLD or blocked every signal
// before it exec'd the test binary.
//
//   ClaimStandardDescriptors();          // at static initialisation
//   for (const std::string& note : PrepareSignals()) Print(note);
#ifndef DISTTEST_SRC_HARNESS_PROCESS_PROCESS_HYGIENE_H_
#define DISTTEST_SRC_HARNESS_PROCESS_PROCESS_HYGIENE_H_

#include <string>
#include <vector>

namespace disttest::internal {

// Opens /dev/null on whichever of descriptors 0-2 is closed, so that the
// first socket or file the harness opens does not become stdout (where a
// progress line would write into the store's listening socket and the
// process die of SIGPIPE). Runs before main(), before anything opens a
// descriptor.
void ClaimStandardDescriptors();

// Puts in place the signal dispositions and the mask that the harness
// needs, in the calling thread (ranks and threads started after inherit
// them):
//   - SIGCHLD not ignored (SIG_IGN or SA_NOCLDWAIT reaps the ranks before
//     they can be waited for);
//   - SIGTERM, SIGINT, SIGCHLD and SIGUSR2 (stacks of hung ranks) unblocked.
// Returns one line for each change that the run's output should show; each
// is returned once per process.
std::vector<std::string> PrepareSignals();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_PROCESS_HYGIENE_H_
