"""Times `ctsim run` as a user runs it (a fresh interpreter each time) and prints ratios.

The floor is `python -c "import simpy, typer, rich"`, measured in the same
run: the main job's target is <= 1.6x it, `ctsim --help` <= 1.3x. Also: the
16Mi run within 1.2x of the 16Ki run; a 30-day drift run. Runs are
interleaved and the median of several is kept, because the machine is shared
and noisy: compare the ratios, not the absolute seconds.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

CASES: dict[str, list[str]] = {
    "16Ki": ["--entries", "16Ki", "--pods", "50"],
    "1Mi": ["--entries", "1Mi", "--pods", "50"],
    "16Mi": ["--entries", "16Mi", "--pods", "50"],
    "16M (main job)": ["--entries", "16M", "--pods", "50"],
    "30-day drift": [
        "--entries",
        "0",
        "--max-entries",
        "16Mi",
        "--churn",
        "50000/min for 8h, 500/min for 16h",
        "--agent-state",
        "fresh",
        "--horizon",
        "30d",
        "--pods",
        "1",
    ],
}


def time_once(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ctsim", "run", "--json", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main(repeats: int = 7) -> None:
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    baseline: list[float] = []
    floor: list[float] = []
    helps: list[float] = []
    for _ in range(repeats):
        baseline.append(timed([sys.executable, "-c", "pass"]))
        floor.append(timed([sys.executable, "-c", "import simpy, typer, rich"]))
        helps.append(timed([sys.executable, "-m", "ctsim", "--help"]))
        for name, args in CASES.items():
            samples[name].append(time_once(args))
    med = {name: statistics.median(xs) for name, xs in samples.items()}
    floor_s, help_s = statistics.median(floor), statistics.median(helps)
    print(f"bare interpreter start: {statistics.median(baseline) * 1000:.0f} ms")
    print(f"floor (import simpy, typer, rich): {floor_s * 1000:.0f} ms")
    print(f"ctsim --help: {help_s * 1000:.0f} ms = {help_s / floor_s:.2f}x the floor (target <= 1.3x)")
    for name, value in med.items():
        spread = max(samples[name]) - min(samples[name])
        print(f"{name:>16}: {value * 1000:7.0f} ms median (spread {spread * 1000:.0f} ms, n={repeats})")
    print(f"ratio 16Mi / 16Ki: {med['16Mi'] / med['16Ki']:.2f}x (target <= 1.2x)")
    print(f"ratio 1Mi / 16Ki:  {med['1Mi'] / med['16Ki']:.2f}x")
    main_s = med["16M (main job)"]
    print(f"main job: {main_s * 1000:.0f} ms = {main_s / floor_s:.2f}x the floor (target <= 1.6x)")
    print(f"30-day drift: {med['30-day drift']:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
