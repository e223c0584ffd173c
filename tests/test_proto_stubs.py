"""The committed stubs, the service's and the client's, are exactly what scripts/gen-proto
makes from proto/ today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each distribution carries its own copy: the client installs without the service.
COMMITTED = {
    "service": ROOT / "processor" / "advisories" / "v1",
    "client": ROOT / "clients" / "python" / "mcp_breaker_client" / "v1",
}


@pytest.mark.parametrize("which", sorted(COMMITTED))
def test_stubs_are_current(which: str, tmp_path: Path) -> None:
    out = tmp_path / "v1"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(out)],
        check=True,
        capture_output=True,
    )
    made = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    kept = {
        p.name: p.read_bytes() for p in COMMITTED[which].iterdir() if p.suffix in (".py", ".pyi")
    }
    assert sorted(made) == sorted(kept)
    stale = [name for name in made if made[name] != kept[name]]
    assert not stale, f"run scripts/gen-proto and commit: {stale} differ from proto/"


def test_the_stubs_import_as_part_of_the_package() -> None:
    from processor.advisories.v1 import advisories_pb2, advisories_pb2_grpc

    assert advisories_pb2.DESCRIPTOR.package == "mcp_breaker.v1"
    assert advisories_pb2.DESCRIPTOR.name == "mcp_breaker/v1/advisories.proto"
    assert hasattr(advisories_pb2_grpc, "AdvisoriesStub")
    assert hasattr(advisories_pb2_grpc, "AdminStub")


def test_both_copies_in_one_process_are_one_set_of_messages() -> None:
    """The service's tests run the client beside it: the two copies register the same
    file, and a message made with one is the other's."""
    from mcp_breaker_client.v1 import advisories_pb2 as client_pb

    from processor.advisories.v1 import advisories_pb2 as service_pb

    assert client_pb.Advisory is service_pb.Advisory
    assert isinstance(client_pb.Advisory(server="s"), service_pb.Advisory)
