"""Live span capture from the real MCP SDKs, for the main project's tests.

Each stack lives in its own virtualenv (``<repo>/.venv-live-<stack>/``, built from
``requirements-<stack>.txt``) because their pins conflict. ``run_capture`` runs the stack's
``client_<stack>.py`` there: it launches the matching tool server over stdio, lists tools,
makes six calls under one ``capture.agent_turn`` span, and both processes export their spans
over OTLP/gRPC to the endpoint given.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LIVE_DIR = Path(__file__).resolve().parent
REPO = LIVE_DIR.parents[1]
STACKS: tuple[str, ...] = ("mcp2", "fastmcp3", "traceloop", "logfire")
# Agent frameworks, each driven by its own scripted test model (client_<framework>.py, the
# scenario in frameworks_common.py) against server_frameworks.py over stdio.
FRAMEWORKS: tuple[str, ...] = (
    "pydantic_ai",
    "openai_agents",
    "strands",
    "langgraph",
    "vercel_ai6",
    "vercel_ai7",
)
_STAMP = ".live-stamp"
# Variables that would leak the caller's telemetry or interpreter set-up into the stacks.
_DROPPED_ENV_PREFIXES = (
    "OTEL_",
    "LOGFIRE_",
    "TRACELOOP_",
    "FASTMCP_",
    "OPENINFERENCE_",
    "OPENAI_",
    "STRANDS_",
    "LANGCHAIN_",
    "LANGSMITH_",
    "PYTHON",
    "VIRTUAL_ENV",
)


def venv_dir(stack: str) -> Path:
    return REPO / f".venv-live-{stack}"


def requirements(stack: str) -> Path:
    if stack not in STACKS + FRAMEWORKS:
        known = ", ".join(STACKS + FRAMEWORKS)
        raise ValueError(f"unknown stack {stack!r}; known: {known}")
    return LIVE_DIR / f"requirements-{stack}.txt"


def _digest(stack: str) -> str:
    text = requirements(stack).read_bytes() + sys.version.encode()
    return hashlib.sha256(text).hexdigest()


@contextmanager
def _locked(stack: str) -> Iterator[None]:
    """One builder per venv, even across concurrent test processes."""
    key = hashlib.sha256(str(venv_dir(stack)).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"mcp-breaker-live-{key}.lock"
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_venv(stack: str) -> Path:
    """The python of the stack's venv, (re)built when its requirements file has changed."""
    venv = venv_dir(stack)
    python = venv / "bin" / "python"
    digest = _digest(stack)
    stamp = venv / _STAMP
    with _locked(stack):
        if python.exists() and stamp.exists() and stamp.read_text() == digest:
            return python
        print(f"live: building {venv.name} from {requirements(stack).name}", flush=True)
        stamp.unlink(missing_ok=True)
        _run([sys.executable, "-m", "venv", "--clear", str(venv)], "create the venv")
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, "-r", str(requirements(stack))], f"install {requirements(stack).name}")
        stamp.write_text(digest)
    return python


def _run(command: list[str], what: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"live: could not {what} (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_ENV_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_capture(
    stack: str,
    endpoint: str,
    *,
    turn_id: str | None = None,
    timeout_s: float = 120,
    client: str | None = None,
) -> dict[str, Any]:
    """Run the stack's capture client (``client_<client or stack>.py``) against
    ``endpoint``; return its ``result.json``.

    The result holds ``trace_id`` (hex, of the turn span), ``turn_id``, ``tools_listed``
    and ``calls``: per call ``call``, ``arguments``, ``isError``, ``text``, ``raised``.
    """
    extra = ["--turn-id", turn_id] if turn_id is not None else []
    return _run_client(stack, client or stack, endpoint, extra, timeout_s)


def run_framework(
    framework: str, endpoint: str, *, simple: bool = False, timeout_s: float = 180
) -> dict[str, Any]:
    """Run ``client_<framework>.py`` in its venv against ``endpoint``; its result.json.

    The result holds ``trace_ids`` (hex, of each agent run), ``calls`` (what the framework
    handed the model for each tool call), ``final`` and ``versions``.
    """
    return _run_client(framework, framework, endpoint, ["--simple"] if simple else [], timeout_s)


def _run_client(
    stack: str, client: str, endpoint: str, extra: list[str], timeout_s: float
) -> dict[str, Any]:
    python = ensure_venv(stack)
    with tempfile.TemporaryDirectory(prefix=f"live-{stack}-") as tmp:
        out = Path(tmp) / "result.json"
        command = [str(python), str(LIVE_DIR / f"client_{client}.py")]
        command += ["--endpoint", endpoint, "--out", str(out), *extra]
        proc = subprocess.Popen(
            command,
            cwd=tmp,
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: a timeout ends the server too
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            message = f"live {stack} client timed out after {timeout_s}s:\n{stderr}"
            raise RuntimeError(message) from None
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(
                f"live {stack} client failed (exit {proc.returncode}):\n{stderr}\n{stdout}"
            )
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def ensure_venvs(stacks: tuple[str, ...] = STACKS) -> dict[str, Path]:
    """``ensure_venv`` for several stacks at once (cold builds overlap)."""
    with ThreadPoolExecutor(max_workers=len(stacks) or 1) as pool:
        return dict(zip(stacks, pool.map(ensure_venv, stacks), strict=True))
