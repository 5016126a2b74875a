"""Turns a lab output directory (perftest text, meta JSON, captures) into results JSON, and holds
the timing analysis shared with side_by_side.py (stdlib only).

Timing definitions (the same for RC over rxe and for the simulated transports):
  message latency  completion time - first transmission of the message's first packet.
                   RC over rxe: the completion is the arrival, at the requester, of the first ACK
                   (or NAK-sequence-error, which acknowledges the PSNs before it) covering the
                   message's last PSN; for READ, the in-order arrival of its last response.
  goodput          distinct payload bytes / (last completion - first data transmission).
  progress event   a message completes; messages completed at the same instant (one
                   cumulative ACK covering several) are one progress event.
  stall            a gap between progress events longer than 10x the run's median gap; stall
                   time is the sum of those gaps, max_gap the longest gap of all.
  go-back          a retransmission of a PSN at or below the highest sent; "nak" when a NAK
                   (PSN sequence error) arrived since the previous go-back, "timeout" otherwise
                   (the ACK timer, or rxe's completer asking for a retry).
  flap recovery    (rxe captures) from the last ACK progress before the link went down to the
                   first one after it came back, and from link up to that first progress.

MRC through lib_mrc.so (analyze_mrc) is read from the same requester-side capture with the same
definitions, decoded by the project's own MRP0 decoder (`mrct decode --json`): a message is the
data packets of one METH.MSN, its latency runs from the first transmission of its first packet to
the first transport ACK (0xD1) whose cumulative PSN covers its last PSN (the ACK that completes
the work request, docs/wire-format.md 8.4), and a retransmission is a data packet whose PSN was
sent before. So the RC and MRC rows of the side by side mean the same thing.
"""
import glob
import ipaddress
import json
import os
import re
import statistics
import subprocess

import labpcap

PSN_MOD = 1 << 24


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def timeline_stats(first_tx_ns, completion_ns, progress_ns, payload_bytes, stall_factor=10.0):
    """Goodput, message latency percentiles and stalls from per-message times (ns)."""
    done = [(s, c) for s, c in zip(first_tx_ns, completion_ns) if s is not None and c is not None]
    out = {"messages": len(first_tx_ns), "completed": len(done)}
    if not done:
        return out
    start = min(s for s, _ in done)
    end = max(c for _, c in done)
    lat = [(c - s) / 1e3 for s, c in done]
    dur = (end - start) / 1e9
    out.update(duration_s=round(dur, 6),
               goodput_gbps=round(payload_bytes * 8 / dur / 1e9, 4) if dur > 0 else None,
               latency_us={"p50": round(percentile(lat, 50), 1), "p99": round(percentile(lat, 99), 1),
                           "p999": round(percentile(lat, 99.9), 1), "max": round(max(lat), 1)})
    # one event per instant: with batched completions the zero gaps would otherwise make the
    # median 0 and every real gap a "stall"
    prog = sorted({t for t in progress_ns if start <= t <= end})
    gaps = [b - a for a, b in zip([start] + prog, prog) if b > a]
    if gaps:
        med = statistics.median(gaps)
        thr = stall_factor * med
        stalls = [g for g in gaps if g > thr]
        out["progress"] = {"events": len(prog), "median_gap_us": round(med / 1e3, 2),
                           "max_gap_ms": round(max(gaps) / 1e6, 3),
                           "stall_threshold_us": round(thr / 1e3, 2), "stalls": len(stalls),
                           "stall_time_ms": round(sum(stalls) / 1e6, 3),
                           "stall_fraction": round(sum(stalls) / (end - start), 4) if end > start else 0}
    return out


def psn_delta(p, base):
    """p - base in 24-bit PSN space, signed (within half the space either way)."""
    d = (p - base) % PSN_MOD
    return d - PSN_MOD if d >= PSN_MOD // 2 else d


