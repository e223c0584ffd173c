"""Run the commands a page of the docs shows, as a reader would, and check what they print.

A page marks each block to run with an HTML comment just above its fence (invisible once
rendered); a group name in parentheses lets one page hold several independent sessions:

    <!-- doc-test: run -->                      a shell block; must exit 0
    <!-- doc-test: background, ready at URL --> a shell block left running; ready when
                                                URL answers; Ctrl-C (SIGINT) at the end
    <!-- doc-test: python -->                   a Python block, run by this Python
    <!-- doc-test: output -->                   what the block before it printed
    <!-- doc-test: log -->                      what the background block prints, by now
    <!-- doc-test(install): run -->             the same, in the session "install"

An ``output`` or ``log`` block matches when each of its lines matches a line printed, in
any order: runs of spaces match any spaces, ``…`` matches any text. The default ports are
replaced by free ones in every block (and in the URL), and the environment points the
service and the OpenTelemetry SDK at them, so a page written for a person, with the
default ports, runs on a machine where those ports are taken.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from processor.config import env_var_name
from tests.support import LISTEN_KEYS, LOOPBACK, free_port

DEFAULT_PORTS = {"grpc": 4317, "http": 4318, "advisories": 4320, "telemetry": 9464}
RUN_TIMEOUT_S = 600.0  # a block that installs packages takes minutes on a cold cache
READY_TIMEOUT_S = 600.0  # ./scripts/serve installs the project into .venv on its first run
LOG_TIMEOUT_S = 30.0

_MARKED = re.compile(
    r"^<!-- doc-test(?:\((?P<group>[\w-]+)\))?: (?P<spec>.*?) -->\n"
    r"```(?P<lang>\w*)\n(?P<body>.*?)^```",
    re.M | re.S,
)


@dataclass(frozen=True)
class Block:
    kind: str  # run, background, python, output, log
    options: str  # what follows the kind, e.g. "ready at http://..."
    body: str
    line: int  # where the block starts on its page, for messages


def blocks(page: Path, group: str = "") -> list[Block]:
    """The marked blocks of ``page`` in ``group`` ("" is the unnamed one), in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _MARKED.finditer(text):
        if (match["group"] or "") != group:
            continue
        kind, _, options = match["spec"].partition(",")
        found.append(
            Block(
                kind.strip(), options.strip(), match["body"], text.count("\n", 0, match.start()) + 1
            )
        )
    return found


def pattern_of(line: str) -> re.Pattern[str]:
    parts = re.split(r"(…|\s+)", line.strip())
    regex = "".join(
        ".+?" if part == "…" else r"\s+" if part.isspace() else re.escape(part) for part in parts
    )
    return re.compile(regex)


def unmatched(sample: str, printed: str) -> list[str]:
    """The lines of ``sample`` that match no line of ``printed``."""
    lines = [line.strip() for line in printed.splitlines()]
    return [
        line
        for line in sample.splitlines()
        if line.strip() and not any(pattern_of(line).fullmatch(p) for p in lines)
    ]


class DocSession:
    """One reader's session: free ports, the environment, a background process or none."""

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str | None] | None = None,
        *,
        python: str | Path = sys.executable,
    ) -> None:
        """``env``: set (None: removed) over this process's environment; ``python``: what
        runs a ``python`` block (a newcomer's is the checkout's .venv/bin/python)."""
        self.cwd = cwd
        self.python = str(python)
        self.ports = {name: free_port() for name in DEFAULT_PORTS}
        merged = {**os.environ, **(env or {})}
        self.env = {name: value for name, value in merged.items() if value is not None}
        for name, port in self.ports.items():
            self.env[env_var_name(tuple(LISTEN_KEYS[name].split(".")))] = f"{LOOPBACK}:{port}"
        self.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://localhost:{self.ports['grpc']}"
        self._background: subprocess.Popen[str] | None = None
        self._background_output: list[str] = []
        self._last_output = ""
        # The last block ran in the background: an output block waits for its log.
        self._after_background = False

    def substitute(self, text: str) -> str:
        for name, default in DEFAULT_PORTS.items():
            text = re.sub(rf"\b{default}\b", str(self.ports[name]), text)
        return text

    def run(self, block: Block) -> None:
        body = self.substitute(block.body)
        where = f"the block at line {block.line}"
        if block.kind == "run":
            self._last_output = self._finish(["bash", "-eo", "pipefail", "-c", body], where)
        elif block.kind == "python":
            self._last_output = self._finish([self.python, "-c", body], where)
        elif block.kind == "background":
            self._start(body, self.substitute(block.options.removeprefix("ready at ").strip()))
        elif block.kind == "output" and self._after_background:
            # What a background block printed before it answered may still be in the pipe
            # (the reading thread lags on a busy machine): waited for, as a log is.
            self._wait_for_log(body, where)
        elif block.kind == "output":
            missing = unmatched(body, self._last_output)
            assert not missing, f"{where}: not printed: {missing}\nprinted:\n{self._last_output}"
        elif block.kind == "log":
            self._wait_for_log(body, where)
        else:
            raise AssertionError(f"{where}: unknown doc-test kind {block.kind!r}")

    def _finish(self, command: list[str], where: str) -> str:
        self._after_background = False  # what is printed now is this block's
        result = subprocess.run(
            command,
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        printed = result.stdout + result.stderr
        assert result.returncode == 0, f"{where} exited {result.returncode}:\n{printed}"
        return printed

    def _start(self, body: str, ready_url: str) -> None:
        assert self._background is None, "one background block per session"
        # A session of its own: Ctrl-C reaches the whole process group, as in a terminal.
        process = subprocess.Popen(
            ["bash", "-c", body],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._background = process
        threading.Thread(target=self._collect, args=(process,), daemon=True).start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(ready_url):
            assert process.poll() is None, f"the background block exited:\n{self.log}"
            assert time.monotonic() < deadline, f"{ready_url} never answered:\n{self.log}"
            time.sleep(0.1)
        self._after_background = True

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._background_output.append(line)

    @property
    def log(self) -> str:
        return "".join(self._background_output)

    def _wait_for_log(self, sample: str, where: str) -> None:
        deadline = time.monotonic() + LOG_TIMEOUT_S
        while missing := unmatched(sample, self.log):
            assert time.monotonic() < deadline, f"{where}: not logged: {missing}\n{self.log}"
            time.sleep(0.1)

    def stop(self) -> int | None:
        """Ctrl-C for the background block; its exit status (None: there was none)."""
        process, self._background = self._background, None
        if process is None:
            return None
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        try:
            return process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            raise AssertionError(f"the background block ignored Ctrl-C:\n{self.log}") from None

    def __enter__(self) -> DocSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        status = self.stop()
        if kind is None and status is not None:
            assert status == 0, f"the background block exited {status} on Ctrl-C:\n{self.log}"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
