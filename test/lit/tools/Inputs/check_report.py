#!/usr/bin/env python3
"""Checks a run report page (runtime/train/Report.h) against the --log-json file it came from.

Usage: check_report.py LOG.jsonl PAGE.html WORLD

The reference is the log itself, read here with Python's json: every plotted point must equal a
logged value exactly (the page writes the shortest decimal that reads back as the same double,
so float() of the text gives the logged double; no tolerance). Checks:
  - polyline "loss" is [(step, loss)] of every record, "val_loss" the records with a val_loss,
    "throughput" [(step, tokens_per_s)];
  - the memory table has one row per rank (WORLD rows) and the configuration table names the
    model and the plan;
  - every <svg> element is well-formed XML (xml.etree parses it), as an SVG renderer needs;
  - nothing is fetched from elsewhere: no <script>, <link>, <img>, <iframe>, src=, href= or
    url( (the only "http" allowed is the SVG namespace name, which is never fetched).
Prints one line per problem and "report: N points checked, 0 problems"; exits 1 on a problem.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.series = {}  # data-series -> [(x, y)]
        self.tags = []
        self.table_rows = {}  # table id or index -> rows of cell texts
        self._table = None
        self._row = None
        self._cell = None
        self._tables = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "polyline" and "data-series" in a:
            pts = [tuple(float(v) for v in p.split(",")) for p in a["points"].split()]
            self.series[a["data-series"]] = pts
        elif tag == "table":
            self._table = a.get("id", f"table{self._tables}")
            self._tables += 1
            self.table_rows[self._table] = []
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.table_rows[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def main():
    log_path, page_path, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    records = [json.loads(line) for line in open(log_path) if line.strip()]
    html = open(page_path, encoding="utf-8").read()
    page = Page()
    page.feed(html)
    problems = []
    want = {
        "loss": [(float(r["step"]), r["loss"]) for r in records],
        "val_loss": [(float(r["step"]), r["val_loss"]) for r in records if r.get("val_loss") is not None],
        "throughput": [(float(r["step"]), r["tokens_per_s"]) for r in records],
    }
    checked = 0
    for name, points in want.items():
        got = page.series.get(name)
        if got is None:
            problems.append(f"no polyline data-series=\"{name}\"")
        elif got != points:
            problems.append(f"polyline {name}: {got} is not the logged {points}")
        else:
            checked += len(points)
    if not want["val_loss"]:
        problems.append("the log has no validation loss: the run must validate for this check")
    memory = [t for t in page.table_rows.values() if t and t[0][:2] == ["rank", "parameters"]]
    if len(memory) != 1 or len(memory[0]) - 1 != world:
        problems.append(f"the memory table should have {world} rank rows: {memory}")
    config = dict((r[0], r[1]) for r in page.table_rows.get("config", []) if len(r) == 2)
    run = records[0].get("run", {})
    for key in ("model", "plan"):
        if config.get(key) != run.get(key) or not config.get(key):
            problems.append(f"configuration {key}: page says {config.get(key)!r}, the log {run.get(key)!r}")
    for tag, attrs in page.tags:
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            problems.append(f"<{tag}> on a page that must need no network")
        for k in ("src", "href"):
            if k in attrs:
                problems.append(f"<{tag} {k}={attrs[k]!r}>: a fetched resource")
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.S)
    if len(svgs) < 3:
        problems.append(f"{len(svgs)} <svg> plots; want the loss, throughput and memory plots at least")
    for i, svg in enumerate(svgs):
        try:
            ET.fromstring(svg)
        except ET.ParseError as e:
            problems.append(f"<svg> number {i + 1} is not well-formed XML: {e}")
    if re.search(r"url\(|@import", html):
        problems.append("a stylesheet fetches something (url( or @import)")
    for p in problems:
        print("PROBLEM:", p)
    print(f"report: {checked} points checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
