"""The datapath's fill-up signals per family (``--ct-fill-signals``, ``--nat-fill-signals``): ``ipv4=6/h,ipv6=1/h``.

A node shows them as ``cilium_signals_handled_total{signal_type,data}``;
the model sends them evenly spaced (``ctsim.sim.signals``). Which a
release sends at all is ``core.releases.rules``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctsim.core.errors import InputError
from ctsim.core.quantity import format_rate, parse_rate, split_list

FAMILIES = ("ipv4", "ipv6")


@dataclass(frozen=True)
class SignalRates:
    """Signals per second, by family, in the order given."""

    rates: tuple[tuple[str, float], ...]

    @property
    def families(self) -> frozenset[str]:
        return frozenset(f for f, _ in self.rates)

    def describe(self) -> str:
        return ", ".join(f"{family} {format_rate(r)}" for family, r in self.rates)


def parse_signal_rates(text: str, flag: str) -> SignalRates:
    """``ipv4=6/h`` or ``ipv4=6/h,ipv6=1/h``: each family once, each rate above 0."""
    rates: list[tuple[str, float]] = []
    for part in split_list(text, flag):
        family, sep, rate = part.partition("=")
        family = family.strip()
        if not sep or family not in FAMILIES:
            raise InputError(f"{flag}: cannot read {part.strip()!r}; write e.g. 'ipv4=6/h' or 'ipv4=6/h,ipv6=1/h'")
        if family in (f for f, _ in rates):
            raise InputError(f"{flag}: {family} given twice")
        per_second = parse_rate(rate.strip(), flag)
        if per_second <= 0:
            raise InputError(f"{flag}: {family}'s rate must be above 0")
        rates.append((family, per_second))
    if not rates:
        raise InputError(f"{flag}: empty")
    return SignalRates(tuple(rates))
