"""The merge: many files, one stream in span-end order, within a window and a bound."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from processor.offline.decode import Decoded, Origin
from processor.offline.order import OrderStats, in_span_order

S = 1_000_000_000
ORIGIN = Origin(Resource(), "", InstrumentationScope(), "")


@dataclass
class Feed:
    """A file of records, each a list of span end times (seconds)."""

    name: str
    batches: list[list[float]]
    log: list[str] = field(default_factory=list)
    stdin: bool = False

    def first_end_ns(self) -> int | None:
        return None if self.stdin else int(min(self.batches[0]) * S)

    def records(self) -> Iterator[Decoded]:
        self.log.append(f"open {self.name}")
        for batch in self.batches:
            kept = [(int(t * S), Span(name=f"{self.name}@{t}"), ORIGIN) for t in batch]
            yield Decoded(spans=len(batch), latest_end_ns=max(k[0] for k in kept), kept=kept)
        self.log.append(f"done {self.name}")


def merged(
    feeds: list[Feed], window_s: float = 10, bound: int = 1000
) -> tuple[list[str], OrderStats]:
    stats = OrderStats()
    out = [span.name for _, span, _ in in_span_order(list(feeds), int(window_s * S), bound, stats)]  # type: ignore[arg-type]
    return out, stats


def times(names: list[str]) -> list[float]:
    return [float(n.split("@")[1]) for n in names]


def test_overlapping_files_come_out_in_end_time_order() -> None:
    a = Feed("a", [[1, 3, 5], [7, 9]])
    b = Feed("b", [[2, 4], [6, 8, 10]])
    out, stats = merged([a, b])
    assert times(out) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert stats.late == 0


def test_spans_out_of_order_within_the_window_are_put_in_place() -> None:
    out, stats = merged([Feed("a", [[5, 1, 3], [2, 9], [8, 20], [30]])], window_s=10)
    assert times(out) == [1, 2, 3, 5, 8, 9, 20, 30]
    assert stats.late == 0


def test_a_span_later_than_the_window_is_analysed_late_and_counted() -> None:
    out, stats = merged([Feed("a", [[1], [50], [70], [5]])], window_s=10)
    assert times(out) == [1, 50, 5, 70]  # 50 had gone when 5 came: 45 s out of order
    assert (stats.late, stats.late_max_ns) == (1, 45 * S)


def test_rotated_files_are_opened_one_after_the_other() -> None:
    log: list[str] = []
    first = Feed("first", [[1, 2], [3]], log)
    second = Feed("second", [[100, 101]], log)
    third = Feed("third", [[200]], log)
    out, _ = merged([third, first, second])  # any order on the command line
    assert times(out) == [1, 2, 3, 100, 101, 200]
    assert log == [
        "open first",
        "done first",
        "open second",
        "done second",
        "open third",
        "done third",
    ]


def test_standard_input_is_opened_first() -> None:
    log: list[str] = []
    out, _ = merged([Feed("file", [[1]], log), Feed("stdin", [[2]], log, stdin=True)])
    assert log[0] == "open stdin" and times(out) == [1, 2]


def test_past_the_bound_the_earliest_goes_at_once() -> None:
    out, stats = merged([Feed("a", [[float(t)] for t in range(10)])], window_s=1000, bound=3)
    assert times(out) == list(range(10))  # in order all the same: nothing came late
    assert stats.forced == 7 and stats.held_max == 4
