#!/usr/bin/env python3
# Checks the links of the documentation: README.md and every docs/*.md.
#
#   python3 scripts/check-doc-links.py [REPO_ROOT]
#
# REPO_ROOT defaults to the parent of this script's folder. For each file it
# reads every relative link ([text](target), ![alt](target), [id]: target,
# href="..." and src="..."), outside fenced code blocks and inline code, and
# fails (exit 1, one line per problem: file:line: link: why) when
#   - the target file or folder does not exist (resolved from the linking
#     file's folder; a leading '/' from the repository root),
#   - an anchor ('#section' in the same file, or 'other.md#section') names no
#     heading of that Markdown file (GitHub's anchors: the heading's text,
#     lowercase, punctuation other than '-' and '_' removed, each space a '-',
#     '-1', '-2', ... after repeated headings; <a name|id="..."> count too),
#   - README.md has more than 300 lines.
# Links with a scheme (http://, https://, mailto:, ...) are not checked.
# On success it prints "checked N links in M files" and exits 0.
# Standard library only.

import os
import re
import sys
import urllib.parse

README_MAX_LINES = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
# The target of an inline link or image: '](' up to the matching ')', with an
# optional title; one level of parentheses inside the target is allowed.
INLINE_LINK = re.compile(
    r"\]\(\s*(<[^>]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text):
    """Yields (line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and line.strip() == m.group(1):
            fence = None


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                        # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(text):
    """Every anchor a Markdown file defines."""
    found, seen = set(), {}

    def add(heading):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))

    previous = None  # the previous prose line, for setext headings
    for _, line in prose_lines(text):
        for name in HTML_ANCHOR.findall(line):
            found.add(name)
        m = ATX.match(line)
        if m:
            add(m.group(2) or "")
            previous = None
            continue
        if previous is not None and previous.strip() and SETEXT.match(line) \
                and not ATX.match(previous) and not previous.lstrip().startswith(("|", "-", "*", ">")):
            add(previous)
            previous = None
            continue
        previous = line
    return found


def links_of(text):
    """Yields (line number, target) of the links outside code."""
    for number, line in prose_lines(text):
        # Inline code is not a link: blank it out, keeping the columns.
        line = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(1)
        m = REF_DEF.match(line)
        if m:
            yield number, m.group(1)
        for target in HTML_LINK.findall(line):
            yield number, target


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print("usage: %s [REPO_ROOT]" % os.path.basename(argv[0]), file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1] if len(argv) == 2 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = []
    if os.path.isfile(os.path.join(root, "README.md")):
        files.append("README.md")
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + name for name in os.listdir(docs)
                        if name.endswith(".md") and os.path.isfile(os.path.join(docs, name)))
    if not files:
        print("%s: no README.md and no docs/*.md" % root, file=sys.stderr)
        return 1

    texts, anchor_cache, problems, checked = {}, {}, [], 0

    def read(rel):
        if rel not in texts:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                texts[rel] = f.read()
        return texts[rel]

    def anchors(rel):
        if rel not in anchor_cache:
            anchor_cache[rel] = anchors_of(read(rel))
        return anchor_cache[rel]

    for rel in files:
        text = read(rel)
        if rel == "README.md":
            count = len(text.splitlines())
            if count > README_MAX_LINES:
                problems.append("README.md:%d: (length): README.md has %d lines, more than %d"
                                % (count, count, README_MAX_LINES))
        for number, target in links_of(text):
            where = "%s:%d: %s" % (rel, number, target)
            raw = target[1:-1] if target.startswith("<") and target.endswith(">") else target
            if not raw:
                problems.append("%s: empty link target" % where)
                continue
            if SCHEME.match(raw) or raw.startswith("//"):
                continue  # http(s)://, mailto: and other absolute URLs
            checked += 1
            path, _, anchor = raw.partition("#")
            path = urllib.parse.unquote(path)
            anchor = urllib.parse.unquote(anchor)
            if path:
                if path.startswith("/"):
                    full = os.path.normpath(os.path.join(root, path.lstrip("/")))
                else:
                    full = os.path.normpath(os.path.join(root, os.path.dirname(rel), path))
                if full != root and not full.startswith(root + os.sep):
                    problems.append("%s: points outside the repository" % where)
                    continue
                if not os.path.exists(full):
                    problems.append("%s: %s does not exist" % (where, os.path.relpath(full, root)))
                    continue
                target_rel = os.path.relpath(full, root)
            else:
                target_rel = rel
            if "#" in raw:
                if not target_rel.endswith(".md"):
                    continue  # anchors of other files (#L10 of a source file) are GitHub's
                if not os.path.isfile(os.path.join(root, target_rel)):
                    problems.append("%s: %s is not a file" % (where, target_rel))
                elif anchor not in anchors(target_rel):
                    problems.append("%s: no heading of %s has the anchor '#%s'"
                                    % (where, target_rel, anchor))

    for problem in problems:
        print(problem)
    if problems:
        print("%d problem(s) in %d files" % (len(problems), len(files)), file=sys.stderr)
        return 1
    print("checked %d links in %d files" % (checked, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
