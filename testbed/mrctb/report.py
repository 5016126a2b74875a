"""Reports of runs and suites: per-path goodput series, the SVG plot, summary.md, and the
suite's JUnit XML, Markdown and JSON. Pure Python (no plotting library); no root.
"""

from __future__ import annotations

import html
import json
import math
import os
import subprocess
import xml.sax.saxutils as sax

DATA_OPCODES = ("WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_ONLY", "WRITE_LAST_IMM",
                "WRITE_ONLY_IMM")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
           "#7b4173", "#3182bd")


# ------------------------------------------------------------------------------------------------
# goodput per path
# ------------------------------------------------------------------------------------------------
def decode_frames(mrct: str, path: str, contains: str = ""):
    """Yields `mrct decode --json` objects of a capture (the project's decoder); with
    `contains`, only lines that contain that text are parsed."""
    proc = subprocess.Popen([mrct, "decode", "--json", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1 << 20)
    try:
        for line in proc.stdout:
            if line.startswith("{") and contains in line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue
    finally:
        proc.stdout.close()
        proc.wait()


def goodput_series(frames_by_plane: dict[int, object], bin_ms: float = 10.0,
                   path_label=None) -> dict:
    """Delivered data per path over time from the responder's captures.

    frames_by_plane: plane -> iterable of decoded frames seen on the responder's port of that
    plane. Counts the payload of the first arrival of each (QP, PSN) data packet; duplicates
    and retransmissions of already delivered PSNs add nothing (goodput, not throughput).
    A path is (plane, wire EV); path_label(plane, wev) names it. `plane` keys are the 0-based
    plane index of the capture file names (p0, p1, ...); labels and the "plane" field say the
    plane as everywhere else in reports and the viewer: 1-based, = the NIC port
    (docs/viewer.md, "Plane numbering")."""
    seen: set = set()
    arrivals = []  # (ts_ns, path, bytes)
    for plane, frames in frames_by_plane.items():
        for f in frames:
            if not f.get("roce") or f.get("opcode_name") not in DATA_OPCODES:
                continue
            if f.get("trimmed"):
                continue
            key = (f.get("dest_qp"), f.get("psn"))
            if key in seen:
                continue
            seen.add(key)
            arrivals.append((f["ts_ns"], (plane, f.get("wev")), f.get("payload_len") or 0))
    if not arrivals:
        return {"bin_ms": bin_ms, "t0_ns": 0, "bins": 0, "paths": {}, "total_bytes": 0}
    arrivals.sort()
    t0 = arrivals[0][0]
    bin_ns = int(bin_ms * 1e6)
    nbins = (arrivals[-1][0] - t0) // bin_ns + 1
    paths: dict = {}
    for ts, path, nbytes in arrivals:
        series = paths.setdefault(path, [0] * nbins)
        series[(ts - t0) // bin_ns] += nbytes
    out_paths = {}
    for (plane, wev), series in sorted(paths.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        label = path_label(plane, wev) if path_label else f"plane {plane + 1} EV {wev}"
        out_paths[label] = {"plane": plane + 1, "wev": wev, "bytes": sum(series),
                            "mbit_s": [b * 8 / (bin_ms * 1e3) for b in series]}
    return {"bin_ms": bin_ms, "t0_ns": t0, "bins": nbins, "paths": out_paths,
            "total_bytes": sum(a[2] for a in arrivals)}


def _nice_step(span: float, target: int = 6) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def goodput_svg(series: dict, title: str, markers: list | None = None,
                width: int = 900, height: int = 420) -> str:
    """Line chart: one line per path, Mbit/s over ms; markers are (t_ms, label) fault times."""
    left, right, top, bottom = 70, 230, 40, 50
    pw, ph = width - left - right, height - top - bottom
    bins, bin_ms = series.get("bins", 0), series.get("bin_ms", 10.0)
    paths = series.get("paths", {})
    t_max = max(bins * bin_ms, 1.0)
    y_max = max([max(p["mbit_s"]) for p in paths.values() if p["mbit_s"]] + [1.0])
    y_step = _nice_step(y_max)
    y_top = math.ceil(y_max / y_step) * y_step
    x_step = _nice_step(t_max)

    def x(t_ms: float) -> float:
        return left + pw * t_ms / t_max

    def y(v: float) -> float:
        return top + ph * (1 - v / y_top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, sans-serif" '
           f'font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">'
           f'{html.escape(title)}</text>']
    v = 0.0
    while v <= y_top + 1e-9:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#e0e0e0"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += y_step
    t = 0.0
    while t <= t_max + 1e-9:
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top + ph}" y2="{top + ph + 4}" '
                   f'stroke="#333"/>')
        out.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{t:g}</text>')
        t += x_step
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#333"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">time since the '
               f'first delivered data packet (ms), {bin_ms:g} ms bins</text>')
    out.append(f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" '
               f'text-anchor="middle">goodput per path (Mbit/s)</text>')
    for t_ms, label in markers or []:
        if 0 <= t_ms <= t_max:
            out.append(f'<line x1="{x(t_ms):.1f}" x2="{x(t_ms):.1f}" y1="{top}" y2="{top + ph}" '
                       f'stroke="#c00" stroke-dasharray="4,3"/>')
            out.append(f'<text x="{x(t_ms) + 3:.1f}" y="{top + 12}" fill="#c00">'
                       f'{html.escape(label)}</text>')
    # Paths with the same goodput draw the same line: earlier lines are wider and later ones
    # dashed, so a line on top of another leaves the one below visible around and between it.
    n = len(paths)
    for i, (label, p) in enumerate(paths.items()):
        color = PALETTE[i % len(PALETTE)]
        width_px = 1.5 + 2.0 * (n - 1 - i) / max(1, n - 1)
        dash = "" if i % 2 == 0 else ' stroke-dasharray="6,3"'
        pts = " ".join(f"{x((k + 0.5) * bin_ms):.1f},{y(val):.1f}"
                       for k, val in enumerate(p["mbit_s"]))
        if pts:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width_px:.2f}"'
                       f'{dash} points="{pts}"/>')
        ly = top + 14 * i + 10
        if ly < top + ph:
            out.append(f'<line x1="{left + pw + 12}" x2="{left + pw + 32}" y1="{ly}" y2="{ly}" '
                       f'stroke="{color}" stroke-width="{width_px:.2f}"{dash}/>')
            out.append(f'<text x="{left + pw + 38}" y="{ly + 4}">{html.escape(label)}</text>')
    if not paths:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle" '
                   f'fill="#888">no data packets in the responder captures</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------
