// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/sanitizer_report.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// The sanitizer runtimes' entry points; null in a program built without
// them (weak references pull nothing in and cost nothing).
extern "C" {
__attribute__((weak)) int __lsan_do_recoverable_leak_check();
__attribute__((weak)) void __sanitizer_set_report_fd(void* fd);
}

namespace disttest::internal {
namespace {

// Frames of a stack kept per stack of the report: enough to see the caller.
constexpr int kFramesPerStack = 4;

std::string_view WithoutNewline(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  return line;
}

// "==1234==" before a line of ASan's, LSan's and MSan's.
std::string_view WithoutPid(std::string_view line) {
  if (!line.starts_with("==")) return line;
  const std::size_t end = line.find("==", 2);
  if (end == std::string_view::npos || end == 2) return line;
  for (std::size_t i = 2; i < end; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return line;
  }
  return line.substr(end + 2);
}

// "AddressSanitizer", "ThreadSanitizer": one word that names a sanitizer.
bool IsSanitizerName(std::string_view word) {
  if (!word.ends_with("Sanitizer") || word.size() == 9) return false;
  for (char c : word) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// What UBSan writes before ": runtime error: ": "dir/file.cc:12:7" or
// "file.cc:12" (a path without spaces, then a line), "<unknown>", or
// "(binary+0x1f2c)".
bool IsUbsanLocation(std::string_view s) {
  if (s == "<unknown>") return true;
  if (s.find(' ') != std::string_view::npos) return false;
  if (s.starts_with("(") && s.ends_with(")")) {
    return s.find("+0x") != std::string_view::npos;
  }
  auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == d.npos;
  };
  std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || !digits(s.substr(colon + 1))) {
    return false;
  }
  const std::string_view before = s.substr(0, colon);
  const std::size_t first = before.rfind(':');
  if (first != std::string_view::npos && digits(before.substr(first + 1))) {
    colon = first;
  }
  return colon > 0;
}

// The headline a line starts a report with, and where (UBSan says it on
// the same line); nullopt for any other line.
struct Start {
  std::string headline;
  std::string where;
  bool frames_only = false;  // UBSan: only a stack and a summary follow.
};

std::string Basename(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path
                                                     : path.substr(slash + 1));
}

std::optional<Start> ReportStart(std::string_view line) {
  const std::string_view s = WithoutPid(line);
  for (std::string_view kind : {"ERROR: ", "WARNING: "}) {
    if (!s.starts_with(kind)) continue;
    std::string_view rest = s.substr(kind.size());
    const std::size_t colon = rest.find(": ");
    if (colon == std::string_view::npos ||
        !IsSanitizerName(rest.substr(0, colon))) {
      return std::nullopt;
    }
    // Per-process noise that would keep the same failure of several ranks
    // apart: ASan's registers, TSan's pid.
    std::size_t cut = rest.find(" at pc 0x");
    if (cut == std::string_view::npos) cut = rest.find(" (pid=");
    if (cut != std::string_view::npos) rest = rest.substr(0, cut);
    return Start{std::string(rest), "", false};
  }
  // "LeakSanitizer has encountered a fatal error." (under ptrace, say).
  const std::size_t space = s.find(' ');
  if (space != std::string_view::npos && IsSanitizerName(s.substr(0, space)) &&
      s.substr(space).starts_with(" has encountered a fatal error")) {
    return Start{std::string(s), "", false};
  }
  // UBSan: "path/file.cc:12:7: runtime error: signed integer overflow: ...",
  // at the start of the line ("<unknown>" or "(binary+0x12)" without line
  // information); not a test's own "caught: runtime error: ...".
  constexpr std::string_view kRuntimeError = ": runtime error: ";
  const std::size_t at = line.find(kRuntimeError);
  if (at != std::string_view::npos && at > 0 &&
      IsUbsanLocation(line.substr(0, at))) {
    return Start{std::string(line.substr(at + 2)), Basename(line.substr(0, at)),
                 true};
  }
  return std::nullopt;
}

bool IsFrame(std::string_view line) {
  std::size_t i = line.find_first_not_of(' ');
  return i != std::string_view::npos && line.substr(i).starts_with("#") &&
         i + 1 < line.size() &&
         std::isdigit(static_cast<unsigned char>(line[i + 1]));
}

// "file.cc:42" from "#1 0x55 in Body() /src/file.cc:42:7" where the frame
// is the program's own code (not a sanitizer's, the C library's or the
// standard library's headers); empty otherwise.
std::string SourceOf(std::string_view frame) {
  const std::size_t space = frame.rfind(' ');
  if (space == std::string_view::npos) return "";
  std::string_view where = frame.substr(space + 1);
  if (where.starts_with("(") || where.starts_with("/usr/include/") ||
      where.starts_with("/usr/lib/") || where.starts_with("/lib/") ||
      where.find("/libsanitizer/") != std::string_view::npos ||
      where.find("/sanitizer_common/") != std::string_view::npos ||
      where.find("compiler-rt/") != std::string_view::npos) {
    return "";
  }
  // path:line or path:line:column
  std::size_t colon = where.rfind(':');
  if (colon == std::string_view::npos) return "";
  auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == d.npos;
  };
  if (!digits(where.substr(colon + 1))) return "";
  const std::size_t first = where.rfind(':', colon - 1);
  if (first != std::string_view::npos &&
      digits(where.substr(first + 1, colon - first - 1))) {
    where = where.substr(0, colon);  // Without the column.
    colon = first;
  }
  if (colon == 0) return "";
  return Basename(where.substr(0, colon)) + std::string(where.substr(colon));
}

}  // namespace

