"""This kernel's cost of programming kube-proxy's table: the law ``ctsim nft calibrate`` fits, and its file.

A full sync loads the whole table in one transaction. Its time is

    full = per_object * objects + per_bind * (maps * objects / 2) ** bind_exponent

``objects`` is every chain, rule, element and set the layout writes, and
``maps`` the per-Service anonymous ``numgen`` vmaps (``core.nft_layout``).
Seed 000's perf profile names why the second term is there: binding the
i-th map walks the transaction so far (``__nft_set_trans_bind``), and the
rule and entries that use it find it by name in a list of the table's sets
(``nft_set_lookup_global``), so the work is about ``maps * objects / 2``
list steps. Measured here it grows faster than that product (the lists
outgrow the CPU's caches), so the exponent is fitted, not assumed. A layout
without anonymous maps is linear: ``per_object`` alone.

A partial sync (one Service changed) lists the table's chains and sets as
kube-proxy does on every sync (``nft -j list``, whose time grows faster
than the table: measured here, about objects^1.8), then sends that
Service's objects, whose anonymous map is named by scanning the table's:

    partial = per_listed * objects ** list_exponent
            + per_map_scanned * maps + per_sync + per_object * the Service's objects

Each coefficient is fitted to CPU seconds of the ``nft`` process (user and
kernel), which hold on a busy machine where wall time does not.
``exponent`` is the growth the issue's table reports: the log-log slope of
the measured full-sync time over Services at one endpoint each.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from ctsim.core.errors import InputError
from ctsim.core.nft_layout import EndpointMix, Layout, Shape, one_service, shape

FILE_KIND = "ctsim nft calibration"


@dataclass(frozen=True)
class Sample:
    """One measured size: a full load from empty, then kube-proxy's listing and a one-Service transaction."""

    layout: Layout
    services: int
    endpoints: int
    full_s: float  # CPU seconds of `nft -f` loading the whole table
    list_s: float  # CPU seconds of `nft -j list chains` and `list sets`
    partial_s: float  # CPU seconds of `nft -f` adding one Service to the loaded table
    full_wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layout": self.layout.value}


@dataclass(frozen=True)
class LayoutFit:
    """The fitted law of one layout, and how well it held on its own samples."""

    per_object_s: float
    per_bind_s: float  # x (maps * objects / 2) ** bind_exponent
    bind_exponent: float | None  # None: the layout's samples have no anonymous map
    per_listed_s: float  # x objects ** list_exponent: `nft -j list chains` and `list sets`
    list_exponent: float
    per_map_scanned_s: float
    per_sync_s: float
    exponent: float | None  # growth of full-sync time with Services, at one endpoint each (measured)
    growth: dict[int, float]  # the same, per endpoint count measured
    worst_error: float  # the largest |fitted / measured - 1| over its samples (full syncs)

    def full_s(self, sh: Shape) -> float:
        objects, steps = full_features(sh, self.bind_exponent)
        return self.per_object_s * objects + self.per_bind_s * steps

    def partial_s(self, sh: Shape, changed: Shape) -> float:
        """A partial sync of ``changed`` (one Service's objects) on a table of ``sh``."""
        listing = self.per_listed_s * sh.objects**self.list_exponent
        scan = self.per_map_scanned_s * sh.anonymous_maps
        return listing + scan + self.per_sync_s + self.per_object_s * changed.objects


@dataclass(frozen=True)
class NftCalibration:
    fits: dict[Layout, LayoutFit]
    samples: tuple[Sample, ...]
    kernel: str
    nft: str
    measured: str  # when (UTC)
    path: str = ""  # where it was read from; "" for the package's own

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": FILE_KIND,
            "kernel": self.kernel,
            "nft": self.nft,
            "measured": self.measured,
            "fit": {layout.value: {**asdict(f), "growth": {str(k): v for k, v in f.growth.items()}}
                    for layout, f in self.fits.items()},
            "samples": [s.to_dict() for s in self.samples],
        }  # fmt: skip


def _solve(rows: list[list[float]], target: list[float]) -> list[float] | None:
    """Least squares by the normal equations (a handful of unknowns); None if singular."""
    n = len(rows[0])
    a = [
        [sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * t for r, t in zip(rows, target, strict=True))]
        for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def nonnegative_fit(features: list[list[float]], target: list[float]) -> tuple[list[float], float]:
    """Coefficients >= 0 minimising the squared *relative* error, by trying each subset of the features."""
    n = len(features[0])
    best: tuple[list[float], float] = ([0.0] * n, math.inf)
    for size in range(1, n + 1):
        for keep in itertools.combinations(range(n), size):
            rows = [[f[i] / t for i in keep] for f, t in zip(features, target, strict=True)]
            coef = _solve(rows, [1.0] * len(target))
            if coef is None or any(c < 0 for c in coef):
                continue
            full = [0.0] * n
            for i, c in zip(keep, coef, strict=True):
                full[i] = c
            err = sum(
                (sum(c * x for c, x in zip(full, f, strict=True)) / t - 1) ** 2
                for f, t in zip(features, target, strict=True)
            )
            if err < best[1]:
                best = (full, err)
    return best


