#!/usr/bin/python3
"""Opens a vexp HTML report in headless Chromium and checks that it works offline.

Usage: report_browser.py REPORT.html SCREENSHOT.png MIN_CHARTS [MAX_RENDER_MS]

Exit status: 0 when the report passed, 1 when it did not (the reason on stderr),
77 when no Chromium is installed (the test is then skipped).

Checks:
  - the file refers to nothing outside itself (no <script src>, <link>, @import, url(http...));
  - Chromium, with every host name unresolvable, logs no console message at all
    (the report writes none: any message is an error, a warning or a failed
    download; Chromium logs every level as INFO:CONSOLE, so all are counted);
  - with #selftest (chart.js hovers across every chart until a tooltip shows and
    clicks its first legend entry off and on), <body data-selftest="ok">;
  - after the scripts ran, <body data-report="ready">, every <div class="chart">
    has data-state="drawn" and a positive data-points, and there are at least
    MIN_CHARTS of them;
  - data-render-ms (page start to the last chart drawn) is printed, and with
    MAX_RENDER_MS given it must not exceed it;
  - a screenshot of the whole page (its height read from the DOM) is saved.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(cmd, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    html, shot, min_charts = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    max_ms = int(sys.argv[4]) if len(sys.argv) > 4 else None
    exe = browser()
    if not exe:
        print("SKIP: no Chromium installed (Debian: apt-get install chromium; tools/install-deps.sh does it)")
        return 77
    problems = []
    text = open(html, encoding="utf-8").read()
    for pat in (r"<script[^>]*\ssrc\s*=", r"<link\b", r"@import", r"url\(\s*['\"]?https?:", r"<img[^>]*\ssrc\s*=\s*['\"]?https?:"):
        if re.search(pat, text, re.I):
            problems.append("the report refers to an outside resource (%s)" % pat)
    profile = tempfile.mkdtemp(prefix="vexp_chromium_")
    try:
        common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
                  "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars", "--window-size=1280,900"]
        url = "file://" + html
        rc, dom, err = run(common + ["--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", "--dump-dom",
                                     url + "#selftest"])
        if rc != 0:
            problems.append("chromium --dump-dom exited %d: %s" % (rc, err.strip()[-2000:]))
        console = [l for l in err.splitlines() if ":CONSOLE" in l]
        for l in console:
            problems.append("console: " + l.split("] ", 1)[-1])
        body = re.search(r"<body([^>]*)>", dom)
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1))) if body else {}
        if attrs.get("data-report") != "ready":
            problems.append("the page did not finish drawing: data-report=%r data-errors=%r" %
                            (attrs.get("data-report"), attrs.get("data-errors")))
        if attrs.get("data-selftest") != "ok":
            problems.append("hover / legend self-test: %r" % attrs.get("data-selftest"))
        charts = re.findall(r'<div class="chart"([^>]*)>', dom)
        drawn = 0
        for c in charts:
            a = dict(re.findall(r'([\w-]+)="([^"]*)"', c))
            if a.get("data-state") == "drawn" and int(a.get("data-points", "0")) > 0:
                drawn += 1
            else:
                problems.append("chart %s: state %r, %s points" % (a.get("data-chart"), a.get("data-state"),
                                                                   a.get("data-points")))
        if len(charts) < min_charts:
            problems.append("%d charts on the page, expected at least %d" % (len(charts), min_charts))
        ms = int(attrs.get("data-render-ms", "-1"))
        height = int(attrs.get("data-height", "2400"))
        print("%s: %d bytes, %d/%d charts drawn, rendered %d ms after the page started (charts: %s ms), page %d px high" %
              (os.path.basename(html), len(text.encode("utf-8")), drawn, len(charts), ms, attrs.get("data-draw-ms"),
               height))
        if max_ms is not None and ms > max_ms:
            problems.append("drawing took %d ms, more than %d" % (ms, max_ms))
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        rc, out, err = run(common[:-1] + ["--window-size=1280,%d" % min(max(height, 600), 16000),
                                         "--virtual-time-budget=20000", "--screenshot=" + os.path.abspath(shot), url])
        if rc != 0 or not os.path.exists(shot) or os.path.getsize(shot) == 0:
            problems.append("no screenshot written (chromium exited %d)" % rc)
        with open(shot, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                problems.append("the screenshot is not a PNG")
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
