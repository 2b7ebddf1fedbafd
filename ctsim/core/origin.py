"""Where an input came from: a typed origin, rendered in one place.

Every figure ctsim shows says where it came from: the user's flag, a rule
over what was given, a preset's assumption, a default, a live series of the
node, a calibration file, a published or measured figure. An ``Origin`` is
that fact as a value. It is also its own words (a ``str``), so the inputs
block, ``--json``, a CSV cell and a fleet row take it as they took text; a
module that must know where a value came from asks ``origin.source``, never
the text's prefix.
"""

from __future__ import annotations

import enum


class Source(enum.Enum):
    """The kinds of origin; each renders as ``Origin`` says."""

    GIVEN = "given"  # the user's flag
    DERIVED = "derived"  # computed from what was given
    PRESET = "preset"  # what a preset assumes
    DEFAULT = "default"  # Cilium's or the model's default
    SERIES = "series"  # a live series of a node (Prometheus, ctwatch's page)
    CALIBRATION = "calibration"  # a `ctsim calibrate` file
    PUBLISHED = "published"  # a release profile's published or scaled figure
    RULE = "rule"  # the run's own rule (a run until its burst resolves)


class Origin(str):
    """One input's origin: its ``source``, and, for a series, the series and the node it was read on.

    Build one with the class methods; ``amended`` adds what a later rule did
    to the value ("clamped to the map") and keeps the source.
    """

    source: Source
    series: str  # Source.SERIES: the series' name (with its labels, where they tell)
    node: str  # Source.SERIES: the node it was read on ("": the row's own node)

    def __new__(cls, text: str, source: Source, series: str = "", node: str = "") -> Origin:
        o = super().__new__(cls, text)
        o.source, o.series, o.node = source, series, node
        return o

    def __getnewargs__(self) -> tuple[str, Source, str, str]:  # type: ignore[override]
        return str(self), self.source, self.series, self.node

    @classmethod
    def given(cls, detail: str = "") -> Origin:
        return cls(f"given: {detail}" if detail else "given", Source.GIVEN)

    @classmethod
    def flag(cls, words: str) -> Origin:
        """The user's flags, in their own words (``--rate``; ``--max-entries 4Mi; sized from ...``)."""
        return cls(words, Source.GIVEN)

    @classmethod
    def derived(cls, detail: str) -> Origin:
        return cls(f"derived: {detail}", Source.DERIVED)

    @classmethod
    def preset(cls, name: str, detail: str = "") -> Origin:
        return cls(f"preset {name}: {detail}" if detail else f"preset {name}", Source.PRESET)

    @classmethod
    def default(cls, detail: str = "") -> Origin:
        return cls(f"default: {detail}" if detail else "default", Source.DEFAULT)

    @classmethod
    def of_series(cls, series: str, node: str = "") -> Origin:
        """A node's series: ``live: SERIES of NODE`` in a run's inputs; the series alone on the node's own row."""
        return cls(f"live: {series} of {node}" if node else series, Source.SERIES, series, node)

    @classmethod
    def calibration(cls, detail: str) -> Origin:
        return cls(detail, Source.CALIBRATION)

    @classmethod
    def published(cls, detail: str) -> Origin:
        return cls(detail, Source.PUBLISHED)

    @classmethod
    def rule(cls, detail: str) -> Origin:
        return cls(detail, Source.RULE)

    def amended(self, more: str) -> Origin:
        """The same origin, with what a later rule did to the value."""
        return Origin(f"{self}{more}", self.source, self.series, self.node)

    @property
    def is_series(self) -> bool:
        return self.source is Source.SERIES


NONE = Origin("", Source.DEFAULT)  # no figure, so no origin to say
