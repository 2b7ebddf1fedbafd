"""What ctwatch must not take: nothing to watch, a rules file Prometheus cannot load, a table no kernel keeps,
a directory where a map should be pinned. Refused at start in one line, or the source marked down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ctwatch.env import copy_procfs
from tests.support.needs import need_binary


def _ctwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctwatch", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_every_collector_off_is_refused_at_start() -> None:
    every_off = ["--no-collector.bpf", "--no-collector.nf_conntrack", "--no-collector.cilium_metrics",
                 "--no-collector.kube_proxy"]  # fmt: skip
    for args in (["--collector.disable-defaults"], every_off):
        p = _ctwatch(*args, "--once")
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "every collector is off" in p.stderr, p.stderr
        assert p.stdout == ""


@pytest.mark.parametrize(
    ("base", "words"),
    [
        ("https://wiki/{{ $labels.node", "never closed"),
        ("https://wiki/}}/x", "no '{{'"),
        ("https://wiki/{{}}", "not a template action"),
        ('https://wiki/{{ "x }}', "unterminated string"),
    ],
)
def test_a_broken_runbook_template_is_refused(base: str, words: str) -> None:
    p = _ctwatch("rules", "--runbook-base", base)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr
    assert p.stdout == ""


def test_a_templated_runbook_base_passes_promtool(tmp_path: Path) -> None:
    promtool = need_binary("promtool")
    p = _ctwatch("rules", "--runbook-base", "https://wiki/{{ $labels.job }}/ctwatch")
    assert p.returncode == 0, p.stderr
    (tmp_path / "rules.yml").write_text(p.stdout)
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(("count", "limit"), [("-5", "262144"), ("1" + "0" * 26, "262144"), ("300000", "262144"),
                                              ("10", "0"), ("1e26", "262144")])  # fmt: skip
def test_an_nf_conntrack_table_no_kernel_keeps_marks_the_source_down(tmp_path: Path, count: str, limit: str) -> None:
    procfs = copy_procfs(tmp_path)
    base = procfs / "sys" / "net" / "netfilter"
    (base / "nf_conntrack_count").write_text(count + "\n")
    (base / "nf_conntrack_max").write_text(limit + "\n")
    p = _ctwatch("--once", "--collector.disable-defaults", "--collector.nf_conntrack", "--path.procfs", str(procfs))
    assert 'ctwatch_source_up{source="nf_conntrack"} 0.0' in p.stdout, p.stdout
    assert "ctwatch_entries{" not in p.stdout
    assert p.stderr.count('"source down"') == 1 and "Traceback" not in p.stderr, p.stderr


def test_a_directory_at_a_map_path_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "tc" / "globals" / "cilium_ct4_global").mkdir(parents=True)
    p = _ctwatch("--once", "--collector.disable-defaults", "--collector.bpf", "--path.bpffs", str(tmp_path))
    assert 'ctwatch_source_up{source="bpf"} 0.0' in p.stdout, p.stdout
    assert "a directory, not a pinned BPF map" in p.stderr and "Permission denied" not in p.stderr, p.stderr
