"""The library names what it refuses by its parameters; the command line says each as its flag."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from ctsim.cli.command import flag_of
from ctsim.cli.options import LIBRARY_FLAGS
from ctsim.core.errors import InputError
from ctsim.fleet.prometheus import Client, Transport


def _cli(exc: InputError) -> str:
    return exc.said(lambda param: flag_of(param, LIBRARY_FLAGS))


def test_the_library_says_parameters_and_the_cli_says_flags() -> None:
    with pytest.raises(InputError) as refused:
        Client("ftp://prometheus:9090")
    assert refused.value.param == "url"
    assert str(refused.value).startswith("url: expected http(s)://")
    assert _cli(refused.value).startswith("--prometheus-url: expected http(s)://")
    with pytest.raises(InputError) as both:
        Client("http://prometheus:9090", Transport(key_file="/dev/null"))
    assert str(both.value) == "key_file: give cert_file too"
    assert _cli(both.value) == "--key-file: give --cert-file too"  # a parameter not in the table: its dashes
    with pytest.raises(InputError) as timeout:
        Client("http://prometheus:9090", Transport(timeout_s=0.0))
    assert _cli(timeout.value).startswith("--timeout: must be a positive number")


def test_a_refusal_keeps_its_parameter_across_processes() -> None:
    """A sweep's worker raises in another process: the parameter survives the pickle, so the flag does."""
    again = pickle.loads(pickle.dumps(InputError("from 1 to 10,000, got 0", "replications")))
    assert (again.param, _cli(again)) == ("replications", "--replications: from 1 to 10,000, got 0")


def test_the_command_line_names_the_flag() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", "http://h:9090", "--key-file", "/etc/hostname"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (p.returncode, p.stderr) == (2, "ctsim: error: --key-file: give --cert-file too\n")
