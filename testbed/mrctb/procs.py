"""Process and network-namespace bookkeeping for cleanup checks.

Mininet hosts are unnamed namespaces: the only handle on them is a process inside. We record each
node's namespace inode at build time; afterwards "nothing of ours is left" means no process lives
in any of those namespaces (a namespace without processes, bind mounts or open handles is freed
by the kernel) and no interface of the plan exists in the root namespace.
"""

from __future__ import annotations

import json
import os
import signal
import time

STATE_DIR = "/run/mrctb"


def netns_of(pid: int) -> str | None:
    """'net:[inode]' of a live process, None if it is gone (or a zombie)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot (field 22 of /proc/pid/stat): guards against pid
    reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # comm may contain spaces and parentheses; the fields after the last ')' are fixed.
    rest = data[data.rindex(b")") + 2:].split()
    return int(rest[19])


def alive(pid: int, started: int | None = None) -> bool:
    st = start_time(pid)
    if st is None:
        return False
    if started is not None and st != started:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def pids_in_netns(namespaces: set[str]) -> list[int]:
    """Live processes whose network namespace is one of `namespaces`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ns = netns_of(int(entry))
        if ns is not None and ns in namespaces:
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def kill_all(pids: list[int], grace_s: float = 1.0) -> list[int]:
    """SIGTERM, wait up to grace_s, then SIGKILL. Returns the pids still alive afterwards."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            pids = [p for p in pids if alive(p)]
            if not pids:
                return []
            time.sleep(0.02)
    return [p for p in pids if alive(p)]


def root_ifnames() -> set[str]:
    """Interface names in the namespace of this process (the root namespace for the builder)."""
    try:
        return set(os.listdir("/sys/class/net"))
    except OSError:
        return set()


# ---------------------------------------------------------------------------------------------
# state files: let `python3 -m mrctb cleanup-stale` clean up after a builder killed by SIGKILL
# ---------------------------------------------------------------------------------------------
def state_path(owner_pid: int) -> str:
    return os.path.join(STATE_DIR, f"fabric-{owner_pid}.json")


def write_state(namespaces: set[str], ifnames: list[str], pids: list[int]) -> str:
    os.makedirs(STATE_DIR, exist_ok=True)
    path = state_path(os.getpid())
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"owner_pid": os.getpid(), "owner_start": start_time(os.getpid()),
                   "namespaces": sorted(namespaces), "ifnames": ifnames, "pids": pids}, f)
    os.replace(tmp, path)
    return path


def remove_state(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def stale_states() -> list[dict]:
    """State files whose owner process is gone."""
    out = []
    try:
        names = sorted(os.listdir(STATE_DIR))
    except FileNotFoundError:
        return out
    for name in names:
        if not (name.startswith("fabric-") and name.endswith(".json")):
            continue
        path = os.path.join(STATE_DIR, name)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            continue
        if not alive(state.get("owner_pid", -1), state.get("owner_start")):
            state["path"] = path
            out.append(state)
    return out


def cleanup_stale(log=print) -> int:
    """Kills the processes left in namespaces of dead builders. Returns how many were killed."""
    killed = 0
    for state in stale_states():
        pids = pids_in_netns(set(state.get("namespaces", [])))
        for pid in pids:
            log(f"stale fabric of pid {state['owner_pid']}: killing {pid} ({cmdline(pid)})")
        left = kill_all(pids)
        killed += len(pids) - len(left)
        if left:
            log(f"could not kill {left}")
            continue
        remove_state(state["path"])
    return killed
