"""Self-test of bench/perf_lab_report.py on a synthetic result file.

    python3 -m unittest bench/test_perf_lab_report.py
"""
import os
import subprocess
import sys
import tempfile
import unittest
import xml.dom.minidom

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_lab_report.py")

SAMPLE = """\
# sluice perf lab
# date: 2025-01-02 03:04:05 UTC
# kernel: 6.1.0-test
# cpu: Test CPU 9000
# nproc: 2
# commit: abc1234-dirty
# command: PROGRAMS='router edge l2-learning' bench/perf-lab.sh
# capped: program=l2_learning requested=1000000 entries=65536 (l2-learning tables hold at most 65536 entries)
result: program=router size=64 workers=1 entries=10 mode=compiled mpps=5.000 reference_mpps=100.000 ratio=0.050
result: program=router size=64 workers=1 entries=1000000 mode=compiled mpps=2.500 reference_mpps=50.000 ratio=0.050
result: program=router size=1500 workers=1 entries=10000 mode=compiled mpps=3.000 reference_mpps=8.000 ratio=0.375

result: program=edge size=64 workers=1 entries=10 mode=compiled mpps=0.400 reference_mpps=99.000 ratio=0.004
result: program=l2_learning size=64 workers=1 entries=65536 mode=compiled mpps=0.900 reference_mpps=60.000 ratio=0.015
result: program=router size=64 workers=2 entries=10 mode=compiled mpps=9.000 reference_mpps=- ratio=-
"""


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_report(self, text, *args):
        path = os.path.join(self.tmp.name, "lab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)
        return p, os.path.join(self.tmp.name, "lab")

    def test_markdown_and_svg(self):
        p, stem = self.run_report(SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(stem + ".md", encoding="utf-8") as f:
            md = f.read()
        # The machine/date/commit header.
        self.assertIn("Test CPU 9000, 2 CPUs, Linux 6.1.0-test", md)
        self.assertIn("2025-01-02 03:04:05 UTC", md)
        self.assertIn("abc1234-dirty", md)
        # The main table: header and one row per result line, in file order.
        self.assertIn("| program | frame B | workers | entries | Mpps | reference Mpps | ratio |", md)
        rows = [l for l in md.splitlines() if l.startswith("| ") and l.count("|") == 8]
        self.assertEqual(rows[1:], [
            "| router | 64 | 1 | 10 | 5.000 | 100.000 | 0.050 |",
            "| router | 64 | 1 | 1000000 | 2.500 | 50.000 | 0.050 |",
            "| router | 1500 | 1 | 10000 | 3.000 | 8.000 | 0.375 |",
            "| edge | 64 | 1 | 10 | 0.400 | 99.000 | 0.004 |",
            "| l2_learning | 64 | 1 | 65536\\* | 0.900 | 60.000 | 0.015 |",
            "| router | 64 | 2 | 10 | 9.000 | – | – |",
        ])
        # The capped point is explained.
        self.assertIn("l2_learning: 65536 entries where 1000000 were asked for (l2-learning tables hold at most 65536 entries)", md)
        # The table-size table: router, 64 B, 1 worker only.
        self.assertIn("| 10 | 5.000 | 100.000 | 0.050 | 100 % |", md)
        self.assertIn("| 1000000 | 2.500 | 50.000 | 0.050 | 50 % |", md)

        dom = xml.dom.minidom.parse(stem + ".svg")
        self.assertEqual(dom.documentElement.tagName, "svg")
        texts = " ".join(t.firstChild.data for t in dom.getElementsByTagName("text") if t.firstChild)
        for name in ("router", "edge", "l2_learning", "reference"):
            self.assertIn(name, texts)
        # Categorical table-size axis; l2_learning's capped bar sits at the 1M point.
        for label in ("10", "1M", "Test CPU 9000"):
            self.assertIn(label, texts)
        self.assertIn("l2_learning has 65536 entries at the 1M point", texts)

    def test_output_paths(self):
        md = os.path.join(self.tmp.name, "out.md")
        svg = os.path.join(self.tmp.name, "out.svg")
        p, _ = self.run_report(SAMPLE, "--md", md, "--svg", svg)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(md) and os.path.exists(svg))

    def test_malformed_line_is_named(self):
        bad = SAMPLE.replace("mpps=0.400", "mpps=fast")
        p, _ = self.run_report(bad)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("lab.txt:13:", p.stderr)
        self.assertIn("mpps='fast'", p.stderr)

        p, _ = self.run_report(SAMPLE + "garbage here\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("lab.txt:16:", p.stderr)

        p, _ = self.run_report("# only a header\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no 'result:' lines", p.stderr)

    def test_missing_field_is_named(self):
        p, _ = self.run_report("result: program=router size=64 workers=1 entries=10 mode=compiled mpps=1\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("lab.txt:1: result line lacks reference_mpps, ratio", p.stderr)

    def test_help(self):
        p = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("usage:", p.stdout)


if __name__ == "__main__":
    unittest.main()