std::string SanitizerReport::str() const {
  std::string text = headline;
  if (!where.empty()) text += fmt::format(", at {}", where);
  for (const std::string& line : lines) text += "\n  " + line;
  if (cut) text += "\n  ...";
  if (!summary.empty()) text += "\n  " + summary;
  text += "\n  (the whole report is in the rank's output";
  if (count > 1) {
    text += fmt::format("; {} more report{} after it", count - 1,
                        count == 2 ? "" : "s");
  }
  return text + ")";
}

void SanitizerScanner::Line(std::string_view raw) {
  const std::string_view line = WithoutNewline(raw);
  // Most lines are not a sanitizer's: a report starts with a line that has
  // a colon, or with "==pid==" ("==7==LeakSanitizer has encountered a fatal
  // error.").
  if (!in_first_ && line.find(':') == std::string_view::npos &&
      !line.starts_with("==")) {
    return;
  }
  if (std::optional<Start> start = ReportStart(line)) {
    if (!report_) {
      report_.emplace();
      report_->headline = std::move(start->headline);
      report_->where = std::move(start->where);
      report_->at = std::chrono::steady_clock::now();
      in_first_ = true;
      frames_only_ = start->frames_only;
      shadow_ = false;
      frames_ = 0;
    } else {
      in_first_ = false;  // A second report: only counted.
    }
    ++report_->count;
    return;
  }
  if (!in_first_) return;
  const std::string_view s = WithoutPid(line);
  if (s.starts_with("SUMMARY: ")) {
    report_->summary = std::string(s);
    in_first_ = false;
    return;
  }
  const bool frame = IsFrame(s);
  if (frame && report_->where.empty()) report_->where = SourceOf(s);
  // UBSan's report is its line and its stack: another line is the test's.
  if (frames_only_ && !frame) return;
  // ASan's memory map (after its summary, where that comes).
  if (s.starts_with("Shadow bytes")) shadow_ = true;
  if (shadow_ || s.empty()) return;
  frames_ = frame ? frames_ + 1 : 0;
  if (frame && frames_ > kFramesPerStack) {
    report_->cut = true;
    return;
  }
  if (report_->lines.size() >= SanitizerReport::kMaxLines) {
    report_->cut = true;
    return;
  }
  report_->lines.emplace_back(s);
}

std::optional<SanitizerReport> SanitizerScanner::Take() {
  std::optional<SanitizerReport> report = std::move(report_);
  report_.reset();
  in_first_ = false;
  shadow_ = false;
  return report;
}

namespace {

// ASAN_OPTIONS=log_path=... (or LSAN_OPTIONS's): the user wants the
// reports in files; disttest leaves the report where it goes.
bool ReportsGoToFiles() {
  for (const char* var : {"ASAN_OPTIONS", "LSAN_OPTIONS"}) {
    const char* value = std::getenv(var);
    if (value != nullptr && std::strstr(value, "log_path=") != nullptr) {
      return true;
    }
  }
  return false;
}

std::string ReadAll(int fd) {
  std::string text;
  if (lseek(fd, 0, SEEK_SET) != 0) return text;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void* AsReportFd(int fd) {
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
}

}  // namespace

bool LeakSanitizerRuns() {
  // With detect_leaks=0 the check returns at once: the runtime decides
  // (standalone LeakSanitizer reads LSAN_OPTIONS only, ASan's both).
  return &__lsan_do_recoverable_leak_check != nullptr;
}

std::optional<std::string> LeaksOfThisTest() {
  if (!LeakSanitizerRuns()) return std::nullopt;
  // The report is read back into the failure where the runtime lets it be
  // written to a file of ours; otherwise it goes where it would.
  int fd = -1;
  if (&__sanitizer_set_report_fd != nullptr && !ReportsGoToFiles()) {
    fd = memfd_create("disttest-leak-report", MFD_CLOEXEC);
  }
  std::fflush(nullptr);
  if (fd >= 0) __sanitizer_set_report_fd(AsReportFd(fd));
  const bool leaked = __lsan_do_recoverable_leak_check() != 0;
  if (fd < 0) {
    if (!leaked) return std::nullopt;
    return std::string(
        "LeakSanitizer: detected memory leaks (the report is in the rank's "
        "output, or where log_path says)");
  }
  __sanitizer_set_report_fd(AsReportFd(STDERR_FILENO));
  const std::string text = ReadAll(fd);
  close(fd);
  if (!leaked) {
    WriteAll(STDERR_FILENO, text);  // A warning, say: as it would have gone.
    return std::nullopt;
  }
  SanitizerScanner scanner;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    scanner.Line(std::string_view(text).substr(at, nl - at));
    at = nl + 1;
  }
  std::optional<SanitizerReport> report = scanner.Take();
  // Leaks stay leaked: the same summary again is the same leaks, which an
  // earlier test of this process already failed with.
  static std::string* reported = new std::string;
  const std::string& key =
      report && !report->summary.empty() ? report->summary : text;
  if (key == *reported) return std::nullopt;
  *reported = key;
  WriteAll(STDERR_FILENO, text);
  if (!report) {
    return std::string(
        "LeakSanitizer: detected memory leaks (the report is in the rank's "
        "output)");
  }
  return report->str();
}

}  // namespace disttest::internal
