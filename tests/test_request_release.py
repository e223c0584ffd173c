"""processor/request/release.py: a container emptied a slice at a time, so that what it
held is freed in steps (between which another thread may take the interpreter lock)."""

from __future__ import annotations

from typing import Any

import pytest

from processor.request.release import RELEASE_SLICE, let_go


class Watched:
    """Records how much its container still held when it was freed."""

    def __init__(self, container: Any, lengths: list[int]) -> None:
        self._container = container
        self._lengths = lengths

    def __del__(self) -> None:
        self._lengths.append(len(self._container))


@pytest.mark.parametrize("kind", [list, dict])
def test_what_a_container_held_is_freed_a_slice_at_a_time(kind: type) -> None:
    lengths: list[int] = []
    count = 3 * RELEASE_SLICE
    container: Any = [] if kind is list else {}
    for index in range(count):
        item = Watched(container, lengths)
        if kind is list:
            container.append(item)
        else:
            container[index] = item
    del item

    let_go(container)

    assert not container
    assert len(lengths) == count  # each freed, none kept elsewhere
    # Freed while the container still held the rest, never all at once at the end.
    assert lengths[0] >= 2 * RELEASE_SLICE
    assert len(set(lengths)) >= 3


def test_an_empty_or_small_container_is_emptied_too() -> None:
    small = list(range(RELEASE_SLICE - 1))
    empty: dict[int, int] = {}
    let_go(small)
    let_go(empty)
    assert small == [] and empty == {}
