"""The token map: inline tokens and a tokens file, read again when it changes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from processor.auth.tokens import TokenFileError, TokenMap, bearer_token, parse_tokens
from processor.errors import StartupError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str, mtime_ns: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))  # a change the map sees even within one tick


def test_lines_map_tokens_to_tenants_and_comments_are_skipped() -> None:
    text = "# who may send\n\ntokA=acme\n  tokB = globex  \n"
    assert parse_tokens(text, "tokens") == {"tokA": "acme", "tokB": "globex"}


@pytest.mark.parametrize("line", ["justatoken", "=acme"])
def test_a_bad_line_names_the_file_and_line_and_never_the_token(line: str) -> None:
    with pytest.raises(TokenFileError) as error:
        parse_tokens(f"tokA=acme\n{line}\n", "/etc/tokens")
    assert str(error.value) == "/etc/tokens line 2: expected token=tenant"
    assert "justatoken" not in str(error.value)


def test_bearer_token_reads_the_scheme_in_any_case() -> None:
    assert bearer_token("Bearer tokA") == "tokA"
    assert bearer_token("bearer  tokA ") == "tokA"
    assert bearer_token("Basic dXNlcg==") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_inline_and_file_tokens_both_map_and_unknown_ones_do_not(tmp_path: Path) -> None:
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("tokF=fromfile\n")
    tokens = TokenMap({"tokA": "acme"}, str(tokens_file))
    assert tokens.tenant("tokA") == "acme"
    assert tokens.tenant("tokF") == "fromfile"
    assert tokens.tenant("tokX") is None
    assert tokens.tenant(None) is None
    assert tokens.tenants == {"acme", "fromfile"}


def test_a_changed_file_is_read_again_after_the_reload_interval(tmp_path: Path) -> None:
    clock = FakeClock()
    tokens_file = tmp_path / "tokens"
    write(tokens_file, "tokOld=acme\n", 1)
    tokens = TokenMap({}, str(tokens_file), reload_s=5.0, clock=clock)
    write(tokens_file, "tokNew=acme\n", 2)
    assert tokens.tenant("tokOld") == "acme"  # not looked at again yet
    clock.now += 5.0
    assert tokens.tenant("tokOld") is None  # revoked without a restart
    assert tokens.tenant("tokNew") == "acme"


def test_a_broken_file_later_keeps_the_last_good_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    tokens_file = tmp_path / "tokens"
    write(tokens_file, "tokA=acme\n", 1)
    tokens = TokenMap({}, str(tokens_file), reload_s=1.0, clock=clock)
    write(tokens_file, "tokA=acme\nsecret-without-tenant\n", 2)
    clock.now += 1.0
    with caplog.at_level(logging.WARNING):
        assert tokens.tenant("tokA") == "acme"
    assert "line 2: expected token=tenant" in caplog.text
    assert "secret-without-tenant" not in caplog.text
    tokens_file.unlink()
    clock.now += 1.0
    assert tokens.tenant("tokA") == "acme"  # a file gone for a moment revokes nothing


def test_an_unreadable_file_at_start_is_a_startup_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match=r"auth.tokens_file: cannot read .*missing"):
        TokenMap({}, str(tmp_path / "missing"))
