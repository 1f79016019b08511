"""ds-opt --plan-report in a real browser: the page --plan writes, and the one --memory-report
writes of a pipelined step, opened in headless Chromium (Debian's); the script's DOM after it
ran is read back. Checks that the page rendered with no script error, and that the numbers it
shows are the text reports': the ranked layouts (--plan's table), each rank's memory
(--memory-report), the collectives per rank and axis (--comm-report), and one schedule phase
per forward and backward of every micro-batch on every pipeline rank.

usage: plan_report_check.py --bin BUILD/bin --work DIR
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import meta_gpt  # noqa: E402
sys.path.insert(0, HERE)
from plan_check import CLUSTER  # noqa: E402  (the same toy cluster)

class Dom(html.parser.HTMLParser):
    """The rendered page: each table's rows of cell texts (by its class), the texts of the
    elements with an id, and the schedule's phase rectangles."""

    def __init__(self):
        super().__init__()
        self.tables, self.ids, self.phases, self.curve_peaks = {}, {}, 0, []
        self.in_curve_peak = False
        self.table = self.row = self.cell = self.id = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = self.tables.setdefault(a.get("class", ""), [])
        elif tag == "tr" and self.table is not None:
            self.row = []
            self.table.append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""
        elif tag == "rect" and a.get("class") == "phase":
            self.phases += 1
        elif tag == "span" and a.get("class") == "curve-peak":
            self.in_curve_peak = True
            self.curve_peaks.append("")
        if "id" in a:
            self.id = a["id"]
            self.ids[self.id] = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        elif tag in ("td", "th") and self.cell is not None:
            self.row.append(self.cell)
            self.cell = None
        if self.id and tag in ("p", "div", "h1"):
            self.id = None

    def handle_data(self, data):
        if self.in_curve_peak:
            self.curve_peaks[-1] += data
            self.in_curve_peak = False
        if self.cell is not None:
            self.cell += data
        if self.id:
            self.ids[self.id] += data


def render(path):
    browser = shutil.which("chromium")
    if not browser:
        sys.exit("FAILED: no chromium (scripts/setup.sh installs Debian's)")
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--dump-dom", "file://" + os.path.abspath(path)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode:
        sys.exit("FAILED: chromium\n" + p.stderr[-2000:])
    dom = Dom()
    dom.feed(p.stdout)
    return dom


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    w = lambda f: os.path.join(a.work, f)
    os.makedirs(a.work, exist_ok=True)
    meta_gpt.export(w("gpt.pt2"), layers=2, d=32, heads=2, vocab=64, block=16, batch=2,
                    dynamic_batch=True)
    json.dump(CLUSTER, open(w("cluster.json"), "w"))
    json.dump({"train_micro_batch_size_per_gpu": 1,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, open(w("base.json"), "w"))
    ds_opt = os.path.join(a.bin, "ds-opt")
    inputs = ["--input", "idx=tensor<1x16xi64>", "--input", "targets=tensor<1x16xi64>"]

    # --plan's page: the ranked layouts as the table prints them.
    p = subprocess.run([ds_opt, w("gpt.pt2")] + inputs + [
        "--config", w("base.json"), "--plan", "--cluster", w("cluster.json"), "--global-batch",
        "8", "--plan-rows", "1000", "--plan-out", w("plan.json"), "--plan-report",
        w("plan.html")], capture_output=True, text=True)
    if p.returncode:
        sys.exit("FAILED: ds-opt --plan --plan-report\n" + p.stderr)
    dom = render(w("plan.html"))
    print("plan page: status %s, errors '%s'" % (dom.ids.get("status", "").strip(),
                                                  dom.ids.get("errors", "").strip()))
    rows = [l.split() for l in p.stdout.splitlines() if re.match(r"^\d+\s+dp=", l)]
    shown = dom.tables.get("candidate-table", [])[1:]
    same = len(shown) >= len(rows) and all(
        s[0] == r[0] and s[1] == " ".join(r[1:5]) and s[2:6] == r[5:9] and s[6] == r[14] and
        s[7] == r[9]
        for s, r in zip(shown, rows))
    print("plan page: %d ranked layouts shown, the table's %d fitting rows (rank, layout, ZeRO, "
          "micro-batch, accumulation, recomputation, chunks, peak) equal: %s" % (
              len(shown), len(rows), same))

    # A pipelined step's page (--memory-report --comm-report --plan-report): each rank's
    # memory and collectives as the text reports print them, and its schedule.
    cfg = dict(json.load(open(w("base.json"))), train_micro_batch_size_per_gpu=2,
               gradient_accumulation_steps=4, pipeline={"stages": 2})
    json.dump(cfg, open(w("pp.json"), "w"))
    inputs2 = ["--input", "idx=tensor<2x16xi64>", "--input", "targets=tensor<2x16xi64>"]
    p = subprocess.run([ds_opt, w("gpt.pt2")] + inputs2 + [
        "--config", w("pp.json"), "--world-size", "2", "-o", w("pp.mlir")],
        capture_output=True, text=True)
    if p.returncode:
        sys.exit("FAILED: the pipeline's step\n" + p.stderr)
    p = subprocess.run([ds_opt, w("pp.mlir"), "--memory-report", "--comm-report", "--cluster",
                        w("cluster.json"), "--plan-report", w("pp.html"), "-o", os.devnull],
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit("FAILED: --memory-report --plan-report\n" + p.stderr)
    dom = render(w("pp.html"))
    print("step page: status %s, errors '%s'" % (dom.ids.get("status", "").strip(),
                                                  dom.ids.get("errors", "").strip()))
    # --memory-report: one line per rank (rank, parameters, gradients, optimizer,
    # activations, inputs, communication, peak, buffers, mesh); the page, one per stage.
    text = {}
    for l in p.stdout.splitlines():
        f = l.split()
        if re.match(r"^\d+\s+\d+", l) and len(f) == 10:
            stage = int(re.search(r"pp(\d+)", f[9]).group(1))
            text[stage] = f[1:9]
    page = [r[1:] for r in dom.tables.get("memory-table", [])[1:]]
    print("step page: memory of %d stages, the report's (parameters .. buffers) equal: %s" %
          (len(page), page == [text[s] for s in sorted(text)]))
    print("step page: each stage's timeline reaches its peak: %s" %
          (dom.curve_peaks == [r[6] for r in page] and len(page) > 0))
    # --comm-report: per pipeline rank, rows of axes, collective, calls, bytes, seconds.
    comm, rank = [], None
    for l in p.stdout.splitlines():
        if l.startswith("pipeline rank "):
            rank = []
            comm.append(rank)
        elif rank is not None and re.match(r"^  (pp|dp|tp|sp)\S*\s+\w+\s+\d+\s+\d+", l):
            rank.append(l.split()[:4])
    shown = [r[:4] for r in dom.tables.get("comm-table", [])[1:] if r[0] != "axes"]
    flat = [r for rank in comm for r in rank]
    print("step page: %d collective rows, the comm report's (axes, collective, calls, bytes) "
          "equal: %s" % (len(shown), shown == flat and len(flat) > 0))
    print("step page: schedule phases %d (2 stages x 4 micro-batches x forward and backward: "
          "16)" % dom.phases)


if __name__ == "__main__":
    main()
