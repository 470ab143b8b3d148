// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/stack_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include "env/text.h"

namespace disttest::internal {
namespace {

// "#3  0x000055f3 in ns::f (this=0x5, n=3) at a.cc:12" (gdb) or
// "#3  0x000055f3 ns::f(int)" (eu-stack, its source line below it):
// "ns::f at a.cc:12" / "ns::f(int)".
std::string Frame(std::string line) {
  std::size_t at = line.find_first_of(" \t");  // After "#3".
  line = at == std::string::npos ? "" : line.substr(at);
  const auto skip_spaces = [&] {
    line.erase(0, std::min(line.find_first_not_of(" \t"), line.size()));
  };
  skip_spaces();
  if (line.starts_with("0x")) {
    line.erase(0, std::min(line.find(' '), line.size()));
    skip_spaces();
  }
  // gdb's frames: "in f (...)" after an address, and the source file or
  // library on the same line (eu-stack puts the source line below).
  bool gdb = line.starts_with("in ");
  if (gdb) line.erase(0, 3);
  std::string where;
  if (std::size_t at_file = line.rfind(" at "); at_file != std::string::npos) {
    where = line.substr(at_file + 4);
    line.erase(at_file);
    gdb = true;
  } else if (std::size_t from = line.rfind(" from ");
             from != std::string::npos) {
    line.erase(from);
    gdb = true;
  }
  // gdb prints the arguments' values, which differ from rank to rank: the
  // last balanced "(...)" after a space goes ("f<void ()> (this=0x5)").
  while (gdb && !line.empty() && line.back() == ' ') line.pop_back();
  if (gdb && !line.empty() && line.back() == ')') {
    int depth = 0;
    for (std::size_t i = line.size(); i-- > 0;) {
      if (line[i] == ')') ++depth;
      if (line[i] == '(' && --depth == 0) {
        if (i > 0 && line[i - 1] == ' ') line.erase(i - 1);
        break;
      }
    }
  }
  return where.empty() ? line : line + " at " + where;
}

struct Node {
  std::string frame;
  std::set<int> ranks;
  std::vector<std::unique_ptr<Node>> children;  // In order of first rank.

  Node* Child(const std::string& f) {
    for (auto& c : children) {
      if (c->frame == f) return c.get();
    }
    children.push_back(std::make_unique<Node>());
    children.back()->frame = f;
    return children.back().get();
  }
};

std::string Ranks(const std::set<int>& ranks) {
  return RanksText(std::vector<int>(ranks.begin(), ranks.end()));
}

// A frame of the program's start-up, of gtest or of disttest (or of the
// std::function and std::invoke between them), not of the code under test.
bool Harness(const std::string& frame) {
  const std::size_t at = frame.find(" at ");
  const std::string_view function = std::string_view(frame).substr(0, at);
  const std::string_view where = at == std::string::npos
                                     ? std::string_view()
                                     : std::string_view(frame).substr(at + 4);
  for (std::string_view prefix :
       {"_start", "__libc_start", "main", "testing::", "void testing::",
        "bool testing::", "disttest::internal::", "std::function<"}) {
    if (function.starts_with(prefix) &&
        (prefix != "main" || function.size() == 4)) {
      return true;
    }
  }
  for (std::string_view path :
       {"/src/glue/", "/src/harness/", "/disttest/internal/", "/gtest/",
        "/googletest/", "/bits/std_function.h", "/bits/invoke.h"}) {
    if (where.find(path) != std::string_view::npos) return true;
  }
  return false;
}

class Printer {
 public:
  explicit Printer(std::size_t max_lines) : max_lines_(max_lines) {}

  // `node`'s ranks as a heading, then its chain of frames while the ranks
  // stay the same, then each branch one level in.
  void Branch(const Node& node, int depth) {
    Line(depth, Ranks(node.ranks) + ":");
    const Node* n = &node;
    std::vector<std::string> chain;
    for (;;) {
      chain.push_back(n->frame);
      if (n->children.size() != 1 || n->children[0]->ranks != n->ranks) break;
      n = n->children[0].get();
    }
    // The start-up, gtest and disttest frames above the test's own code
    // say nothing at 2 a.m.: three or more at the top are one line (the XML
    // keeps every frame). Below the test's code every frame shows.
    std::size_t top = 0;
    if (depth == 0) {
      while (top < chain.size() && Harness(chain[top])) ++top;
      if (top >= 3) {
        Line(depth + 1, fmt::format("... ({} frames of start-up, gtest and "
                                    "disttest)",
                                    top));
      } else {
        top = 0;
      }
    }
    for (std::size_t i = top; i < chain.size(); ++i) Line(depth + 1, chain[i]);
    // The threads that end here (a rank's other threads go on elsewhere).
    for (const auto& child : n->children) Branch(*child, depth + 1);
  }

  std::string Take() {
    if (cut_ > 0) {
      out_ += fmt::format(
          "... ({} more lines of the merged stacks cut; each rank's whole "
          "stack is in the XML, property rank<r>.disttest_stack)\n",
          cut_);
    }
    return std::move(out_);
  }

 private:
  void Line(int depth, const std::string& text) {
    if (lines_ >= max_lines_) {
      ++cut_;
      return;
    }
    ++lines_;
    out_ += std::string(2 * depth, ' ') + text + "\n";
  }

  std::size_t max_lines_;
  std::size_t lines_ = 0;
  std::size_t cut_ = 0;
  std::string out_;
};

}  // namespace

std::vector<std::vector<std::string>> ParseStacks(const std::string& stack) {
  std::vector<std::vector<std::string>> threads;
  std::istringstream in(stack);
  bool in_thread = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("TID ") || line.starts_with("Thread ")) {
      threads.emplace_back();
      in_thread = true;
    } else if (line.starts_with("#")) {
      if (!in_thread) {  // A tool that names no thread: one thread.
        threads.emplace_back();
        in_thread = true;
      }
      threads.back().push_back(Frame(line));
    } else if (line.starts_with("    ") && in_thread &&
               !threads.back().empty()) {
      // eu-stack's source line of the frame above.
      const std::size_t text = line.find_first_not_of(' ');
      if (text != std::string::npos) {
        threads.back().back() += " at " + line.substr(text);
      }
    }
  }
  threads.erase(std::remove_if(threads.begin(), threads.end(),
                               [](const auto& t) { return t.empty(); }),
                threads.end());
  return threads;
}

std::string MergeStacks(const std::vector<std::pair<int, std::string>>& stacks,
                        std::size_t max_lines) {
  Node root;
  for (const auto& [rank, stack] : stacks) {
    for (const std::vector<std::string>& frames : ParseStacks(stack)) {
      Node* n = &root;
      n->ranks.insert(rank);
      for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
        n = n->Child(*f);
        n->ranks.insert(rank);
      }
    }
  }
  Printer printer(max_lines);
  for (const auto& top : root.children) printer.Branch(*top, 0);
  return printer.Take();
}

}  // namespace disttest::internal
