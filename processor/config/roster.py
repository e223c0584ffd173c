"""Roster health: when the tools offered to the model count as collapsed."""

from __future__ import annotations

from dataclasses import dataclass

from processor.config.checks import not_positive

DEFAULT_COLLAPSE_FRACTION = 0.0  # offered at or below this share of the turn's best: collapse
DEFAULT_ROSTER_MAX_TURNS = 50_000
DEFAULT_ROSTER_TURN_IDLE_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class RosterConfig:
    """Tool listings: when the surface offered to the model counts as collapsed."""

    # 0.0: only a drop to zero tools is a collapse; 0.5: a drop to half the turn's best.
    collapse_fraction: float = DEFAULT_COLLAPSE_FRACTION
    max_turns: int = DEFAULT_ROSTER_MAX_TURNS
    turn_idle_s: float = DEFAULT_ROSTER_TURN_IDLE_S

    def validate(self, prefix: str) -> list[str]:
        problems = []
        if not 0 <= self.collapse_fraction < 1:
            problems.append(
                f"{prefix}.collapse_fraction: must be in [0, 1), got {self.collapse_fraction}"
            )
        return problems + not_positive(prefix, self, "max_turns", "turn_idle_s")
