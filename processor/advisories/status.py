"""``mcp-breaker status``: what is out right now, as a table a person reads at a glance.

Reads GetState from a running service's advisory port; the rendering is a plain function
of the advisories, the time and the terminal's width, so it is tested without a network.
Three layouts, as ``kubectl get`` has them: the table (causes in full when the terminal
has room, else cut to fit it, never below ``MIN_CAUSE_CHARS``), ``wide`` (every cause in
full and the advisory's id, tenant and expiry), and ``json`` (GetState's reply itself, in
protobuf's JSON mapping: stable keys, the proto's field names).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from google.protobuf import json_format

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from processor.telemetry.printable import escape_controls

NS = 1_000_000_000
STATUS_TIMEOUT_S = 5.0
# A cause is cut to fit the terminal, but never shorter than this: a cause of 20
# characters says less than a table that wraps.
MIN_CAUSE_CHARS = 60


class Layout(enum.StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"


_SCOPE = {
    pb.SCOPE_SERVER: "server",
    pb.SCOPE_TOOL: "tool",
    pb.SCOPE_TURN_TOOL: "turn/tool",
    pb.SCOPE_TURN_CALL: "turn/call",
    pb.SCOPE_TURN_ROSTER: "turn/roster",
}
_STATE = {
    pb.STATE_OPEN: "OPEN",
    pb.STATE_HALF_OPEN: "half-open",
    pb.STATE_FORCED_OPEN: "FORCED OPEN",
    pb.STATE_FORCED_CLOSED: "forced closed",
    pb.STATE_TURN_BLOCKED: "blocked (turn)",
    pb.STATE_ROSTER_COLLAPSED: "roster collapsed",
}
# Worst first: what a person must act on comes at the top.
_ORDER = {pb.STATE_FORCED_OPEN: 0, pb.STATE_OPEN: 1, pb.STATE_HALF_OPEN: 2}


def fetch(
    target: str,
    *,
    token: str | None = None,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> pb.GetStateResponse:
    if ca_file:
        credentials = grpc.ssl_channel_credentials(
            Path(ca_file).read_bytes(),
            private_key=Path(key_file).read_bytes() if key_file else None,
            certificate_chain=Path(cert_file).read_bytes() if cert_file else None,
        )
        channel = grpc.secure_channel(target, credentials)
    else:
        channel = grpc.insecure_channel(target)
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with channel:
        stub = pb_grpc.AdvisoriesStub(channel)  # type: ignore[no-untyped-call]
        response: pb.GetStateResponse = stub.GetState(
            pb.GetStateRequest(), timeout=STATUS_TIMEOUT_S, metadata=metadata
        )
        return response


def _ago(unix_nano: int, now_s: float) -> str:
    if not unix_nano:
        return "-"
    return _span(now_s - unix_nano / NS) + " ago"


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def render(
    advisories: Sequence[pb.Advisory],
    now_s: float,
    *,
    width: int | None = None,
    wide: bool = False,
) -> str:
    """One row per advisory in force, worst first; a line saying so when nothing is out.

    ``width``: the terminal's columns, which a long cause is cut to fit (None: not a
    terminal, nothing is cut); ``wide``: every cause in full, with more columns."""
    shown = [a for a in advisories if a.state != pb.STATE_CLOSED]
    if not shown:
        return "No circuits open: every tool mcp-breaker has seen is available.\n"
    shown.sort(key=lambda a: (_ORDER.get(a.state, 3), a.server, a.tool, a.turn))
    header = ["SCOPE", "SERVER", "TOOL", "STATE", "FAILING SINCE", "CALLS", "RETRY IN"]
    if wide:
        header += ["EXPIRES IN", "TENANT", "ID"]
    rows = [[*header, "CAUSE"]]
    for a in shown:
        calls = f"{a.evidence.failures}/{a.evidence.calls} failed" if a.evidence.calls else "-"
        retry = _span(a.retry_after_seconds) if a.retry_after_seconds else "-"
        state = _STATE.get(a.state, str(a.state)) + ("" if a.enforced else " (shadow)")
        tool = a.tool + (f" [turn {a.turn}]" if a.turn else "")
        row = [
            _SCOPE.get(a.scope, "?"),
            a.server or "-",
            tool or "*",
            state,
            _ago(a.evidence.since_unix_nano, now_s),
            calls,
            retry,
        ]
        if wide:
            row += [_until(a.expires_unix_nano, now_s), a.tenant or "-", a.id or "-"]
        rows.append([*row, _cause(a) or "-"])
    # Every cell, not only the names: servers, tools, turns and causes are whatever a
    # sender put in its spans, and a newline, tab or escape code would break the table or
    # drive the terminal reading it. Escaped before any cut: a cut counts what shows.
    shown_rows = [[escape_controls(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in shown_rows) for i in range(len(header))]
    if width is not None and not wide:
        room = max(MIN_CAUSE_CHARS, width - sum(widths) - 2 * len(widths))
        for row in shown_rows[1:]:
            if len(row[-1]) > room:
                row[-1] = row[-1][: room - 1] + "…"
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, [*widths, 0], strict=True)).rstrip()
        for row in shown_rows
    ]
    return "\n".join(lines) + f"\n\n{len(shown)} advisories in force.\n"


def _cause(a: pb.Advisory) -> str:
    cause = a.cause or a.evidence.failure_class
    if a.evidence.excerpt:
        cause = f"{cause}: {a.evidence.excerpt}" if cause else a.evidence.excerpt
    return cause


def _until(unix_nano: int, now_s: float) -> str:
    return _span(unix_nano / NS - now_s) if unix_nano else "-"


def as_json(response: pb.GetStateResponse) -> str:
    """GetState's reply in protobuf's JSON mapping, every field present (zero values too,
    so a script's keys never go missing); 64-bit numbers are strings, as the mapping says."""
    document = json_format.MessageToDict(
        response,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    # ASCII: a name's escape codes reach the terminal as text, as in the table.
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"


def status(
    target: str,
    *,
    token: str | None,
    ca_file: str | None,
    cert_file: str | None = None,
    key_file: str | None = None,
    layout: Layout = Layout.TABLE,
    width: int | None = None,
) -> str:
    response = fetch(target, token=token, ca_file=ca_file, cert_file=cert_file, key_file=key_file)
    if layout is Layout.JSON:
        return as_json(response)
    text = render(response.advisories, time.time(), width=width, wide=layout is Layout.WIDE)
    if response.not_shown:
        text += f"{response.not_shown} more not shown (the least severe).\n"
    if response.shared_state == "memory":
        text += (
            "Breaker state is in the service's memory (state.backend: memory): it knows what "
            "it has seen since it last started.\n"
        )
    elif response.shared_state:
        text += f"Shared state: {escape_controls(response.shared_state)}.\n"
    return text
