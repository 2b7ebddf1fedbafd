"""Real things for ctwatch's tests: a bpffs we mount, Cilium-shaped pinned maps, HTTP servers."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctsim.core.defaults import CT_VALUE_SIZE
from ctsim.core.nft_layout import EndpointMix, Layout
from ctsim.kernel import calibrate as cal
from ctsim.kernel.bpf import BPF_MAP_TYPE_LRU_HASH, BPFMap
from tests.support.http import Respond, send, serve
from tests.support.needs import REQUIRED, need_bpf

FIXTURES = Path(__file__).parent / "fixtures"


@contextmanager
def bpffs() -> Iterator[Path]:
    """A bpffs mounted on a fresh directory, unmounted (freeing its pins) afterwards."""
    need_bpf()
    root = Path(tempfile.mkdtemp(prefix="ctwatch-bpffs-"))
    made = subprocess.run(["mount", "-t", "bpf", "bpf", str(root)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        os.rmdir(root)
        msg = f"cannot mount bpffs: {made.stderr.strip()}"
        if REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        (root / "tc" / "globals").mkdir(parents=True)
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=False)
        os.rmdir(root)


def pin_ct_map(root: Path, name: str, entries: int, max_entries: int, key_size: int = 14) -> None:
    """A Cilium-shaped CT map holding ``entries``, pinned at tc/globals/<name>."""
    with _filled(entries, max_entries, key_size) as m:
        m.pin(str(root / "tc" / "globals" / name))


def _filled(entries: int, max_entries: int, key_size: int) -> BPFMap:
    m = BPFMap.create(BPF_MAP_TYPE_LRU_HASH, key_size, CT_VALUE_SIZE, max_entries, name="ctwatch_t")
    value = bytes(CT_VALUE_SIZE)
    for base in range(0, entries, cal.FILL_CHUNK):
        n = min(cal.FILL_CHUNK, entries - base)
        m.update_batch(b"".join(cal.ct_key(i, key_size) for i in range(base, base + n)), value * n, n)
    return m


@contextmanager
def http_server(respond: Respond) -> Iterator[str]:
    """A real HTTP server on loopback; yields its /metrics URL."""
    with serve(respond) as address:
        yield f"http://{address}/metrics"


def serve_text(body: str, delay_s: float = 0.0) -> Respond:
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        if delay_s:
            time.sleep(delay_s)
        send(handler, body)

    return respond


def copy_procfs(tmp: Path) -> Path:
    dest = tmp / "proc"
    shutil.copytree(FIXTURES / "proc", dest)
    return dest


@contextmanager
def kube_proxy_table(layout: Layout, services: int, mix: EndpointMix) -> Iterator[str]:
    """A throwaway netns holding kube-proxy's table, programmed with the real `nft`; yields its name."""
    from ctsim.kernel import nft_ruleset
    from ctsim.kernel.netns_conntrack import temporary_netns
    from tests.support.needs import need_binary, need_netns

    need_netns()
    need_binary("nft")
    need_binary("nsenter")
    with temporary_netns("ctwatch-kp") as ns:
        script = nft_ruleset.full(layout, services, mix).encode()
        subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "nft", "-f", "-"], input=script, check=True)
        yield ns
