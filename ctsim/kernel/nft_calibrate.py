"""``ctsim nft calibrate``: kube-proxy's table programmed with the real ``nft`` in a throwaway namespace.

Each size gets a namespace of its own, removed however the work ends
(Ctrl-C, SIGTERM, an error): ``temporary_netns`` removes it, after the
running ``nft`` is killed and reaped. Every figure is the CPU time of the
``nft`` process (``wait4``'s user and system time: the kernel's work on the
transaction runs in that process's ``sendmsg``), the fastest of the trials,
so a busy machine slows the wall clock but hardly the figure.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from ctsim.core.errors import InputError, WorkFailed
from ctsim.core.nft_cost import NftCalibration, Sample, fit
from ctsim.core.nft_layout import EndpointMix, Layout
from ctsim.kernel import nft_ruleset
from ctsim.kernel.netns_conntrack import temporary_netns

Progress = Callable[[str, int, int], None]  # (task, advance, total)
NETNS_PREFIX = "ctsim-nft"
MAX_SERVICES = 200_000


class Missing(InputError):
    """``nft``, ``nsenter`` or network namespaces are not available here."""


@dataclass(frozen=True)
class Plan:
    layouts: tuple[Layout, ...]
    sizes: tuple[int, ...]  # Services
    endpoints: tuple[int, ...]  # endpoints per Service, each measured at every size
    trials: int


@dataclass(frozen=True)
class Timed:
    cpu_s: float
    wall_s: float
    stdout: bytes


def nft_version() -> str:
    out = subprocess.run(["nft", "--version"], capture_output=True, text=True, timeout=10, check=False)
    return out.stdout.strip() or "nft (version unknown)"


def probe() -> None:
    """One line, before any work, where this machine cannot run the measurement."""
    for tool, package in (("nft", "nftables"), ("nsenter", "util-linux")):
        if shutil.which(tool) is None:
            raise Missing(f"`{tool}` is not installed here (Debian: apt-get install {package}); nothing was measured")
    try:
        with temporary_netns(NETNS_PREFIX):
            pass
    except OSError as exc:
        raise Missing(
            f"cannot make a network namespace here ({exc.strerror or exc}): needs root (CAP_SYS_ADMIN); "
            "nothing was measured"
        ) from None


def run_nft(netns: str, args: list[str], script: str | None = None) -> Timed:
    """``nft ARGS`` inside ``netns``, ``script`` on its standard input; its CPU time from ``wait4``."""
    cmd = ["nsenter", f"--net=/run/netns/{netns}", "nft", *args]
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err)
        try:
            assert proc.stdin is not None
            try:
                proc.stdin.write(script.encode() if script else b"")
                proc.stdin.close()
            except BrokenPipeError:
                pass
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if proc.returncode is None:  # interrupted: the nft goes with us, before its namespace does
                proc.kill()
                proc.wait()
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            first = err.read(2000).decode(errors="replace").strip().splitlines()
            raise WorkFailed(f"nft {' '.join(args)} failed (exit {proc.returncode}): {first[0] if first else ''}")
        out.seek(0)
        return Timed(usage.ru_utime + usage.ru_stime, wall, out.read())


def measure(layout: Layout, services: int, endpoints: int) -> Sample:
    """One size in a namespace of its own: the full load, kube-proxy's listing, one more Service."""
    with temporary_netns(NETNS_PREFIX) as ns:
        full = run_nft(ns, ["-f", "-"], nft_ruleset.full(layout, services, EndpointMix.every(endpoints)))
        chains = run_nft(ns, ["-j", "list", "chains", nft_ruleset.FAMILY])
        sets = run_nft(ns, ["-j", "list", "sets", nft_ruleset.FAMILY])
        partial = run_nft(ns, ["-f", "-"], nft_ruleset.partial(layout, services, endpoints))
    return Sample(layout, services, endpoints, full.cpu_s, chains.cpu_s + sets.cpu_s, partial.cpu_s, full.wall_s)


def fastest(samples: list[Sample]) -> Sample:
    """Each figure the fastest of its trials: what the kernel needs, less what else was running."""
    first = samples[0]
    return Sample(
        first.layout,
        first.services,
        first.endpoints,
        min(s.full_s for s in samples),
        min(s.list_s for s in samples),
        min(s.partial_s for s in samples),
        min(s.full_wall_s for s in samples),
    )


def calibrate(plan: Plan, progress: Progress | None = None) -> NftCalibration:
    probe()
    points = [(layout, e, n) for layout in plan.layouts for e in plan.endpoints for n in plan.sizes]
    samples = []
    for layout, e, n in points:
        trials = []
        for _ in range(plan.trials):
            trials.append(measure(layout, n, e))
            if progress:
                progress("nft -f", 1, len(points) * plan.trials)
        samples.append(fastest(trials))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return fit(samples, platform.release(), nft_version(), now)
