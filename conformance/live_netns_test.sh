#!/usr/bin/env bash
# mrct check --live on the wire: two veth pairs in a namespace of this test's own (h1's and h2's
# interfaces; the "mirror ports" are the far ends), the checker fixtures of live_fixture replayed
# onto them in time order by an AF_PACKET sender, judged live, and tcpdump capturing the same
# frames on the same interfaces. Checks:
#   - good fixture, stopped by SIGINT: live verdict CONFORMING, as the offline check of the
#     fixture files; periodic verdicts printed; the live report's rules (status, counts,
#     evidence) equal those of `mrct check` on tcpdump's capture of the same frames;
#   - bad fixture, stopped by --duration-s: NOT CONFORMING, failing the rule the offline check of
#     the fixture fails (MRC-REQ-006; timing rules may add to it, the replay being in real time);
#     the same judgements as tcpdump's capture checked offline; --keep-s wrote one capture per
#     failing rule, and MRC-REQ-006-1.pcapng holds the violating frame (bytes taken from
#     tcpdump's capture) and its neighbours, commented;
#   - bad input: a missing interface is exit 2 naming it.
# Environment: MRCT, LIVE_FIXTURE. Needs root (namespaces, AF_PACKET); exit 77 (skipped) without.
set -euo pipefail
: "${MRCT:?}" "${LIVE_FIXTURE:?}"
MRCT=$(realpath "$MRCT")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v tcpdump > /dev/null || { echo "SKIP: needs tcpdump"; exit 77; }
ns=mrclive$$
dir=$(mktemp -d "${TMPDIR:-/tmp}/mrc_live_$$_XXXX")
cleanup() {
  jobs -p | xargs -r kill 2> /dev/null || true
  ip netns del "$ns" 2> /dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail=0
in_ns() { ip netns exec "$ns" "$@"; }

"$LIVE_FIXTURE" "$dir/fx"
ip netns add "$ns"
# No IPv6 of the kernel's own on these links (router solicitations, MLD): only the fixture's frames.
in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
in_ns ip link set lo up
for p in a b; do
  in_ns ip link add "${p}0" type veth peer name "${p}1"
  in_ns ip link set "${p}0" up
  in_ns ip link set "${p}1" up
done

# replay DIR: h1-eth0.pcapng onto a0, h2-eth0.pcapng onto b0, merged on time, own gaps.
replay() {
  in_ns /usr/bin/python3 - "$1" <<'PY'
import socket, struct, sys, time

def frames(path):
    """(ts_ns, bytes) of each Enhanced Packet Block of a pcapng file."""
    data = open(path, "rb").read()
    out, off, resol = [], 0, {}
    bo = "<"
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from(bo + "II", data, off)
        if btype == 0x0A0D0D0A:
            bo = "<" if data[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            btype, blen = struct.unpack_from(bo + "II", data, off)
        elif btype == 1:  # IDB: if_tsresol (option 9), default 10^-6
            r, o = 6, off + 16
            while o + 4 <= off + blen - 4:
                code, ln = struct.unpack_from(bo + "HH", data, o)
                if code == 0:
                    break
                if code == 9:
                    r = data[o + 4]
                o += 4 + (ln + 3) // 4 * 4
            resol[len(resol)] = r
        elif btype == 6:
            ifid, hi, lo, cap, _ = struct.unpack_from(bo + "IIIII", data, off + 8)
            t = (hi << 32) | lo
            r = resol.get(ifid, 6)
            ns = t * 10 ** (9 - r) if r <= 9 else t // 10 ** (r - 9)
            out.append((ns, data[off + 28:off + 28 + cap]))
        off += blen
    return out

d = sys.argv[1]
scale = 1  # the fixtures' own timing (a sender slower than it stretches gaps)
merged = sorted([(t, 0, b) for t, b in frames(d + "/h1-eth0.pcapng")] +
                [(t, 1, b) for t, b in frames(d + "/h2-eth0.pcapng")], key=lambda x: x[0])
socks = []
for ifname in ("a0", "b0"):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    socks.append(s)
t0, w0 = merged[0][0], time.monotonic_ns()
for t, i, b in merged:
    due = w0 + (t - t0) * scale
    while time.monotonic_ns() < due:
        pass
    socks[i].send(b)
print(len(merged), "frames replayed")
PY
}

# live NAME MRCT-ARGS...: tcpdump on a1 and b1, mrct check --live on them, replay, stop.
# With STOP=sigint the run is ended by SIGINT after the replay, else by its --duration-s.
live() {
  local name=$1; shift
  local o=$dir/$name
  mkdir -p "$o/keep"
  local dumps=()
  for i in a1 b1; do
    # ip netns exec execs tcpdump: $! is tcpdump's own pid.
    ip netns exec "$ns" tcpdump -i "$i" -U -w "$o/$i.pcap" --time-stamp-precision=nano -s 0 \
      > /dev/null 2> "$o/tcpdump_$i.log" &
    dumps+=($!)
  done
  # ip netns exec execs mrct: $! is mrct's own pid.
  ip netns exec "$ns" "$MRCT" check --live a1@h1,b1@h2 --profile "$dir/fx/$name/dut.json" --interval-s 0.5 \
    --keep-s 0.05 --keep-dir "$o/keep" --json "$o/live.json" -q "$@" > "$o/live.out" \
    2> "$o/live.err" &
  local live_pid=$!
  for _ in $(seq 50); do
    grep -q listening "$o/tcpdump_a1.log" 2> /dev/null &&
      grep -q listening "$o/tcpdump_b1.log" 2> /dev/null && break
    sleep 0.1
  done
  sleep 1  # the checker's rings are open well within this
  replay "$dir/fx/$name"
  sleep 1.2  # two periodic verdicts after the last frame
  if [ "${STOP:-}" = sigint ]; then kill -INT "$live_pid"; fi
  local rc=0
  wait "$live_pid" || rc=$?
  echo "$rc" > "$o/rc"
  sleep 0.2
  kill -INT "${dumps[@]}" 2> /dev/null || true
  wait "${dumps[@]}" || true
  "$MRCT" check "$o/a1.pcap@h1" "$o/b1.pcap@h2" --profile "$dir/fx/$name/dut.json" -q \
    --json "$o/offline_wire.json" > /dev/null 2>&1 || true
  "$MRCT" check "$dir/fx/$name/h1-eth0.pcapng@h1" "$dir/fx/$name/h2-eth0.pcapng@h2" \
    --profile "$dir/fx/$name/dut.json" -q --json "$o/offline_fixture.json" > /dev/null 2>&1 || true
}

compare() {  # compare NAME EXPECTED_RC EXPECTED_FAILING_RULES
  local name=$1 want_rc=$2 want_fail=$3
  local o=$dir/$name
  /usr/bin/python3 - "$o" "$want_rc" "$want_fail" <<'PY' || fail=1
import json, sys
o, want_rc, want_fail = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ok = True
def bad(msg):
    global ok
    ok = False
    print("FAIL", o.rsplit("/", 1)[1] + ":", msg)
rc = int(open(o + "/rc").read())
live = json.load(open(o + "/live.json"))
wire = json.load(open(o + "/offline_wire.json"))
fx = json.load(open(o + "/offline_fixture.json"))
failing = lambda r: sorted(x["id"] for x in r["rules"] if x["status"] in ("fail", "warn"))
if rc != (1 if failing(live) else 0):
    bad(f"exit {rc} with failing rules {failing(live)}")
# The fixture's verdict on the rules no replay timing can change (framing, and MRC-REQ-006: the
# A flag of a message's last packet). A replay in real time by a Python sender on a loaded
# machine is not exact to the microsecond, and timing rules (MRC-EV-009, MRC-REQ-004, ...) may
# judge the replayed gaps differently from the fixture's own: those are compared between live
# and offline on the same frames (below), not with the fixture.
untimed = lambda ids: [i for i in ids if i.startswith("MRC-FRM") or i == "MRC-REQ-006"]
if ",".join(failing(fx)) != want_fail:
    bad(f"offline check of the fixture fails {failing(fx)}, expected [{want_fail}]")
if untimed(failing(live)) != untimed(failing(fx)):
    bad(f"live failing rules {failing(live)}, the fixture's {failing(fx)}")
if want_rc == 0 and failing(live):
    print(f"note {o.rsplit('/', 1)[1]}: timing rules failed on the replay: {failing(live)} "
          "(the same offline on tcpdump's capture)")
# Same frames, same judgements: status, counts and evidence of every rule (the file named in
# evidence aside: an interface live, tcpdump's file offline).
strip = lambda rules: [dict(r, evidence=[dict(e, file="") for e in r["evidence"]])
                       for r in rules]
if strip(live["rules"]) != strip(wire["rules"]):
    for a, b in zip(strip(live["rules"]), strip(wire["rules"])):
        if a != b:
            bad(f"live and offline (tcpdump's capture) differ on {a['id']}: {a} / {b}")
            break
lf = [c["frames"] for c in live["captures"]]
wf = [c["frames"] for c in wire["captures"]]
if lf != wf:
    bad(f"frames per interface: live {lf}, tcpdump {wf}")
fxf = [c["frames"] for c in fx["captures"]]
if lf != fxf:
    bad(f"frames per interface: live {lf}, fixture {fxf}")
periodic = [l for l in open(o + "/live.out") if "so far" in l]
if len(periodic) < 2:
    bad(f"{len(periodic)} periodic verdicts")
if ok:
    print(f"ok   {o.rsplit('/', 1)[1]}: exit {rc}, failing [{','.join(failing(live))}], "
          f"{sum(lf)} frames on {len(lf)} interfaces, {len(periodic)} periodic verdicts; "
          "live rules == offline rules of tcpdump's capture; untimed failing rules == the "
          "fixture's")
    print("     last periodic:", periodic[-1].strip())
PY
}

STOP=sigint live good
compare good 0 ""
live bad --duration-s 5
compare bad 1 MRC-REQ-006

# The capture kept around MRC-REQ-006 holds the violating frame, from tcpdump's capture.
/usr/bin/python3 - "$dir/bad" <<'PY' || fail=1
import json, os, struct, sys
o = sys.argv[1]
live = json.load(open(o + "/live.json"))
rule = next(x for x in live["rules"] if x["id"] == "MRC-REQ-006")
ev = rule["evidence"][0]
iface = ["a1", "b1"][ev["capture"]]

def pcap_frames(path):
    d = open(path, "rb").read()
    off, out = 24, []
    while off + 16 <= len(d):
        cap = struct.unpack_from("<I", d, off + 8)[0]
        out.append(d[off + 16:off + 16 + cap])
        off += 16 + cap
    return out

def pcapng_frames(path):
    d = open(path, "rb").read()
    off, out = 0, []
    while off + 12 <= len(d):
        btype, blen = struct.unpack_from("<II", d, off)
        if btype == 6:
            cap = struct.unpack_from("<I", d, off + 20)[0]
            out.append(d[off + 28:off + 28 + cap])
        off += blen
    return out

want = pcap_frames(f"{o}/{iface}.pcap")[ev["frame"] - 1]
keep = sorted(os.listdir(o + "/keep"))
path = o + "/keep/MRC-REQ-006-1.pcapng"
fails = sorted(x["id"] for x in live["rules"] if x["status"] in ("fail", "warn"))
if keep != [f"{r}-1.pcapng" for r in fails] or "MRC-REQ-006" not in fails:
    print("FAIL keep: files", keep)
    sys.exit(1)
got = pcapng_frames(path)
if want not in got or len(got) < 3:
    print(f"FAIL keep: {path} has {len(got)} frames, the violating frame "
          f"({iface} frame {ev['frame']}) {'in' if want in got else 'not in'} them")
    sys.exit(1)
if b"MRC-REQ-006: this frame" not in open(path, "rb").read():
    print("FAIL keep: no comment on the violating frame")
    sys.exit(1)
print(f"ok   keep: {os.path.basename(path)} holds {len(got)} frames around the violation, "
      f"the violating one ({iface} frame {ev['frame']}) among them, commented")
PY

# Bad input: exit 2, the interface named.
rc=0
in_ns "$MRCT" check --live nosuch0 --duration-s 1 > /dev/null 2> "$dir/err" || rc=$?
if [ "$rc" != 2 ] || ! grep -q "nosuch0: no such interface" "$dir/err"; then
  echo "FAIL missing interface: exit $rc, $(cat "$dir/err")"
  fail=1
else
  echo "ok   missing interface: exit 2, $(cat "$dir/err")"
fi
exit $fail
