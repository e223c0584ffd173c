"""The container image, checked without a Docker daemon (none runs on these machines).

hadolint lints the Dockerfile; the rest reads it: a pinned slim base that runs the Python
these tests run on, a non-root numeric user that the chart's pod runs as, the entrypoint
the chart relies on, nothing but the built environment in the final stage. The wheel the
build stage installs is built here from the same build context, and inspected.
"""

from __future__ import annotations

import email
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from processor import __version__
from tests.helm_chart import CHART_DIR, ROOT, one, render

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT = Path(sys.executable).parent / "hadolint"
# An exact release of the official image (major.minor.patch and a variant), optionally by
# digest too; never a floating tag such as 3.11-slim or latest.
PINNED = re.compile(r"^python:(?P<version>\d+\.\d+)\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?$")
BUILD_TOOLS = re.compile(r"\b(apt-get|apk|gcc|g\+\+|make|build-essential|pip|wheel)\b")


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    """The Dockerfile's stages, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            base, _, name = args.partition(" AS ")
            found.append(Stage(base=base.strip(), name=name.strip()))
        else:
            assert found, f"{keyword} before the first FROM"
            found[-1].instructions.append((keyword, args.strip()))
    return found


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_the_base_is_pinned_and_runs_the_tested_python() -> None:
    bases = {stage.base for stage in stages()}
    assert len(bases) == 1, f"the stages differ in base: {bases} (the venv moves between them)"
    (base,) = bases
    pinned = PINNED.match(base)
    assert pinned, f"{base}: pin an exact python:X.Y.Z-slim-<release> tag"
    assert pinned["version"] == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_final_stage_runs_the_entrypoint_as_the_charts_user() -> None:
    build, final = stages()
    assert build.name and f"--from={build.name}" in " ".join(final.all("COPY"))
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["mcp-breaker", "serve"]
    assert final.all("CMD") == []
    (user,) = final.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) > 0 and int(gid) > 0
    pod = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    security = pod["podSecurityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (int(uid), int(gid))
    assert security["runAsNonRoot"] is True
    # The ports it exposes are the chart's.
    exposed = {int(port) for line in final.all("EXPOSE") for port in line.split()}
    ports = one(render({}), "Deployment")["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert exposed == {p["containerPort"] for p in ports}


def test_no_build_tool_runs_in_the_final_stage() -> None:
    _, final = stages()
    for command in final.all("RUN"):
        assert not BUILD_TOOLS.search(command), f"the final stage runs {command!r}"
    # It takes only the built environment from the build stage, not the sources.
    assert [c for c in final.all("COPY") if not c.startswith("--from=")] == []


def build_context(tmp_path: Path) -> Path:
    """What `docker build .` sends: what .dockerignore lets in and the Dockerfile copies."""
    rules = [line for line in DOCKERIGNORE.read_text().splitlines() if line and line[0] != "#"]
    assert rules[0] == "*", ".dockerignore starts from nothing and lets files in"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    build, _ = stages()
    copied = {src for args in build.all("COPY") for src in args.split()[:-1]}
    copied = {src.removeprefix("./").rstrip("/") for src in copied}
    assert copied == allowed, f"the Dockerfile copies {copied}, .dockerignore lets in {allowed}"
    context = tmp_path / "context"
    context.mkdir()
    for name in sorted(allowed):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, context / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, context / name)
    return context


NAMES = ("mcp_breaker", "mcp_breaker_client")  # the service's wheel, the client's
SOURCES = ("./clients/python", ".")


def test_the_build_context_builds_the_wheels_the_image_installs(tmp_path: Path) -> None:
    context = build_context(tmp_path)
    dist = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), *SOURCES],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    wheel, client = (dist / f"{n}-{__version__}-py3-none-any.whl" for n in NAMES)
    assert sorted(dist.iterdir()) == sorted([wheel, client])
    build, _ = stages()
    assert "/dist/mcp_breaker_client-*.whl /dist/mcp_breaker-*.whl" in " ".join(build.all("RUN"))
    with zipfile.ZipFile(client) as archive:
        names = set(archive.namelist())
    # The client's core, which the service imports; nothing of the service in it.
    assert "mcp_breaker_client/shared/verdict.py" in names
    assert "mcp_breaker_client/v1/advisories_pb2.py" in names
    assert not [n for n in names if n.startswith(("processor/", "tests/"))]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"mcp_breaker-{__version__}.dist-info"
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert "mcp-breaker = processor.cli:main" in entry_points
    assert "processor/advisories/v1/advisories_pb2.py" in names
    assert "processor/cli.py" in names
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]
    normalise = re.compile(r"\s+")
    assert sorted(normalise.sub("", r) for r in required) == sorted(
        normalise.sub("", r) for r in project["dependencies"]
    )


@pytest.mark.timeout(600)  # pip fetches the locked files (from its cache, once warm)
def test_the_image_lock_installs_as_the_build_stage_installs_it(tmp_path: Path) -> None:
    """The build stage's `pip install --require-hashes -r requirements/service.lock`, as
    pip would run it in an empty environment: every pin found, every file's hash right."""
    context = build_context(tmp_path)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"),
            *("--require-hashes", "-r", "requirements/service.lock"),
            *("--quiet", "--report", str(tmp_path / "report.json")),
        ],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    names = {item["metadata"]["name"].lower() for item in report["install"]}
    assert {"grpcio", "protobuf", "redis", "opentelemetry-proto"} <= names
