#!/usr/bin/env python3
"""`moetrain report RUNDIR --out report.html`, rendered in headless Chromium: the page loads
without console errors (a deliberately broken page shows that errors are caught), every plot
has its data points, a collapsed router is visible in the expert-load heatmap, and user errors
end in one line. Stdlib only, plus Debian's chromium. One ctest test per case:

    report_tests.py --moetrain build/moetrain --work DIR TEST_NAME
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import ARGS, corpus, expect_error, main, run, test, work  # noqa: E402


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("chromium is not installed (tools/install-deps.sh installs it)")


def render(html_path, screenshot=None):
    """Loads the file in headless Chromium; returns (DOM after load, console messages)."""
    profile = html_path + ".profile"
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            "--window-size=1240,1800"]
    argv += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    t0 = time.time()
    p = subprocess.run(argv + ["file://" + os.path.abspath(html_path)], capture_output=True,
                       text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-3000:]
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    print(f"chromium rendered {os.path.basename(html_path)} in {time.time() - t0:.1f} s")
    return p.stdout, console


class Svgs(HTMLParser):
    """The report's SVG figures: per <svg class="plot">, its title, series and heatmap cells."""

    def __init__(self):
        super().__init__()
        self.plots, self.title_next, self.in_title = [], False, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "plot" in a.get("class", ""):
            self.plots.append({"title": a.get("aria-label", ""), "series": {}, "cells": [],
                               "polyline_points": []})
        elif not self.plots:
            return
        elif tag == "polyline" and a.get("class") == "series":
            self.plots[-1]["series"][a["data-series"]] = int(a["data-points"])
            self.plots[-1]["polyline_points"].append(len(a.get("points", "").split()))
        elif tag == "rect" and a.get("class") == "cell":
            self.plots[-1]["cells"].append(a["fill"])


def parse(dom):
    s = Svgs()
    s.feed(dom)
    return {p["title"]: p for p in s.plots}


