"""Outputs as root: a device node or a FIFO is written into, never replaced by a regular file.

Device nodes are made with mknod in a temporary folder (never the real /dev ones).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctsim.core.errors import InputError
from ctsim.core.files import check_writable, read_text, write_atomic
from tests.support.needs import REQUIRED

ROOT = Path(__file__).resolve().parents[1]
PROCFS = ROOT / "tests" / "ctwatch" / "fixtures" / "proc"
SWEEP = ["-m", "ctsim", "sweep", "--entries", "0", "--pods", "1", "--horizon", "1m", "--grid", "seed=1,2"]


def _mknod(path: Path, major: int, minor: int) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError as exc:
        if REQUIRED:
            pytest.fail(f"CTSIM_REQUIRE_KERNEL=1 but mknod is refused: {exc}")
        pytest.skip(f"mknod needs root: {exc}")
    return path


def _ctsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, check=False)


def _is_chr(path: Path) -> bool:
    return stat.S_ISCHR(path.lstat().st_mode)


@pytest.mark.parametrize("flag", ["--csv", "--output"])
def test_a_null_device_stays_a_device(tmp_path: Path, flag: str) -> None:
    null = _mknod(tmp_path / "null", 1, 3)
    p = _ctsim(*SWEEP, flag, str(null))
    assert p.returncode == 0, p.stderr
    assert _is_chr(null)
    assert os.listdir(tmp_path) == ["null"]  # no temporary file left beside it


def test_a_full_device_is_one_line_and_exit_2_and_stays_a_device(tmp_path: Path) -> None:
    full = _mknod(tmp_path / "full", 1, 7)
    p = _ctsim(*SWEEP, "--csv", str(full))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"ctsim: error: cannot write {full}: No space left on device"]
    assert _is_chr(full)


def test_ctwatch_textfile_onto_a_device(tmp_path: Path) -> None:
    null = _mknod(tmp_path / "null", 1, 3)
    p = _ctsim(
        "-m", "ctwatch", "--once", "--collector.disable-defaults", "--collector.nf_conntrack",
        "--path.procfs", str(PROCFS), "--textfile", str(null),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert _is_chr(null)


def test_a_fifo_with_a_reader_gets_the_rows(tmp_path: Path) -> None:
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before ctsim writes: no race with a reader
    try:
        p = _ctsim(*SWEEP, "--csv", str(fifo))
        out = os.read(reader, 1 << 16).decode()  # a few hundred bytes: they fit in the pipe
    finally:
        os.close(reader)
    assert p.returncode == 0, p.stderr
    lines = out.splitlines()
    assert lines[0].startswith("preset,") and len(lines) == 3
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_nobody_reads_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="no process reads it"):
        write_atomic(str(fifo), "x")
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        read_text(str(fifo), "--calibration")


def test_a_regular_file_keeps_its_mode_and_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    write_atomic(str(target), "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.json"]


def test_outputs_where_no_file_can_be_made_are_refused_before_work() -> None:
    with pytest.raises(InputError, match=r"takes no new files|not writable"):
        check_writable("/proc/version", "--output")


def test_a_plot_onto_a_device_or_fifo_is_written_into(tmp_path: Path) -> None:
    null = _mknod(tmp_path / "null", 1, 3)
    fifo = tmp_path / "plot.png"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)  # reads while ctsim writes
    reader.start()
    for target in (null, fifo):
        p = _ctsim("-m", "ctsim", "run", "--pods", "1", "--horizon", "1m", "--plot", str(target))
        assert p.returncode == 0, p.stderr
    reader.join(timeout=30)
    assert got and got[0].startswith(b"\x89PNG")
    assert _is_chr(null) and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_dash_is_standard_output_for_every_output_flag(tmp_path: Path) -> None:
    """`-` is stdout, as `fleet --csv -` and Unix tools take it: never a file named `-`; the table steps aside."""
    csv = subprocess.run(
        [sys.executable, *SWEEP, "--csv", "-"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert csv.returncode == 0, csv.stderr
    assert "seed" in csv.stdout.splitlines()[0].split(",")  # the CSV header, the grid's axis in it
    assert len(csv.stdout.splitlines()) == 3  # a header and the two points, and nothing else
    doc = subprocess.run([sys.executable, *SWEEP, "-o", "-"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert doc.returncode == 0, doc.stderr
    import json

    assert len(json.loads(doc.stdout)["rows"]) == 2
    assert not (tmp_path / "-").exists()
    both = _ctsim(*SWEEP, "--csv", "-", "-o", "-")
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "standard output" in both.stderr
    json_too = _ctsim(*SWEEP, "--csv", "-", "--json")
    assert json_too.returncode == 2 and "--csv - and --json" in json_too.stderr


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real" / "rows.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "rows.csv"
    link.symlink_to(target)
    write_atomic(str(link), "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert sorted(os.listdir(target.parent)) == ["rows.csv"]  # its temporary file was beside the target
    dangling = tmp_path / "later.csv"
    dangling.symlink_to(tmp_path / "real" / "later.csv")
    check_writable(str(dangling), "--csv")
    write_atomic(str(dangling), "made\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "later.csv").read_text() == "made\n"


def test_ctwatch_textfile_is_a_prom_file_or_the_once_page(tmp_path: Path) -> None:
    base = ["-m", "ctwatch", "--once", "--collector.disable-defaults", "--collector.nf_conntrack",
            "--path.procfs", str(PROCFS)]  # fmt: skip
    txt = _ctsim(*base, "--textfile", str(tmp_path / "out.txt"))
    assert txt.returncode == 2 and ".prom" in txt.stderr and txt.stderr.count("\n") == 1
    assert not (tmp_path / "out.txt").exists()
    page = _ctsim(*base, "--textfile", "-")
    assert page.returncode == 0, page.stderr
    assert page.stdout.count("# HELP ctwatch_build_info ") == 1  # the page once, not twice
    daemon = _ctsim("-m", "ctwatch", "--textfile", "-", "--path.procfs", str(PROCFS))
    assert daemon.returncode == 2 and "--once" in daemon.stderr


def test_an_output_that_is_an_input_of_the_same_run_is_refused_before_any_work(tmp_path: Path) -> None:
    """sweep -o onto its --grid-file, fleet --csv onto its token (through a link too): one line, exit 2, intact."""
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\nentries = ["16Ki", "32Ki"]\n')
    link = tmp_path / "link.toml"
    link.symlink_to(grid)
    for out in (grid, link):
        p = subprocess.run(
            [sys.executable, "-m", "ctsim", "sweep", "--grid-file", str(grid), "-o", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert p.returncode == 2 and "--grid-file's file" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert grid.read_text() == '[grid]\nentries = ["16Ki", "32Ki"]\n'
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", "http://127.0.0.1:9",
         "--bearer-token-file", str(token), "--csv", str(token)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 2 and "--bearer-token-file's file" in p.stderr, p.stderr
    assert token.read_text() == "s3cret\n"
