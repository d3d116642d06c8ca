#!/usr/bin/python3
"""Relative links of the documentation stay inside the repository and point at files
that exist: docs_links.py SOURCE_DIR. Checks docs/*.md, README.md and every README.md
under plugins/ and sdk/: inline links [text](target), images ![alt](target) and
reference definitions [label]: target, outside code blocks and code spans. URLs with a
scheme (https:, mailto:) and in-page anchors (#...) are not files; an absolute path
is outside the repository. Prints one line per bad link (file:line: why) and exits 1."""
import os
import re
import sys

ROOT = os.path.realpath(sys.argv[1])
INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)")  # the end of [text](target): the text may span lines
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def doc_files():
    out = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    out += [os.path.join(docs, f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    for top in ("plugins", "sdk"):
        for d, _, files in sorted(os.walk(os.path.join(ROOT, top))):
            out += [os.path.join(d, f) for f in sorted(files) if f == "README.md"]
    return [f for f in out if os.path.isfile(f)]


def links(path):
    """(line number, target) of every link outside code."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * len(m.group(1))
                elif line.strip().startswith(fence):
                    fence = None
                continue
            if fence is not None or line.startswith("    ") and not line.strip().startswith(("-", "*", "|")):
                continue
            text = re.sub(r"(`+).*?\1", "", line)  # code spans
            for m in INLINE.finditer(text):
                yield n, m.group(1)
            m = REFDEF.match(text)
            if m:
                yield n, m.group(1)


def problem(doc, target):
    if SCHEME.match(target) or target.startswith("#"):
        return None
    rel = re.split(r"[#?]", target, 1)[0]
    if not rel:
        return None
    if rel.startswith("/"):
        return "links '%s', an absolute path (outside the repository)" % target
    resolved = os.path.realpath(os.path.join(os.path.dirname(doc), rel))
    if os.path.commonpath([resolved, ROOT]) != ROOT:
        return "links '%s', which is outside the repository" % target
    if not os.path.exists(resolved):
        return "links '%s', which does not exist" % target
    return None


def main():
    bad = []
    files = doc_files()
    count = 0
    for doc in files:
        for n, target in links(doc):
            count += 1
            why = problem(doc, target)
            if why:
                bad.append("%s:%d: %s" % (os.path.relpath(doc, ROOT), n, why))
    for b in bad:
        print(b)
    if bad:
        sys.exit(1)
    print("%d links in %d files: every relative one is a file of the repository" % (count, len(files)))


if __name__ == "__main__":
    main()
