"""Bounded series: the cap, the overflow series, the fold count, idle expiry in LRU order,
label truncation, and the values a series holds (counter, gauge, histogram with exemplars).

Time is passed in as plain numbers; nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processor.telemetry.series import (
    MAX_LABEL_VALUE_CHARS,
    OVERFLOW_KEY,
    CounterValue,
    Exemplar,
    GaugeValue,
    HistogramValue,
    SeriesTable,
    label_value,
)

Labels = tuple[str, ...]
Key = Labels | None  # None: the overflow series, as ``items`` names it
IDLE_S = 10.0


def counters(max_series: int = 3, idle_s: float = IDLE_S) -> SeriesTable[CounterValue]:
    return SeriesTable(CounterValue, max_series, idle_s)


def bump(table: SeriesTable[CounterValue], name: str, now_s: float = 0.0) -> None:
    table.at((name, "ok"), now_s).add(1)


def totals(table: SeriesTable[CounterValue]) -> dict[Key, float]:
    return {labels: value.total for labels, value in table.items()}


def names(table: SeriesTable[CounterValue]) -> set[str | None]:
    return {None if labels is None else labels[0] for labels, _ in table.items()}


def exemplar(n: int, value: float = 1.0) -> Exemplar:
    return Exemplar(trace_id=f"{n:032x}", span_id=f"{n:016x}", value=value, at_s=1_700_000_000.0)


# --- the cap and the overflow series ------------------------------------------------------


def test_each_label_set_has_its_own_series_up_to_the_cap() -> None:
    table = counters(max_series=3)
    for name in ("a", "b", "c", "a"):
        bump(table, name)
    assert totals(table) == {("a", "ok"): 2, ("b", "ok"): 1, ("c", "ok"): 1}
    assert table.folded == 0
    assert len(table) == 3


def test_past_the_cap_new_label_sets_fold_into_one_overflow_series() -> None:
    table = counters(max_series=3)
    for name in ("a", "b", "c", "d", "e", "f", "d"):
        bump(table, name)
    assert totals(table) == {("a", "ok"): 1, ("b", "ok"): 1, ("c", "ok"): 1, None: 4}
    assert table.folded == 4
    assert len(table) == 3 + 1  # the cap, plus the overflow series


def test_a_series_held_before_the_cap_keeps_counting_after_it() -> None:
    table = counters(max_series=2)
    for name in ("a", "b", "c", "a", "a", "b"):
        bump(table, name)
    assert totals(table) == {("a", "ok"): 3, ("b", "ok"): 2, None: 1}
    assert table.folded == 1


def test_the_overflow_series_cannot_be_named_by_a_sender() -> None:
    """A label value is whatever a span says, NUL bytes included: no label set a sender
    can write may land in (or pose as) the overflow series."""
    table = counters(max_series=5)
    forged = [("\0overflow",), (label_value(OVERFLOW_KEY[0]),), (label_value(OVERFLOW_KEY[0] * 2),)]
    for labels in forged:
        table.at(labels, 0.0).add(1)
    assert set(totals(table)) == set(forged)  # each its own series; none reads as overflow
    assert table.folded == 0


# --- idle expiry ----------------------------------------------------------------------------


def test_an_idle_series_expires_and_frees_its_place() -> None:
    table = counters(max_series=2)
    bump(table, "a", now_s=0.0)
    bump(table, "b", now_s=5.0)
    bump(table, "c", now_s=IDLE_S)  # a has been idle for IDLE_S: it goes, c takes its place
    assert names(table) == {"b", "c"}
    assert table.folded == 0


def test_a_series_just_short_of_idle_stays() -> None:
    table = counters(max_series=2)
    bump(table, "a", now_s=0.0)
    bump(table, "b", now_s=0.0)
    bump(table, "c", now_s=IDLE_S - 0.001)
    assert names(table) == {"a", "b", None}
    assert table.folded == 1


def test_a_place_freed_by_expiry_is_taken_even_while_the_overflow_series_lives() -> None:
    """The overflow series is not one of the ``max_series`` label sets: when a real series
    expires, the next new label set gets a series of its own again."""
    table = counters(max_series=2)
    bump(table, "a", now_s=0.0)
    bump(table, "b", now_s=5.0)
    bump(table, "c", now_s=6.0)  # folded; the overflow series is now the freshest
    bump(table, "d", now_s=IDLE_S)  # a expires: d takes its place
    assert names(table) == {"b", "d", None}
    assert table.folded == 1


def test_expiry_goes_least_recently_updated_first() -> None:
    """a was made first but updated after b: b is the one that has been idle longest."""
    table = counters(max_series=2)
    bump(table, "a", now_s=0.0)
    bump(table, "b", now_s=1.0)
    bump(table, "a", now_s=2.0)
    bump(table, "c", now_s=1.0 + IDLE_S)  # b idle for IDLE_S, a only for IDLE_S - 1
    assert names(table) == {"a", "c"}
    assert totals(table)[("a", "ok")] == 2
    assert table.folded == 0


def test_expire_alone_drops_every_idle_series_and_keeps_the_rest() -> None:
    table = counters(max_series=10)
    for minute, name in enumerate("abcd"):
        bump(table, name, now_s=float(minute))
    bump(table, "a", now_s=4.0)
    table.expire(now_s=3.0 + IDLE_S)  # b, c, d idle (last at 1, 2, 3); a updated at 4
    assert names(table) == {"a"}
    table.expire(now_s=4.0 + IDLE_S)
    assert len(table) == 0


def test_the_overflow_series_expires_like_any_other() -> None:
    table = counters(max_series=1)
    bump(table, "a", now_s=0.0)
    bump(table, "b", now_s=0.0)  # folded
    table.expire(now_s=IDLE_S)
    assert len(table) == 0
    bump(table, "c", now_s=IDLE_S)
    assert names(table) == {"c"}
    assert table.folded == 1  # a count of updates ever folded: it never goes down


# --- label values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(None, "", id="no value is empty"),
        pytest.param("", "", id="empty stays empty"),
        pytest.param("search", "search", id="a short name is kept"),
        pytest.param("x" * MAX_LABEL_VALUE_CHARS, "x" * MAX_LABEL_VALUE_CHARS, id="at the cap"),
        pytest.param("y" * 100_000, "y" * MAX_LABEL_VALUE_CHARS, id="100 KB is cut"),
        pytest.param("é" * 200, "é" * MAX_LABEL_VALUE_CHARS, id="characters, not bytes"),
    ],
)
def test_label_value_is_cut_to_the_cap(raw: str | None, expected: str) -> None:
    assert label_value(raw) == expected


# --- values ---------------------------------------------------------------------------------


def test_a_counter_keeps_the_latest_exemplar() -> None:
    counter = CounterValue()
    counter.add(1, exemplar(1))
    counter.add(2.5, exemplar(2))
    counter.add(1)  # no exemplar: the last one stays
    assert counter.total == 4.5
    assert counter.exemplar == exemplar(2)


def test_a_gauge_holds_the_last_value_set() -> None:
    gauge = GaugeValue()
    gauge.set(86)
    gauge.set(0)
    assert gauge.value == 0


BOUNDS = (0.1, 1.0, 5.0)


@pytest.mark.parametrize(
    ("value", "bucket"),
    [
        pytest.param(0.0, 0, id="zero in the first"),
        pytest.param(0.1, 0, id="on the first bound: in it (le)"),
        pytest.param(0.100001, 1, id="just past the first bound: in the next"),
        pytest.param(1.0, 1, id="on a middle bound: in it"),
        pytest.param(5.0, 2, id="on the last bound: in it"),
        pytest.param(5.000001, 3, id="past the last bound: +Inf"),
        pytest.param(1e9, 3, id="far past: +Inf"),
    ],
)
def test_a_histogram_bucket_is_less_or_equal(value: float, bucket: int) -> None:
    histogram = HistogramValue(BOUNDS)
    histogram.observe(value)
    expected = [0] * (len(BOUNDS) + 1)
    expected[bucket] = 1
    assert histogram.counts == expected


def test_a_histogram_counts_cumulatively_with_sum_and_count() -> None:
    histogram = HistogramValue(BOUNDS)
    for value in (0.05, 0.1, 0.7, 3.0, 3.0, 60.0):
        histogram.observe(value)
    assert histogram.counts == [2, 1, 2, 1]
    assert histogram.cumulative() == [2, 3, 5, 6]
    assert histogram.count == 6
    assert histogram.sum == pytest.approx(66.85)


def test_a_histogram_keeps_the_latest_exemplar_of_each_bucket() -> None:
    histogram = HistogramValue(BOUNDS)
    histogram.observe(0.05, exemplar(1, 0.05))
    histogram.observe(0.1, exemplar(2, 0.1))  # same bucket: replaces 1
    histogram.observe(3.0, exemplar(3, 3.0))
    histogram.observe(3.5)  # no exemplar: 3 stays
    histogram.observe(99.0, exemplar(4, 99.0))
    assert histogram.exemplars == {0: exemplar(2, 0.1), 2: exemplar(3, 3.0), 3: exemplar(4, 99.0)}


def test_a_histogram_table_folds_observations_too() -> None:
    table: SeriesTable[HistogramValue] = SeriesTable(lambda: HistogramValue(BOUNDS), 1, IDLE_S)
    table.at(("a",), 0.0).observe(0.5)
    table.at(("b",), 0.0).observe(2.0)
    table.at(("c",), 0.0).observe(2.0)
    held = {labels: value.cumulative() for labels, value in table.items()}
    assert held == {("a",): [0, 1, 1, 1], None: [0, 0, 2, 2]}


# --- properties -----------------------------------------------------------------------------

LABEL_SETS = st.tuples(st.sampled_from("abcdefghij"), st.sampled_from(["ok", "failed"]))


@settings(max_examples=300, deadline=None)
@given(
    max_series=st.integers(min_value=1, max_value=8),
    updates=st.lists(LABEL_SETS, max_size=80),
)
def test_without_expiry_nothing_is_lost_and_the_cap_holds(
    max_series: int, updates: list[Labels]
) -> None:
    table = counters(max_series=max_series, idle_s=math.inf)
    first_seen: list[Labels] = []
    for labels in updates:
        table.at(labels, 0.0).add(1)
        first_seen += [labels] if labels not in first_seen else []
        assert len(table) <= max_series + 1
    held = totals(table)
    assert sum(held.values()) == len(updates)  # folded updates are in the overflow series
    assert held.get(None, 0) == table.folded
    # The first ``max_series`` label sets seen are the ones with series of their own.
    assert set(held) - {None} == set(first_seen[:max_series])


@dataclass
class Model:
    """What a bounded table should hold, written the plain way: a dict, scanned in full."""

    max_series: int
    idle_s: float
    held: dict[Key, list[float]] = field(default_factory=dict)  # key -> [touched, total]
    folded: int = 0
    expired_total: float = 0.0

    def update(self, labels: Labels, now_s: float) -> None:
        key: Key = labels
        if key not in self.held:
            for idle in [
                k for k, (touched, _) in self.held.items() if now_s - touched >= self.idle_s
            ]:
                self.expired_total += self.held.pop(idle)[1]
            if sum(1 for k in self.held if k is not None) >= self.max_series:
                self.folded += 1
                key = None
        entry = self.held.setdefault(key, [now_s, 0.0])
        entry[0] = now_s
        entry[1] += 1


@settings(max_examples=300, deadline=None)
@given(
    max_series=st.integers(min_value=1, max_value=6),
    updates=st.lists(
        st.tuples(LABEL_SETS, st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 10.0])), max_size=80
    ),
)
def test_with_expiry_the_table_holds_what_the_model_holds(
    max_series: int, updates: list[tuple[Labels, float]]
) -> None:
    """Random label sets at random (non-decreasing) times: the table never holds more than
    ``max_series`` label sets plus the overflow series, folds only when that many are live,
    and every update is either held or was in a series that expired idle."""
    idle_s = 4.0
    table = counters(max_series=max_series, idle_s=idle_s)
    model = Model(max_series, idle_s)
    now_s = 0.0
    for labels, step_s in updates:
        now_s += step_s
        table.at(labels, now_s).add(1)
        model.update(labels, now_s)
        assert len(table) <= max_series + 1
        assert totals(table) == {key: total for key, (_, total) in model.held.items()}
        assert table.folded == model.folded
    assert sum(totals(table).values()) + model.expired_total == len(updates)
