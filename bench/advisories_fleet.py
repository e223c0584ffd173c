"""The advisory benchmark's subscribers: raw ``Advisories/Subscribe`` streams in this process.

Each has a channel and a TCP connection of its own, all read by one grpc.aio event loop in
a thread, and notes when it read the change naming each turn; the moment of reading is
where every delivery figure ends.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

# A sibling module: bench/ is on sys.path when these files are run as scripts.
from advisories_service import DELIVERY_WAIT_S, wait

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc

T = TypeVar("T")
DRAIN_QUIET_S = 2.0  # reading the stalled stream at last: this long without a message


@dataclass
class Stream:
    """What one subscriber read: when each turn's change arrived, and how the stream ended."""

    name: str
    got: dict[str, int] = field(default_factory=dict)  # turn -> perf_counter_ns when read
    snapshot: bool = False
    ended: str = ""  # the status code name once the stream ended


class Fleet:
    """Subscribers on one grpc.aio event loop in a thread of its own.

    Every subscriber has its own channel and, through a channel-local subchannel pool,
    its own TCP connection, as separate harness processes would.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._channels: list[grpc.aio.Channel] = []
        self._calls: list[Any] = []
        self._readers: list[asyncio.Task[None]] = []

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    def _open(self, name: str, options: Sequence[tuple[str, Any]] = ()) -> Any:
        channel = grpc.aio.insecure_channel(
            self.target, options=[("grpc.use_local_subchannel_pool", 1), *options]
        )
        self._channels.append(channel)
        call = pb_grpc.AdvisoriesStub(channel).Subscribe(  # type: ignore[no-untyped-call]
            pb.SubscribeRequest(subscriber_name=name)
        )
        self._calls.append(call)
        return call

    def subscribe(self, count: int, label: str) -> list[Stream]:
        async def go() -> list[Stream]:
            streams = [Stream(f"{label}-{i:03d}") for i in range(count)]
            for stream in streams:
                task = asyncio.create_task(self._read(self._open(stream.name), stream))
                self._readers.append(task)
            return streams

        streams = self.call(go())
        wait(lambda: all(s.snapshot or s.ended for s in streams), "every snapshot")
        if failed := [s for s in streams if s.ended]:
            raise RuntimeError(f"{len(failed)} subscribers ended at once: {failed[0].ended}")
        return streams

    def stall(self, options: Sequence[tuple[str, Any]] = ()) -> Any:
        """A subscriber that never reads: its call starts, and nothing takes its messages."""

        async def go() -> Any:
            return self._open("stalled", options)

        return self.call(go())

    @staticmethod
    async def _read(call: Any, stream: Stream) -> None:
        try:
            async for message in call:
                now = time.perf_counter_ns()  # first: the message is decoded already
                kind = message.WhichOneof("kind")
                if kind == "change":
                    stream.got.setdefault(message.change.turn, now)
                elif kind == "snapshot":
                    stream.snapshot = True
            stream.ended = "OK"
        except grpc.aio.AioRpcError as error:
            stream.ended = error.code().name
        except asyncio.CancelledError:
            stream.ended = "CANCELLED"

    def drain(self, call: Any) -> dict[str, Any]:
        """Read a stalled stream at last: what it held, and how it ended."""

        async def go() -> dict[str, Any]:
            held: dict[str, Any] = {"snapshot": None, "snapshot_bytes": 0, "changes": 0}
            try:
                while True:
                    message = await asyncio.wait_for(call.read(), DRAIN_QUIET_S)
                    if message is grpc.aio.EOF:
                        return held | {"ended": "OK"}
                    kind = message.WhichOneof("kind")
                    if kind == "snapshot":
                        held["snapshot"] = len(message.snapshot.advisories)
                        held["snapshot_bytes"] = message.ByteSize()
                    held["changes"] += kind == "change"
            except grpc.aio.AioRpcError as error:
                return held | {"ended": error.code().name}
            except TimeoutError:
                return held | {"ended": f"still open (nothing for {DRAIN_QUIET_S:g} s)"}

        return self.call(go())

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def go() -> None:
            for call in self._calls:
                call.cancel()
            await asyncio.gather(*self._readers, return_exceptions=True)
            for channel in self._channels:
                await channel.close()

        try:
            self.call(go())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def delivered(streams: Sequence[Stream], expected: int) -> bool:
    """Wait until every stream has read ``expected`` changes; False if some never did."""
    return wait(lambda: all(len(s.got) >= expected for s in streams), "", DELIVERY_WAIT_S)