def analyze_rc(path, requester_addrs, mtu=4096, flap=None):
    """RC behaviour seen from the requester's interface: messages, go-back-N, ACK progress."""
    pkts = labpcap.roce_packets(path)
    req = {addr_key(a) for a in requester_addrs}
    is_req = {}
    base = None

    def rel(p):
        return psn_delta(p, base)

    max_sent = -1
    prev_r = None
    cur = None
    msgs = []          # [first_psn, last_psn, first_tx_ns]
    reads = []         # [psn, first_tx_ns, npkts]
    tx = rtx = payload = 0
    rewinds = []       # (t, psn, cause)
    naks = []          # t of NAK-sequence-error
    rnr = dup_acks = acks = 0
    cum = -1
    progress = []      # (t, cum)
    last_nak_seen = None
    last_tx = None
    qps = set()
    for ts, p in pkts:
        if p["src"] not in is_req:
            is_req[p["src"]] = addr_key(p["src"]) in req
        from_req = is_req[p["src"]]
        op = p["opcode"]
        if from_req and (op in labpcap.REQUEST_DATA_OPS or op == labpcap.READ_REQUEST):
            qps.add(p["destqp"])
            if base is None:
                base = p["psn"]
            r = rel(p["psn"])
            tx += 1
            if r <= max_sent:
                rtx += 1
                if prev_r is None or r <= prev_r:
                    cause = "nak" if last_nak_seen is not None else "timeout"
                    since = ts - (progress[-1][0] if progress else pkts[0][0])
                    rewinds.append((ts, r, cause, since, ts - (last_tx or ts)))
                    last_nak_seen = None
            else:
                if op == labpcap.READ_REQUEST:
                    n = max(1, -(-p.get("reth_len", 0) // mtu))
                    reads.append([r, ts, n])
                    payload += p.get("reth_len", 0)
                    max_sent = r + n - 1
                else:
                    payload += p["payload_len"]
                    max_sent = r
                    if op in labpcap.FIRST_OPS or op in labpcap.ONLY_OPS:
                        cur = [r, None, ts]
                    if (op in labpcap.LAST_OPS or op in labpcap.ONLY_OPS) and cur is not None:
                        cur[1] = r
                        msgs.append(cur)
                        cur = None
            prev_r = r
            last_tx = ts
        elif not from_req and base is not None and op == labpcap.ACK:
            s = p.get("aeth_syndrome", 0)
            kind = s >> 5
            r = rel(p["psn"])
            if kind == 0:
                acks += 1
                if r > cum:
                    cum = r
                    progress.append((ts, cum))
                else:
                    dup_acks += 1
            elif kind == 3 and (s & 0x1F) == 0:
                naks.append(ts)
                last_nak_seen = ts
                if r - 1 > cum:
                    cum = r - 1
                    progress.append((ts, cum))
            elif kind == 1:
                rnr += 1
        elif not from_req and base is not None and op in labpcap.READ_RESPONSE_OPS:
            r = rel(p["psn"])
            if r == cum + 1:
                cum = r
                progress.append((ts, cum))
    # completions: first time cum covers the message's last PSN
    ends = [(m[1], m[2]) for m in msgs] + [(r + n - 1, t) for r, t, n in reads]
    ends.sort()
    first_tx, comp = [], []
    j = 0
    for last, t_first in ends:
        while j < len(progress) and progress[j][1] < last:
            j += 1
        first_tx.append(t_first)
        comp.append(progress[j][0] if j < len(progress) else None)
    res = {"roce_frames": len(pkts), "qps": len(qps), "data_tx": tx, "retransmitted": rtx,
           "retransmit_fraction": round(rtx / tx, 4) if tx else 0,
           "go_back_events": len(rewinds),
           "go_back_nak": sum(1 for r in rewinds if r[2] == "nak"),
           "go_back_timeout": sum(1 for r in rewinds if r[2] == "timeout"),
           "naks_rx": len(naks), "rnr_naks_rx": rnr, "acks_rx": acks, "duplicate_acks": dup_acks}
    # For a timeout rewind: how long the requester had been silent (~ the ACK timeout once the
    # window is spent) and how long since the acknowledged PSN last moved.
    for key, idx in (("timeout_idle_ms", 4), ("timeout_since_progress_ms", 3)):
        to = [r[idx] / 1e6 for r in rewinds if r[2] == "timeout"]
        if to:
            res[key] = {"min": round(min(to), 2), "median": round(statistics.median(to), 2),
                        "max": round(max(to), 2)}
    # progress events for the stall figures are message completions, as for the simulated runs
    res.update(timeline_stats(first_tx, comp, [c for c in comp if c is not None], payload))
    done = [c for c in comp if c is not None]
    if first_tx and done:
        res["first_tx_ns"] = min(t for t in first_tx if t is not None)
        res["last_completion_ns"] = max(done)
    if flap and progress:
        res.update(flap_stats(flap, progress))
    return res


def flap_stats(flap, progress):
    """How long a flap stopped progress (ACKed PSNs over time) and how soon after the link came
    back progress resumed; the same reading for RC and MRC captures."""
    down, up = flap["down_us"] * 1000, flap["up_us"] * 1000
    before = [t for t, _ in progress if t <= down]
    after = [t for t, _ in progress if t >= up]
    if before and after:
        return {"flap": {"down_ms": round((up - down) / 1e6, 1),
                         "no_progress_ms": round((after[0] - before[-1]) / 1e6, 2),
                         "recovery_after_up_ms": round((after[0] - up) / 1e6, 2)}}
    if not after:
        return {"flap": {"down_ms": round((up - down) / 1e6, 1), "recovered": False}}
    return {}


MRC_DATA_FIRST = {0xC6}
MRC_DATA_LAST = {0xC8, 0xC9}
MRC_DATA_ONLY = {0xCA, 0xCB}
MRC_DATA_OPS = {0xC0} | set(range(0xC6, 0xCC))
MRC_TRANSPORT_ACK, MRC_SACK, MRC_NACK, MRC_PROBE = 0xD1, 0xDC, 0xDD, 0xDE


def addr_key(a):
    """One spelling for an address: mrct prints IPv6 as text, labpcap as 32 hex digits."""
    a = str(a)
    if len(a) == 32 and ":" not in a and "." not in a:
        a = ":".join(a[i:i + 4] for i in range(0, 32, 4))
    try:
        return ipaddress.ip_address(a).exploded
    except ValueError:
        return a


def mrct_frames(mrct, path):
    """The capture's frames as `mrct decode --json` objects (the project's MRP0 decoder)."""
    r = subprocess.run([mrct, "decode", "--json", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise labpcap.PcapError(f"{path}: mrct decode exit {r.returncode}: "
                                f"{r.stderr.strip()[-300:]}")
    out = []
    for i, line in enumerate(r.stdout.splitlines()):
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise labpcap.PcapError(f"{path}: mrct decode --json line {i + 1}: {e}")
    return out


def analyze_mrc(path, requester_addrs, mrct, flap=None):
    """MRC (MRP0) seen from the requester's interface, with analyze_rc's definitions."""
    frames = mrct_frames(mrct, path)
    req = {addr_key(a) for a in requester_addrs}
    is_req = {}
    base = None

    def rel(p):
        return psn_delta(p, base)

    sent = set()       # relative PSNs transmitted at least once
    msgs = {}          # MSN -> [first_tx_ns, last_psn or None]
    tx = rtx = rtx_flag = payload = probes = 0
    evs = set()
    acks = naks = sacks = dup_acks = decode_errors = 0
    nack_codes = {}
    cum = -1
    progress = []      # (t, cumulative placed PSN) from transport ACKs
    sack_progress = []  # (t, cack_psn) from SACKs
    for f in frames:
        if "error" in f:
            decode_errors += 1
            continue
        if not f.get("roce"):
            continue
        ts, op = f["ts_ns"], f["opcode"]
        src = f.get("src", "")
        if src not in is_req:
            is_req[src] = addr_key(src) in req
        from_req = is_req[src]
        if from_req and op in MRC_DATA_OPS:
            if base is None:
                base = f["psn"]
            r = rel(f["psn"])
            tx += 1
            evs.add(f.get("wev"))
            rtx_flag += bool(f.get("rtx"))
            if r in sent:
                rtx += 1
                continue
            sent.add(r)
            payload += f.get("payload_len", 0)
            m = msgs.setdefault(f.get("meth.msn", r), [ts, None])
            m[0] = min(m[0], ts)
            if op in MRC_DATA_LAST or op in MRC_DATA_ONLY:
                m[1] = r
        elif from_req and op == MRC_PROBE:
            probes += 1  # reliability probes (EV probes are endpoint operations, DestQP 2)
        elif not from_req and base is not None and op == MRC_TRANSPORT_ACK:
            s = f.get("aeth.syndrome", 0)
            if s >> 5 == 0:
                acks += 1
                r = rel(f["psn"])
                if r > cum:
                    cum = r
                    progress.append((ts, cum))
                else:
                    dup_acks += 1
            else:
                naks += 1
        elif not from_req and base is not None and op == MRC_SACK:
            sacks += 1
            c = rel(f["psn"])
            if not sack_progress or c > sack_progress[-1][1]:
                sack_progress.append((ts, c))
        elif not from_req and base is not None and op == MRC_NACK:
            name = f.get("neth.code_name", str(f.get("neth.code")))
            nack_codes[name] = nack_codes.get(name, 0) + 1

    def covered(prog, last):
        # first time the cumulative PSN reaches `last` (prog is increasing in both fields)
        lo, hi = 0, len(prog)
        while lo < hi:
            mid = (lo + hi) // 2
            if prog[mid][1] < last:
                lo = mid + 1
            else:
                hi = mid
        return prog[lo][0] if lo < len(prog) else None

    if tx == 0:
        # e.g. captured on the sending interface: AF_PACKET qdisc-bypass frames skip its taps
        return {"error": f"{path}: no MRC data packet from the requester "
                         f"({', '.join(sorted(requester_addrs))}) in "
                         f"{sum(1 for f in frames if f.get('roce'))} RoCE frames"}
    order = sorted(msgs.values(), key=lambda m: m[0])
    first_tx = [m[0] for m in order]
    comp = [covered(progress, m[1]) if m[1] is not None else None for m in order]
    res = {"decoder": "mrct decode --json", "roce_frames": sum(1 for f in frames if f.get("roce")),
           "decode_errors": decode_errors, "data_tx": tx, "retransmitted": rtx,
           "retransmit_fraction": round(rtx / tx, 4) if tx else 0, "rtx_flagged": rtx_flag,
           "evs_used": len(evs), "reliability_probes_tx": probes, "transport_acks_rx": acks,
           "transport_naks_rx": naks, "duplicate_acks": dup_acks, "sacks_rx": sacks,
           "nacks_rx": sum(nack_codes.values()), "nack_codes": nack_codes}
    res.update(timeline_stats(first_tx, comp, [c for c in comp if c is not None], payload))
    # the same messages up to the SACK that first covers them (delivery, before placement's ACK)
    sack_done = [covered(sack_progress, m[1]) if m[1] is not None else None for m in order]
    sl = [(c - s) / 1e3 for s, c in zip(first_tx, sack_done) if c is not None]
    if sl:
        res["sack_latency_us"] = {"p50": round(percentile(sl, 50), 1),
                                  "p99": round(percentile(sl, 99), 1),
                                  "p999": round(percentile(sl, 99.9), 1)}
    done = [c for c in comp if c is not None]
    if first_tx and done:
        res["first_tx_ns"] = min(first_tx)
        res["last_completion_ns"] = max(done)
    if flap and progress:
        res.update(flap_stats(flap, progress))
    return res


PERF_ERR = re.compile(r"(error|Failed|Couldn't|Unable|retry|timeout)", re.I)


def parse_perftest(text, cpu_mhz=None, cycles=False):
    """The results table of a perftest client output (+ error lines). With -C (cycles=True) the
    latency columns hold TSC cycles although perftest still labels them [usec]; cpu_mhz (the
    guest's /proc/cpuinfo) converts them to microseconds."""
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            # columns are separated by 2+ spaces, except "#bytes #iterations" in latency tests
            head = []
            for tok in re.split(r"\s{2,}", line.strip()):
                head += tok.split() if tok.startswith("#") else [tok]
            for v in lines[i + 1:]:
                if re.match(r"^\s*\d", v):
                    vals = v.split()
                    for h, x in zip(head, vals):
                        key = (h.replace("#", "").replace("[", "_").replace("]", "").replace("/", "_per_")
                               .replace("%", "pct").replace(" ", "_").replace(".", "_").lower())
                        try:
                            out[key] = float(x) if "." in x else int(x)
                        except ValueError:
                            out[key] = x
                    break
            break
    if cycles:
        for k in [k for k in out if k.endswith("_usec")]:
            out[k[:-len("_usec")] + "_cycles"] = out.pop(k)
    for k in [k for k in out if k.endswith("_cycles") and isinstance(out[k], (int, float))]:
        out[k[:-len("_cycles")] + "_usec"] = round(out[k] / cpu_mhz, 3) if cpu_mhz else None
    errs = [ln.strip() for ln in lines if PERF_ERR.search(ln) and "#" not in ln][:5]
    if errs:
        out["errors"] = errs
    return out


def read_counters(meta):
    a, b = meta.get("counters_after", {}), meta.get("counters_before", {})
    return {k: a[k] - b.get(k, 0) for k in sorted(a) if isinstance(a[k], int) and a[k] - b.get(k, 0)}


def collect(out_dir, mode=None, timings=None, kernel=None, mrct=None):
    """results.json of a lab output directory. mrct decodes the MRC (mrc-perf) captures; without
    it their analysis says so and the RC runs are analysed as always."""
    setup = {}
    sp = os.path.join(out_dir, "setup.json")
    if os.path.isfile(sp):
        with open(sp) as fh:
            setup = json.load(fh)
    req = {setup.get("requester", {}).get("v4", "10.211.0.1"),
           setup.get("requester", {}).get("v6", "fd00:211::1")}
    runs = []
    for mp in sorted(glob.glob(os.path.join(out_dir, "*.meta.json")), key=os.path.getmtime):
        with open(mp) as fh:
            meta = json.load(fh)
        name = meta["name"]
        run = {"name": name, "tool": meta["tool"], "family": meta["family"], "fault": meta["fault"],
               "args": meta["args"], "client_rc": meta["client_rc"], "server_rc": meta["server_rc"],
               "ok": meta["client_rc"] == 0 and meta["server_rc"] == 0,
               "wall_s": round((meta["t_end_us"] - meta["t_start_us"]) / 1e6, 3),
               "capture": {"file": f"{name}.pcap", "captured": meta.get("captured"),
                           "dropped_by_kernel": meta.get("capture_dropped"),
                           "interface": meta.get("capture_if", "mrcA0")}}
        if meta["fault"] != "none":
            run["expected_failure"] = "fault runs may end in RETRY_EXC_ERR; that is a result"
        if "flap" in meta:
            run["flap"] = meta["flap"]
        cp = os.path.join(out_dir, f"{name}.client.txt")
        if os.path.isfile(cp):
            with open(cp, errors="replace") as fh:
                run["perftest"] = parse_perftest(fh.read(), setup.get("cpu_mhz"),
                                                 cycles=" -C" in f" {meta['args']}")
        run["rxe_counters_delta"] = read_counters(meta)
        jp = os.path.join(out_dir, f"{name}.client.json")
        if meta["tool"] == "mrc-perf" and os.path.isfile(jp):
            # mrc-perf prints one JSON object per connection (README of conformance/mrc-perf)
            with open(jp, errors="replace") as fh:
                objs = [json.loads(x) for x in fh.read().splitlines() if x.startswith("{")]
            run["mrc_perf"] = objs[0] if objs else {"error": "no result line"}
            run.pop("perftest", None)
        pp = os.path.join(out_dir, f"{name}.pcap")
        if not os.path.isfile(pp):
            # runs of an older lab (MRC was not captured before 2026-11-28) keep no capture
            run["capture"] = None
        elif meta["tool"] == "mrc-perf" and not (mrct and os.path.isfile(mrct)):
            run["analysis"] = {"error": f"{name}.pcap not analysed: mrct (the MRP0 decoder) not "
                                        "found; build it or pass --mrct"}
        else:
            try:
                if meta["tool"] == "mrc-perf":
                    run["analysis"] = analyze_mrc(pp, req, mrct, flap=meta.get("flap"))
                else:
                    run["analysis"] = analyze_rc(pp, req, flap=meta.get("flap"))
            except labpcap.PcapError as e:
                run["analysis"] = {"error": str(e)}
        runs.append(run)
    return {"setup": setup, "mode": mode, "kernel": setup.get("kernel", kernel),
            "host_loadavg": os.getloadavg(), "host_cpus": os.cpu_count(),
            "timings": timings or {}, "runs": runs}


def print_table(summary):
    print(f"{'run':34} {'rc':>3} {'perftest':>22} {'goodput':>9} {'lat p99':>10} {'lat max':>10} "
          f"{'rtx%':>6} {'gbN/to':>7} {'stall ms':>9}")
    for r in summary["runs"]:
        pt = r.get("perftest", {})
        if "bw_average_gb_per_sec" in pt:
            perf = f"{pt['bw_average_gb_per_sec']:.3f} Gb/s"
        elif pt.get("t_typical_usec") is not None:
            perf = f"{pt['t_typical_usec']:.2f} us typ"
        elif "gbit_per_s" in r.get("mrc_perf", {}) and "write_lat" not in r.get("args", ""):
            perf = f"mrc-perf {r['mrc_perf']['gbit_per_s']:.3f} Gb/s"
        elif r.get("mrc_perf", {}).get("latency_us", {}).get("p50") is not None:
            perf = f"mrc-perf {r['mrc_perf']['latency_us']['p50']:.0f} us p50"
        else:
            perf = "-"
        a = r.get("analysis", {})
        lat = a.get("latency_us", {})
        pr = a.get("progress", {})

        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        print(f"{r['name']:34} {r['client_rc']:>3} {perf:>22} {f(a.get('goodput_gbps'), '.3f'):>9} "
              f"{f(lat.get('p99'), '.0f'):>10} {f(lat.get('max'), '.0f'):>10} "
              f"{f(100 * a.get('retransmit_fraction', 0), '.2f'):>6} "
              f"{a.get('go_back_nak', '-')}/{a.get('go_back_timeout', '-'):<4} "
              f"{f(pr.get('stall_time_ms'), '.1f'):>9}")
