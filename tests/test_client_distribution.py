"""clients/python as a harness installs it: a fresh virtual environment with the client
alone (its lock, then the client from a copy of its folder), which holds none of the
service's dependencies and nothing of the service, passes the client's own tests, and
runs the client's examples against a real mcp-breaker."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import LOOPBACK, ServiceThread, make_config

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "clients" / "python"
INSTALL_TIMEOUT_S = 600  # a cold pip cache downloads some 40 wheels
RUN_TIMEOUT_S = 120

pytestmark = pytest.mark.slow


class Venv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "bin" / "python"

    def run(self, *args: str | Path, cwd: Path, timeout_s: float = RUN_TIMEOUT_S) -> str:
        """Run the venv's python; its output, or the test fails with it. The working
        directory is outside the repository, so nothing of it is importable by accident."""
        done = subprocess.run(
            [str(self.python), *map(str, args)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={"PATH": f"{self.root / 'bin'}:/usr/bin:/bin", "PYTHONNOUSERSITE": "1"},
        )
        assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's folder alone, away from the repository: it builds from what it holds."""
    copy = tmp_path_factory.mktemp("client") / "python"
    shutil.copytree(CLIENT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return copy


@pytest.fixture(scope="module")
def venv(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("harness") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    made = Venv(root)
    pip = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    lock = source / "requirements.lock"
    made.run(*pip, "--require-hashes", "-r", lock, cwd=root, timeout_s=INSTALL_TIMEOUT_S)
    made.run(*pip, "--no-deps", source, cwd=root, timeout_s=INSTALL_TIMEOUT_S)
    yield made


def installed(venv: Venv) -> set[str]:
    listing = venv.run("-m", "pip", "list", "--format", "json", cwd=venv.root)
    return {canonicalize_name(p["name"]) for p in json.loads(listing)}


def test_the_client_alone_has_none_of_the_services_own_dependencies(venv: Venv) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    service = {canonicalize_name(Requirement(d).name) for d in project["dependencies"]}
    have = installed(venv)
    assert "mcp-breaker-client" in have and "mcp" in have  # the client and its [mcp] extra
    assert "mcp-breaker" not in have
    # What only the service needs: none of it came with the client or its extras.
    own = {"redis", "hiredis", "aiohttp", "pyyaml", "zstandard", "tqdm", "stringzilla"}
    own |= {"prometheus-client", "cachetools", "grpcio-status", "grpcio-health-checking"}
    assert own <= service  # the list above is the service's, as pyproject.toml says
    assert not have & own, have & own


def test_nothing_of_the_service_is_importable_and_every_client_module_is(venv: Venv) -> None:
    """Every module of the client imports (but the framework adapters, whose frameworks
    are extras not installed here); ``processor`` is nowhere."""
    script = (
        "import importlib, importlib.util, pkgutil, mcp_breaker_client as c\n"
        "assert importlib.util.find_spec('processor') is None\n"
        "names = [m.name for m in pkgutil.walk_packages(c.__path__, 'mcp_breaker_client.')]\n"
        "skip = {'mcp_breaker_client.pydantic_ai', 'mcp_breaker_client.openai_agents'}\n"
        "for name in names:\n"
        "    if name not in skip: importlib.import_module(name)\n"
        "import sys\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'processor']\n"
        "print(len(names), c.__file__)\n"
    )
    count, where = venv.run("-c", script, cwd=venv.root).split()
    assert int(count) > 15
    assert Path(where).is_relative_to(venv.root)  # the installed copy, not the repository's


def test_the_clients_own_tests_pass_in_it(venv: Venv, source: Path) -> None:
    out = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", source / "tests", cwd=source)
    assert re.search(r"\b\d{2,} passed\b", out), out
    assert "failed" not in out and "error" not in out


def test_the_examples_run_against_a_real_service(venv: Venv, source: Path) -> None:
    """dead_tool.py: each turn's repeat refused at once, the tool out from the fourth
    turn; watch_advisories.py then shows its circuit open."""
    running = ServiceThread(make_config())
    try:
        advisory_port = f"{LOOPBACK}:{running.service.ports['advisories']}"
        examples = source / "examples"
        out = venv.run(examples / "dead_tool.py", running.grpc_endpoint, advisory_port, cwd=source)
        lines = out.splitlines()
        assert lines[0] == "turn 1, call 1: called, failed: upstream MCP session is closed"
        assert lines[1].startswith("turn 1, call 2: refused: ") and "unavailable" in lines[1]
        called = [line.split(":")[0] for line in lines if ": called," in line]
        assert called == ["turn 1, call 1", "turn 2, call 1", "turn 3, call 1"]
        assert lines[6].startswith("turn 4, call 1: refused: ")
        assert lines[-1] == "the dead tool was called 3 times for 10 calls the model asked for"

        watched = venv.run(examples / "watch_advisories.py", advisory_port, cwd=source)
        assert re.search(r"^SCOPE_TOOL browser/navigate STATE_OPEN: ", watched, re.M), watched
    finally:
        running.stop()
