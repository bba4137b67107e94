#!/usr/bin/env python3
"""Summarise one run of os-ken's switch test suite (os_ken/tests/switch/tester.py).

Used by scripts/osken-switch-tests.sh; stdlib only, so any python3 runs it.

tester.py logs, for each test file, the file's description (the JSON file's
leading string, e.g. "action: 00_OUTPUT") before its first case, then one line
per case, "    <case description padded> OK|ERROR", and after an ERROR the
reason on lines indented by eight spaces. It ends with "--- Test report ---"
and "OK(n) / ERROR(n)". This script maps file descriptions back to
<group>/<file> through the suite directory, so that cases are counted per
group (action, match, group, meter) against the number of cases the JSON files
hold: a case that never ran (the run was cut short) counts as failed.

  osken_switch_report.py summary SUITE_DIR LOG LABEL [--failing OUT] [--counts OUT]
                         [--reference OTHER_LOG --reference-label NAME] [--quiet]

With --reference, a failing case that also failed (or did not run) in the other
log is tagged "[NAME fails too]".
  osken_switch_report.py rate-cases SUITE_DIR
lists the cases that measure packet/bit rates, one "<group>/<file>: <case>" a line.
  osken_switch_report.py drop-rate-cases SUITE_DIR
rewrites the suite's JSON files (a copy: it changes them in place) without
their rate-measuring cases, and removes the files left without any case.
"""
import argparse
import json
import os
import re
import sys

GROUPS = ("action", "match", "group", "meter")
CASE_RE = re.compile(r"^    (\S.*?)\s+(OK|ERROR)$")
NOT_REASON_RE = re.compile(r"^(---|\.+$|waiting for switches|dpid=)")


def is_rate_case(item):
    """True for a case whose tests measure a packet or bit rate through the tester."""
    return any(isinstance(t.get("egress"), dict) and "throughput" in t["egress"] for t in item.get("tests", []))


def load_suite(suite_dir):
    """{file description: (relpath, [(case, is_rate_case)])} for every JSON file."""
    files = {}
    for root, _dirs, names in os.walk(suite_dir):
        for name in sorted(names):
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, suite_dir)
            with open(path) as f:
                items = json.load(f)
            desc = next((x for x in items if isinstance(x, str)), rel)
            cases = []
            for item in items:
                if not isinstance(item, dict):
                    continue
                cases.append((item.get("description", "?").strip(), is_rate_case(item)))
            files[desc.strip()] = (rel, cases)
    return files


def group_of(rel):
    return rel.split(os.sep, 1)[0]


def parse_log(log_path, files):
    """[(relpath, case, 'OK'|'ERROR', reason)] in the order the cases ran."""
    results = []
    current = None
    with open(log_path, errors="replace") as f:
        lines = [line.rstrip("\n") for line in f]
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "--- Test report ---" in line:
            break
        if line.strip() in files:
            current = files[line.strip()][0]
            continue
        m = CASE_RE.match(line)
        if not m or current is None:
            continue
        case, verdict = m.group(1).strip(), m.group(2)
        reason = []
        if verdict == "ERROR":
            # The reason: the indented lines that follow, up to the next case or file.
            # (Not the progress dots of the next rate case, nor connection news.)
            while i < len(lines):
                nxt = lines[i]
                if CASE_RE.match(nxt) or nxt.strip() in files or NOT_REASON_RE.match(nxt):
                    break
                if nxt.strip():
                    reason.append(nxt.strip())
                i += 1
        results.append((current, case, verdict, " | ".join(reason)))
    return results


def one_line(text, width=300):
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[: width - 3] + "..."


def summary(args):
    files = load_suite(args.suite)
    results = parse_log(args.log, files)
    rate_cases = {(rel, c) for rel, cases in files.values() for c, rate in cases if rate}
    ran = {(rel, case): (verdict, reason) for rel, case, verdict, reason in results}
    ref_ok = None
    if args.reference:
        ref_ok = {(rel, case) for rel, case, verdict, _ in parse_log(args.reference, files) if verdict == "OK"}

    total = {g: 0 for g in GROUPS}
    ok = {g: 0 for g in GROUPS}
    failing = []
    for rel, cases in sorted(files.values()):
        g = group_of(rel)
        total.setdefault(g, 0)
        ok.setdefault(g, 0)
        for case, _rate in cases:
            total[g] += 1
            verdict, reason = ran.get((rel, case), ("NOT RUN", "did not run (run cut short)"))
            if verdict == "OK":
                ok[g] += 1
            else:
                tag = " [rate]" if (rel, case) in rate_cases else ""
                if ref_ok is not None and (rel, case) not in ref_ok:
                    tag += f" [{args.reference_label} fails too]"
                failing.append(f"{rel}: {case}: {one_line(reason or verdict)}{tag}")

    t_ok, t_all = sum(ok.values()), sum(total.values())
    out = [f"{args.label}:"]
    for g in total:
        if total[g]:
            out.append(f"  {g:<7} {ok[g]:>4} OK {total[g] - ok[g]:>4} failed  of {total[g]:>4}")
    out.append(f"  {'total':<7} {t_ok:>4} OK {t_all - t_ok:>4} failed  of {t_all:>4}")
    rate_failed = sum(1 for line in failing if "[rate]" in line)
    if rate_cases:
        out.append(f"  ({rate_failed} of the {len(rate_cases)} rate-measuring cases failed; they are noisy on 2 cores)")
    if ref_ok is not None:
        both = sum(1 for line in failing if line.endswith("fails too]"))
        out.append(f"  ({both} of the {len(failing)} failing cases fail on {args.reference_label} too)")
    if not args.quiet:
        print("\n".join(out))
    if args.failing:
        with open(args.failing, "w") as f:
            version = os.path.basename(os.path.normpath(args.suite))
            f.write(f"# os-ken 3.1.1 switch test suite ({version}): cases {args.label} failed, with tester.py's reason.\n")
            f.write("# Written by scripts/osken-switch-tests.sh; [rate] marks cases that measure packet/bit rates.\n")
            for line in failing:
                f.write(line + "\n")
    if args.counts:
        with open(args.counts, "w") as f:
            f.write(f"{t_ok} {t_all}\n")


def rate_list(args):
    for desc, (rel, cases) in sorted(load_suite(args.suite).items(), key=lambda kv: kv[1][0]):
        for case, rate in cases:
            if rate:
                print(f"{rel}: {case}")


def drop_rate_cases(args):
    for root, _dirs, names in os.walk(args.suite):
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            with open(path) as f:
                items = json.load(f)
            kept = [x for x in items if not (isinstance(x, dict) and is_rate_case(x))]
            if not any(isinstance(x, dict) for x in kept):
                os.remove(path)
            elif len(kept) != len(items):
                with open(path, "w") as f:
                    json.dump(kept, f, indent=2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("suite")
    s.add_argument("log")
    s.add_argument("label")
    s.add_argument("--failing")
    s.add_argument("--counts")
    s.add_argument("--reference")
    s.add_argument("--reference-label", default="reference")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=summary)
    r = sub.add_parser("rate-cases")
    r.add_argument("suite")
    r.set_defaults(func=rate_list)
    d = sub.add_parser("drop-rate-cases")
    d.add_argument("suite")
    d.set_defaults(func=drop_rate_cases)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
