"""The Helm chart (helm/mcp-breaker), rendered offline with Helm's own library.

``helm-python-sdk`` bundles the Helm v4 SDK, so linting and rendering here are what
``helm lint`` and ``helm template`` do, without a helm binary or a cluster. This module is
shared by the tests and by ``scripts/gen-chart``, which regenerates the two derived parts
of the chart: the ``config`` subschema of values.schema.json (from the service's own
config model) and the examples' ``rendered/`` manifests.

    python -m tests.helm_chart           # rewrite both
    python -m tests.helm_chart --check   # exit 1 when either is out of date
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from helm_python.chart import Chart

from processor.config.load import SECRET_KEYS, Leaf, leaf_keys

ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = ROOT / "helm" / "mcp-breaker"
EXAMPLES_DIR = CHART_DIR / "examples"
SCHEMA_PATH = CHART_DIR / "values.schema.json"
CONFIGURATION_DOC = ROOT / "docs" / "configuration.md"
# As the Collector chart's examples are rendered: release "example" in "default".
RELEASE, NAMESPACE = "example", "default"
NOTES = "templates/NOTES.txt"
# The keys the chart writes itself (from `ports`, `listenAddress`, `advisoryTls`,
# `receiversTls`, `persistence`, `redis`): the schema leaves them out of `config`, so
# setting them there fails `helm install`. (auth.tokens_file is the chart's only with
# secrets.tokensFile, so it stays in the schema: a file of your own, by extraVolumes.)
CHART_OWNED: tuple[Leaf, ...] = (
    ("receivers", "grpc", "enabled"),
    ("receivers", "grpc", "endpoint"),
    ("receivers", "http", "enabled"),
    ("receivers", "http", "endpoint"),
    ("telemetry", "enabled"),
    ("telemetry", "metrics_endpoint"),
    ("advisories", "enabled"),
    ("advisories", "endpoint"),
    ("advisories", "tls"),
    ("receivers", "tls"),
    ("forward", "queue", "storage"),  # from `persistence`: the disk queue needs a volume
    ("forward", "queue", "directory"),
    # From `redis`: the backend, where Redis is and who logs in (the password is a secret).
    ("state", "backend"),
    ("state", "redis", "url"),
    ("state", "redis", "username"),
    ("state", "redis", "password_file"),
)
REDIS_TEMPLATES = "redis-"  # the embedded Redis's templates
CHECKSUM_LINE = re.compile(r"^\s*checksum/[a-z]+: [0-9a-f]{64}$")


def examples() -> list[str]:
    return sorted(p.parent.name for p in EXAMPLES_DIR.glob("*/values.yaml"))


def example_values(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES_DIR / name / "values.yaml").read_text(encoding="utf-8"))
    return typing.cast(dict[str, Any], loaded or {})


def render(values: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Template path (``templates/x.yaml``) -> rendered text; templates that render to
    nothing are left out. NOTES.txt is kept: it is what ``helm install`` prints."""
    with Chart.load(CHART_DIR) as chart:
        rendered = chart.render(dict(values or {}), name=RELEASE, namespace=NAMESPACE)
    out = {}
    for path, text in rendered.items():
        relative = path.split("/", 1)[1]  # drop the chart's name
        if text.strip():
            out[relative] = text.strip() + "\n"
    return out


def manifests(rendered: Mapping[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(template path, object) for every Kubernetes object rendered."""
    for path, text in sorted(rendered.items()):
        if path == NOTES:
            continue
        for document in yaml.safe_load_all(text):
            if document:
                yield path, typing.cast(dict[str, Any], document)


def one(rendered: Mapping[str, str], kind: str) -> dict[str, Any]:
    """The service's own object of this kind (the embedded Redis's are redis-*.yaml)."""
    found = [
        doc
        for path, doc in manifests(rendered)
        if doc["kind"] == kind and not Path(path).name.startswith(REDIS_TEMPLATES)
    ]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def config_file(rendered: Mapping[str, str]) -> str:
    """The service's config file as its ConfigMap holds it."""
    (found,) = [
        doc["data"]["config.yaml"]
        for _, doc in manifests(rendered)
        if doc["kind"] == "ConfigMap" and "config.yaml" in doc["data"]
    ]
    return typing.cast(str, found)


def rendered_files(rendered: Mapping[str, str]) -> dict[str, str]:
    """What ``examples/<name>/rendered/`` holds: one file per template, as ``helm template``
    writes it (a ``# Source:`` line under the document separator)."""
    return {
        Path(path).name: f"---\n# Source: mcp-breaker/{path}\n{text}"
        for path, text in rendered.items()
        if path != NOTES
    }


def without_checksums(text: str) -> str:
    """Checksum annotations change with every byte of the config: left out of comparisons."""
    return "\n".join(line for line in text.splitlines() if not CHECKSUM_LINE.match(line))


# -- the config subschema, from the service's own model ------------------------------------
def _descriptions() -> dict[str, str]:
    """Key -> meaning, from the tables of docs/configuration.md (kept in step by a test)."""
    found = {}
    for line in CONFIGURATION_DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) == 6 and cells[1].startswith("`") and cells[2].startswith("`MCP_"):
            found[cells[1].strip("`")] = cells[4]
    return found


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _leaf_schema(kind: Any) -> dict[str, Any]:
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer"}
    if kind is float:
        return {"type": "number"}
    if kind is str:
        return {"type": "string"}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"type": "string", "enum": [str(member.value) for member in kind]}
    if typing.get_origin(kind) is dict:
        return {"type": "object", "additionalProperties": {"type": "string"}}
    if typing.get_origin(kind) is tuple:
        return {"type": "array", "items": {"type": "string"}}
    raise TypeError(f"no schema for {kind!r}")  # a new kind of key in the model


def config_schema() -> dict[str, Any]:
    """JSON Schema of ``config``: every key the service accepts but the chart's own and the
    secret ones, each with its type, default and meaning; nothing else."""
    descriptions = _descriptions()
    excluded = set(CHART_OWNED) | set(SECRET_KEYS)
    root: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
    for path, kind, default in leaf_keys():
        if any(path[: len(owned)] == owned for owned in excluded):
            continue
        node = root
        for part in path[:-1]:
            node = node["properties"].setdefault(
                part, {"type": "object", "additionalProperties": False, "properties": {}}
            )
        leaf = _leaf_schema(kind)
        leaf["default"] = _json_default(default)
        leaf["description"] = descriptions[".".join(path)]
        node["properties"][path[-1]] = leaf
    root["description"] = (
        "mcp-breaker's configuration (docs/configuration.md), merged over the chart's "
        "defaults. Generated from processor/config/ by scripts/gen-chart."
    )
    return root


def schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def current_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def regenerated_schema() -> dict[str, Any]:
    schema = current_schema()
    schema["properties"]["config"] = config_schema()
    return schema


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say what is out of date")
    args = parser.parse_args(argv)
    stale = []
    schema = schema_text(regenerated_schema())
    if SCHEMA_PATH.read_text(encoding="utf-8") != schema:
        stale.append(SCHEMA_PATH)
        if not args.check:
            SCHEMA_PATH.write_text(schema, encoding="utf-8")
    for name in examples():
        out = EXAMPLES_DIR / name / "rendered"
        files = rendered_files(render(example_values(name)))
        existing = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.yaml")}
        if existing != files:
            stale.append(out)
            if not args.check:
                out.mkdir(exist_ok=True)
                for gone in existing.keys() - files.keys():
                    (out / gone).unlink()
                for file_name, text in files.items():
                    (out / file_name).write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'out of date' if args.check else 'wrote'}: {path.relative_to(ROOT)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
