"""Isolation, as plain logic: how a refused export is split to find what the next hop refuses.

An export is a list of pieces: the requests merged into it, or parts of one request being
split. Refused for what may be in its data, it is sent again as two halves: its requests
in two while there are several, then a lone request's spans in two (``halve_request``:
cut between spans, none decoded, since the bad one may be among them). The forwarder
(``queue.py``) sends each half and splits again whichever is refused, until a refused
piece is one span: only that is given up. Each split costs two exports, drawn from the
budget of the export first refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from processor.inflight.stage import halve_request
from processor.request.sender import Sender

# Exports one refused export may turn into while its parts are sent apart: enough to find
# a few bad spans among thousands (each one costs about two per halving), bounded so a
# next hop that refuses everything cannot make one export into thousands.
ISOLATION_MAX_EXPORTS = 64


@dataclass(frozen=True, slots=True)
class Piece:
    """Part of an export: a held request, or part of one being split."""

    payload: bytes
    span_count: int
    sender: Sender


@dataclass(slots=True)
class Budget:
    """Exports left for sending the parts of one refused export apart."""

    left: int = ISOLATION_MAX_EXPORTS
    started: bool = False  # the first split has been logged


def halves(pieces: list[Piece]) -> list[list[Piece]]:
    """Two exports that together hold ``pieces``: its requests in two, or a lone request's
    spans in two; none when it is one span."""
    if len(pieces) > 1:
        middle = len(pieces) // 2
        return [pieces[:middle], pieces[middle:]]
    piece = pieces[0]
    if piece.span_count < 2:
        return []
    return [[Piece(part, spans, piece.sender)] for part, spans in halve_request(piece.payload)]
