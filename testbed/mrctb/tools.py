"""Finding the `mrct` binary and asking it what it can do."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ToolError(RuntimeError):
    pass


def subcommands(mrct: str) -> set[str]:
    """Subcommands listed by `mrct --help` (each tool library adds its own when built)."""
    try:
        proc = subprocess.run([mrct, "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    out, in_list = set(), False
    for line in proc.stdout.splitlines():
        if line.strip().lower().startswith("subcommands"):
            in_list = True
            continue
        if in_list and line.startswith("  ") and line.strip():
            out.add(line.split()[0])
        elif in_list and line.strip() and not line.startswith(" "):
            in_list = False
    return out


def _named() -> list[str]:
    """Binaries the caller named: $MRCT, and the mrct that exec'd us (`mrct run` execs this
    interpreter; the shell that started mrct left its path in $_)."""
    out = []
    if os.environ.get("MRCT"):
        out.append(os.environ["MRCT"])
    invoked = os.environ.get("_", "")
    if os.path.basename(invoked) == "mrct":
        out.append(invoked)
    return out


def _usable(paths: list[str]) -> list[str]:
    seen, uniq = set(), []
    for c in paths:
        c = os.path.abspath(c)
        if c not in seen and os.path.isfile(c) and os.access(c, os.X_OK):
            seen.add(c)
            uniq.append(c)
    return uniq


def candidates() -> list[str]:
    """$MRCT, the invoking mrct, build/*/bin/mrct of this checkout (newest first), PATH."""
    built = glob.glob(os.path.join(REPO_DIR, "build", "*", "bin", "mrct"))
    built.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    on_path = shutil.which("mrct")
    return _usable(_named() + built + ([on_path] if on_path else []))


class Mrct:
    """An mrct binary and the subcommands it was built with."""

    def __init__(self, path: str):
        self.path = path
        self._subs: set[str] | None = None

    def has(self, sub: str) -> bool:
        if self._subs is None:
            self._subs = subcommands(self.path)
        return sub in self._subs

    def mutants(self) -> dict[str, tuple[str, str]]:
        """mutant name -> (the catalogue rule it breaks, the role it acts in: client, server or
        both), from `mrct endpoint --list-mutants` (NAME RULE [ROLE] what...)."""
        proc = subprocess.run([self.path, "endpoint", "--list-mutants"], capture_output=True,
                              text=True, timeout=20)
        out = {}
        for line in proc.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].startswith("MRC-"):
                role = parts[2] if len(parts) > 2 and parts[2] in ("client", "server") else "both"
                out[parts[0]] = (parts[1], role)
        return out

    def rules(self) -> list[dict]:
        if not self.has("rules"):
            return []
        proc = subprocess.run([self.path, "rules", "--json"], capture_output=True, text=True,
                              timeout=20)
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            return []
        return data if isinstance(data, list) else []


PREFERRED = ("endpoint", "inject", "check", "rules")


def find(explicit: str | None = None, need: tuple = ("endpoint",)) -> Mrct:
    """--mrct, else $MRCT, else the invoking mrct: that binary, if it has every subcommand in
    `need`. Otherwise, among this checkout's builds and PATH: the newest that has PREFERRED
    too (the checker and the injector), else the newest that has `need`."""
    tried = []
    if explicit and not os.path.isfile(explicit):
        raise ToolError(f"--mrct {explicit}: no such file")
    named = [os.path.abspath(explicit)] if explicit else _usable(_named())
    for path in named:
        m = Mrct(path)
        missing = [s for s in need if not m.has(s)]
        if not missing:
            return m
        tried.append(f"{path} (no {', '.join(missing)})")
    if not explicit:
        found = [Mrct(p) for p in candidates() if p not in named]
        for m in found:
            if all(m.has(s) for s in set(need) | set(PREFERRED)):
                return m
        for m in found:
            missing = [s for s in need if not m.has(s)]
            if not missing:
                return m
            tried.append(f"{m.path} (no {', '.join(missing)})")
    hint = "; tried " + "; ".join(tried) if tried else ""
    raise ToolError(f"no mrct binary with subcommand(s) {', '.join(need)}: build it "
                    f"(cmake --preset release && cmake --build --preset release --target mrct) "
                    f"or pass --mrct PATH{hint}")
