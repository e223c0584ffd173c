"""Prometheus's own binaries for tests: a real server scraping on loopback, and promtool.

Both are looked up on ``PATH`` (Debian's ``prometheus`` package installs them). A missing
binary fails the test with a message saying so: these tests are never skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import LOOPBACK, free_port, terminate, wait_until

LOG_TAIL_LINES = 60


def binary(name: str) -> str:
    """The path of one of Prometheus's binaries, or a failed test naming what is missing."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"`{name}` is not on PATH: this test runs Prometheus's own `{name}` "
            "(Debian/Ubuntu: apt-get install prometheus; or put the release binaries on PATH)",
            pytrace=False,
        )
    return found


def promtool_check_metrics(exposition: str) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` on a classic text exposition, read from stdin."""
    return subprocess.run(
        [binary("promtool"), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class PrometheusServer:
    """``prometheus`` as a subprocess: its own config, TSDB and log under ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[str],
        *,
        job: str = "mcp-breaker",
        rule_files: Sequence[Path] = (),
    ) -> None:
        self.workdir = workdir
        self.job = job
        self.port = free_port()
        self.config_path = workdir / "prometheus.yml"
        self.log_path = workdir / "prometheus.log"
        quoted = ", ".join(json.dumps(target) for target in targets)
        rules = "".join(f"  - {json.dumps(str(path))}\n" for path in rule_files)
        # Every two seconds, so a test waits seconds for a scrape, not a minute; rules are
        # evaluated as often. The timeout is the whole interval: a service in the test's
        # process can be slow to answer on a loaded machine, and a dropped scrape loses
        # the sample a test may look for (a series' first zero).
        self.config_path.write_text(
            "global:\n"
            "  scrape_interval: 2s\n"
            "  scrape_timeout: 2s\n"
            "  evaluation_interval: 2s\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + "scrape_configs:\n"
            f"  - job_name: {json.dumps(job)}\n"
            "    static_configs:\n"
            f"      - targets: [{quoted}]\n"
        )
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout_s: float = 60) -> PrometheusServer:
        command = [
            binary("prometheus"),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'tsdb'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--enable-feature=exemplar-storage",
        ]
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        wait_until(self._ready, timeout_s, what=f"Prometheus to be ready\n{self.log_tail()}")
        return self

    def _ready(self) -> bool:
        process = self._process
        assert process is not None
        if process.poll() is not None:
            raise AssertionError(
                f"prometheus exited with status {process.returncode}\n{self.log_tail()}"
            )
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def stop(self) -> None:
        process, self._process = self._process, None
        terminate(process)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if not self.log_path.exists():
            return "(no Prometheus log)"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "--- Prometheus log (last lines) ---\n" + "\n".join(text)

    # -- the HTTP API -------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """``data`` of a successful ``/api/v1/...`` answer; an error says what Prometheus said."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            raise AssertionError(f"GET {url}: {error.code} {error.read().decode()}") from error
        if body.get("status") != "success":
            raise AssertionError(f"GET {url}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: ``[{"metric": {...}, "value": [ts, "1"]}, ...]``."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The one value an instant query gives, or None while it gives nothing."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, f"{expr} gave {len(result)} series: {result}"
        return float(result[0]["value"][1])

    def exemplars(self, expr: str) -> list[dict[str, Any]]:
        """``/api/v1/query_exemplars`` over all time: ``[{"seriesLabels", "exemplars"}]``."""
        result: list[dict[str, Any]] = self.api("query_exemplars", query=expr)
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """``/api/v1/alerts``: the alerts pending or firing, with ``activeAt``."""
        result: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return active

    def target_metadata(self, metric: str) -> list[dict[str, Any]]:
        """What the scrape said about a metric family: its type, help and unit."""
        result: list[dict[str, Any]] = self.api("targets/metadata", metric=metric)
        return result
