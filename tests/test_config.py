"""The configuration: defaults, precedence, coercion and validation messages."""

from __future__ import annotations

import enum
import re
from pathlib import Path

import pytest
import yaml

from processor.config import (
    Compression,
    ForwardProtocol,
    QueueStorage,
    ServiceConfig,
    env_var_name,
    grpc_target,
    leaf_keys,
    load_config,
    unknown_environment,
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

    def test_every_problem_of_every_kind_is_reported_at_once(self, tmp_path: Path) -> None:
        """Unknown keys, types and ranges in one pass: a file is fixed in one round."""
        path = tmp_path / "bad.yaml"
        path.write_text(
            "forward:\n  timeout_s: soon\n  queue: {max_spans: -5}\n"
            "breaker: {failure_ratio: 1.5}\n"
            "receivers: {http: {endpoint: 'h:99999'}}\n"
            "recievers: {}\n"
        )
        problems = problems_of(path=path, overrides=["forward.queue.consumers=ten"])
        assert problems == [
            "recievers: unknown key (did you mean receivers?)",
            "forward.timeout_s: expected a number, got 'soon' (from file bad.yaml)",
            "forward.queue.consumers: expected an integer, got 'ten' (from --set "
            "forward.queue.consumers)",
            "receivers.http.endpoint: must be host:port with a port from 0 to 65535, got "
            "'h:99999' (from file bad.yaml)",
            "forward.queue.max_spans: must be positive, got -5 (from file bad.yaml)",
            "breaker.failure_ratio: must be in (0, 1], got 1.5 (from file bad.yaml)",
        ]

    def test_an_unreadable_value_is_not_range_checked_as_its_default(self) -> None:
        """The range check runs on the default in its place: no second line about it."""
        problems = problems_of(
            overrides=["forward.retry.max_interval_s=later", "forward.retry.multiplier=0.5"]
        )
        assert problems == [
            "forward.retry.max_interval_s: expected a number, got 'later' "
            "(from --set forward.retry.max_interval_s)",
            "forward.retry.multiplier: must be at least 1, got 0.5",
        ]

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
            ("forward:\n  queue: 5\n", "forward.queue: is a section, not a value"),
        ],
        ids=["list", "broken-yaml", "scalar-for-section"],
    )
    def test_bad_files(self, tmp_path: Path, text: str, expected: str) -> None:
        path = tmp_path / "c.yaml"
        path.write_text(text)
        assert any(expected in p for p in problems_of(path=path))

    @pytest.mark.parametrize(
        ("source", "expected"),
        [
            (
                {"text": "telemetry: true\n"},
                "telemetry: is a section, not a value: set the keys under it "
                "(telemetry.enabled, telemetry.metrics_endpoint, "
                "telemetry.ready_probe_timeout_s, ...); got True (from file c.yaml)",
            ),
            (
                {"overrides": ["forward=x"]},
                "forward: is a section, not a value: set the keys under it (forward.endpoint, "
                "forward.protocol, forward.compression, ...); got a value (from --set forward)",
            ),
            (
                {"overrides": ["forward.queue=5"]},
                "forward.queue: is a section, not a value: set the keys under it "
                "(forward.queue.max_spans, forward.queue.max_bytes, forward.queue.consumers, "
                "...); got '5' (from --set forward.queue)",
            ),
            (
                {"text": "advisories:\n  tls: s3cr3t\n"},
                "advisories.tls: is a section, not a value: set the keys under it "
                "(advisories.tls.cert_file, advisories.tls.key_file, "
                "advisories.tls.client_ca_file); got 's3cr3t' (from file c.yaml)",
            ),
        ],
        ids=["file", "set", "set-nested", "no-secret-below"],
    )
    def test_a_section_given_a_value_says_so(
        self, tmp_path: Path, source: dict[str, object], expected: str
    ) -> None:
        kwargs: dict[str, object] = {"overrides": source.get("overrides", [])}
        if "text" in source:
            path = tmp_path / "c.yaml"
            path.write_text(str(source["text"]))
            kwargs["path"] = path
        assert problems_of(**kwargs) == [expected]

    def test_a_section_that_may_hold_a_secret_does_not_quote_its_value(self) -> None:
        problems = problems_of(overrides=["advisories=s3cr3t-token"])
        assert len(problems) == 1 and "got a value" in problems[0]
        assert "s3cr3t" not in problems[0]

    def test_an_empty_section_is_accepted(self, tmp_path: Path) -> None:
        """`telemetry:` with every key under it commented out is no section at all."""
        path = tmp_path / "c.yaml"
        path.write_text("telemetry:\n  # enabled: false\nforward:\n  queue:\n")
        assert load_config(path=path) == ServiceConfig()

    def test_duplicate_keys_are_refused_naming_both_lines(self, tmp_path: Path) -> None:
        path = tmp_path / "dup.yaml"
        path.write_text(
            "forward:\n"
            "  endpoint: first:4317\n"
            "  queue:\n"
            "    max_spans: 10\n"
            "    max_spans: 20\n"
            "  endpoint: second:4317\n"
            "log: {level: info}\n"
            "log: {level: debug}\n"
        )
        assert problems_of(path=path) == [
            "forward.queue.max_spans: given twice in dup.yaml (lines 4 and 5); keep one",
            "forward.endpoint: given twice in dup.yaml (lines 2 and 6); keep one",
            "log: given twice in dup.yaml (lines 7 and 8); keep one",
        ]

    def test_a_merge_key_may_be_overridden(self, tmp_path: Path) -> None:
        """YAML merges (`<<: *base`) exist to be overridden: that is not a duplicate."""
        path = tmp_path / "merge.yaml"
        path.write_text(
            "x-retry: &retry {initial_interval_s: 1, max_interval_s: 4}\n"
            "forward:\n  retry:\n    <<: *retry\n    max_interval_s: 8\n"
        )
        with pytest.raises(ConfigError) as caught:  # x-retry is not a key of ours
            load_config(path=path)
        assert caught.value.problems == ["x-retry: unknown key"]
        path.write_text("forward:\n  retry: &r {max_interval_s: 8}\n")
        assert load_config(path=path).forward.retry.max_interval_s == 8.0

    def test_missing_file(self, tmp_path: Path) -> None:
        problems = problems_of(path=tmp_path / "nope.yaml")
        assert len(problems) == 1 and re.search(r"cannot read .*nope\.yaml", problems[0])


