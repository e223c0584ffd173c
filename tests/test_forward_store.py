"""The disk queue's store: real SQLite and segment files in a temporary directory, reopened
as a restart would; and the forwarder on it, against a real gRPC next hop."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from processor.config import load_config
from processor.errors import QueueStorageError, StartupError
from processor.forward import segments as segments_module
from processor.forward import store as store_module
from processor.forward.queue import Admission, Forwarder
from processor.forward.senders import GrpcSender
from processor.forward.store import FILE_NAME, LOCK_NAME, DiskStore, MemoryStore
from processor.inflight.stage import Prepared, StagePath
from processor.request.sender import Sender
from processor.telemetry.metrics import SelfMetrics
from tests.poison import sender_request, span_id
from tests.support import CaptureCollector


def batch(first: int, count: int = 10, peer: str = "ipv4:10.0.0.1:5000") -> Prepared:
    payload = sender_request("svc", first, count)
    return Prepared(payload, count, 0, "", StagePath.PASSTHROUGH, Sender(peer=peer, tenant="t"))


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 60))


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{segments_module.SUFFIX}"))


def test_what_was_appended_and_not_removed_is_there_after_a_reopen(tmp_path: Path) -> None:
    async def first_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        assert store.recovered() == []
        held = [await store.append(batch(i * 10)) for i in range(5)]
        assert [h.key for h in held] == sorted(h.key for h in held)
        assert await store.payloads(held[1:3]) == [batch(10).payload, batch(20).payload]
        await store.remove(held[:2])
        # Span data: the service's user alone may read it, the write-ahead log included.
        names = [FILE_NAME, f"{FILE_NAME}-wal", f"{FILE_NAME}-shm", LOCK_NAME]
        names += [p.name for p in segment_files(tmp_path)]
        assert len(names) == 5
        for name in names:
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
        await store.close()

    async def second_run() -> None:
        store = DiskStore(str(tmp_path), fsync=True)
        recovered = store.recovered()
        assert [(h.span_count, h.size) for h in recovered] == [
            (10, len(batch(i * 10).payload)) for i in (2, 3, 4)
        ]
        assert recovered[0].sender == Sender(peer="ipv4:10.0.0.1:5000", tenant="t")
        assert await store.payloads(recovered) == [batch(i * 10).payload for i in (2, 3, 4)]
        await store.close()

    run(first_run)
    run(second_run)


def test_a_directory_it_creates_is_the_services_alone(tmp_path: Path) -> None:
    asyncio.run(DiskStore(str(tmp_path / "queue"), fsync=False).close())
    assert (tmp_path / "queue").stat().st_mode & 0o777 == 0o700


def test_appends_made_together_are_committed_together(tmp_path: Path) -> None:
    """Group commit: many requests waiting while one commit runs share the next one, and
    deletes share the commits of appends."""
    transactions: list[tuple[int, int]] = []  # (removals, appends) of each

    async def scenario() -> None:
        store = DiskStore(str(tmp_path), fsync=True)
        commit = store._commit

        def counting(removals: list[int], batches: list[Prepared]) -> list[int]:
            transactions.append((len(removals), len(batches)))
            return commit(removals, batches)

        store._commit = counting  # type: ignore[method-assign]
        held = await asyncio.gather(*(store.append(batch(i * 10)) for i in range(50)))
        assert len({h.key for h in held}) == 50
        assert [h.payload for h in held] == [batch(i * 10).payload for i in range(50)]
        transactions.clear()
        await asyncio.gather(store.remove(held[:10]), store.append(batch(500)))
        assert transactions == [(10, 1)]
        await store.close()

    run(scenario)
    assert len(transactions) == 1


def test_checkpoints_keep_the_log_from_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint every few commits, off the writer; the log starts again after each."""
    every_four_commits = 4 * store_module.COMMIT_PAGES * store_module.PAGE_SIZE_BYTES
    monkeypatch.setattr(store_module, "WAL_CHECKPOINT_BYTES", every_four_commits)
    wal = tmp_path / f"{FILE_NAME}-wal"

    async def scenario() -> int:
        store = DiskStore(str(tmp_path), fsync=False)
        largest = 0
        for i in range(300):
            held = await store.append(batch(i * 10))
            await store.remove([held])
            largest = max(largest, wal.stat().st_size)
        await store.append(batch(5000))  # left for the next start
        await store.close()
        return largest

    largest = run(scenario)
    # 300 commits of appends and as many of deletes write some 600 pages without a
    # checkpoint; the log never held more than a few dozen.
    assert 0 < largest < 60 * store_module.PAGE_SIZE_BYTES
    reopened = DiskStore(str(tmp_path), fsync=False)
    assert [h.span_count for h in reopened.recovered()] == [10]
    asyncio.run(reopened.close())


