#!/usr/bin/env python3
"""Renders a perf-lab result file (written by bench/perf-lab.sh) as a markdown
table and an SVG plot. Python 3 standard library only.

Input: header lines `# key: value` (date, kernel, cpu, nproc, commit, command,
`capped:` notes, ...), blank lines, and the `result:` lines of `sluice bench`:

  result: program=router size=64 workers=1 entries=1000 mode=compiled mpps=5.835 reference_mpps=92.421 ratio=0.063

(`reference_mpps` and `ratio` are `-` when the reference did not run.)

Output, next to the input unless --md/--svg say otherwise:
  <input>.md   machine/date/commit, one table of every run, and how the router's
               rate falls with table size (64 B frames, 1 worker)
  <input>.svg  two panels: Mpps vs table size (64 B, 1 worker) and Mpps vs
               frame size (10000 entries, 1 worker), one series per program
               plus the hand-written reference router, log-scale Mpps axis
"""
import argparse
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

RESULT_KEYS = ("program", "size", "workers", "entries", "mode", "mpps", "reference_mpps", "ratio")
REFERENCE = "reference router"
# Fixed colors for the lab's programs so plots from different runs compare at a glance.
COLORS = {"router": "#1f77b4", "edge": "#ff7f0e", "l2_learning": "#2ca02c", "basic_routing": "#9467bd", "psa_unicast": "#8c564b", "psa_metadata": "#e377c2", REFERENCE: "#7f7f7f"}
PALETTE = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


class InputError(Exception):
    """A malformed input file; the message names the line."""


@dataclass
class Result:
    line: int
    program: str
    size: int
    workers: int
    entries: int
    mode: str
    mpps: float
    reference: Optional[float]
    ratio: Optional[float]
    requested: int  # entries the lab asked for; larger than `entries` when capped

    @property
    def series(self) -> str:
        # Compiled is the normal mode; only the other one is worth spelling out.
        return self.program if self.mode == "compiled" else f"{self.program} ({self.mode})"

    @property
    def capped(self) -> bool:
        return self.requested != self.entries


@dataclass
class Lab:
    header: Dict[str, str]
    results: List[Result]
    failed: List[str]  # `# FAILED:` notes of an interrupted lab
    cap_reasons: Dict[str, str]  # program -> why its table size was capped


def _number(kind, text: str, key: str, where: str, optional=False):
    if optional and text == "-":
        return None
    try:
        value = kind(text)
    except ValueError:
        raise InputError(f"{where}: {key}={text!r} is not a{'n integer' if kind is int else ' number'}") from None
    if isinstance(value, float) and not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {key}={text!r} is out of range")
    return value


def parse(text: str, name: str = "<input>") -> Lab:
    header: Dict[str, str] = {}
    caps: Dict[Tuple[str, int], Tuple[int, str]] = {}  # (program, entries) -> (requested, why)
    failed: List[str] = []
    rows = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{name}:{n}"
        if not line:
            continue
        if line.startswith("#"):
            key, sep, value = line.lstrip("#").strip().partition(":")
            if not sep:
                continue  # a title or free comment
            key, value = key.strip(), value.strip()
            if key == "capped":
                # `capped: program=l2_learning requested=1000000 entries=65536 (why)`
                m = re.match(r"program=(\S+) requested=(\d+) entries=(\d+)\s*(?:\((.*)\))?$", value)
                if not m:
                    raise InputError(f"{where}: malformed capped line (want 'program=P requested=N entries=M (why)')")
                k = (m.group(1).replace("-", "_"), int(m.group(3)))
                if int(m.group(2)) >= caps.get(k, (0, ""))[0]:
                    caps[k] = (int(m.group(2)), m.group(4) or "")
            elif key == "FAILED":
                failed.append(value)
            else:
                header.setdefault(key, value)
            continue
        if not line.startswith("result:"):
            raise InputError(f"{where}: expected a '# ...' header line or a 'result: ...' line, got {line[:60]!r}")
        fields = {}
        for tok in line[len("result:"):].split():
            key, sep, value = tok.partition("=")
            if not sep or not key or not value:
                raise InputError(f"{where}: malformed field {tok!r} (want key=value)")
            fields[key] = value
        missing = [k for k in RESULT_KEYS if k not in fields]
        if missing:
            raise InputError(f"{where}: result line lacks {', '.join(missing)}")
        rows.append((n, where, fields))
    if not rows:
        raise InputError(f"{name}: no 'result:' lines")
    results = []
    for n, where, f in rows:
        program = f["program"].replace("-", "_")
        entries = _number(int, f["entries"], "entries", where)
        results.append(Result(
            line=n,
            program=program,
            size=_number(int, f["size"], "size", where),
            workers=_number(int, f["workers"], "workers", where),
            entries=entries,
            mode=f["mode"],
            mpps=_number(float, f["mpps"], "mpps", where),
            reference=_number(float, f["reference_mpps"], "reference_mpps", where, optional=True),
            ratio=_number(float, f["ratio"], "ratio", where, optional=True),
            requested=caps.get((program, entries), (entries, ""))[0],
        ))
    why = {p: reason for (p, _), (_, reason) in caps.items() if reason}
    return Lab(header, results, failed, why)


