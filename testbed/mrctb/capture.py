"""Per-interface packet captures: tcpdump inside a node's namespace, nanosecond pcap files."""

from __future__ import annotations

import dataclasses
import os
import re
import select
import signal
import subprocess
import time

READY_TIMEOUT_S = 5.0
# tcpdump abandons packets still in its ring when it gets SIGINT, so a packet that crossed the
# interface just before stop() could be missing. Stop waits until the files stop growing for
# this long (at most SETTLE_MAX_S).
SETTLE_S = 0.1
SETTLE_MAX_S = 2.0


class CaptureError(RuntimeError):
    pass


@dataclasses.dataclass
class CaptureResult:
    path: str
    node: str
    ifname: str
    captured: int | None  # tcpdump's "packets captured"
    dropped_by_kernel: int | None
    returncode: int | None


class Capture:
    """tcpdump -i IFACE -w FILE with nanosecond timestamps, written packet by packet.

    `--immediate-mode` and `-U` make every packet reach the file as soon as it is seen; without
    them tcpdump holds packets for up to a second and a quick stop leaves an empty pcap.
    `-Z root` keeps tcpdump from dropping to the `tcpdump` user, who may not be able to write
    the output directory. In immediate mode libpcap sizes every ring slot for the snap length
    (64 KiB on veth when snaplen is 0), so the default 2 MiB buffer holds only 32 packets and a
    burst overflows it: callers pass the link MTU as snaplen and we ask for a 16 MiB ring
    (about 1,800 slots at MTU 9000). Kernel drops are reported in CaptureResult.
    """

    def __init__(self, popen_fn, node: str, ifname: str, path: str, snaplen: int = 0,
                 bpf_filter: str | None = None, buffer_kib: int = 16384):
        self.node = node
        self.ifname = ifname
        self.path = path
        self._popen_fn = popen_fn
        self._snaplen = snaplen
        self._filter = bpf_filter
        self._buffer_kib = buffer_kib
        self.proc: subprocess.Popen | None = None
        self.result: CaptureResult | None = None
        self._stderr = b""

    def start(self) -> "Capture":
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        cmd = ["tcpdump", "-n", "--immediate-mode", "-U", "--time-stamp-precision=nano",
               "-Z", "root", "-B", str(self._buffer_kib), "-s", str(self._snaplen),
               "-i", self.ifname, "-w", self.path]
        if self._filter:
            cmd.append(self._filter)
        self.proc = self._popen_fn(self.node, cmd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump prints "listening on IFACE" once the socket is bound; only then is a packet
        # sent afterwards guaranteed to be in the file.
        deadline = time.monotonic() + READY_TIMEOUT_S
        fd = self.proc.stderr.fileno()
        while b"listening on" not in self._stderr:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise CaptureError(f"tcpdump on {self.node}:{self.ifname} not ready after "
                                   f"{READY_TIMEOUT_S} s: {self._stderr.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    rc = self.proc.wait()
                    raise CaptureError(f"tcpdump on {self.node}:{self.ifname} exited rc={rc}: "
                                       f"{self._stderr.decode(errors='replace').strip()}")
                self._stderr += chunk
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 5.0, settle_s: float = SETTLE_S) -> CaptureResult:
        if self.result is not None:
            return self.result
        if settle_s > 0:
            settle([self], settle_s)
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                _, err = self.proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
            self._stderr += err or b""
            rc = self.proc.returncode
        text = self._stderr.decode(errors="replace")
        captured = _count(r"(\d+) packets? captured", text)
        dropped = _count(r"(\d+) packets? dropped by kernel", text)
        self.result = CaptureResult(self.path, self.node, self.ifname, captured, dropped, rc)
        return self.result


def settle(captures: list[Capture], quiet_s: float = SETTLE_S) -> None:
    """Waits until none of the captures' files has grown for quiet_s."""
    def sizes():
        out = []
        for cap in captures:
            try:
                out.append(os.path.getsize(cap.path))
            except OSError:
                out.append(-1)
        return out

    deadline = time.monotonic() + SETTLE_MAX_S
    last = sizes()
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(min(0.02, quiet_s))
        now = sizes()
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return


def stop_all(captures: list[Capture], settle_s: float = SETTLE_S) -> list[CaptureResult]:
    """Stops several captures after one shared settle period."""
    live = [c for c in captures if c.result is None and c.running]
    if live and settle_s > 0:
        settle(live, settle_s)
    for cap in live:
        cap.proc.send_signal(signal.SIGINT)
    return [cap.stop(settle_s=0) for cap in captures]


def _count(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None
