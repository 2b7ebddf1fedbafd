"""A/B of a change in instructions, not seconds: a count a busy neighbour cannot move.

On this shared VM the floor of bench_run.py swings from 81 to 181 ms
between runs, and a change worth 5 % drowns in it. ``valgrind
--tool=callgrind`` counts the instructions a process executes, the same
count however loaded the machine is, as long as the run itself is the
same: ``PYTHONHASHSEED`` is pinned (set and dict order move the count by
~2 % otherwise) and the bytecode is compiled first.

    python benchmarks/bench_instructions.py                  # this tree: about two minutes
    python benchmarks/bench_instructions.py --against HEAD~3 # also that commit, and this tree / it
    python benchmarks/bench_instructions.py --storm          # also 1,000 pods in a collapse

Instructions are not time: the interpreter's start-up spends more time per
instruction (it reads files) than a simulation does, so ``main job / floor``
reads ~1.75x here where bench_run.py measures ~1.55x in CPU time, and a run
that misses the cache more (100,000 parked pods) costs more time per
instruction. The targets are bench_run.py's; this tells whether a change
made the work smaller.
"""

from __future__ import annotations

import compileall
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_run

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent
RUN = ["-m", "ctsim", "run"]
# bench_run.py's cases (without its interpreter, which this runs under valgrind), but its two table sizes.
CASES: dict[str, list[str]] = {
    name: cmd[1:] for name, cmd in bench_run.CASES.items() if name not in ("16Ki table", "16Mi table")
}
CASES["standard, 50 pods"] = [*RUN, "--preset", "standard", "--entries", "128Ki", "--pods", "50"]
CASES["collapse, 50 pods"] = [*RUN, "--entries", "16Mi", "--pods", "50"]
STORM = {"1,000 pods": [*RUN, "--entries", "16M", "--pods", "1000", "--json"]}
COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(tree: Path, args: list[str]) -> int:
    """Instructions ``python args`` executes with ``tree``'s ctsim first on the path."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", PY, *args],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    found = COLLECTED.search(out.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count for {args}:\n{out.stderr[-500:]}")
    return int(found.group(1))


def counts(tree: Path, cases: dict[str, list[str]]) -> dict[str, int]:
    compileall.compile_dir(tree / "ctsim", quiet=1)
    return {name: instructions(tree, args) for name, args in cases.items()}


def main(argv: list[str]) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    cases = {**CASES, **(STORM if "--storm" in argv else {})}
    against = argv[argv.index("--against") + 1] if "--against" in argv else None
    here = counts(REPO, cases)
    there: dict[str, int] = {}
    if against is not None:
        with tempfile.TemporaryDirectory() as scratch:
            tree = Path(scratch) / "tree"
            git = ["git", "-C", str(REPO), "worktree"]
            subprocess.run([*git, "add", "-q", "--detach", str(tree), against], check=True)
            try:
                there = counts(tree, cases)
            finally:
                subprocess.run([*git, "remove", "--force", str(tree)], check=True)
    print("instructions, millions (callgrind, PYTHONHASHSEED=0)")
    header = f"  {'':>18}  {'this tree':>10}"
    if against is not None:
        header += f"  {against:>10}  {'this / it':>9}"
    print(header)
    for name, n in here.items():
        row = f"  {name:>18}  {n / 1e6:10.1f}"
        if against is not None:
            row += f"  {there[name] / 1e6:10.1f}  {n / there[name]:9.3f}"
        print(row)
    print(f"  main job / floor: {here['main job'] / here['floor']:.2f}x (in instructions; see the module docstring)")


if __name__ == "__main__":
    main(sys.argv[1:])
