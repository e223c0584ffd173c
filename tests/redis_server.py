"""A real ``redis-server`` for tests (Debian's package; ``scripts/_system.sh`` installs it):
started on a free loopback port in a directory of its own, with nothing persisted."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import LOOPBACK, free_port, terminate, wait_until


class RedisServer:
    def __init__(self, workdir: Path, port: int | None = None, *, password: str = "") -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.password = password  # requirepass: clients must AUTH with it
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(
                "redis-server is not on PATH (Debian/Ubuntu: apt-get install redis-server)",
                pytrace=False,
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "redis.log").open("ab")
        self._process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                LOOPBACK,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--protected-mode",
                "no",
                *(["--requirepass", self.password] if self.password else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._answers, 30, "redis-server to answer")
        return self

    def _answers(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(f"redis-server exited: {self._process.returncode}")
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                # Behind a password PING is refused, but answered: the server is up.
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is saved (and nothing was to be)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        # The port may take a moment to be free again.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                try:
                    sock.bind((LOOPBACK, self.port))
                    return
                except OSError:
                    time.sleep(0.05)

    def stop(self) -> None:
        process, self._process = self._process, None
        terminate(process)