# one run
# ------------------------------------------------------------------------------------------------
STATUS_MARK = {"pass": "✅ pass", "fail": "❌ fail", "not-run": "⏸ not-run",
               "unsupported": "➖ unsupported", "incomplete": "⚠️ incomplete",
               "inconclusive": "❔ inconclusive",
               "error": "💥 error", "interrupted": "⏹ interrupted"}


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_markdown(result: dict) -> str:
    r = result
    lines = [f"# {r['scenario']}: {STATUS_MARK.get(r['verdict'], r['verdict'])}", ""]
    if r.get("description"):
        lines += [r["description"], ""]
    if r.get("outcome"):
        lines += [f"Expected outcome: {r['outcome']}", ""]
    lines += [f"- scenario file: `{r.get('file', '')}`",
              f"- seed: {r.get('seed')} (replay: `mrct run {r.get('file', '')} --seed "
              f"{r.get('seed')}`)",
              f"- implementation: {r.get('dut', 'reference')}"
              + (f", mutant `{r['mutant']}`" if r.get("mutant") else ""),
              f"- wall time: {r.get('timings', {}).get('total_s', 0):.1f} s"]
    if r.get("reason"):
        lines.append(f"- reason: {r['reason']}")
    lines.append("")
    if r.get("expectations"):
        lines += ["## Expectations", "", "| check | expected | observed | status |",
                  "|---|---|---|---|"]
        for e in r["expectations"]:
            lines.append(f"| {_md_cell(e['name'])} | {_md_cell(e.get('expected', ''))} | "
                         f"{_md_cell(e.get('observed', ''))} | "
                         f"{STATUS_MARK.get(e['status'], e['status'])} |")
        lines.append("")
    eps = r.get("endpoints") or []
    if eps:
        lines += ["## Endpoints", "", "| pair | role | node | implementation | exit | Gbit/s | "
                  "messages | retransmissions | EVs retired | error |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for e in eps:
            res = e.get("result") or {}
            lines.append(
                f"| {e['pair']} | {e['role']} | {e['node']} | "
                f"{'DUT' if e.get('is_dut') else 'reference'} | {e.get('rc')} | "
                f"{res.get('gbit_per_s', 0):.3f} | {res.get('messages', '')} | "
                f"{(res.get('retransmissions') or {}).get('total', '')} | "
                f"{(res.get('ev') or {}).get('retired', '')} | "
                f"{_md_cell(res.get('error') or e.get('error', ''))} |")
        lines.append("")
    if r.get("faults"):
        lines += ["## Fault schedule", "",
                  "t0 = the first burst of the transfer at a responder port. Each action takes "
                  "a few ms (ip commands in the node); planned and actual start are both shown.",
                  "", "| fault | action | target | trigger | phase | planned (ms) | started (ms) "
                  "| done (ms) | error |", "|---|---|---|---|---|---|---|---|---|"]

        def ms(v):
            return "" if v is None else format(v, ".1f")

        for f in r["faults"]:
            lines.append(f"| {f['fault']} | {f['action']} | {_md_cell(f.get('target', ''))} | "
                         f"{_md_cell(f.get('trigger', ''))} | {f.get('phase', '')} "
                         f"#{f.get('rep', 0) + 1} | {ms(f.get('planned_ms'))} | "
                         f"{ms(f.get('t_ms'))} | {ms(f.get('done_ms'))} | "
                         f"{_md_cell(f.get('error', ''))} |")
        lines.append("")
    inj = r.get("injector") or {}
    if inj.get("counts"):
        counts = ", ".join(f"{k} {v}" for k, v in sorted(inj["counts"].items())
                           if v and k not in ("bytes", "frames"))
        lines += ["## Injector", "", f"Decisions: {counts or 'none'}; "
                  f"log `{inj.get('log', '')}`", ""]
    chk = r.get("checker") or {}
    if chk:
        lines += ["## Conformance checker", ""]
        if chk.get("status") == "not-run":
            lines.append(f"Not run: {chk.get('reason', '')}")
        else:
            counts = ", ".join(f"{n} {k}" for k, n in sorted((chk.get("counts") or {}).items(),
                                                             key=lambda kv: str(kv[0])))
            lines += [f"Verdict: **{chk.get('verdict', '?')}** (exit {chk.get('rc')}); "
                      f"rules: {counts}", ""]
            for why in chk.get("inconclusive") or []:
                lines.append(f"- ❔ inconclusive: {_md_cell(why)}")
            for u in chk.get("unrecognised") or []:
                lines.append(f"- not MRC: {u.get('frames')} frame(s): {_md_cell(u.get('reason'))}")
            if chk.get("tolerances"):
                lines += ["Tolerances (software fabric defaults and the scenario's): "
                          + ", ".join(f"`{k} = {v}`" for k, v in
                                      sorted(chk["tolerances"].items())), ""]
            for rule in chk.get("failed", [])[:20]:
                lines.append(f"- ❌ {rule['id']}: {_md_cell(rule.get('statement', ''))} "
                             f"({rule.get('violations', '?')} violation(s))"
                             + (f"; first: {_md_cell(rule['first'])}" if rule.get("first") else ""))
            # Warnings name their rule and margin: the first evidence says by how much.
            for rule in chk.get("warned", [])[:20]:
                lines.append(f"- ⚠️ warning {rule['id']}: {_md_cell(rule.get('statement', ''))} "
                             f"({rule.get('violations', '?')} violation(s))"
                             + (f"; first: {_md_cell(rule['first'])}" if rule.get("first") else ""))
            for rid, why in sorted((chk.get("skipped") or {}).items()):
                lines.append(f"- skipped {rid}: {_md_cell(why)}")
            if chk.get("markdown"):
                lines.append(f"\nFull report: `check/{os.path.basename(chk['markdown'])}`")
        lines.append("")
    if r.get("goodput_plot"):
        lines += ["## Goodput per path", "", f"![goodput per path]({r['goodput_plot']})", ""]
    if r.get("viewer_png"):
        lines += ["## Per-path timelines (mrct view)", "", f"![timelines]({r['viewer_png']})", ""]
    if r.get("artifacts_list"):
        lines += ["## Artifacts", ""]
        for name, desc in r["artifacts_list"]:
            lines.append(f"- `{name}`: {desc}")
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# suites
# ------------------------------------------------------------------------------------------------
def retried_note(r: dict) -> str:
    """Said with every case the suite ran twice (suite.run_with_stall_retry)."""
    t = r.get("retried")
    if not t:
        return ""
    st = t.get("host_stall") or {}
    return (f"second attempt: the first was {t.get('first_verdict')} while the reference "
            f"{st.get('role', '?')} on {st.get('node', '?')} was not run for "
            f"{float(st.get('late_ms', 0)):.0f} ms (host stall; artifacts "
            f"{os.path.basename(t.get('first_artifacts', ''))})")


def _detail(r: dict, width: int) -> str:
    return "; ".join(x for x in ((r.get("reason") or "")[:width], retried_note(r)) if x)


def suite_matrix(results: list[dict]) -> str:
    """The terminal matrix: scenario x verdict."""
    w = max([len(r["scenario"]) for r in results] + [8])
    lines = [f"{'scenario'.ljust(w)}  {'verdict':12}  {'time':>7}  detail"]
    lines.append("-" * (w + 40))
    for r in results:
        lines.append(f"{r['scenario'].ljust(w)}  {r['verdict']:12}  "
                     f"{r.get('timings', {}).get('total_s', 0):6.1f}s  "
                     f"{_detail(r, 90)}")
    return "\n".join(lines)


def suite_counts(results: list[dict]) -> dict:
    out: dict = {}
    for r in results:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


def fault_free_retirements(results: list[dict]) -> dict | None:
    """EV retirements summed over every fault-free scenario run of a suite, all seeds and DUTs
    (issue 17): without an impairment or a fault nothing may retire an EV, whatever each
    scenario's own expectations say, and a retirement in one seed of many fails the suite. None
    when the suite ran no fault-free scenario (mutants do not count: they are meant to fail)."""
    runs = [r for r in results if r.get("fault_free") and not r.get("mutant")]
    if not runs:
        return None
    reported = [r for r in runs if isinstance(r.get("ev_retired"), int)]
    total = sum(r["ev_retired"] for r in reported)
    return {
        "total": total, "runs": len(runs), "reported": len(reported),
        "scenarios": len({r.get("file") or r.get("scenario") for r in runs}),
        "seeds": sorted({r["seed"] for r in runs if isinstance(r.get("seed"), int)}),
        "retiring": [{"scenario": r.get("scenario"), "seed": r.get("seed"),
                      "retired": r["ev_retired"]} for r in reported if r["ev_retired"] > 0],
        "not_reported": [r.get("scenario") for r in runs if r not in reported],
        "status": "fail" if total > 0 else ("pass" if reported else "not-run"),
    }


def fault_free_line(agg: dict) -> str:
    """One line for the terminal and suite.md."""
    seeds = ", ".join(str(s) for s in agg["seeds"]) or "-"
    line = (f"fault-free EV retirements: {agg['total']} in {agg['reported']} of {agg['runs']} "
            f"run(s) ({agg['scenarios']} scenario(s), seeds {seeds}), expected 0: "
            f"{agg['status'].upper()}")
    if agg["retiring"]:
        line += "; retired in " + ", ".join(f"{x['scenario']} (seed {x['seed']}): {x['retired']}"
                                            for x in agg["retiring"])
    if agg["not_reported"]:
        line += "; not reported by " + ", ".join(str(x) for x in agg["not_reported"][:5])
    return line


def suite_junit(results: list[dict], name: str) -> str:
    counts = suite_counts(results)
    failures = sum(counts.get(v, 0) for v in ("fail", "incomplete", "inconclusive"))
    errors = counts.get("error", 0) + counts.get("interrupted", 0)
    skipped = counts.get("unsupported", 0) + counts.get("not-run", 0)
    total_t = sum(r.get("timings", {}).get("total_s", 0) for r in results)
    q = sax.quoteattr
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name={q(name)} tests="{len(results)}" failures="{failures}" '
           f'errors="{errors}" skipped="{skipped}" time="{total_t:.3f}">',
           f'  <testsuite name={q(name)} tests="{len(results)}" failures="{failures}" '
           f'errors="{errors}" skipped="{skipped}" time="{total_t:.3f}">']
    for r in results:
        t = r.get("timings", {}).get("total_s", 0)
        out.append(f'    <testcase classname={q("mrct.suite." + name)} name={q(r["scenario"])} '
                   f'time="{t:.3f}">')
        v, reason = r["verdict"], r.get("reason") or ""
        failed = [e for e in r.get("expectations", []) if e["status"] == "fail"]
        detail = "\n".join(f"{e['name']}: expected {e.get('expected')}, observed "
                           f"{e.get('observed')}" for e in failed)
        if v in ("fail", "incomplete", "inconclusive"):
            out.append(f'      <failure message={q(reason or v)}>{sax.escape(detail)}</failure>')
        elif v in ("error", "interrupted"):
            out.append(f'      <error message={q(reason or v)}/>')
        elif v in ("unsupported", "not-run"):
            out.append(f'      <skipped message={q(v + ": " + reason)}/>')
        note = retried_note(r)
        out.append(f'      <system-out>{sax.escape("artifacts: " + r.get("artifacts", ""))}'
                   f'{sax.escape(chr(10) + note) if note else ""}</system-out>')
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"


def suite_markdown(results: list[dict], name: str, dut: str, wall_s: float) -> str:
    counts = suite_counts(results)
    head = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    lines = [f"# MRC suite `{name}` against {dut}", "",
             f"{len(results)} scenario(s): {head}; wall time {wall_s:.1f} s", ""]
    agg = fault_free_retirements(results)
    if agg is not None:
        lines += [fault_free_line(agg), ""]
    lines += ["| scenario | verdict | time (s) | tags | detail |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {_md_cell(r['scenario'])} | "
                     f"{STATUS_MARK.get(r['verdict'], r['verdict'])} | "
                     f"{r.get('timings', {}).get('total_s', 0):.1f} | "
                     f"{_md_cell(' '.join(r.get('tags', [])))} | "
                     f"{_md_cell(_detail(r, 160))} |")
    retried = sum(1 for r in results if r.get("retried"))
    if retried:
        lines += ["", f"{retried} case(s) ran twice: the first attempt did not pass while a "
                  "reference endpoint was not run by its host for >= 20 ms (a host stall); "
                  "the verdict shown is the second attempt's."]
    lines.append("")
    return "\n".join(lines)
