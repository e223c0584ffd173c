"""Within a turn, the rules a harness's local notes and the service's breaker share: how a
failure's key is chosen, which failure classes block the whole tool, the defaults of a
turn's bounds, and the words the model is told of a turn block."""

from __future__ import annotations

import enum

from mcp_breaker_client.shared import messages
from mcp_breaker_client.shared.verdict import FailureClass

DEFAULT_TURN_IDLE_S = 3600.0  # a turn's state is dropped after this long without a call
DEFAULT_MAX_BLOCKS_PER_TURN = 256
# A dead session is dead whatever the arguments: these failures block the whole tool.
TOOL_WIDE = frozenset({FailureClass.TRANSPORT, FailureClass.TIMEOUT})


class TurnKey(enum.StrEnum):
    CAUSE = "cause"
    CALL = "call"
    TOOL = "tool"


def turn_block_message(tool: str, server: str, *, tool_wide: bool, excerpt: str) -> str:
    """What the model is told of a turn block: the service's annotation and the client's
    local note (``mcp_adapter.py``) say the same."""
    subject = messages.tool_subject(tool, server)
    if tool_wide:
        return messages.turn_tool_blocked(subject, why=excerpt)
    return messages.turn_call_blocked(subject, why=excerpt)
