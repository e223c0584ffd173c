"""Bounded series: the label sets of one metric, capped, folded and expired.

Label values such as tool and server names are chosen by whoever sends spans, so a metric
keyed by them could grow without end. A ``SeriesTable`` holds at most ``max_series``
label sets; once full, an update for a new label set goes to one overflow series (labelled
only ``otel_metric_overflow="true"``, as the Collector's span-metrics connector does) and
is counted as folded. A series not updated for ``idle_s`` is dropped, which frees a place.

Counters and histograms are born at zero: the first scrape that sees a new series is
shown it at 0 (``exposed``), its count from the next scrape on. Prometheus's
``increase()`` and ``rate()`` need a sample before the first increment to count it, and a
series that first appears at 5 is read as "was always 5"; one scrape interval late beats
never.

Plain data, time passed in; the collector in ``findings.py`` reads it at scrape time.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

OVERFLOW_LABEL = "otel_metric_overflow"
MAX_LABEL_VALUE_CHARS = 128  # a longer tool or server name is cut, so memory per key is bounded
# Never a real label set: its one value is longer than any label_value() can be.
OVERFLOW_KEY: tuple[str, ...] = ("\0overflow" * (MAX_LABEL_VALUE_CHARS // 9 + 1),)


def label_value(value: str | None) -> str:
    return (value or "")[:MAX_LABEL_VALUE_CHARS]


@dataclass(slots=True)
class Exemplar:
    """The trace behind a number: the latest span that moved the series.

    Never changed once made (``replace`` makes another), but not frozen: one is made for
    every call, and a frozen dataclass sets each field through ``object.__setattr__``, at
    several times the cost."""

    trace_id: str  # hex
    span_id: str  # hex
    value: float
    at_s: float  # the span's end time, Unix seconds


@dataclass(slots=True)
class CounterValue:
    total: float = 0.0
    exemplar: Exemplar | None = None
    exposed: bool = False  # a scrape has shown this series (at zero, the first time)

    def add(self, amount: float, exemplar: Exemplar | None = None) -> None:
        self.total += amount
        if exemplar is not None:
            self.exemplar = exemplar


@dataclass(slots=True)
class GaugeValue:
    value: float = 0.0

    def set(self, value: float) -> None:
        self.value = value


@dataclass(slots=True)
class HistogramValue:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, not cumulative; +Inf last
    sum: float = 0.0
    exemplars: dict[int, Exemplar] = field(default_factory=dict)  # bucket index -> latest
    exposed: bool = False  # a scrape has shown this series (at zero, the first time)

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, exemplar: Exemplar | None = None) -> None:
        index = bisect.bisect_left(self.bounds, value)  # le: a value on a bound is in it
        self.counts[index] += 1
        self.sum += value
        if exemplar is not None:
            self.exemplars[index] = exemplar

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        running, out = 0, []
        for count in self.counts:
            running += count
            out.append(running)
        return out


SeriesValue = CounterValue | GaugeValue | HistogramValue
V = TypeVar("V", bound=SeriesValue)


class SeriesTable(Generic[V]):
    def __init__(self, make: Callable[[], V], max_series: int, idle_s: float) -> None:
        self._make: Callable[[], V] = make
        self._max_series = max_series
        self._idle_s = idle_s
        # Least recently updated first, so expiry looks only at the front.
        self._series: OrderedDict[tuple[str, ...], tuple[float, V]] = OrderedDict()
        self.folded = 0  # updates that went to the overflow series

    def __len__(self) -> int:
        return len(self._series)

    def at(self, labels: tuple[str, ...], now_s: float) -> V:
        """The value to update for ``labels`` (made if new, the overflow one if full)."""
        series = self._series
        entry = series.pop(labels, None)
        if entry is None:
            self.expire(now_s)
            # The overflow series is not one of the max_series label sets.
            if len(series) - (OVERFLOW_KEY in series) >= self._max_series:
                self.folded += 1
                labels = OVERFLOW_KEY
                entry = series.pop(labels, None)
        value = entry[1] if entry is not None else self._make()
        series[labels] = (now_s, value)
        return value

    def expire(self, now_s: float) -> None:
        series = self._series
        while series:
            key, (touched, _) = next(iter(series.items()))
            if now_s - touched < self._idle_s:
                break
            del series[key]

    def items(self) -> Iterator[tuple[tuple[str, ...] | None, V]]:
        """(labels, value) per series; ``None`` labels the overflow series."""
        for labels, (_, value) in self._series.items():
            yield (None if labels == OVERFLOW_KEY else labels), value
