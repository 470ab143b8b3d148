// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: the TCP store's request decoder, which reads whatever a
// connection sends (src/rendezvous/wire.h). Arbitrary bytes must be decoded
// or rejected without reading out of bounds; a payload that decodes must
// pass ValidateRequest and re-encode to exactly the same bytes, because the
// encoding is canonical.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rendezvous/wire.h"

namespace {

namespace wire = disttest::internal;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "store_request_fuzzer: %s\n", what);
  std::abort();
}

void CheckRoundTrip(const char* payload, std::size_t size,
                    const wire::Request& request) {
  std::string error;
  if (!wire::ValidateRequest(request, &error)) {
    Fail("a decoded request fails ValidateRequest");
  }
  const std::vector<char> frame = wire::EncodeRequest(request);
  if (frame.size() != wire::kFrameHeaderBytes + size ||
      wire::DecodeFrameLength(frame.data()) != size ||
      std::memcmp(frame.data() + wire::kFrameHeaderBytes, payload, size) != 0) {
    Fail("re-encoding a decoded request changed its bytes");
  }
  // The token comparison must agree with ==, whatever the lengths.
  if (wire::TokensEqual(request.token, request.key) !=
      (request.token == request.key)) {
    Fail("TokensEqual disagrees with ==");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const char* payload = reinterpret_cast<const char*>(data);
  wire::Request request;
  std::string error;
  if (!wire::DecodeRequest(payload, size, &request, &error)) {
    if (error.empty()) Fail("a request was rejected without a reason");
    return 0;
  }
  CheckRoundTrip(payload, size, request);
  return 0;
}
