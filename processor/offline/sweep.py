"""``--sweep key=v1,v2,...``: the same traces under several settings, side by side.

One or two keys; every combination of their values is one more analysis in the same pass
over the input (each with its own pipeline). The trade-off each shows is the one an SRE
weighs before enforcing: dead calls spared (refused calls that failed anyway) against
good calls refused (refused calls that would have succeeded).
"""

from __future__ import annotations

import itertools
import typing
from dataclasses import dataclass, field
from typing import Any

from processor.config import leaf_keys
from processor.offline.run import ANALYSED_SECTIONS, Analysis

MAX_SWEEP_KEYS = 2
MAX_SWEEP_VALUES = 12  # per key: each value is a whole analysis more


@dataclass(frozen=True, slots=True)
class SweepKey:
    key: str
    values: tuple[str, ...]


def parse(specs: list[str]) -> tuple[list[SweepKey], list[str]]:
    """The keys and values to sweep, and one line per problem with them."""
    problems: list[str] = []
    if len(specs) > MAX_SWEEP_KEYS:
        problems.append(f"--sweep: at most {MAX_SWEEP_KEYS} keys, got {len(specs)}")
    schema = {".".join(path): kind for path, kind, _ in leaf_keys()}
    keys: list[SweepKey] = []
    for spec in specs[:MAX_SWEEP_KEYS]:
        key, sep, values = spec.partition("=")
        key = key.strip()
        listed = tuple(v.strip() for v in values.split(",") if v.strip())
        if not sep or not listed:
            problems.append(f"--sweep {spec!r}: expected key=value1,value2,...")
            continue
        if key not in schema:
            problems.append(f"--sweep {key}: unknown key")
            continue
        if key.split(".")[0] not in ANALYSED_SECTIONS:
            sections = ", ".join(f"{s}." for s in ANALYSED_SECTIONS)
            problems.append(
                f"--sweep {key}: does not change the analysis; sweep a key under {sections}"
            )
            continue
        if typing.get_origin(schema[key]) in (dict, tuple):
            problems.append(f"--sweep {key}: a list or mapping cannot be swept")
            continue
        if len(listed) > MAX_SWEEP_VALUES:
            problems.append(f"--sweep {key}: at most {MAX_SWEEP_VALUES} values, got {len(listed)}")
            continue
        if any(k.key == key for k in keys):
            problems.append(f"--sweep {key}: given twice")
            continue
        keys.append(SweepKey(key, listed))
    return keys, problems


def combinations(keys: list[SweepKey]) -> list[tuple[tuple[str, str], ...]]:
    """Every combination of the keys' values, as (key, value) pairs, first key slowest."""
    if not keys:
        return []
    return [
        tuple(zip((k.key for k in keys), values, strict=True))
        for values in itertools.product(*(k.values for k in keys))
    ]


@dataclass(slots=True)
class Sweep:
    keys: list[SweepKey]
    analyses: list[Analysis] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for analysis in self.analyses:
            tally = analysis.tally
            counterfactual = tally.counterfactual()
            rows.append(
                {
                    "values": dict(analysis.label),
                    "would_refuse": counterfactual["would_refuse"]["count"],
                    "within_turns": counterfactual["within_turns"]["count"],
                    "across_turns": counterfactual["across_turns"]["count"],
                    "dead_calls_spared": counterfactual["dead_calls_spared"]["count"],
                    "good_calls_refused": counterfactual["refused_that_succeeded"]["count"],
                    "tool_seconds_saved": counterfactual["tool_seconds_saved"],
                    "model_rounds_saved": counterfactual["model_rounds_saved"],
                    "circuits_opened": sum(c.opened for c in tally.circuits.values()),
                }
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "keys": [{"key": k.key, "values": list(k.values)} for k in self.keys],
            "rows": self.rows(),
        }
