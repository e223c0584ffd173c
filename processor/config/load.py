"""Build a ServiceConfig from a YAML file, environment variables and flags.

Precedence, lowest first: the defaults in each component's module (``receivers``,
``forward``...), the YAML file, ``MCP_BREAKER_*`` environment variables, then ``--set
key=value`` flags. Every leaf key has one environment variable, derived from its dotted
path: ``forward.queue.max_spans`` is ``MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS``. Files and the
environment are read here, once, at the edge; the components only ever see frozen
dataclasses.

Every problem is reported in one pass: unknown keys, duplicate keys in the file, values of
the wrong type and values out of range together, so a person fixes a file once. A value
that cannot be read leaves its default in place for the range checks, and any range
problem about that key is left out (the type problem already names it).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from processor.config.service import ServiceConfig
from processor.errors import ConfigError

ENV_PREFIX = "MCP_BREAKER_"
# Keys whose values are secrets: never quoted in an error message (nor by print-config).
SECRET_KEYS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("advisories", "tokens"),
        ("advisories", "admin_tokens"),
        ("forward", "headers"),
        ("state", "redis", "password"),
    }
)

Leaf = tuple[str, ...]

# Variables under our prefix that are not settings, and are not typos either:
# ``mcp-breaker status`` reads its bearer token from MCP_BREAKER_TOKEN (--token-env).
OTHER_VARIABLES = frozenset({"MCP_BREAKER_TOKEN"})
# Kubernetes gives every pod variables for each Service in its namespace, named after the
# Service: one called ``mcp-breaker`` (or ``mcp-breaker-advisories``...) yields
# MCP_BREAKER_SERVICE_HOST, MCP_BREAKER_PORT_4317_TCP_ADDR and the like, in our own pods.
_SERVICE_LINK = re.compile(
    r"MCP_BREAKER_(?:[A-Z0-9_]+_)?"
    r"(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT(?:_\d+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)?)"
)


def leaf_keys(cls: type = ServiceConfig, prefix: Leaf = ()) -> Iterator[tuple[Leaf, Any, Any]]:
    """Yield (path, type, default) for every settable key, in declaration order."""
    hints = typing.get_type_hints(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            yield from leaf_keys(typing.cast(type, kind), (*prefix, f.name))
        else:
            yield (*prefix, f.name), kind, getattr(defaults, f.name)


def env_var_name(path: Leaf) -> str:
    return ENV_PREFIX + "_".join(path).upper()


def load_config(
    *,
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> ServiceConfig:
    """Merge the sources, coerce every value to its type and validate; raise ConfigError
    with every problem found. Unknown ``MCP_BREAKER_*`` variables are not problems here:
    ``unknown_environment`` names them, for the caller to warn about."""
    schema = {p: kind for p, kind, _ in leaf_keys()}
    problems: list[str] = []
    raw: dict[Leaf, tuple[Any, str]] = {}

    if path is not None:
        _read_yaml(Path(path), schema, raw, problems)
    for key in schema:
        name = env_var_name(key)
        if environ is not None and name in environ:
            raw[key] = (environ[name], f"environment variable {name}")
    for item in overrides:
        dotted, sep, value = item.partition("=")
        key = tuple(dotted.strip().split("."))
        if not sep:
            problems.append(f"--set {item!r}: expected key=value")
        elif key not in schema:
            problems.append(_not_a_key(key, value, f"--set {dotted.strip()}", schema))
        else:
            raw[key] = (value, f"--set {dotted.strip()}")

    values: dict[Leaf, Any] = {}
    unreadable: set[str] = set()
    for key, (value, origin) in raw.items():
        dotted = ".".join(key)
        try:
            values[key] = _coerce(value, schema[key])
        except (TypeError, ValueError) as exc:
            unreadable.add(dotted)
            if key in SECRET_KEYS:  # the message would quote the tokens: say where, not what
                problems.append(f"{dotted}: not a valid {_kind(schema[key])} (from {origin})")
            else:
                problems.append(f"{dotted}: {exc}, got {value!r} (from {origin})")

    # Range checks run on what could be read (an unreadable value keeps its default), so
    # a range problem is reported in the same pass as a type problem elsewhere.
    config = typing.cast(ServiceConfig, _build(ServiceConfig, (), values))
    # A range problem says where its value came from, as a type problem does, unless from
    # the command line the user is looking at.
    origins = {".".join(k): origin for k, (_, origin) in raw.items()}
    for problem in config.validate():
        dotted = problem.partition(":")[0]
        if dotted in unreadable:
            continue
        origin = origins.get(dotted, "--set")
        problems.append(problem if origin.startswith("--set") else f"{problem} (from {origin})")
    if problems:
        raise ConfigError(problems)
    return config


def unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """One warning per ``MCP_BREAKER_*`` variable that sets nothing, with the closest name.

    A warning, not an error: the prefix is not ours alone. Kubernetes derives variables
    from Service names (a Service called ``mcp-breaker`` puts MCP_BREAKER_PORT and others
    in every pod of its namespace), and scripts around the service may keep their own
    MCP_BREAKER_* variables; refusing to start over a variable nobody meant for us would
    turn a harmless deployment detail into an outage. Those known shapes are not warned
    about at all; anything else is, so a typo is never silently ignored.
    """
    paths = [path for path, _, _ in leaf_keys()]
    names = {env_var_name(path) for path in paths}
    sections = {env_var_name(path[:n]): path[:n] for path in paths for n in range(1, len(path))}
    warnings = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in names or name in OTHER_VARIABLES:
            continue
        if _SERVICE_LINK.fullmatch(name):
            continue
        if name in sections:
            section = sections[name]
            example = env_var_name(next(p for p in paths if p[: len(section)] == section))
            warnings.append(
                f"environment variable {name}: names the section {'.'.join(section)}, not a "
                f"setting; ignored (each key has its own variable, e.g. {example})"
            )
            continue
        # Compared without the prefix every name shares, which would make anything "close".
        tails = sorted(n.removeprefix(ENV_PREFIX) for n in names)
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), tails, n=1)
        hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
        warnings.append(f"environment variable {name}: not a setting; ignored{hint}")
    return warnings


def _read_yaml(
    path: Path, schema: Mapping[Leaf, Any], raw: dict[Leaf, tuple[Any, str]], problems: list[str]
) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"--config: cannot read {str(path)!r}: {exc.strerror}")
        return
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        # YAML says keys are unique, but PyYAML keeps the last of two silently: a second
        # `endpoint:` further down a long file would win without a word.
        problems += _duplicate_keys(node, path.name) if node is not None else []
        document = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        problems.append(f"--config: {str(path)!r} is not valid YAML: {exc}")
        return
    finally:
        loader.dispose()
    if document is None:
        return
    if not isinstance(document, dict):
        problems.append(f"--config: {str(path)!r} must hold a mapping at the top level")
        return
    origin = f"file {path.name}"

    def walk(node: dict[Any, Any], prefix: Leaf) -> None:
        for name, value in node.items():
            key = (*prefix, str(name))
            if key in schema:
                raw[key] = (value, origin)
            elif _is_section(key, schema) and isinstance(value, dict):
                walk(value, key)
            elif _is_section(key, schema) and value is None:
                continue  # `telemetry:` with every key under it commented out
            else:
                problems.append(_not_a_key(key, value, origin, schema))

    walk(document, ())


def _duplicate_keys(node: yaml.Node, filename: str, prefix: Leaf = ()) -> list[str]:
    """One problem per key given twice in the same mapping, naming both lines."""
    problems: list[str] = []
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            problems += _duplicate_keys(item, filename, prefix)
    if not isinstance(node, yaml.MappingNode):
        return problems
    first_line: dict[str, int] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *defaults` merges are meant to be overridden
        name, line = str(key_node.value), key_node.start_mark.line + 1
        dotted = ".".join((*prefix, name))
        if name in first_line:
            problems.append(
                f"{dotted}: given twice in {filename} (lines {first_line[name]} and {line}); "
                f"keep one"
            )
        else:
            first_line[name] = line
        problems += _duplicate_keys(value_node, filename, (*prefix, name))
    return problems


def _is_under(key: Leaf, section: Leaf) -> bool:
    return len(key) > len(section) and key[: len(section)] == section


def _is_section(key: Leaf, schema: Mapping[Leaf, Any]) -> bool:
    return any(_is_under(k, key) for k in schema)


def _not_a_key(key: Leaf, value: Any, origin: str, schema: Mapping[Leaf, Any]) -> str:
    """Why ``key`` cannot be set: a section given a value, or an unknown key (with a hint)."""
    dotted = ".".join(key)
    if _is_section(key, schema):
        children = list(dict.fromkeys(k[len(key)] for k in schema if _is_under(k, key)))
        shown = ", ".join(f"{dotted}.{c}" for c in children[:3])
        more = ", ..." if len(children) > 3 else ""
        # A section that holds secrets may have been given one by mistake: not quoted.
        secret = any(_is_under(k, key) for k in SECRET_KEYS)
        got = "a value" if secret else repr(value)
        return (
            f"{dotted}: is a section, not a value: set the keys under it ({shown}{more}); "
            f"got {got} (from {origin})"
        )
    known = sorted({".".join(k[:n]) for k in schema for n in range(1, len(k) + 1)})
    close = difflib.get_close_matches(dotted, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{dotted}: unknown key{hint}"


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _coerce(value: Any, kind: Any) -> Any:
    """Turn a YAML value or an environment string into ``kind``; ValueError says what was wanted."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError("expected true or false")
    if kind is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError("expected an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError("expected an integer") from None
    if kind is float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError("expected a number") from None
    if kind is str:
        if isinstance(value, (dict, list)):
            raise ValueError("expected a string")
        return "" if value is None else str(value)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        allowed = ", ".join(str(m.value) for m in kind)
        try:
            return kind(str(value).strip().lower())
        except ValueError:
            raise ValueError(f"expected one of {allowed}") from None
    if typing.get_origin(kind) is dict:
        return _coerce_mapping(value)
    if typing.get_origin(kind) is tuple:
        return _coerce_names(value)
    raise TypeError(f"unsupported type {kind!r}")  # a programming error in the model


def _coerce_mapping(value: Any) -> dict[str, str]:
    # Environment form, as OTEL_EXPORTER_OTLP_HEADERS: "k1=v1,k2=v2".
    if isinstance(value, str):
        pairs = [p for p in value.split(",") if p.strip()]
        if not all("=" in p for p in pairs):
            raise ValueError("expected key=value pairs separated by commas")
        return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in pairs)}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if value is None:
        return {}
    raise ValueError("expected a mapping")


def _coerce_names(value: Any) -> tuple[str, ...]:
    # Environment form: "a,b,c".
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v) for v in value)
    if value is None:
        return ()
    raise ValueError("expected a list of strings")


def _build(cls: type, prefix: Leaf, values: Mapping[Leaf, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        key = (*prefix, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = _build(typing.cast(type, hints[f.name]), key, values)
        elif key in values:
            kwargs[f.name] = values[key]
    return cls(**kwargs)


def _kind(annotation: Any) -> str:
    origin = typing.get_origin(annotation) or annotation
    return {dict: "key=value list", tuple: "list"}.get(origin, "value")
