#!/usr/bin/python3
"""DocsLinksTest: every relative link in README.md and docs/*.md must point at a file or folder
that exists, and a link with a #fragment into a Markdown file at one of its headings (GitHub's
anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2, ... for repeats).

Usage: check_links.py [REPO_ROOT]   (default: two folders up from this script)
Exits 0 when every link resolves, 1 with one line per broken link otherwise. Standard library
only, so it runs with any python3.
"""

import os
import re
import sys
import unicodedata
from urllib.parse import unquote

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# [text](target "title"), ![alt](target); text may hold one level of nested brackets (images).
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+[\"'(][^)]*)?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
HTML_HREF = re.compile(r"<(?:a|img)\s+[^>]*(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def strip_code_spans(line):
    """The line with inline code replaced by spaces, so links inside code are not links."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def prose_lines(text):
    """(line number, line) for the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and not line.strip()[len(match.group(1)):].strip():
            fence = None


def heading_text_to_plain(text):
    """What GitHub's renderer would show of a heading: code spans, links, emphasis and HTML
    reduced to their text."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)       # images: alt text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)        # links: their text
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)       # reference links
    text = re.sub(r"<[^>]+>", "", text)                         # inline HTML
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), text)    # code spans: their content
    text = re.sub(r"(\*+)(\S(?:.*?\S)?)\1", r"\2", text)       # *emphasis*, **strong**
    text = re.sub(r"(?<![\w])(_+)(\S(?:.*?\S)?)\1(?![\w])", r"\2", text)  # _emphasis_
    return text


def slug(text):
    """GitHub's heading anchor: lower case; keep letters, digits, marks, spaces, '-' and '_';
    spaces become hyphens."""
    plain = heading_text_to_plain(text).strip().lower()
    kept = []
    for char in plain:
        category = unicodedata.category(char)
        if char in "-_" or char == " " or category[0] in "LN" or category[0] == "M":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors_of(path, cache={}):
    """Every anchor a Markdown file offers: its headings' slugs (with -N for repeats) and the
    names and ids of HTML anchors."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    anchors, seen = set(), {}
    previous = None
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        title = None
        if match:
            title = match.group(2)
        elif previous is not None and previous.strip() and SETEXT.match(line) \
                and not HEADING.match(previous) and not previous.lstrip().startswith(("|", "-", "*", ">")):
            title = previous.strip()
        if title is not None:
            base = slug(title)
            count = seen.get(base, 0)
            anchors.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
        for name in HTML_ANCHOR.findall(line):
            anchors.add(name)
        previous = line
    cache[path] = anchors
    return anchors


def links_of(text):
    """(line number, target) for every link target outside code."""
    for number, line in prose_lines(text):
        visible = strip_code_spans(line)
        for match in INLINE_LINK.finditer(visible):
            yield number, match.group(1)
        match = REFERENCE_DEF.match(visible)
        if match:
            yield number, match.group(1)
        for target in HTML_HREF.findall(visible):
            yield number, target


def check_file(root, path):
    """One message per broken link of the Markdown file at path."""
    problems = []
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    shown = os.path.relpath(path, root)
    for number, target in links_of(text):
        target = target.strip("<>")
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # http:, https:, mailto: ...: not this test's business
        file_part, _, fragment = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part:
            if file_part.startswith("/"):
                resolved = os.path.normpath(os.path.join(root, file_part.lstrip("/")))
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        else:
            resolved = path
        if not os.path.exists(resolved):
            problems.append(f"{shown}:{number}: {target}: no such file "
                            f"{os.path.relpath(resolved, root)}")
            continue
        if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
            if unquote(fragment).lower() not in anchors_of(resolved):
                problems.append(f"{shown}:{number}: {target}: no heading with anchor "
                                f"#{fragment} in {os.path.relpath(resolved, root)}")
    return problems


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted(os.path.join(docs, name) for name in os.listdir(docs)
                        if name.endswith(".md"))
    problems, links = [], 0
    for page in pages:
        if not os.path.isfile(page):
            problems.append(f"{os.path.relpath(page, root)}: missing")
            continue
        with open(page, encoding="utf-8") as handle:
            links += sum(1 for _ in links_of(handle.read()))
        problems += check_file(root, page)
    if problems:
        print(f"DocsLinksTest: {len(problems)} broken link(s) in README.md and docs/*.md:")
        for problem in problems:
            print("  " + problem)
        print("Fix the link, or the heading or file it points at (anchors are GitHub's: lower "
              "case, punctuation dropped, spaces to hyphens).")
        return 1
    print(f"DocsLinksTest: {links} links in {len(pages)} pages, all resolve.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
