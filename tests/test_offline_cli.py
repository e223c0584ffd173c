"""``mcp-breaker analyze`` as a user meets it: --help, exit codes, messages that say what to
fix, standard input, and a progress bar on a terminal only."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from processor.offline import run
from processor.offline.command import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXTRA_HINT,
    parse_time,
)
from processor.server import TICK_INTERVAL_S
from tests.offline_support import analyze
from tests.otlp_file import encode, otlp_json
from tests.seed_window import write_seed_window
from tests.test_seed_replay import harness_calls


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_seed_window(tmp_path_factory.mktemp("cli"))


def test_help_reads_well() -> None:
    result = analyze("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: mcp-breaker analyze")
    for words in ("exit codes:", "--sweep", "--since", "--format", "examples:", "standard input"):
        assert words in result.stdout


def test_the_top_level_help_names_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "processor", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "analyze" in result.stdout and "recorded traces" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "--since: not an ISO 8601 time or Unix seconds: 'yesterday'"),
        (["--until", "2026-13-01"], "--until: not an ISO 8601 time"),
        (
            ["--since", "2026-08-18T02:00Z", "--until", "2026-08-18T01:00Z"],
            "--until: must be later than --since",
        ),
        (["--reorder-window", "0"], "--reorder-window: must be positive, got 0"),
        (
            ["--sweep", "forward.endpoint=a,b"],
            "--sweep forward.endpoint: does not change the analysis",
        ),
        (["--sweep", "breaker.min_calls=2,x"], "breaker.min_calls: expected an integer, got 'x'"),
        (["--sweep", "breaker.nope=1"], "--sweep breaker.nope: unknown key"),
        (["--set", "breaker.min_calls=0"], "breaker.min_calls: must be positive, got 0"),
        (["--sweep", "a=1", "--sweep", "b=1", "--sweep", "c=1"], "--sweep: at most 2 keys"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_bad_settings_say_what_to_fix(seed: Path, args: list[str], message: str) -> None:
    result = analyze(str(seed), *args)
    assert result.returncode == EXIT_FAILED
    assert message in result.stderr
    assert result.stdout == ""


def test_nothing_readable_is_a_failure(tmp_path: Path) -> None:
    result = analyze(str(tmp_path / "missing.json"))
    assert result.returncode == EXIT_FAILED
    assert f"{tmp_path / 'missing.json'}: no such file or directory" in result.stderr
    assert "no input could be read" in result.stderr


def test_unreadable_lines_are_named_and_the_rest_is_analysed(tmp_path: Path) -> None:
    good = otlp_json(encode(harness_calls("t1", [(1, 10**18)])))
    path = tmp_path / "traces.json"
    path.write_bytes(
        good + b"\n{not json\n" + good.replace(b'"traceId":"', b'"traceId":"zz') + b"\n"
    )
    result = analyze(str(path), "--format", "json")
    assert result.returncode == EXIT_PARTIAL
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"mcp-breaker analyze: {path}:2: not valid JSON")
    assert lines[1].startswith(f"mcp-breaker analyze: {path}:3: resourceSpans[0]")
    assert "must be hex" in lines[1]
    report = json.loads(result.stdout)
    assert report["input"]["skipped"]["count"] == 2
    assert report["input"]["skipped"]["first"][0].startswith(f"{path}:2: not valid JSON")
    assert report["calls"]["calls"] == 1  # line 1 was analysed


def test_standard_input(seed: Path) -> None:
    data = gzip.compress(seed.read_bytes())
    result = analyze("-", "--format", "json", stdin=data)
    assert result.returncode == EXIT_OK, result.stderr
    report = json.loads(result.stdout)
    assert report["input"]["files"][0]["name"] == "-"
    assert report["input"]["spans"] == 42


def test_an_output_that_cannot_be_written(seed: Path, tmp_path: Path) -> None:
    result = analyze(str(seed), "--output", str(tmp_path / "no" / "such" / "dir" / "r.txt"))
    assert result.returncode == EXIT_FAILED
    assert "--output" in result.stderr and "No such file or directory" in result.stderr


def test_html_without_its_extra_says_how_to_install_it(seed: Path, tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from processor.cli import main\n"
        f"sys.exit(main(['analyze', {str(seed)!r}, '--format', 'html', '-o', 'r.html']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == EXIT_FAILED
    assert "pip install -e '.[analyze]'" in result.stderr  # works as printed, in a checkout
    assert EXTRA_HINT in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_quiet_when_not_a_terminal(seed: Path) -> None:
    result = analyze(str(seed), "--output", os.devnull)
    assert result.returncode == EXIT_OK and result.stderr == ""


def test_a_progress_bar_on_a_terminal(seed: Path) -> None:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "processor", "analyze", str(seed), "--output", os.devnull],
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert process.wait(timeout=60) == EXIT_OK
    assert b"reading:" in shown and b"B/s" in shown  # bytes read, of the file's size


def test_times_in_the_forms_people_write() -> None:
    assert parse_time("2026-08-18T00:20:00Z") == 1_787_012_400 * 10**9
    assert parse_time("2026-08-18 00:20") == 1_787_012_400 * 10**9  # naive: UTC
    assert parse_time("2026-08-18T02:20:00+02:00") == 1_787_012_400 * 10**9
    assert parse_time("1787012400.5") == 1_787_012_400_500_000_000


def test_the_replay_ticks_as_often_as_the_service() -> None:
    assert run.TICK_INTERVAL_S == TICK_INTERVAL_S