def test_the_bytes_are_written_to_a_segment_once_and_not_into_the_database(
    tmp_path: Path,
) -> None:
    payload = batch(0).payload

    async def scenario() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        await store.append(batch(0))
        await store.close()

    run(scenario)
    [segment] = segment_files(tmp_path)
    assert segment.read_bytes().count(payload) == 1
    for name in (FILE_NAME, f"{FILE_NAME}-wal"):
        path = tmp_path / name
        assert not path.exists() or payload not in path.read_bytes(), name


def test_a_segment_is_deleted_once_its_requests_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments_module, "SEGMENT_BYTES", 2 * len(batch(0).payload))

    async def scenario() -> None:
        store = DiskStore(str(tmp_path), fsync=True)
        held = [await store.append(batch(i * 10)) for i in range(10)]
        assert len(segment_files(tmp_path)) == 5  # two requests each
        await store.remove(held[:5])  # returns once their deletes are committed
        # The first two segments held only delivered requests; the third still holds one.
        assert len(segment_files(tmp_path)) == 3
        await store.remove(held[5:])
        await store.append(batch(100))  # left for the next start
        await store.close()

    run(scenario)
    reopened = DiskStore(str(tmp_path), fsync=False)
    assert [h.span_count for h in reopened.recovered()] == [10]
    asyncio.run(reopened.close())
    assert len(segment_files(tmp_path)) == 1  # the one that holds it


def test_a_segment_left_by_a_commit_that_never_happened_is_deleted(tmp_path: Path) -> None:
    asyncio.run(DiskStore(str(tmp_path), fsync=False).close())
    orphan = tmp_path / segments_module.segment_name(7)
    orphan.write_bytes(b"written before a crash, its rows never committed")
    asyncio.run(DiskStore(str(tmp_path), fsync=False).close())
    assert not orphan.exists()