def test_environment_variable_names_derive_from_the_path() -> None:
    assert env_var_name(("forward", "queue", "max_spans")) == "MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS"


class TestUnknownEnvironment:
    """Variables under our prefix that set nothing: warned about, with the closest name."""

    def test_a_typo_is_named_with_a_suggestion(self) -> None:
        assert unknown_environment({"MCP_BREAKER_FORWARD_ENDPNT": "x"}) == [
            "environment variable MCP_BREAKER_FORWARD_ENDPNT: not a setting; ignored "
            "(did you mean MCP_BREAKER_FORWARD_ENDPOINT?)"
        ]

    def test_every_unknown_variable_is_named(self) -> None:
        warnings = unknown_environment(
            {"MCP_BREAKER_LOG_LEVL": "debug", "MCP_BREAKER_ZZZ": "1", "MCP_BREAKER_FORWARD": "x"}
        )
        assert len(warnings) == 3, warnings
        assert warnings[0].startswith(
            "environment variable MCP_BREAKER_FORWARD: names the section forward, not a setting"
        )
        assert "(did you mean MCP_BREAKER_LOG_LEVEL?)" in warnings[1]
        assert warnings[2].endswith("MCP_BREAKER_ZZZ: not a setting; ignored")

    @pytest.mark.parametrize(
        "name",
        [
            "MCP_BREAKER_FORWARD_ENDPOINT",  # a setting
            "MCP_BREAKER_TOKEN",  # mcp-breaker status's bearer token
            "MCP_BREAKER_SERVICE_HOST",  # Kubernetes, for a Service named mcp-breaker
            "MCP_BREAKER_SERVICE_PORT",
            "MCP_BREAKER_SERVICE_PORT_OTLP_GRPC",
            "MCP_BREAKER_PORT",
            "MCP_BREAKER_PORT_4317_TCP",
            "MCP_BREAKER_PORT_4317_TCP_ADDR",
            "MCP_BREAKER_ADVISORIES_PORT_4320_TCP_PORT",  # a Service mcp-breaker-advisories
            "MCP_BREAKERS",  # not our prefix
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ],
    )
    def test_what_is_not_a_typo_is_not_warned_about(self, name: str) -> None:
        assert unknown_environment({name: "x"}) == []

    def test_an_unknown_variable_does_not_stop_loading(self) -> None:
        """A warning, not an error: the prefix is shared (see unknown_environment)."""
        assert load_config(environ={"MCP_BREAKER_FORWARD_ENDPNT": "x"}) == ServiceConfig()


