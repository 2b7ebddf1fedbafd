"""Every output of a varied set of invocations, hashed: a refactor's before and after, byte for byte.

    python -m tests.support.fingerprint -o now.json            # this tree
    python -m tests.support.fingerprint --against REV          # this tree and REV (a git worktree), compared
    python -m tests.support.fingerprint --parking off --against REV   # this tree with parking off, and REV

Each invocation runs ``python -m ctsim ARGS`` in-process (``runpy``, so the
same line works whatever the package's layout) in a forked worker, with
stdout, stderr and the exit code hashed together. The set: ``varied_runs``
as ``--json`` and as text, plans on several nodes, and small sweeps.
``--parking`` plays this tree's runs with parking off (every step as
events) or eager (wherever it may, not only where it pays); REV's always
park as shipped, so each must give the same bytes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def invocations(n: int) -> list[list[str]]:
    from tests.support.scenarios import varied_runs

    runs = varied_runs(n)
    out = [["run", *a, "--json"] for a in runs]
    out += [["run", *a] for a in runs[: n // 3]]
    plans = [
        [],
        [
            "--node-memory",
            "2Ti",
            "--map-ratio",
            "0.005",
            "--cores",
            "128",
            "--churn",
            "50000/min for 8h, 500/min for 16h",
        ],
        ["--node-memory", "64Gi", "--map-ratio", "0.0025", "--churn", "20000/min", "--any-churn", "2000/min"],
        ["--max-entries", "4Mi", "--profile", "cilium-1.18", "--burst", "20"],
        ["--churn", "500/s", "--ipv6-churn", "200/s", "--deadline", "60s", "--rate", "100000"],
    ]
    for p in plans:
        out += [["plan", *p, "--json"], ["plan", *p]]
    sweeps = [
        ["--grid", "entries=256Ki,4Mi,16Mi", "--grid", "pods=5,50", "--horizon", "30m"],
        ["--grid", "gc_interval=auto,60s", "--entries", "16M", "--pods", "20", "--replications", "3"],
    ]
    for s in sweeps:
        out.append(["sweep", *s, "--json"])  # the text says how long the sweep took
    return out


def _one(args: list[str]) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    sys.argv = ["ctsim", *args]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("ctsim", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code
    digest = hashlib.sha256(f"{code}\0{out.getvalue()}\0{err.getvalue()}".encode()).hexdigest()
    return " ".join(args), digest


def _parking(mode: str) -> None:
    """In a worker: parking as ``mode`` says for every model it builds (and every pool it forks)."""
    from ctsim.sim.parking import Parking

    if mode == "off":  # as ``Model(parking=False)``
        Parking.applies = staticmethod(lambda node, deadline_s: False)  # type: ignore[method-assign]
    elif mode == "eager":
        Parking.worth_it = lambda self, pod: True  # type: ignore[method-assign]


def fingerprint(n: int, parking: str = "on") -> dict[str, str]:
    os.environ.update(COLUMNS="160", NO_COLOR="1", TERM="dumb")
    # Not multiprocessing.Pool: its workers are daemons, and sweeps and replications start pools of their own.
    context = multiprocessing.get_context("fork")
    workers, mode = os.cpu_count() or 1, (parking,)
    pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_parking, initargs=mode)
    with pool:
        return dict(pool.map(_one, invocations(n)))


def _at(rev: str, n: int, out: Path) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), rev], check=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "-n", str(n), "-o", str(out)]
            subprocess.run(cmd, cwd=tree, env=env, check=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=900, help="varied runs (each as --json; a third also as text)")
    parser.add_argument("-o", "--output", type=Path, help="write {invocation: sha256} here")
    parser.add_argument("--against", metavar="REV", help="also fingerprint REV and compare")
    parser.add_argument("--parking", choices=("on", "off", "eager"), default="on", help="this tree's parking")
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    now = fingerprint(args.n, args.parking)
    if args.output:
        args.output.write_text(json.dumps(now, indent=0, sort_keys=True))
    if not args.against:
        print(f"{len(now)} invocations fingerprinted")
        return
    with tempfile.TemporaryDirectory() as tmp:
        then = _at(args.against, args.n, Path(tmp) / "then.json")
    differ = sorted(k for k in now if then.get(k) != now[k])
    same = len(now) - len(differ)
    print(f"{len(now)} invocations (parking {args.parking}), {same} identical to {args.against}, {len(differ)} differ")
    for k in differ:
        print(f"  differs: ctsim {k}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
