"""ExpiringKeys and ExpiringValues keep what cachetools' TTLCache kept for the classifier, op
for op."""

from __future__ import annotations

from cachetools import TTLCache
from hypothesis import given, settings
from hypothesis import strategies as st

from processor.classify.recent import ExpiringKeys, ExpiringValues

# (key, clock step, set or ask): small key and time ranges, so that keys are set again,
# expire, and the bound evicts; now and then the clock goes back (a replay, a test).
OPERATIONS = st.lists(
    st.tuples(st.integers(0, 7), st.sampled_from([0.0, 0.5, 1.0, 3.0, -2.0]), st.booleans()),
    max_size=80,
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(1, 5), st.sampled_from([0.5, 2.0, 5.0]), OPERATIONS)
def test_expiring_keys_answer_as_a_ttl_cache(
    max_keys: int, ttl: float, operations: list[tuple[int, float, bool]]
) -> None:
    clock = [100.0]
    cache: TTLCache[int, bool] = TTLCache(max_keys, ttl, timer=lambda: clock[0])
    keys = ExpiringKeys(max_keys, ttl)
    for key, step, setting in operations:
        clock[0] += step
        now = clock[0]
        if setting:
            cache[key] = True
            keys.set(key, now)
        assert keys.any_of((key,), now) == (key in cache)
        assert keys.any_of(range(8), now) == any(k in cache for k in range(8))
    assert len(keys) >= len(cache)  # TTLCache drops what is due when counted; we when set


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(1, 5), st.sampled_from([0.5, 2.0, 5.0]), OPERATIONS)
def test_expiring_values_answer_as_a_ttl_cache(
    max_keys: int, ttl: float, operations: list[tuple[int, float, bool]]
) -> None:
    clock = [100.0]
    cache: TTLCache[int, bool] = TTLCache(max_keys, ttl, timer=lambda: clock[0])
    latest: dict[int, str] = {}  # read beside the cache: reading it would reorder its keys
    values = ExpiringValues(max_keys, ttl)
    for index, (key, step, setting) in enumerate(operations):
        clock[0] += step
        now = clock[0]
        if setting:
            cache[key], latest[key] = True, f"tool-{index}"
            values.set(key, f"tool-{index}", now)
        assert values.get(key, now) == (latest[key] if key in cache else None)
    assert len(values) <= max_keys


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 5), st.sampled_from([0.5, 2.0, 5.0]), OPERATIONS)
def test_setting_many_keys_at_once_is_setting_each_in_turn(
    max_keys: int, ttl: float, operations: list[tuple[int, float, bool]]
) -> None:
    """set_all, as the decider marks a call's keys: what setting each in turn would keep."""
    one_by_one, at_once = ExpiringValues(max_keys, ttl), ExpiringValues(max_keys, ttl)
    keys_one_by_one, keys_at_once = ExpiringKeys(max_keys, ttl), ExpiringKeys(max_keys, ttl)
    now = 100.0
    for index, (key, step, setting) in enumerate(operations):
        now += step
        batch = [(key, f"v{index}"), ((key + 3) % 8, f"w{index}")] if setting else []
        for k, v in batch:
            one_by_one.set(k, v, now)
            keys_one_by_one.set(k, now)
        at_once.set_all(batch, now)
        keys_at_once.set_all([k for k, _ in batch], now)
        for k in range(8):
            assert at_once.get(k, now) == one_by_one.get(k, now)
            assert keys_at_once.any_of((k,), now) == keys_one_by_one.any_of((k,), now)
        assert len(at_once) == len(one_by_one) and len(keys_at_once) == len(keys_one_by_one)