def test_every_yaml_example_in_the_docs_is_a_valid_configuration(tmp_path: Path) -> None:
    docs = Path(__file__).parents[1] / "docs"
    blocks = [
        (page.name, block)
        for page in sorted(docs.glob("*.md"))
        for block in re.findall(r"^```yaml\n(.*?)^```", page.read_text(), re.S | re.M)
    ]
    assert len(blocks) >= 2, blocks
    for name, block in blocks:
        # The Collector's configuration, or the Helm chart's values: not ours.
        if block.startswith(("# otelcol:", "# helm values:")):
            assert isinstance(yaml.safe_load(block), dict), f"docs/{name}: not YAML"
            continue
        path = tmp_path / "example.yaml"
        path.write_text(block)
        try:
            load_config(path=path)
        except ConfigError as error:
            pytest.fail(f"docs/{name}: a YAML example is not valid: {error.problems}")


class TestSharedState:
    """state.*: the Redis every replica shares, validated before anything starts."""

    def test_the_default_is_this_process_alone(self) -> None:
        assert load_config().state.backend.value == "memory"

    @pytest.mark.parametrize(
        ("override", "problem"),
        [
            ("state.redis.url=ftp://cache:6379", "must start with redis://, rediss:// or unix://"),
            ("state.redis.url=redis://user:hunter2@cache:6379/0", "must not hold a password"),
            ("state.redis.ca_file=/ca.pem", "only for a rediss:// (TLS) url"),
            ("state.redis.timeout_s=0", "state.redis.timeout_s: must be positive"),
            ("state.redis.key_prefix=two words", "state.redis.key_prefix: must be a word"),
        ],
    )
    def test_a_bad_redis_setting_is_named(self, override: str, problem: str) -> None:
        (found,) = problems_of(overrides=["state.backend=redis", override])
        assert problem in found
        assert "hunter2" not in found  # a password in the url is never quoted back

    def test_the_password_is_a_secret(self, capsys: pytest.CaptureFixture[str]) -> None:
        from processor.cli import main

        env = {"MCP_BREAKER_STATE_REDIS_PASSWORD": "hunter2"}
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            assert main(["print-config", "--set", "state.backend=redis"]) == 0
        printed = capsys.readouterr().out
        assert "hunter2" not in printed and "password: <redacted>" in printed
        assert load_config(environ=env).state.redis.password == "hunter2"

    def test_password_and_password_file_go_one_at_a_time(self) -> None:
        (found,) = problems_of(
            overrides=[
                "state.backend=redis",
                "state.redis.password=p",
                "state.redis.password_file=/run/secrets/redis",
            ]
        )
        assert "one at a time" in found and "p," not in found


