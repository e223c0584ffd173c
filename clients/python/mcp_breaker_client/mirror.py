"""The harness's local mirror of the advisories in force, and the check before each call.

Plain data, clock passed in, no I/O and no locking (``AdvisoryClient`` serializes access).
The subscriber feeds it what the ``Subscribe`` stream says:

- a **snapshot** replaces everything held (the first message of a stream, or a resync);
- a **change** replaces the advisory with the same id, and one whose state is
  ``STATE_CLOSED`` removes it;
- the stream's **epoch** and the **seq** of the last change are kept, so a reconnecting
  subscriber can ask to resume exactly where it left off.

``check`` answers "may this call go?" in microseconds from four indexes, one per scope
(``docs/advisories.md``, "Matching advisories in a local mirror"):

======================  =======================================
scope                   refuses a call with the same
======================  =======================================
``SCOPE_SERVER``        server
``SCOPE_TOOL``          server and tool
``SCOPE_TURN_TOOL``     turn, server and tool (tenant implicit)
``SCOPE_TURN_CALL``     turn and fingerprint
======================  =======================================

The answer is ``DENY`` with the advisory when a matching one refuses (``OPEN``,
``FORCED_OPEN``, ``TURN_BLOCKED``, or a state this version does not know, as the contract
says), is enforced and has not expired; ``PROBE_NEEDED`` when a matching one is half-open
(ask the service's ``Check`` for the permit); else ``ALLOW``. A shadow-mode advisory
(``enforced`` false) never refuses: the answer is ``ALLOW`` with the advisory attached, so
the harness can log or annotate what would have been refused.

Expiry: an advisory past its ``expires_unix_nano`` no longer applies, whatever the stream
says (a mirror cut off from the service must not refuse on stale news). One exception: an
*open* circuit past its expiry is what the service turns into a half-open one, so it is
read as half-open here too (the next ``Check`` decides), not as allowed for everyone.

Bounded: the service bounds what it holds (``advisories.max_advisories``); the mirror keeps
at most ``max_advisories`` too, dropping the oldest, so a faulty peer cannot grow it.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp_breaker_client.calls import call_fingerprints, resolve_server
from mcp_breaker_client.v1 import advisories_pb2 as pb

NS_PER_S = 1_000_000_000
DEFAULT_MAX_ADVISORIES = 100_000  # ten times the service's default bound

# The states that let a call go, or say nothing; any other state refuses, including one a
# later version of the contract adds (it must be read as refusing, advisories.proto says).
# STATE_UNSPECIFIED is a sender's omission, not a new state: it refuses nothing.
_LETS_CALLS_GO = frozenset(
    {pb.STATE_UNSPECIFIED, pb.STATE_CLOSED, pb.STATE_HALF_OPEN, pb.STATE_FORCED_CLOSED}
)

IndexKey = tuple[str, ...]


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"  # do not make the call; give the model the advisory's message
    PROBE_NEEDED = "probe_needed"  # half-open: ask the service (check_remote) for a permit
    PROBE = "probe"  # the service granted this caller the probe permit: make the call


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    decision: Decision
    # Why: the refusing advisory (DENY), the half-open one (PROBE_NEEDED, PROBE), or for an
    # ALLOW the shadow-mode advisory that would have refused. Shared with the mirror: read
    # it, do not modify it.
    advisory: pb.Advisory | None = None
    probe_permit: int = 0
    # False when the service could not be asked (check_remote): allowed, failing open.
    answered: bool = True

    @property
    def refused(self) -> bool:
        return self.decision is Decision.DENY

    @property
    def shadow(self) -> bool:
        """Allowed, but only because the advisory that refuses it is in shadow mode."""
        return self.decision is Decision.ALLOW and self.advisory is not None


ALLOWED = CheckResult(decision=Decision.ALLOW)


def refuses(state: int) -> bool:
    return state not in _LETS_CALLS_GO


def index_key(advisory: pb.Advisory) -> IndexKey | None:
    """Where a call finds this advisory; None for a scope this version does not know (it
    can match no call: better a missed refusal than refusing calls at random)."""
    scope = advisory.scope
    if scope == pb.SCOPE_SERVER:
        return ("server", advisory.server)
    if scope == pb.SCOPE_TOOL:
        return ("tool", advisory.server, advisory.tool)
    if scope == pb.SCOPE_TURN_TOOL:
        return ("turn_tool", advisory.turn, advisory.server, advisory.tool)
    if scope == pb.SCOPE_TURN_CALL:
        return ("turn_call", advisory.turn, advisory.fingerprint)
    return None


class Mirror:
    def __init__(self, *, max_advisories: int = DEFAULT_MAX_ADVISORIES) -> None:
        self.max_advisories = max_advisories
        self.epoch = ""  # "" until the first snapshot: nothing to resume from
        self.last_seq = 0
        self.evicted = 0  # advisories dropped to stay within max_advisories
        self._by_id: OrderedDict[str, pb.Advisory] = OrderedDict()
        # Index key -> ids (as an ordered set): ids are unique per scope and key for one
        # tenant, but nothing here relies on it.
        self._index: dict[IndexKey, dict[str, None]] = {}
        # Turn -> how many SCOPE_TURN_CALL advisories it has: the fingerprint (a hash of
        # the arguments) is only computed for a call whose turn has one.
        self._call_turns: dict[str, int] = {}
        self._in_snapshot = False  # parts of a snapshot still to come
        self._rosters: dict[str, str] = {}  # turn -> id of its roster-collapse advisory

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, advisory_id: str) -> pb.Advisory | None:
        return self._by_id.get(advisory_id)

    def advisories(self) -> list[pb.Advisory]:
        return list(self._by_id.values())

    # -- what the stream says ---------------------------------------------------------------
    def replace(self, epoch: str, seq: int, advisories: Iterable[pb.Advisory]) -> None:
        """A snapshot: exactly these advisories are in force (closed ones are skipped)."""
        self._by_id.clear()
        self._index.clear()
        self._call_turns.clear()
        self._rosters.clear()
        for advisory in advisories:
            if advisory.state != pb.STATE_CLOSED:
                self._put(advisory)
        self.epoch, self.last_seq = epoch, seq

    @property
    def complete(self) -> bool:
        """False while the parts of a snapshot are still arriving."""
        return not self._in_snapshot

    def apply(self, epoch: str, seq: int, advisory: pb.Advisory) -> None:
        """A change: it replaces the advisory with its id; a closed one is removed."""
        if advisory.state == pb.STATE_CLOSED:
            self._remove(advisory.id)
        else:
            self._put(advisory)
        self.epoch, self.last_seq = epoch, seq

    def apply_message(self, message: pb.SubscribeResponse) -> str:
        """One message of the stream; returns its kind (snapshot, change or heartbeat).

        A heartbeat's seq is not taken as received: it may count a change still on its
        way, and resuming after it would skip that change.
        """
        kind = message.WhichOneof("kind")
        if kind == "snapshot":
            snapshot = message.snapshot
            # A snapshot in parts: the first replaces, the rest add. (A service that sends
            # one part sets neither flag, or first without more.)
            if snapshot.first or not self._in_snapshot:
                self.replace(message.epoch, message.seq, snapshot.advisories)
            else:
                for advisory in snapshot.advisories:
                    if advisory.state != pb.STATE_CLOSED:
                        self._put(advisory)
            self._in_snapshot = snapshot.more
            # The position counts only once the snapshot is whole: a stream that breaks
            # between its parts must start over, not resume past the parts it never got.
            if snapshot.more:
                self.epoch, self.last_seq = "", 0
            else:
                self.epoch, self.last_seq = message.epoch, message.seq
        elif kind == "change":
            self.apply(message.epoch, message.seq, message.change)
        return kind or "unknown"

    def _put(self, advisory: pb.Advisory) -> None:
        self._remove(advisory.id)  # a snapshot listing an id twice: the last one counts
        self._by_id[advisory.id] = advisory
        if advisory.scope == pb.SCOPE_TURN_ROSTER:
            self._rosters[advisory.turn] = advisory.id
        key = index_key(advisory)
        if key is not None:
            self._index.setdefault(key, {})[advisory.id] = None
            if advisory.scope == pb.SCOPE_TURN_CALL:
                self._call_turns[advisory.turn] = self._call_turns.get(advisory.turn, 0) + 1
        while len(self._by_id) > self.max_advisories:
            oldest = next(iter(self._by_id))
            self._remove(oldest)
            self.evicted += 1

    def _remove(self, advisory_id: str) -> None:
        known = self._by_id.pop(advisory_id, None)
        if known is None:
            return
        if known.scope == pb.SCOPE_TURN_ROSTER and self._rosters.get(known.turn) == advisory_id:
            del self._rosters[known.turn]
        key = index_key(known)
        if key is None:
            return
        ids = self._index.get(key)
        if ids is not None:
            ids.pop(advisory_id, None)
            if not ids:
                del self._index[key]
        if known.scope == pb.SCOPE_TURN_CALL:
            left = self._call_turns.get(known.turn, 0) - 1
            if left > 0:
                self._call_turns[known.turn] = left
            else:
                self._call_turns.pop(known.turn, None)

    def roster_collapse(self, turn: str, now_s: float) -> pb.Advisory | None:
        """The turn's roster collapsed: the harness should list its tools again. It refuses
        no call, so ``check`` never returns it."""
        advisory_id = self._rosters.get(turn)
        advisory = self._by_id.get(advisory_id) if advisory_id else None
        if advisory is None or _state_at(advisory, int(now_s * NS_PER_S)) is None:
            return None
        return advisory

    # -- the check --------------------------------------------------------------------------
    def check(
        self,
        *,
        turn: str,
        server: str | None,
        tool: str,
        arguments: Any = None,
        fingerprint: str | None = None,
        now_s: float,
    ) -> CheckResult:
        """May this call go now? See the module docstring for how advisories match."""
        if not self._by_id:
            return ALLOWED
        server = resolve_server(server, tool)
        # The order the service's Check reads them in: the turn's blocks, then circuits.
        keys: list[IndexKey] = [("turn_tool", turn, server, tool)]
        if turn in self._call_turns:
            prints = (fingerprint,) if fingerprint else call_fingerprints(server, tool, arguments)
            keys += [("turn_call", turn, print_) for print_ in prints]
        if server:
            keys.append(("server", server))
        keys.append(("tool", server, tool))

        now_ns = int(now_s * NS_PER_S)
        half_open: pb.Advisory | None = None
        shadow: pb.Advisory | None = None
        for key in keys:
            for advisory_id in self._index.get(key, ()):
                advisory = self._by_id[advisory_id]
                state = _state_at(advisory, now_ns)
                if state is None:
                    continue
                if refuses(state):
                    if advisory.enforced:
                        return CheckResult(decision=Decision.DENY, advisory=advisory)
                    shadow = shadow or advisory
                elif state == pb.STATE_HALF_OPEN and advisory.enforced:
                    half_open = half_open or advisory
        if half_open is not None:
            return CheckResult(decision=Decision.PROBE_NEEDED, advisory=half_open)
        return CheckResult(decision=Decision.ALLOW, advisory=shadow)


def _state_at(advisory: pb.Advisory, now_ns: int) -> int | None:
    """The advisory's state at ``now_ns``; None when it no longer applies."""
    expires = advisory.expires_unix_nano
    if not expires or expires > now_ns:
        return advisory.state
    if advisory.state == pb.STATE_OPEN and advisory.scope in (pb.SCOPE_SERVER, pb.SCOPE_TOOL):
        return pb.STATE_HALF_OPEN  # its open period is over: one probe may go
    return None