# ---------------------------------------------------------------- formatting

def fmt_mpps(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


def fmt_count(n: int) -> str:
    """10 -> 10, 10000 -> 10k, 1000000 -> 1M (round values only, else exact)."""
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def fmt_short(x: float) -> str:
    """About three significant digits, for bar labels."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def machine(h: Dict[str, str]) -> str:
    parts = [h.get("cpu", "unknown CPU")]
    if "nproc" in h:
        parts.append(f"{h['nproc']} CPUs")
    if "kernel" in h:
        parts.append(f"Linux {h['kernel']}")
    return ", ".join(parts)


def pick(values, preferred):
    """The preferred value when the file has it, else the smallest (narrow runs still plot)."""
    values = sorted(set(values))
    return preferred if preferred in values else values[0]


# ------------------------------------------------------------------ markdown

def markdown(lab: Lab) -> str:
    h = lab.header
    out = [
        "# Sluice perf lab",
        "",
        f"- **machine:** {machine(h)}",
        f"- **date:** {h.get('date', 'unknown')}",
        f"- **commit:** {h.get('commit', 'unknown')}",
    ]
    if "command" in h:
        out.append(f"- **command:** `{h['command']}`")
    out += [
        "",
        "`sluice bench` replays generated traffic from memory; *reference* is the hand-written "
        "Rust router on the same frame size and route count, run in the same process right after "
        "(on the batch size it is fastest with, tried per run); routes are /24s spread over the IPv4 "
        "space (`--route-layout spread`, the default); *ratio* = Mpps / reference Mpps.",
    ]
    capped = sorted({(r.program, r.requested, r.entries) for r in lab.results if r.capped})
    if capped:
        out.append("")
        for p, req, got in capped:
            why = lab.cap_reasons.get(p, "the largest table it is run with")
            out.append(f"\\* {p}: {got} entries where {req} were asked for ({why}).")
    if lab.failed:
        out.append("")
        for f in lab.failed:
            out.append(f"**Failed run:** {f}")
    out += [
        "",
        "| program | frame B | workers | entries | Mpps | reference Mpps | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in lab.results:
        entries = f"{r.entries}\\*" if r.capped else str(r.entries)
        ratio = "–" if r.ratio is None else f"{r.ratio:.3f}"
        out.append(f"| {r.series} | {r.size} | {r.workers} | {entries} | {fmt_mpps(r.mpps)} "
                   f"| {fmt_mpps(r.reference)} | {ratio} |")

    out += ["", "## How the rate falls with table size (router, 64 B, 1 worker)", ""]
    rows = sorted((r for r in lab.results if r.program == "router" and r.size == 64 and r.workers == 1),
                  key=lambda r: (r.series, r.entries))
    if not rows:
        out.append("No router run at 64 B with 1 worker in this file.")
    else:
        out += [
            "| entries | engine Mpps | reference Mpps | ratio | engine vs fewest entries |",
            "|---:|---:|---:|---:|---:|",
        ]
        base = {}  # per series (compiled/interpreted): the rate with the fewest entries
        for r in rows:
            base.setdefault(r.series, r.mpps)
            ratio = "–" if r.ratio is None else f"{r.ratio:.3f}"
            rel = f"{100 * r.mpps / base[r.series]:.0f} %" if base[r.series] > 0 else "–"
            out.append(f"| {r.entries} | {fmt_mpps(r.mpps)} | {fmt_mpps(r.reference)} | {ratio} | {rel} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------- SVG

W = 960            # image width
PANEL_H = 400      # height of one panel, title to footnote
TOP = 100          # title and legend above the panels
LEFT, RIGHT = 80, 30
PLOT_TOP, PLOT_BOTTOM = 40, 80   # inside a panel: room for its title / x labels


def _text(x, y, s, size=12, anchor="start", weight="normal", fill="#222", extra=""):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}"{extra}>{escape(s)}</text>')


def _log_ticks(lo: float, hi: float) -> List[float]:
    """1-2-5 ticks per decade between lo and hi (both powers of ten)."""
    ticks = []
    d = math.log10(lo)
    while 10 ** d <= hi * 1.0001:
        for m in (1, 2, 5):
            t = m * 10 ** d
            if lo * 0.9999 <= t <= hi * 1.0001:
                ticks.append(t)
        d += 1
    return ticks


def _panel(y0: float, title: str, xtitle: str, cats: List[str], series: List[str],
           values: Dict[Tuple[str, int], Tuple[float, bool]], colors: Dict[str, str],
           note: str) -> List[str]:
    """One grouped-bar panel at vertical offset y0. values[(series, cat index)] =
    (Mpps, capped?). Log y axis so the engine and the ~20x faster reference
    both stay readable."""
    el = [_text(LEFT, y0 + 22, title, size=15, weight="bold")]
    x0, x1 = LEFT, W - RIGHT
    top, bottom = y0 + PLOT_TOP, y0 + PANEL_H - PLOT_BOTTOM
    vals = [v for v, _ in values.values() if v > 0]
    if not vals or not cats:
        el.append(_text((x0 + x1) / 2, (top + bottom) / 2, "no data for this panel in the result file",
                        size=13, anchor="middle", fill="#888"))
        return el
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    if hi <= lo:
        hi = lo * 10

    def y(v):
        return bottom - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (bottom - top)

    for t in _log_ticks(lo, hi):
        major = abs(math.log10(t) - round(math.log10(t))) < 1e-9
        el.append(f'<line x1="{x0}" y1="{y(t):.1f}" x2="{x1}" y2="{y(t):.1f}" '
                  f'stroke="{"#ccc" if major else "#eee"}" stroke-width="1"/>')
        el.append(_text(x0 - 6, y(t) + 4, f"{t:g}", size=11, anchor="end", fill="#444" if major else "#888"))
    el.append(f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{bottom}" stroke="#444"/>')
    el.append(f'<line x1="{x0}" y1="{bottom}" x2="{x1}" y2="{bottom}" stroke="#444"/>')
    mid = (top + bottom) / 2
    el.append(_text(LEFT - 55, mid, "Mpps (log scale)", size=12, anchor="middle",
                    extra=f' transform="rotate(-90 {LEFT - 55} {mid:.1f})"'))

    group = (x1 - x0) / len(cats)
    bar = group * 0.8 / max(1, len(series))
    for ci, cat in enumerate(cats):
        gx = x0 + ci * group + group * 0.1
        el.append(_text(x0 + (ci + 0.5) * group, bottom + 20, cat, size=13, anchor="middle", weight="bold"))
        for si, s in enumerate(series):
            bx = gx + si * bar
            if (s, ci) not in values:
                el.append(_text(bx + bar / 2, bottom - 4, "n/a", size=9, anchor="middle", fill="#999"))
                continue
            v, capped = values[(s, ci)]
            if v <= 0:
                el.append(_text(bx + bar / 2, bottom - 4, "0", size=9, anchor="middle", fill="#999"))
                continue
            by = y(v)
            el.append(f'<rect x="{bx + 1:.1f}" y="{by:.1f}" width="{max(1.0, bar - 2):.1f}" '
                      f'height="{bottom - by:.1f}" fill="{colors[s]}"><title>{escape(s)} {cat}: '
                      f'{v:.3f} Mpps</title></rect>')
            el.append(_text(bx + bar / 2, by - 4, fmt_short(v) + ("*" if capped else ""),
                            size=10, anchor="middle"))
    el.append(_text((x0 + x1) / 2, bottom + 42, xtitle, size=12, anchor="middle"))
    if note:
        el.append(_text(x0, bottom + 62, note, size=11, fill="#555"))
    return el


def svg(lab: Lab, source: str = "") -> str:
    rs = lab.results
    # Series in order of first appearance, then the reference router last.
    series: List[str] = []
    for r in rs:
        if r.series not in series:
            series.append(r.series)
    colors = {}
    extra = iter(PALETTE * 4)
    for s in series + [REFERENCE]:
        colors[s] = COLORS.get(s) or next(extra)
    all_series = series + ([REFERENCE] if any(r.reference is not None for r in rs) else [])

    def collect(rows, cat_of) -> Tuple[List, Dict]:
        """Bars for rows grouped by cat_of(row). The reference comes from the router's
        runs (same route count); other programs only where their table was not capped."""
        keys = sorted({cat_of(r) for r in rows})
        idx = {k: i for i, k in enumerate(keys)}
        values, ref_from = {}, {}
        for r in rows:
            ci = idx[cat_of(r)]
            values[(r.series, ci)] = (r.mpps, r.capped)
            if r.reference is not None and not r.capped:
                # Prefer the router's own reference; otherwise the first program that has one.
                if ci not in ref_from or (r.program == "router" and ref_from[ci] != "router"):
                    values[(REFERENCE, ci)] = (r.reference, False)
                    ref_from[ci] = r.program
        return keys, values

    def cap_note(rows):
        capped = sorted({(r.requested, r.program, r.entries) for r in rows if r.capped})
        return "; ".join(f"* {p} has {e} entries at the {fmt_count(q)} point (its largest table)"
                         for q, p, e in capped)

    h = lab.header
    el = [
        _text(W / 2, 30, "Sluice perf lab: engine vs hand-written reference router", size=18,
              anchor="middle", weight="bold"),
        _text(W / 2, 52, f"{machine(h)} · {h.get('date', 'date unknown')} · commit {h.get('commit', 'unknown')}",
              size=12, anchor="middle", fill="#444"),
    ]
    # One legend for both panels, centred under the title.
    labels = [("reference (hand-written router)" if s == REFERENCE else s) for s in all_series]
    widths = [40 + 7 * len(label) for label in labels]  # rough text width at 12 px
    x = W / 2 - sum(widths) / 2
    for s, label, w in zip(all_series, labels, widths):
        el.append(f'<rect x="{x:.1f}" y="68" width="14" height="14" fill="{colors[s]}"/>')
        el.append(_text(x + 20, 80, label, size=12))
        x += w

    # Panel 1: rate vs table size.
    size = pick([r.size for r in rs], 64)
    workers = pick([r.workers for r in rs], 1)
    rows = [r for r in rs if r.size == size and r.workers == workers]
    keys, values = collect(rows, lambda r: r.requested)
    el += _panel(TOP, f"Rate vs table size: {size} B frames, {workers} worker{'s' if workers > 1 else ''}",
                 "table entries (routes, or hosts for l2_learning)", [fmt_count(k) for k in keys],
                 all_series, values, colors, cap_note(rows))

    # Panel 2: rate vs frame size.
    entries = pick([r.requested for r in rs], 10000)
    rows = [r for r in rs if r.requested == entries and r.workers == workers]
    keys, values = collect(rows, lambda r: r.size)
    el += _panel(TOP + PANEL_H, f"Rate vs frame size: {fmt_count(entries)} entries, "
                 f"{workers} worker{'s' if workers > 1 else ''}",
                 "frame size in bytes (FCS included)", [f"{k} B" for k in keys],
                 all_series, values, colors, cap_note(rows))

    height = TOP + 2 * PANEL_H + 20
    if source:
        el.append(_text(W - RIGHT, height - 8, f"source: {source}", size=10, anchor="end", fill="#888"))
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
            f'viewBox="0 0 {W} {height}" font-family="sans-serif">')
    title = f"<title>{escape('Sluice perf lab, ' + machine(h) + ', ' + h.get('date', ''))}</title>"
    bg = f'<rect x="0" y="0" width="{W}" height="{height}" fill="white"/>'
    return "\n".join(['<?xml version="1.0" encoding="UTF-8"?>', head, title, bg, *el, "</svg>"]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="result file written by bench/perf-lab.sh (e.g. bench/results/latest.txt)")
    ap.add_argument("--md", help="markdown output (default: the input with .md)")
    ap.add_argument("--svg", help="SVG output (default: the input with .svg)")
    a = ap.parse_args(argv)
    stem = os.path.splitext(a.results)[0]
    md_path, svg_path = a.md or stem + ".md", a.svg or stem + ".svg"
    prog = os.path.basename(sys.argv[0]) or "perf_lab_report.py"
    try:
        with open(a.results, encoding="utf-8") as f:
            lab = parse(f.read(), a.results)
    except OSError as e:
        print(f"{prog}: error: cannot read {a.results}: {e.strerror}", file=sys.stderr)
        return 1
    except InputError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(markdown(lab))
    with open(svg_path, "w", encoding="utf-8") as f:
        f.write(svg(lab, os.path.basename(a.results)))
    print(f"{prog}: wrote {md_path} and {svg_path} ({len(lab.results)} runs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
