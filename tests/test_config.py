"""The configuration: defaults, precedence, coercion and validation messages."""

from __future__ import annotations

import enum
import re
from pathlib import Path

import pytest

from processor.config import (
    Compression,
    ForwardProtocol,
    ServiceConfig,
    env_var_name,
    leaf_keys,
    load_config,
)
from processor.errors import ConfigError


def as_yaml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return '""' if value == "" else "{}" if value == {} else str(value)


def problems_of(**kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(**kwargs)  # type: ignore[arg-type]
    return caught.value.problems


class TestDefaults:
    def test_empty_sources_give_the_documented_defaults(self) -> None:
        assert load_config() == ServiceConfig()

    def test_an_empty_file_gives_the_defaults(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.yaml"
        path.write_text("")
        assert load_config(path=path) == ServiceConfig()

    def test_defaults_follow_otlp_and_the_collector(self) -> None:
        config = ServiceConfig()
        assert config.receivers.grpc.endpoint == "0.0.0.0:4317"
        assert config.receivers.http.endpoint == "0.0.0.0:4318"
        assert config.telemetry.metrics_endpoint == "0.0.0.0:9464"
        assert config.receivers.grpc.max_recv_msg_bytes == 4 * 1024 * 1024
        assert config.receivers.http.max_body_bytes == 20 * 1024 * 1024
        assert config.forward.endpoint == ""
        assert config.forward.timeout_s == 5.0

    def test_every_key_is_documented(self) -> None:
        """docs/configuration.md names every key, its variable and its default."""
        doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
        rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if "| `" in line}
        for path, _, default in leaf_keys():
            row = rows.get(f"`{'.'.join(path)}`")
            assert row is not None, f"{'.'.join(path)} is not in docs/configuration.md"
            assert f"`{env_var_name(path)}`" in row
            assert f"| `{as_yaml(default)}` |" in row, (row, as_yaml(default))


class TestPrecedence:
    def test_file_then_environment_then_flags(self, tmp_path: Path) -> None:
        path = tmp_path / "c.yaml"
        path.write_text(
            "forward:\n  endpoint: file:4317\n  timeout_s: 2\n  queue:\n    consumers: 3\n"
        )
        environ = {"MCP_BREAKER_FORWARD_ENDPOINT": "env:4317", "MCP_BREAKER_FORWARD_TIMEOUT_S": "3"}
        config = load_config(path=path, environ=environ, overrides=["forward.timeout_s=4"])
        assert config.forward.endpoint == "env:4317"  # env beats file
        assert config.forward.timeout_s == 4.0  # flag beats env
        assert config.forward.queue.consumers == 3  # file beats default

    def test_environment_strings_are_coerced(self) -> None:
        environ = {
            "MCP_BREAKER_RECEIVERS_HTTP_ENABLED": "false",
            "MCP_BREAKER_FORWARD_PROTOCOL": "HTTP",
            "MCP_BREAKER_FORWARD_ENDPOINT": "http://next:4318",
            "MCP_BREAKER_FORWARD_COMPRESSION": "gzip",
            "MCP_BREAKER_FORWARD_HEADERS": "authorization=Bearer x, tenant=a",
        }
        config = load_config(environ=environ)
        assert config.receivers.http.enabled is False
        assert config.forward.protocol is ForwardProtocol.HTTP
        assert config.forward.compression is Compression.GZIP
        assert config.forward.headers == {"authorization": "Bearer x", "tenant": "a"}

    def test_unrelated_environment_is_ignored(self) -> None:
        assert load_config(environ={"MCP_BREAKER": "x", "PATH": "/bin"}) == ServiceConfig()


class TestValidation:
    @pytest.mark.parametrize(
        ("override", "expected"),
        [
            ("forward.queue.max_spans=0", "forward.queue.max_spans: must be positive, got 0"),
            (
                "forward.retry.multiplier=0.5",
                "forward.retry.multiplier: must be at least 1, got 0.5",
            ),
            (
                "forward.retry.randomization=1",
                "forward.retry.randomization: must be in [0, 1), got 1.0",
            ),
            ("receivers.grpc.endpoint=nohost", "receivers.grpc.endpoint: must be host:port"),
            ("receivers.http.endpoint=h:99999", "got 'h:99999'"),
            ("forward.endpoint=collector", "forward.endpoint: must be host:port"),
            ("forward.timeout_s=-1", "forward.timeout_s: must be positive, got -1.0"),
            (
                "forward.queue.consumers=ten",
                "forward.queue.consumers: expected an integer, got 'ten'",
            ),
            ("forward.protocol=smtp", "forward.protocol: expected one of grpc, http, got 'smtp'"),
            ("receivers.grpc.enabled=maybe", "receivers.grpc.enabled: expected true or false"),
            ("forward.endpnt=x:1", "forward.endpnt: unknown key (did you mean forward.endpoint?)"),
            ("forward.endpoint", "expected key=value"),
        ],
        ids=lambda v: v if "=" in v and len(v) < 40 else None,
    )
    def test_messages_name_the_key_and_the_bad_value(self, override: str, expected: str) -> None:
        assert any(expected in p for p in problems_of(overrides=[override]))

    def test_http_forwarding_needs_a_url(self) -> None:
        problems = problems_of(overrides=["forward.protocol=http", "forward.endpoint=next:4318"])
        assert problems == [
            "forward.endpoint: must be an http:// or https:// URL for protocol http, "
            "got 'next:4318'"
        ]

    def test_max_interval_below_initial_is_refused_not_clamped(self) -> None:
        problems = problems_of(
            overrides=["forward.retry.initial_interval_s=10", "forward.retry.max_interval_s=1"]
        )
        assert problems == [
            "forward.retry.max_interval_s: must be at least initial_interval_s (10.0), got 1.0"
        ]

    def test_both_receivers_off_is_refused(self) -> None:
        problems = problems_of(overrides=["receivers.grpc.enabled=no", "receivers.http.enabled=no"])
        assert problems == ["receivers: at least one of grpc and http must be enabled"]

    def test_every_problem_is_reported_at_once(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text("forward:\n  timeout_s: soon\n  queue: {max_spans: -5}\nrecievers: {}\n")
        problems = problems_of(path=path)
        assert len(problems) == 2, problems  # type errors stop before range checks
        assert any(p.startswith("recievers: unknown key (did you mean") for p in problems)
        assert any(
            "forward.timeout_s: expected a number, got 'soon' (from file bad.yaml)" in p
            for p in problems
        )

    def test_environment_errors_name_the_variable(self) -> None:
        problems = problems_of(environ={"MCP_BREAKER_FORWARD_QUEUE_MAX_BYTES": "lots"})
        assert problems == [
            "forward.queue.max_bytes: expected an integer, got 'lots' "
            "(from environment variable MCP_BREAKER_FORWARD_QUEUE_MAX_BYTES)"
        ]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("- a\n- b\n", "must hold a mapping at the top level"),
            ("forward: [unclosed\n", "is not valid YAML"),
            ("forward:\n  queue: 5\n", "forward.queue: unknown key"),
        ],
        ids=["list", "broken-yaml", "scalar-for-section"],
    )
    def test_bad_files(self, tmp_path: Path, text: str, expected: str) -> None:
        path = tmp_path / "c.yaml"
        path.write_text(text)
        assert any(expected in p for p in problems_of(path=path))

    def test_missing_file(self, tmp_path: Path) -> None:
        problems = problems_of(path=tmp_path / "nope.yaml")
        assert len(problems) == 1 and re.search(r"cannot read .*nope\.yaml", problems[0])


def test_environment_variable_names_derive_from_the_path() -> None:
    assert env_var_name(("forward", "queue", "max_spans")) == "MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS"