def test_a_request_whose_bytes_are_not_on_disk_is_an_error_naming_the_segment(
    tmp_path: Path,
) -> None:
    """As after a power loss without fsync: the rows survived, the bytes did not."""

    async def first_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        for i in range(2):
            await store.append(batch(i * 10))
        await store.close()

    run(first_run)
    [segment] = segment_files(tmp_path)
    size = segment.stat().st_size
    segment.write_bytes(bytes(size // 2))  # zeros where the first request was, then nothing

    async def second_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        first, second = store.recovered()
        for held, problem in ((first, "does not hold request"), (second, "does not hold")):
            with pytest.raises(QueueStorageError, match=problem) as caught:
                await store.payloads([held])
            assert segment.name in str(caught.value)
        await store.close()

    run(second_run)
    segment.unlink()

    async def third_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)  # starts: the error is when it is read
        with pytest.raises(QueueStorageError, match="is missing"):
            await store.payloads(store.recovered())
        await store.close()

    run(third_run)


def test_a_queue_written_by_the_previous_layout_is_read(tmp_path: Path) -> None:
    """Layout 1 kept the bytes in the rows: they are sent from there, new ones go to
    segments, and both survive the next restart."""
    old = sqlite3.connect(tmp_path / FILE_NAME)
    old.execute(store_module._SCHEMA)
    old.execute(
        "INSERT INTO requests (spans, size, peer, tenant, payload) VALUES (?, ?, ?, ?, ?)",
        (10, len(batch(0).payload), "ipv4:10.0.0.1:5000", "t", batch(0).payload),
    )
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()

    async def first_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        [left] = store.recovered()
        assert left.sender == Sender(peer="ipv4:10.0.0.1:5000", tenant="t")
        new = await store.append(batch(10))
        assert new.key > left.key
        assert await store.payloads([left]) == [batch(0).payload]
        await store.close()

    async def second_run() -> None:
        store = DiskStore(str(tmp_path), fsync=False)
        recovered = store.recovered()
        assert await store.payloads(recovered) == [batch(0).payload, batch(10).payload]
        await store.remove(recovered)
        await store.close()

    run(first_run)
    run(second_run)
    assert DiskStore(str(tmp_path), fsync=False).recovered() == []


def test_more_than_it_keeps_in_memory_is_read_back_from_disk(tmp_path: Path) -> None:
    two = len(batch(0).payload) + len(batch(10).payload)

    async def scenario() -> None:
        store = DiskStore(str(tmp_path), fsync=False, memory_limit_bytes=two)
        held = [await store.append(batch(i * 10)) for i in range(3)]
        assert [h.payload is None for h in held] == [False, False, True]
        assert await store.payloads(held) == [batch(i * 10).payload for i in range(3)]
        await store.remove(held[:2])  # room in memory again
        fourth = await store.append(batch(30))
        assert fourth.payload == batch(30).payload
        await store.close()

    run(scenario)


def test_a_second_process_cannot_open_the_same_queue(tmp_path: Path) -> None:
    store = DiskStore(str(tmp_path), fsync=False)
    try:
        code = (
            "import sys; from processor.forward.store import DiskStore\n"
            "from processor.errors import StartupError\n"
            "try:\n    DiskStore(sys.argv[1], fsync=False)\n"
            "except StartupError as e:\n    print(e); sys.exit(7)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
        )
    finally:
        asyncio.run(store.close())
    assert result.returncode == 7, result.stderr
    assert "forward.queue.directory:" in result.stdout
    assert "is in use by another process" in result.stdout


def test_a_file_that_is_not_a_queue_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(
        b"this is not an SQLite database, but it is long enough" * 40
    )
    with pytest.raises(StartupError, match=r"forward\.queue\.directory: .* move it aside"):
        DiskStore(str(tmp_path), fsync=False)


def test_a_database_of_another_layout_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / FILE_NAME)
    db.execute("CREATE TABLE requests (x)")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(StartupError, match="layout 99"):
        DiskStore(str(tmp_path), fsync=False)


