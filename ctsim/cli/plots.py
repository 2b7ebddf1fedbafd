"""PNG plots with matplotlib (optional: ``pip install 'ctsim[plot]'``)."""

from __future__ import annotations

import io
from typing import Any

from ctsim.core.defaults import CONNTRACK_GC_STARTING_INTERVAL
from ctsim.core.errors import InputError
from ctsim.core.files import check_writable, write_atomic
from ctsim.core.quantity import format_count, format_duration


def require_matplotlib(flag: str) -> None:
    """Fails before any work when the plot could not be drawn (matplotlib is an extra)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise InputError(f"{flag}: plots need matplotlib: pip install 'ctsim[plot]' (or pip install matplotlib)")


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plots need matplotlib: pip install 'ctsim[plot]'") from None
    return plt


def heatmap(rows: list[dict[str, Any]], x: str, y: str, value: str, path: str, title: str = "") -> None:
    """``value`` over the ``x`` × ``y`` grid; cells whose run collapsed are hatched and outlined."""
    plt = _pyplot()
    xs = list(dict.fromkeys(str(r[x]) for r in rows))
    ys = list(dict.fromkeys(str(r[y]) for r in rows))
    grid = [[float("nan")] * len(xs) for _ in ys]
    collapsed = [[False] * len(xs) for _ in ys]
    for r in rows:
        i, j = ys.index(str(r[y])), xs.index(str(r[x]))
        v = r[value]
        grid[i][j] = float("nan") if v is None else float(v)
        collapsed[i][j] = collapsed[i][j] or r["verdict"] == "collapse"
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(xs), 1.2 + 0.6 * len(ys)))
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="RdYlGn")
    fig.colorbar(image, ax=ax, label=value)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if collapsed[i][j]:
                ax.add_patch(
                    plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="black", linewidth=1.5)
                )
            text = "" if grid[i][j] != grid[i][j] else f"{grid[i][j]:.2g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{value} (hatched: collapse)")
    fig.tight_layout()
    _save(plt, fig, path)


def drift_of(model: Any, result: Any, path: str, title: str = "") -> None:
    """``drift`` for a finished ``Model`` run with ``trace_every`` set."""
    s = model.scenario
    # A fresh agent has no cached interval yet: it acts on the 5m starting interval.
    intervals = [(0.0, s.gc_initial_interval or CONNTRACK_GC_STARTING_INTERVAL)] + [
        (p.end * s.time_scale, p.interval_after) for p in result.gc.passes
    ]
    drift(model.trace, intervals, path, title)


def drift(
    trace: list[tuple[float, int, int]], intervals: list[tuple[float, float]], path: str, title: str = ""
) -> None:
    """Table size (present, expired) and the GC interval over node time."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    hours = [t / 3600 for t, _, _ in trace]
    top.plot(hours, [p for _, p, _ in trace], label="present entries")
    top.plot(hours, [e for _, _, e in trace], label="expired entries", linestyle="--")
    top.set_ylabel("entries")
    top.yaxis.set_major_formatter(lambda v, _pos: format_count(v).split(" ")[0])
    top.legend(loc="best", framealpha=0.85)  # wherever it hides the least of the lines
    if intervals:
        end = max(hours[-1] if hours else 0.0, intervals[-1][0] / 3600)
        xs = [t / 3600 for t, _ in intervals] + [end]  # the last interval holds to the end of the run
        ys = [i / 3600 for _, i in intervals] + [intervals[-1][1] / 3600]
        bottom.step(xs, ys, where="post", label="GC interval")
        bottom.set_ylim(0, max(ys) * 1.15)
        if len(intervals) == 1:
            bottom.text(
                0.02, 0.5, f"no GC pass in this run: the interval stays {format_duration(intervals[0][1])}",
                transform=bottom.transAxes, va="center", fontsize=9,
            )  # fmt: skip
    bottom.set_ylabel("GC interval (h)")
    bottom.set_xlabel("node time (h)")
    top.set_title(title or "CT table and GC interval")
    fig.tight_layout()
    _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: str) -> None:
    """Rendered in memory, then written as every output is (``files.write_atomic``: a FIFO or device too)."""
    png = io.BytesIO()
    try:
        fig.savefig(png, dpi=110, format="png")
    finally:
        plt.close(fig)
    write_atomic(path, png.getvalue())


def check_plot(path: str, flag: str) -> None:
    """A PNG path that can be written, and matplotlib to draw it, before any work."""
    check_writable(path, flag, suffix=".png")
    require_matplotlib(flag)
