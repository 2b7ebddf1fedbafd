"""Gates for tests that need the real kernel (BPF maps, bpffs, network namespaces).

Where the kernel refuses, such a test skips with the reason; under
``CTSIM_REQUIRE_KERNEL=1`` (set by .ci/run) it fails instead, so CI can never
pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

REQUIRED = os.environ.get("CTSIM_REQUIRE_KERNEL") == "1"


def _refused(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"CTSIM_REQUIRE_KERNEL=1 but {reason}")
    pytest.skip(reason)


def need_bpf() -> None:
    from ctsim.kernel.calibrate import NoPrivilege, probe

    try:
        probe()
    except NoPrivilege as exc:
        _refused(str(exc))


def need_netns() -> None:
    name = f"ctsim-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        _refused(f"cannot create a network namespace: {made.stderr.strip() or made.returncode}")
    subprocess.run(["ip", "netns", "del", name], check=False)


def need_binary(name: str) -> str:
    """A real tool the test drives (promtool, node_exporter, kubectl): skip without it, fail under CI."""
    path = shutil.which(name)
    if path is None:
        if REQUIRED:
            pytest.fail(f"{name} is not installed (.ci/run installs it)")
        pytest.skip(f"{name} is not installed")
    return path
