"""The console script: --help, check-config, print-config, and bad configuration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from processor.cli import main


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "processor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize("command", [[], ["serve"], ["check-config"], ["print-config"]])
def test_help_reads_well_everywhere(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: mcp-breaker")
    assert "--help" in result.stdout


def test_check_config_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("forward:\n  endpoint: collector:4317\n")
    result = run("check-config", str(path))
    assert result.returncode == 0
    assert result.stdout.strip() == f"{path}: valid"


def test_check_config_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("forward:\n  endpoint: collector\n  queue:\n    consumers: ten\n")
    result = run("check-config", str(path))
    assert result.returncode == 1
    assert "mcp-breaker: invalid configuration:\n" in result.stderr
    assert "forward.queue.consumers: expected an integer, got 'ten' (from file bad.yaml)" in (
        result.stderr
    )


def test_check_config_warns_about_unknown_environment_variables(tmp_path: Path) -> None:
    """A typo in a variable is named with the right name; the file is still valid."""
    import os

    path = tmp_path / "ok.yaml"
    path.write_text("forward:\n  endpoint: collector:4317\n")
    env = {**os.environ, "MCP_BREAKER_FORWARD_ENDPNT": "x:1"}
    result = run("check-config", str(path), env=env)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "mcp-breaker: warning: environment variable MCP_BREAKER_FORWARD_ENDPNT: not a "
        "setting; ignored (did you mean MCP_BREAKER_FORWARD_ENDPOINT?)"
    ]


def test_a_bad_configuration_comes_with_the_environment_warnings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The typo may be why a value is wrong: both are shown, the warning first."""
    monkeypatch.setenv("MCP_BREAKER_FORWARD_TIMEOUT", "2")
    assert main(["serve", "--set", "forward.timeout_s=0"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "mcp-breaker: warning: environment variable MCP_BREAKER_FORWARD_TIMEOUT: not a "
        "setting; ignored (did you mean MCP_BREAKER_FORWARD_TIMEOUT_S?)"
    )
    assert err[1:] == [
        "mcp-breaker: invalid configuration:",
        "  - forward.timeout_s: must be positive, got 0.0",
    ]


def test_serve_refuses_to_start_on_bad_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--set", "forward.timeout_s=0"]) == 1
    assert "forward.timeout_s: must be positive, got 0.0" in capsys.readouterr().err


def test_print_config_shows_the_effective_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["print-config", "--set", "forward.queue.max_spans=7"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["forward"]["queue"]["max_spans"] == 7
    assert printed["receivers"]["grpc"]["endpoint"] == "0.0.0.0:4317"


def test_environment_reaches_the_console_script(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS": "-1"}
    result = run("print-config", env=env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "mcp-breaker: invalid configuration:",  # not "in FILE": the value is not from one
        "  - forward.queue.max_spans: must be positive, got -1 "
        "(from environment variable MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS)",
    ]


def test_secrets_never_reach_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """Tokens and forward headers: print-config shows their shape, errors say where."""
    secret_settings = [
        "--set",
        "advisories.tokens=s3cr3t-token-a=acme,s3cr3t-token-b=globex",
        "--set",
        "advisories.admin_tokens=s3cr3t-admin",
        "--set",
        "forward.headers=authorization=Bearer s3cr3t-header",
    ]
    assert main(["print-config", *secret_settings]) == 0
    out = capsys.readouterr().out
    assert "s3cr3t" not in out
    printed = yaml.safe_load(out)
    assert sorted(printed["advisories"]["tokens"].values()) == ["acme", "globex"]
    assert printed["advisories"]["admin_tokens"] == ["<redacted>"]
    assert printed["forward"]["headers"] == {"authorization": "<redacted>"}

    assert main(["print-config", "--set", "advisories.tokens=s3cr3t-a=acme,s3cr3t-b"]) == 1
    err = capsys.readouterr().err
    assert "advisories.tokens: not a valid key=value list" in err and "s3cr3t" not in err