def slope(points: list[tuple[float, float]]) -> float | None:
    """The log-log least-squares slope of (x, y); None under two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    lx = [math.log(x) for x, _ in points]
    ly = [math.log(y) for _, y in points]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def full_features(sh: Shape, bind_exponent: float | None) -> tuple[float, float]:
    """What each of the full sync's coefficients multiplies."""
    steps = sh.anonymous_maps * sh.objects / 2
    return float(sh.objects), steps**bind_exponent if bind_exponent and steps else 0.0


BIND_EXPONENTS = [0.5 + i / 200 for i in range(301)]  # 0.5 to 2.0: searched, the coefficients fitted for each


def fit_layout(samples: list[Sample]) -> LayoutFit:
    """The law for one layout's samples: each coefficient >= 0, by least squares on the relative error."""
    shapes = [shape(s.layout, s.services, EndpointMix.every(s.endpoints)) for s in samples]
    full = [s.full_s for s in samples]
    c_obj, c_bind, k, best = 0.0, 0.0, None, math.inf
    for exponent in BIND_EXPONENTS if any(sh.anonymous_maps for sh in shapes) else [None]:
        (a, b), err = nonnegative_fit([list(full_features(sh, exponent)) for sh in shapes], full)
        if err < best:
            c_obj, c_bind, k, best = a, b, exponent if b > 0 else None, err
    list_exponent = slope([(sh.objects, s.list_s) for sh, s in zip(shapes, samples, strict=True)]) or 1.0
    (c_list,), _ = nonnegative_fit([[sh.objects**list_exponent] for sh in shapes], [s.list_s for s in samples])
    sent = [s.partial_s - c_obj * one_service(s.layout, s.endpoints).objects for s in samples]
    (c_scan, c_sync), _ = nonnegative_fit([[sh.anonymous_maps, 1.0] for sh in shapes], [max(t, 1e-6) for t in sent])
    growth = {}
    for e in sorted({s.endpoints for s in samples}):
        g = slope([(s.services, s.full_s) for s in samples if s.endpoints == e])
        if g is not None:
            growth[e] = round(g, 3)
    law = LayoutFit(c_obj, c_bind, k, c_list, round(list_exponent, 4), c_scan, c_sync, growth.get(1), growth, 0.0)
    worst = max(abs(law.full_s(sh) / s.full_s - 1) for sh, s in zip(shapes, samples, strict=True))
    return LayoutFit(
        c_obj, c_bind, k, c_list, round(list_exponent, 4), c_scan, c_sync, growth.get(1), growth, round(worst, 4)
    )


def fit(samples: list[Sample], kernel: str, nft: str, measured: str) -> NftCalibration:
    fits = {
        layout: fit_layout([s for s in samples if s.layout is layout])
        for layout in Layout
        if any(s.layout is layout for s in samples)
    }
    return NftCalibration(fits, tuple(samples), kernel, nft, measured)


def load(path: str, flag: str = "--calibration") -> NftCalibration:
    """A file ``ctsim nft calibrate -o`` wrote; one line (``InputError``) for anything else."""
    from ctsim.core.files import read_text

    return from_text(read_text(path, flag), path)


def from_text(text: str, path: str) -> NftCalibration:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("kind") != FILE_KIND:
            raise ValueError(f'no "kind": "{FILE_KIND}"')
        fits = {}
        for name, f in doc["fit"].items():
            fields = {k: f[k] for k in LayoutFit.__dataclass_fields__}
            fields["growth"] = {int(k): float(v) for k, v in f["growth"].items()}
            fits[Layout(name)] = LayoutFit(**fields)
        samples = tuple(Sample(**{**s, "layout": Layout(s["layout"])}) for s in doc.get("samples", []))
        return NftCalibration(fits, samples, str(doc["kernel"]), str(doc["nft"]), str(doc["measured"]), path)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        where = path or "the packaged calibration"
        raise InputError(f"{where}: not a file `ctsim nft calibrate -o` wrote ({exc})", "calibration") from None


def packaged() -> NftCalibration:
    """The calibration ctsim ships, measured on its maintainers' machine (docs/capacity-planning.md says where)."""
    from importlib.resources import files

    return from_text(files("ctsim.core").joinpath("nft_calibration.json").read_text(), "")
