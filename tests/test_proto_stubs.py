"""The committed stubs are exactly what scripts/gen-proto makes from proto/ today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "processor" / "advisories" / "v1"


def test_stubs_are_current(tmp_path: Path) -> None:
    out = tmp_path / "v1"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(out)],
        check=True,
        capture_output=True,
    )
    made = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    kept = {p.name: p.read_bytes() for p in COMMITTED.iterdir() if p.suffix in (".py", ".pyi")}
    assert sorted(made) == sorted(kept)
    stale = [name for name in made if made[name] != kept[name]]
    assert not stale, f"run scripts/gen-proto and commit: {stale} differ from proto/"


def test_the_stubs_import_as_part_of_the_package() -> None:
    from processor.advisories.v1 import advisories_pb2, advisories_pb2_grpc

    assert advisories_pb2.DESCRIPTOR.package == "mcp_breaker.v1"
    assert advisories_pb2.DESCRIPTOR.name == "mcp_breaker/v1/advisories.proto"
    assert hasattr(advisories_pb2_grpc, "AdvisoriesStub")
    assert hasattr(advisories_pb2_grpc, "AdminStub")