def assert_self_contained(html):
    # No script, no external resource: the only URL is the SVG namespace.
    urls = set(re.findall(r"(?:https?:)?//[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert "<script" not in html.lower()


@test
def console_errors_are_detected():
    """The negative control of the console check below."""
    d = work("report_console")
    bad = os.path.join(d, "bad.html")
    open(bad, "w").write("<!DOCTYPE html><html><body><script>console.error('boom');"
                         "notDefined();</script></body></html>")
    _, console = render(bad)
    assert any("boom" in c for c in console) and any("notDefined" in c for c in console), console


@test
def report_renders_with_data():
    d = work("report_render")
    data = corpus(d)
    steps, every = 24, 8
    run("train", "--device", "cpu", "--threads", "1", "--preset", "tiny", "--data", data,
        "--batch", 4, "--seq", 32, "--accum", 2, "--steps", steps, "--lr", 3e-3,
        "--eval-every", every, "--eval-batches", 2, "--save-every", 12,
        "--out", f"{d}/run", "--log-json", f"{d}/run/log.jsonl", "--quiet")
    p = run("report", f"{d}/run", "--out", f"{d}/report.html")
    assert "report.html" in p.stdout
    html = open(f"{d}/report.html").read()
    assert_self_contained(html)
    dom, console = render(f"{d}/report.html")
    assert console == [], console
    assert "moetrain run report" in dom
    plots = parse(dom)
    evals = steps // every
    loss = plots["Loss"]["series"]
    assert loss == {"train loss": steps, "val loss": evals}, loss
    assert plots["Loss against tokens seen"]["series"] == {"train loss": steps, "val loss": evals}
    assert plots["Learning rate"]["series"] == {"lr": steps}
    assert plots["Gradient norm (before clipping)"]["series"] == {"grad norm": steps}
    assert plots["Throughput"]["series"] == {"tokens/s": steps - 1}
    heat = plots["Expert load, layer 1"]["cells"]
    assert len(heat) == 4 * steps, len(heat)  # tiny: 4 experts, one column per step
    for p in plots.values():  # every polyline's points attribute holds its points
        assert all(n > 0 for n in p["polyline_points"]), p
    # Tokens seen in the log: step * B * T * accum.
    recs = [json.loads(line) for line in open(f"{d}/run/log.jsonl")]
    assert recs[0]["tokens_seen"] == 4 * 32 * 2


@test
def collapsed_router_is_visible():
    """A synthetic log (no checkpoint needed) where layer 1's router sends every row to
    expert 0 from step 11 on: those columns are dark red for expert 0 and white for the rest."""
    d = work("report_collapse")
    os.makedirs(f"{d}/run")
    with open(f"{d}/run/log.jsonl", "w") as f:
        for s in range(1, 21):
            counts = [32, 32, 32, 32] if s <= 10 else [128, 0, 0, 0]
            share = [c / 128 for c in counts]
            f.write(json.dumps({
                "step": s, "loss": 5.0 / s, "ce": 5.0 / s, "aux": 0.01, "z": 0.0, "lr": 1e-3,
                "grad_norm": 1.0, "tokens_per_s": 1000.0, "loss_scale": 1.0,
                "expert_load": [{"layer": 1, "min_share": min(share), "max_share": max(share),
                                 "empty": counts.count(0), "counts": counts}]}) + "\n")
    run("report", f"{d}/run", "--out", f"{d}/r.html")
    dom, console = render(f"{d}/r.html")
    assert console == [], console
    cells = parse(dom)["Expert load, layer 1"]["cells"]
    rows = [cells[i * 20:(i + 1) * 20] for i in range(4)]
    assert all(c == "#a50026" for c in rows[0][10:]), rows[0]  # expert 0 saturates
    for r in rows[1:]:
        assert all(c == "#ffffff" for c in r[10:]), r  # starved experts are white
        assert len(set(r[:10])) == 1 and r[0] not in ("#ffffff", "#a50026")  # balanced
    html = open(f"{d}/r.html").read()
    assert "Loss against tokens seen is left out" in html  # no checkpoint, no tokens_seen


@test
def report_errors_are_one_line():
    d = work("report_errors")
    os.makedirs(f"{d}/empty")
    os.makedirs(f"{d}/bad")
    open(f"{d}/bad/log.jsonl", "w").write('{"step": 1, "loss": 2.0}\nnot json\n')
    os.makedirs(f"{d}/nosteps")
    open(f"{d}/nosteps/log.jsonl", "w").write("\n")
    cases = [([f"{d}/missing", "--out", f"{d}/r.html"], "does not exist"),
             ([f"{d}/empty", "--out", f"{d}/r.html"], "no training log"),
             ([f"{d}/bad", "--out", f"{d}/r.html"], "line 2"),
             ([f"{d}/nosteps", "--out", f"{d}/r.html"], "no training steps"),
             ([f"{d}/bad", "--out", f"{d}/no/such/dir/r.html"], "line 2")]
    for argv, word in cases:
        p = expect_error(["report", *argv], word)
        assert p.returncode == 1 and word in p.error, (argv, p.error)
    open(f"{d}/bad/log.jsonl", "w").write('{"step": 1, "loss": 2.0}\n')
    p = run("report", f"{d}/bad", "--out", f"{d}/no/such/dir/r.html", ok=False)
    assert p.returncode == 1 and "cannot write" in p.stderr, p.stderr
    assert not os.path.exists(f"{d}/r.html")


def screenshot_mode():
    """--screenshot PNG: render the report of the run directory given as the case (docs)."""
    if not ARGS.screenshot:
        return None
    out = os.path.join(ARGS.work, "report.html")
    run("report", ARGS.name, "--out", out)
    render(out, screenshot=ARGS.screenshot)
    return 0


if __name__ == "__main__":
    sys.exit(main(lambda ap: ap.add_argument("--screenshot",
                                             help="write a PNG of the report of RUNDIR (docs)"),
                  screenshot_mode))