def test_a_directory_under_a_file_is_a_startup_error(tmp_path: Path) -> None:
    """Runs as root too: no permission can make a directory inside a regular file."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(StartupError, match=r"forward\.queue\.directory: cannot create"):
        DiskStore(str(tmp_path / "file" / "queue"), fsync=False)


def test_the_memory_store_keeps_the_bytes_in_its_entries() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        held = await store.append(batch(0))
        assert held.payload == batch(0).payload
        assert await store.payloads([held]) == [batch(0).payload]
        assert store.recovered() == [] and not store.durable

    run(scenario)


class TestForwarderOnDisk:
    def forwarder(
        self,
        hop: CaptureCollector,
        directory: Path,
        *overrides: str,
        registry: CollectorRegistry | None = None,
    ) -> Forwarder:
        config = load_config(
            overrides=[
                f"forward.endpoint={hop.endpoint}",
                "forward.queue.storage=disk",
                f"forward.queue.directory={directory}",
                "forward.queue.consumers=1",
                *overrides,
            ]
        ).forward
        store = DiskStore(config.queue.directory, fsync=config.queue.fsync)
        metrics = SelfMetrics(registry or CollectorRegistry())
        return Forwarder(config, GrpcSender(config), metrics, store=store)

    def left_at_shutdown(self, next_hop: CaptureCollector, directory: Path) -> Any:
        """A run that takes 4 requests of 10 spans and stops while the next hop stalls:
        its drain report. The next hop is released for the next run."""
        next_hop.stall()

        async def first_run() -> Any:
            forwarder = self.forwarder(next_hop, directory)
            forwarder.start()
            for i in range(4):
                assert await forwarder.offer(batch(i * 10)) is Admission.ACCEPTED
            return await forwarder.drain(0.2)

        report = run(first_run)
        next_hop.release()
        return report

    def test_what_is_left_at_shutdown_is_kept_and_sent_by_the_next_run(
        self, next_hop: CaptureCollector, tmp_path: Path
    ) -> None:
        report = self.left_at_shutdown(next_hop, tmp_path)
        # Kept, not lost: nothing counted as undelivered, everything said to be on disk.
        assert (report.undelivered_spans, report.kept_spans, report.kept_batches) == (0, 40, 4)
        assert next_hop.span_count() == 0

        async def second_run() -> Any:
            forwarder = self.forwarder(next_hop, tmp_path)
            assert (forwarder.recovered_spans, forwarder.recovered_batches) == (40, 4)
            assert forwarder.stats().spans == 40
            forwarder.start()
            return await forwarder.drain(10)

        report = run(second_run)
        assert report.delivered_spans == 40 and report.kept_spans == 0
        assert {s.span_id for s in next_hop.spans()} == {span_id(i) for i in range(40)}
        assert DiskStore(str(tmp_path), fsync=False).recovered() == []

    def test_the_disk_queue_is_bounded_in_bytes_like_the_memory_queue(
        self, next_hop: CaptureCollector, tmp_path: Path
    ) -> None:
        three = sum(len(batch(i * 10).payload) for i in range(3))
        next_hop.stall()

        async def scenario() -> None:
            forwarder = self.forwarder(next_hop, tmp_path, f"forward.queue.max_bytes={three}")
            forwarder.start()
            for i in range(3):
                assert await forwarder.offer(batch(i * 10)) is Admission.ACCEPTED
            assert await forwarder.offer(batch(30)) is Admission.QUEUE_FULL
            assert forwarder.stats().bytes == three
            next_hop.release()
            while forwarder.stats().spans:
                await asyncio.sleep(0.01)
            assert await forwarder.offer(batch(30)) is Admission.ACCEPTED
            await forwarder.drain(10)

        run(scenario)
        assert next_hop.span_count() == 40

    def test_a_request_whose_bytes_are_lost_takes_no_other_with_it(
        self, next_hop: CaptureCollector, tmp_path: Path
    ) -> None:
        """After a power loss without fsync, one row may survive whose bytes did not: that
        request is given up, counted; the ones sent with it in one export are delivered."""
        assert self.left_at_shutdown(next_hop, tmp_path).kept_batches == 4
        db = sqlite3.connect(tmp_path / FILE_NAME)
        rows = db.execute("SELECT segment, position FROM requests ORDER BY id").fetchall()
        db.close()
        assert len({segment for segment, _ in rows}) == 1  # read back as one export
        segment, position = rows[1]
        with open(tmp_path / segments_module.segment_name(segment), "r+b") as damaged:
            damaged.seek(position)
            damaged.write(bytes(4))  # the second request's record no longer begins there
        registry = CollectorRegistry()

        async def second_run() -> Any:
            forwarder = self.forwarder(next_hop, tmp_path, registry=registry)
            forwarder.start()
            return await forwarder.drain(10)

        report = run(second_run)
        assert report.delivered_spans == 30
        delivered = {s.span_id for s in next_hop.spans()}
        assert delivered == {span_id(i) for i in (*range(10), *range(20, 40))}
        given_up = registry.get_sample_value(
            "mcp_breaker_exporter_send_failed_spans_total", {"reason": "storage"}
        )
        assert given_up == 10
        assert DiskStore(str(tmp_path), fsync=False).recovered() == []