class TestForwardEndpointAndQueue:
    """The endpoint as the OpenTelemetry SDK writes it, TLS files, and the disk queue."""

    @pytest.mark.parametrize(
        ("endpoint", "insecure", "target"),
        [
            ("collector:4317", True, ("collector:4317", False)),
            ("collector:4317", False, ("collector:4317", True)),
            ("http://collector:4317", False, ("collector:4317", False)),  # the scheme wins
            ("https://collector:4317", True, ("collector:4317", True)),
            ("HTTPS://collector:4317/", True, ("collector:4317", True)),
            ("http://[::1]:4317", True, ("[::1]:4317", False)),
        ],
    )
    def test_a_scheme_decides_tls_as_in_the_sdk(
        self, endpoint: str, insecure: bool, target: tuple[str, bool]
    ) -> None:
        assert grpc_target(endpoint, insecure) == target
        config = load_config(
            overrides=[f"forward.endpoint={endpoint}", f"forward.insecure={insecure}"]
        )
        assert config.forward.tls is target[1]

    @pytest.mark.parametrize(
        ("endpoint", "expected"),
        [
            (
                "ftp://collector:4317",
                "forward.endpoint: unsupported scheme 'ftp' in 'ftp://collector:4317'; an "
                "OTLP/gRPC endpoint is host:port, http://host:port (plaintext) or "
                "https://host:port (TLS)",
            ),
            (
                "http://collector:4318/v1/traces",
                "forward.endpoint: an OTLP/gRPC endpoint has no path, got "
                "'http://collector:4318/v1/traces' (for OTLP/HTTP to /v1/traces, set "
                "forward.protocol: http)",
            ),
            (
                "http://collector",
                "forward.endpoint: must be host:port with a port from 0 to 65535, got 'collector'",
            ),
        ],
    )
    def test_an_endpoint_that_cannot_work_is_refused(self, endpoint: str, expected: str) -> None:
        assert problems_of(overrides=[f"forward.endpoint={endpoint}"]) == [expected]

    def test_tls_files_need_tls_and_each_other(self) -> None:
        plain = problems_of(
            overrides=["forward.endpoint=c:4317", "forward.ca_file=ca.pem", "forward.cert_file=c"]
        )
        assert plain == [
            "forward: cert_file and key_file go together, got only one",
            "forward.ca_file: set, but 'c:4317' is not reached over TLS (use https://, or "
            "insecure: false for a host:port gRPC endpoint)",
            "forward.cert_file: set, but 'c:4317' is not reached over TLS (use https://, or "
            "insecure: false for a host:port gRPC endpoint)",
        ]
        tls = load_config(
            overrides=[
                "forward.endpoint=https://c:4317",
                "forward.ca_file=ca.pem",
                "forward.cert_file=c.pem",
                "forward.key_file=k.pem",
            ]
        )
        assert tls.forward.tls

    def test_the_disk_queue_needs_a_directory_and_a_next_hop(self) -> None:
        assert problems_of(overrides=["forward.queue.storage=disk"]) == [
            "forward.queue.storage: disk needs forward.endpoint: without a next hop spans "
            "are released, never queued",
            "forward.queue.directory: must be set when forward.queue.storage is disk (a "
            "directory the service can write, on a volume that outlives the process)",
        ]
        config = load_config(
            overrides=[
                "forward.endpoint=c:4317",
                "forward.queue.storage=disk",
                "forward.queue.directory=/var/lib/mcp-breaker",
                "forward.queue.fsync=true",
            ]
        )
        assert config.forward.queue.storage is QueueStorage.DISK

    def test_disk_settings_with_the_memory_queue_are_refused_not_ignored(self) -> None:
        problems = problems_of(
            overrides=["forward.queue.directory=/var/lib/q", "forward.queue.fsync=true"]
        )
        assert problems == [
            "forward.queue.directory: only used by the disk queue, got '/var/lib/q' with "
            "forward.queue.storage memory (set forward.queue.storage: disk, or remove it)",
            "forward.queue.fsync: only used by the disk queue, got true with "
            "forward.queue.storage memory (set forward.queue.storage: disk, or remove it)",
        ]


def test_the_redis_stream_must_keep_the_longest_window_a_restarted_replica_replays() -> None:
    from processor.config.state import Backend, RedisConfig, StateConfig, retention_problems

    def problems(backend: Backend, retain_s: float) -> list[str]:
        state = StateConfig(backend=backend, redis=RedisConfig(retain_s=retain_s))
        return retention_problems(state, needed_s=7200.0, needed_by="breaker.window_s")

    assert problems(Backend.REDIS, 3600.0) == [
        "state.redis.retain_s: must be at least breaker.window_s (7200.0), the longest "
        "window a restarting replica replays, got 3600.0"
    ]
    assert problems(Backend.REDIS, 7200.0) == []  # exactly enough
    assert problems(Backend.REDIS, 86400.0) == []
    assert problems(Backend.MEMORY, 3600.0) == []  # no stream to keep
    assert problems(Backend.REDIS, 0.0) == []  # RedisConfig.validate reports it already
    # The defaults agree with each other: two hours kept, an hour looked back over.
    assert (
        retention_problems(StateConfig(backend=Backend.REDIS), needed_s=3600.0, needed_by="x") == []
    )
