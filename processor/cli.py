"""The ``mcp-breaker`` console script."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import enum
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from processor import __version__
from processor.config import ServiceConfig, env_var_name, load_config, unknown_environment
from processor.errors import ConfigError
from processor.offline import command as analyze_command
from processor.telemetry import logs

log = logging.getLogger(__name__)

DESCRIPTION = """\
mcp-breaker: an OpenTelemetry hop that reads MCP tool calls in flight.

It receives OTLP traces (gRPC on 4317, HTTP on 4318), analyses the MCP spans, forwards
every span to the next hop, serves Prometheus metrics (9464) and pushes circuit-open
advisories to the harnesses that subscribe (4320). 'mcp-breaker analyze' replays traces
you already recorded and reports what it would have done.

Settings come from, lowest precedence first: built-in defaults, a YAML file
(--config), MCP_BREAKER_* environment variables, and --set flags.
Run 'mcp-breaker print-config' to see every key and its value.
"""


def _add_config_flags(parser: argparse.ArgumentParser, *, file_required: bool = False) -> None:
    if file_required:
        parser.add_argument("config", metavar="FILE", help="YAML configuration file to check")
    else:
        parser.add_argument("--config", metavar="FILE", help="YAML configuration file")
    parser.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one key, e.g. --set forward.endpoint=collector:4317 (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-breaker",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-breaker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve_parser = commands.add_parser(
        "serve",
        help="run the processor",
        description="Receive OTLP traces, analyse MCP spans, forward every span. "
        "Stops on SIGTERM or SIGINT after draining its queue. Exit status: 0 when every "
        "accepted span was delivered, given up on (counted and logged) or kept on the disk "
        "queue; 1 when the configuration or start-up failed; 3 when spans accepted into "
        "the memory queue could not be delivered before the shutdown grace period ended.",
    )
    _add_config_flags(serve_parser)
    serve_parser.add_argument(
        "--forward-endpoint",
        metavar="ENDPOINT",
        help="next OTLP hop: host:port, http://host:port (plaintext) or https://host:port "
        "(TLS), as the OpenTelemetry SDK writes it (same as --set forward.endpoint=...); "
        "empty: analyse and release",
    )
    serve_parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="log verbosity"
    )
    serve_parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes sharing the receiver ports, one core each (same as --set "
        "server.workers=N); more than one needs state.backend: redis",
    )

    check = commands.add_parser(
        "check-config",
        help="validate a configuration file without starting",
        description="Validate FILE (with the environment and --set applied) and exit: "
        "0 when valid, 1 with one line per problem otherwise.",
    )
    _add_config_flags(check, file_required=True)

    state = commands.add_parser(
        "status",
        help="show the open circuits of a running service",
        description="Ask a running mcp-breaker (its advisory port) what is out right now, "
        "and print it as a table: worst first, with the cause and since when. The cause is "
        "shown in full when the terminal has room (and always when the output is not a "
        "terminal); --wide adds columns and never cuts; --output json prints GetState's "
        "reply (docs/advisories.md, 'mcp-breaker status').",
    )
    state.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json"],
        default="table",
        help="table (default), wide, or json: the same data as the GetState call",
    )
    state.add_argument(
        "--wide",
        action="store_const",
        const="wide",
        dest="output",
        help="the same as --output wide",
    )
    state.add_argument(
        "--target",
        default="127.0.0.1:4320",
        metavar="HOST:PORT",
        help="the service's advisory port (default: %(default)s)",
    )
    state.add_argument(
        "--token-env",
        default="MCP_BREAKER_TOKEN",
        metavar="VAR",
        help="environment variable holding the bearer token (default: %(default)s); "
        "a token is never taken on the command line, where ps would show it",
    )
    state.add_argument("--tls-ca", metavar="FILE", help="CA certificate: connect with TLS")
    state.add_argument(
        "--tls-cert", metavar="FILE", help="client certificate, for a port with mutual TLS"
    )
    state.add_argument("--tls-key", metavar="FILE", help="the client certificate's key")

    analyze_command.add_parser(commands, _add_config_flags)

    show = commands.add_parser(
        "print-config",
        help="print the effective configuration as YAML",
        description="Print every key with its effective value and its environment variable.",
    )
    _add_config_flags(show)
    return parser


def _overrides(args: argparse.Namespace) -> list[str]:
    overrides = list(args.overrides)
    if getattr(args, "forward_endpoint", None) is not None:
        overrides.append(f"forward.endpoint={args.forward_endpoint}")
    if getattr(args, "log_level", None) is not None:
        overrides.append(f"log.level={args.log_level}")
    if getattr(args, "workers", None) is not None:
        overrides.append(f"server.workers={args.workers}")
    return overrides


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _print_config(config: ServiceConfig) -> None:
    print("# Effective configuration. Each key can also be set by an environment variable,")
    print(f"# e.g. forward.endpoint by {env_var_name(('forward', 'endpoint'))}.")
    plain = _plain(config)
    # Tokens are secrets: show how many there are and their tenants, never their text.
    advisories = plain["advisories"]
    advisories["tokens"] = {
        f"<redacted {n}>": tenant for n, tenant in enumerate(config.advisories.tokens.values(), 1)
    }
    advisories["admin_tokens"] = ["<redacted>"] * len(config.advisories.admin_tokens)
    plain["forward"]["headers"] = {name: "<redacted>" for name in config.forward.headers}
    if config.state.redis.password:
        plain["state"]["redis"]["password"] = "<redacted>"
    print(yaml.safe_dump(plain, sort_keys=False), end="")


def _status(args: argparse.Namespace) -> int:
    import grpc  # here, not at the top: the other commands start without gRPC's imports

    from processor.advisories.status import Layout, status

    token = os.environ.get(args.token_env) or None
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    try:
        text = status(
            args.target,
            token=token,
            ca_file=args.tls_ca,
            cert_file=args.tls_cert,
            key_file=args.tls_key,
            layout=Layout(args.output),
            width=width,
        )
        print(text, end="")
    except grpc.RpcError as error:
        code = error.code()
        print(f"mcp-breaker status: {args.target}: {code.name}: {error.details()}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"mcp-breaker status: {error.filename}: {error.strerror}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "status":
        return _status(args)
    if args.command == "analyze":
        return analyze_command.main(args)
    warnings = unknown_environment(os.environ)
    try:
        config = load_config(path=args.config, environ=os.environ, overrides=_overrides(args))
    except ConfigError as error:
        _print_warnings(warnings)
        # Not "in FILE": a problem may come from the environment; each names its origin.
        print("mcp-breaker: invalid configuration:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    if args.command != "serve":
        _print_warnings(warnings)
    if args.command == "check-config":
        print(f"{args.config}: valid")
        return 0
    if args.command == "print-config":
        _print_config(config)
        return 0
    logs.configure(config.log.level)
    for warning in warnings:  # in the service's log, where an operator looks
        log.warning("%s", warning)
    if config.server.workers > 1:
        from processor.workers import supervise

        return asyncio.run(supervise(config))
    from processor.server import serve

    return asyncio.run(serve(config))


def _print_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"mcp-breaker: warning: {warning}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
