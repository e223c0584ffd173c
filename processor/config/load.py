"""Build a ServiceConfig from a YAML file, environment variables and flags.

Precedence, lowest first: the defaults in ``model``, the YAML file, ``MCP_BREAKER_*``
environment variables, then ``--set key=value`` flags. Every leaf key has one environment
variable, derived from its dotted path: ``forward.queue.max_spans`` is
``MCP_BREAKER_FORWARD_QUEUE_MAX_SPANS``. Files and the environment are read here, once, at
the edge; the components only ever see frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from processor.config.model import ServiceConfig
from processor.errors import ConfigError

ENV_PREFIX = "MCP_BREAKER_"
# Keys whose values are secrets: never quoted in an error message (nor by print-config).
SECRET_KEYS: frozenset[tuple[str, ...]] = frozenset(
    {("advisories", "tokens"), ("advisories", "admin_tokens"), ("forward", "headers")}
)

Leaf = tuple[str, ...]


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
    """Merge the sources, coerce every value to its type and validate; raise ConfigError."""
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
            problems.append(_unknown_key(dotted.strip(), schema))
        else:
            raw[key] = (value, f"--set {dotted.strip()}")

    values: dict[Leaf, Any] = {}
    for key, (value, origin) in raw.items():
        dotted = ".".join(key)
        try:
            values[key] = _coerce(value, schema[key])
        except (TypeError, ValueError) as exc:
            if key in SECRET_KEYS:  # the message would quote the tokens: say where, not what
                problems.append(f"{dotted}: not a valid {_kind(schema[key])} (from {origin})")
            else:
                problems.append(f"{dotted}: {exc}, got {value!r} (from {origin})")

    if problems:
        raise ConfigError(problems)
    config = typing.cast(ServiceConfig, _build(ServiceConfig, (), values))
    problems = config.validate()
    if problems:
        raise ConfigError(problems)
    return config


def _read_yaml(
    path: Path, schema: Mapping[Leaf, Any], raw: dict[Leaf, tuple[Any, str]], problems: list[str]
) -> None:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        problems.append(f"--config: cannot read {str(path)!r}: {exc.strerror}")
        return
    except yaml.YAMLError as exc:
        problems.append(f"--config: {str(path)!r} is not valid YAML: {exc}")
        return
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
            elif isinstance(value, dict) and any(k[: len(key)] == key for k in schema):
                walk(value, key)
            else:
                problems.append(_unknown_key(".".join(key), schema))

    walk(document, ())


def _unknown_key(dotted: str, schema: Mapping[Leaf, Any]) -> str:
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
