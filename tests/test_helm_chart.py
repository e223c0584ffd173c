"""The Helm chart, linted and rendered by Helm's own library and checked as a cluster would.

Every case (the defaults, each example, and one with every template on) is linted with
``lint(strict=True)``, rendered, and each object validated against the Kubernetes API
schemas of two pinned versions with ``kubernetes-validate --strict``; the Prometheus
Operator's objects, which those schemas do not hold, against models generated from the
operator's CRDs. The service reads the ConfigMap as ``mcp-breaker check-config`` does.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as operator
from helm_python.chart import Chart, lint, package
from helm_python.errors import HelmError

from processor import __version__
from processor.config.forward import DEFAULT_SHUTDOWN_GRACE_S
from tests.helm_chart import (
    CHART_DIR,
    EXAMPLES_DIR,
    NAMESPACE,
    RELEASE,
    ROOT,
    config_file,
    current_schema,
    example_values,
    examples,
    manifests,
    one,
    regenerated_schema,
    render,
    rendered_files,
    without_checksums,
)
from tests.prometheus_server import binary

# The chart's kubeVersion floor (Chart.yaml), and a recent release.
KUBE_VERSIONS = ("1.27.0", "1.33.0")
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "mcp-breaker.json"
MCP_BREAKER = Path(sys.executable).parent / "mcp-breaker"
# Every template on at once, so each is linted, rendered and validated at least once.
EVERYTHING: dict[str, Any] = {
    "replicaCount": 3,
    "config": {
        "forward": {"endpoint": "collector.observability.svc:4317"},
        "receivers": {"auth": "certificate", "span_tenant": "match"},
    },
    "extraArgs": ["--log-level", "debug"],
    "image": {"digest": "sha256:" + "ab" * 32},
    "imagePullSecrets": [{"name": "registry"}],
    "secrets": {
        "advisoryTokens": {"tok-a": "team-a", "tok-b": "team-b"},
        "advisoryAdminTokens": ["admin-1"],
        "forwardHeaders": {"x-api-key": "key=with=equals"},
    },
    "advisoryTls": {
        "enabled": True,
        "secretName": "advisory-tls",
        "mutual": True,
        "clientCaSecretName": "harness-ca",
    },
    "receiversTls": {
        "enabled": True,
        "secretName": "otlp-tls",
        "mutual": True,
        "clientCaSecretName": "sender-ca",
    },
    "ports": {"otlp-http": {"nodePort": 30318}, "otlp": {"nodePort": 30317}},
    "service": {"type": "NodePort", "externalTrafficPolicy": "Local"},
    "serviceAccount": {"annotations": {"example.com/role": "mcp-breaker"}},
    "podAnnotations": {"example.com/team": "sre"},
    "podLabels": {"tier": "telemetry"},
    "annotations": {"example.com/owner": "sre"},
    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    "startupProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "failureThreshold": 30},
    # preStop.sleep needs Kubernetes 1.30; the image's Python sleeps on any version.
    "lifecycleHooks": {
        "preStop": {"exec": {"command": ["python", "-c", "import time; time.sleep(5)"]}}
    },
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "extraEnvFrom": [{"configMapRef": {"name": "more-env"}}],
    "extraVolumes": [{"name": "extra", "emptyDir": {}}],
    "extraVolumeMounts": [{"name": "extra", "mountPath": "/var/extra"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "telemetry", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-breaker"}},
                    },
                }
            ]
        }
    },
    "priorityClassName": "telemetry",
    "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    "autoscaling": {
        "enabled": True,
        "maxReplicas": 6,
        "targetMemoryUtilizationPercentage": 75,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
    },
    "networkPolicy": {
        "enabled": True,
        "allowIngressFrom": [{"namespaceSelector": {}}],
        "extraIngressRules": [
            {"ports": [{"port": 9464}], "from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}
        ],
        "egressRules": [{"ports": [{"port": 53, "protocol": "UDP"}, {"port": 4317}]}],
    },
    "serviceMonitor": {
        "enabled": True,
        "interval": "15s",
        "scrapeTimeout": "10s",
        "extraLabels": {"release": "prom"},
        "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "c1"}],
        "metricRelabelings": [
            {"action": "drop", "sourceLabels": ["__name__"], "regex": "python_gc_.*"}
        ],
    },
    "podMonitor": {"enabled": True, "interval": "15s", "extraLabels": {"release": "prom"}},
    "prometheusRule": {"enabled": True, "extraLabels": {"release": "prom"}},
    "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
    "redis": {
        "enabled": True,
        "password": "redis-pw",
        "embedded": {
            "enabled": True,
            "image": {"digest": "sha256:" + "cd" * 32},
            "resources": {"limits": {"memory": "256Mi"}},
        },
    },
}
CASES = {"defaults": {}, **{name: example_values(name) for name in examples()}}
CASES["every-template"] = EVERYTHING
OPERATOR_MODELS = {
    "ServiceMonitor": operator.ServiceMonitor,
    "PodMonitor": operator.PodMonitor,
    "PrometheusRule": operator.PrometheusRule,
}


def with_values(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``base`` with dotted keys set: with_values({}, **{"ports.otlp.enabled": False})."""
    values = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = values
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return values


def container(rendered: dict[str, str]) -> dict[str, Any]:
    (only,) = one(rendered, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(only)


def lint_problems(values: dict[str, Any], **options: Any) -> list[str]:
    report = lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSIONS[0]}", **options)
    # Severity 1 is information ("icon is recommended"); 2 warning, 3 error.
    found = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return found + list(report["errors"])


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], dict[str, str]]:
    name = request.param
    return name, CASES[name], render(CASES[name])


# -- Helm's own checks ----------------------------------------------------------------------
def test_lint_strict_finds_nothing(case: tuple[str, dict[str, Any], dict[str, str]]) -> None:
    """``helm lint --strict`` (with the schema) has no warning and no error for the case."""
    _, values, _ = case
    assert lint_problems(values) == []


def test_the_rendered_objects_are_valid_kubernetes(
    case: tuple[str, dict[str, Any], dict[str, str]],
) -> None:
    """Every object validates strictly (no unknown field) against the API's own schemas."""
    _, _, rendered = case
    objects = list(manifests(rendered))
    kinds = {doc["kind"] for _, doc in objects}
    assert kinds >= {"ConfigMap", "ServiceAccount"}
    assert len(kinds & {"Deployment", "StatefulSet"}) == 1  # one workload, of the kind asked
    for path, doc in objects:
        model = OPERATOR_MODELS.get(doc["kind"])
        if model is not None:
            # The models drop what the CRD does not know: a round trip that loses a field
            # is an unknown field; a wrong type raises.
            parsed = model.model_validate(doc)
            again = parsed.model_dump(by_alias=True, exclude_none=True, mode="json")
            assert again == doc, f"{path}: the {doc['kind']} CRD drops fields of it"
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = ".".join(str(p) for p in error.path)
                pytest.fail(f"{path} against Kubernetes {version}: {where}: {error.message}")


def test_every_template_renders_in_some_case() -> None:
    rendered = set().union(*(render(values).keys() for values in CASES.values()))
    templates = {p.relative_to(CHART_DIR).as_posix() for p in CHART_DIR.glob("templates/*")}
    assert templates - {t for t in templates if Path(t).name.startswith("_")} == rendered


# -- the examples ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", examples())
def test_the_committed_rendered_output_is_current(name: str) -> None:
    """examples/<name>/rendered is what the chart renders now (checksum lines apart):
    regenerate with scripts/gen-chart."""
    fresh = rendered_files(render(example_values(name)))
    folder = EXAMPLES_DIR / name / "rendered"
    committed = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.yaml")}
    assert sorted(committed) == sorted(fresh), f"{folder}: run scripts/gen-chart"
    for file_name, text in fresh.items():
        assert without_checksums(committed[file_name]) == without_checksums(text), (
            f"{folder / file_name} is out of date: run scripts/gen-chart"
        )


def test_the_examples_are_the_documented_ones() -> None:
    assert examples() == [
        "minimal",
        "with-disk-queue",
        "with-prometheus-operator",
        "with-redis-and-3-replicas",
        "with-tls",
    ]
    readme = (EXAMPLES_DIR / "README.md").read_text(encoding="utf-8")
    for name in examples():
        assert f"[`{name}`]({name}/values.yaml)" in readme


# -- values.schema.json ---------------------------------------------------------------------
BAD_VALUES = {
    "a misspelt top-level key": ({"replicaCont": 2}, "replicaCont"),
    "a misspelt nested key": ({"ports": {"otlp": {"containerPrt": 4317}}}, "containerPrt"),
    "a misspelt config key": ({"config": {"forward": {"endpont": "c:4317"}}}, "endpont"),
    "a wrong type": ({"replicaCount": "two"}, "replicaCount"),
    "a wrong type in config": (
        {"config": {"forward": {"queue": {"max_spans": "many"}}}},
        "max_spans",
    ),
    "a value out of its enum": ({"config": {"forward": {"protocol": "udp"}}}, "protocol"),
    "a secret in config": ({"config": {"advisories": {"tokens": {"t": "a"}}}}, "tokens"),
    "a chart-owned key in config": (
        {"config": {"receivers": {"grpc": {"endpoint": ":1"}}}},
        "endpoint",
    ),
    "the state backend in config": ({"config": {"state": {"backend": "redis"}}}, "backend"),
    "the Redis password in config": (
        {"config": {"state": {"redis": {"password": "pw"}}}},
        "password",
    ),
    "a Redis url with a password": (
        {"redis": {"enabled": True, "url": "redis://:pw@redis:6379/0"}},
        "url",
    ),
    "the receivers' TLS files in config": (
        {"config": {"receivers": {"tls": {"cert_file": "/certs/tls.crt"}}}},
        "tls",
    ),
    "a misspelt receiversTls key": ({"receiversTls": {"enable": True}}, "enable"),
    "an unknown receivers.auth": ({"config": {"receivers": {"auth": "password"}}}, "auth"),
    "tokensFile not a switch": ({"secrets": {"tokensFile": "tokens"}}, "tokensFile"),
}


@pytest.mark.parametrize(("values", "key"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_the_schema_rejects_a_bad_value(values: dict[str, Any], key: str) -> None:
    """A bad value fails before anything reaches a cluster: at schema validation, and so at
    ``helm install``/``helm template`` (render) and ``helm lint``."""
    with Chart.load(CHART_DIR) as chart, pytest.raises(HelmError, match=key):
        chart.validate_schema(values)
    with pytest.raises(HelmError, match=key):
        render(values)
    assert any(key in problem for problem in lint_problems(values))


def test_the_schema_accepts_the_defaults_and_every_case() -> None:
    with Chart.load(CHART_DIR) as chart:
        for values in CASES.values():
            chart.validate_schema(values)


def test_the_config_schema_is_generated_from_the_service_model() -> None:
    """values.schema.json's `config` is what scripts/gen-chart makes of processor/config."""
    assert current_schema() == regenerated_schema(), "run scripts/gen-chart"


# -- the config the pods get ----------------------------------------------------------------
def check_config(text: str, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BREAKER_")}
    result = subprocess.run(
        [str(MCP_BREAKER), "check-config", str(path)],
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"check-config said:\n{result.stderr}\nof:\n{text}"
    return result.stdout


def secret_env(rendered: dict[str, str]) -> dict[str, str]:
    """The environment the pod gets from the chart's Secret."""
    data = one(rendered, "Secret")["data"]
    env = {}
    for item in container(rendered)["env"]:
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            env[item["name"]] = base64.b64decode(data[ref["key"]]).decode()
    return env


def test_the_config_map_passes_check_config(
    case: tuple[str, dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    _, _, rendered = case
    assert check_config(config_file(rendered), tmp_path).endswith(": valid\n")


def test_secrets_reach_the_pod_by_environment_never_by_the_config_map(tmp_path: Path) -> None:
    rendered = render(EVERYTHING)
    text = config_file(rendered)
    for secret in ("tok-a", "team-a", "admin-1", "x-api-key", "key=with=equals", "redis-pw"):
        assert secret not in text
    env = secret_env(rendered)
    assert env == {
        "MCP_BREAKER_ADVISORIES_TOKENS": "tok-a=team-a,tok-b=team-b",
        "MCP_BREAKER_ADVISORIES_ADMIN_TOKENS": "admin-1",
        "MCP_BREAKER_FORWARD_HEADERS": "x-api-key=key=with=equals",
        "MCP_BREAKER_STATE_REDIS_PASSWORD": "redis-pw",
    }
    check_config(text, tmp_path, env)
    # And the service reads them as the values were meant.
    from processor.config import load_config

    path = tmp_path / "config.yaml"
    config = load_config(path=path, environ=env)
    assert config.advisories.tokens == {"tok-a": "team-a", "tok-b": "team-b"}
    assert config.advisories.admin_tokens == ("admin-1",)
    assert config.forward.headers == {"x-api-key": "key=with=equals"}
    assert config.state.redis.password == "redis-pw"
    assert config.advisories.tls.client_ca_file == "/etc/mcp-breaker/client-ca/ca.crt"
    assert config.receivers.tls.client_ca_file == "/etc/mcp-breaker/receivers-client-ca/ca.crt"
    # A change of a secret rolls the pods, as a change of the config does.
    annotations = one(rendered, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    changed = render(with_values(EVERYTHING, **{"secrets.advisoryAdminTokens": ["admin-2"]}))
    after = one(changed, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert after["checksum/secret"] != annotations["checksum/secret"]
    assert after["checksum/config"] == annotations["checksum/config"]


# -- authenticated intake: receiversTls, receivers.auth, the tokens file ---------------------
def volumes_and_mounts(rendered: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    return volumes, mounts


def test_receivers_tls_mounts_its_secret_and_points_the_config_at_it(tmp_path: Path) -> None:
    """receiversTls mounts the kubernetes.io/tls Secret read-only and writes receivers.tls
    with the files where the mount puts them; with mutual, the client CA too, from
    clientCaSecretName or else the same Secret. Off, nothing of it."""
    values = {"receiversTls": {"enabled": True, "secretName": "otlp-tls"}}
    rendered = render(values)
    volumes, mounts = volumes_and_mounts(rendered)
    assert volumes["receivers-tls"]["secret"] == {
        "secretName": "otlp-tls",
        "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
    }
    assert "receivers-client-ca" not in volumes and "advisory-tls" not in volumes
    mount = mounts["receivers-tls"]
    assert mount["readOnly"] is True and "subPath" not in mount
    tls = yaml.safe_load(config_file(rendered))["receivers"]["tls"]
    assert tls == {
        "cert_file": f"{mount['mountPath']}/tls.crt",
        "key_file": f"{mount['mountPath']}/tls.key",
    }
    assert check_config(config_file(rendered), tmp_path).endswith(": valid\n")

    for ca_secret, expected in (("", "otlp-tls"), ("sender-ca", "sender-ca")):
        mutual = with_values(values, **{"receiversTls.mutual": True})
        if ca_secret:
            mutual["receiversTls"]["clientCaSecretName"] = ca_secret
        mutual["config"] = {"receivers": {"auth": "certificate"}}
        rendered = render(mutual)
        volumes, mounts = volumes_and_mounts(rendered)
        assert volumes["receivers-client-ca"]["secret"] == {
            "secretName": expected,
            "items": [{"key": "ca.crt", "path": "ca.crt"}],
        }
        ca_mount = mounts["receivers-client-ca"]
        assert ca_mount["readOnly"] is True
        receivers = yaml.safe_load(config_file(rendered))["receivers"]
        assert receivers["tls"]["client_ca_file"] == f"{ca_mount['mountPath']}/ca.crt"
        assert receivers["auth"] == "certificate"  # the user's key, left alone
        assert check_config(config_file(rendered), tmp_path).endswith(": valid\n")

    plain = render({})
    assert "tls" not in yaml.safe_load(config_file(plain))["receivers"]
    assert not {"receivers-tls", "receivers-client-ca"} & set(volumes_and_mounts(plain)[0])


def test_a_tokens_file_is_mounted_where_the_config_says_and_rotates_without_a_roll(
    tmp_path: Path,
) -> None:
    """secrets.tokensFile: the chart's Secret holds the tokens as token=tenant lines under
    tokens-file, mounted (a directory, never a subPath, which the kubelet would not update)
    at auth.tokens_file; not in the environment, nor in the ConfigMap. A change of the
    tokens changes the Secret but neither checksum: the pods are not rolled, the service
    reads the file again."""
    values = {
        "config": {"receivers": {"auth": "token"}},
        "secrets": {"tokensFile": True, "advisoryTokens": {"tok-a": "team-a", "tok-b": "team-b"}},
    }
    rendered = render(values)
    text = config_file(rendered)
    assert "tok-a" not in text and "team-a" not in text
    data = one(rendered, "Secret")["data"]
    assert sorted(data) == ["tokens-file"]
    file_text = base64.b64decode(data["tokens-file"]).decode()
    assert file_text == "tok-a=team-a\ntok-b=team-b\n"
    assert "env" not in container(rendered)  # no MCP_BREAKER_ADVISORIES_TOKENS
    volumes, mounts = volumes_and_mounts(rendered)
    (item,) = volumes["tokens"]["secret"]["items"]
    assert volumes["tokens"]["secret"]["secretName"] == "example-mcp-breaker"
    assert item["key"] == "tokens-file"
    assert mounts["tokens"]["readOnly"] is True and "subPath" not in mounts["tokens"]
    config = yaml.safe_load(text)
    assert config["auth"] == {"tokens_file": f"{mounts['tokens']['mountPath']}/{item['path']}"}
    assert check_config(text, tmp_path).endswith(": valid\n")

    # The service reads the file the Secret becomes as the tokens were meant.
    from processor.auth.tokens import TokenMap, parse_tokens

    assert parse_tokens(file_text, "tokens-file") == {"tok-a": "team-a", "tok-b": "team-b"}
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(file_text, encoding="utf-8")
    assert TokenMap({}, str(tokens_file)).tenant("tok-b") == "team-b"

    annotations = one(rendered, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    rotated = render(with_values(values, **{"secrets.advisoryTokens": {"tok-c": "team-a"}}))
    assert one(rotated, "Secret")["data"] != data
    after = one(rotated, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert after == annotations


def test_an_existing_secret_gives_its_tokens_file_and_every_other_key_optional() -> None:
    """With existingSecret, the tokens file is that Secret's tokens-file: not optional (the
    service cannot start without the file it is told of), while the environment's keys
    stay optional."""
    rendered = render(example_values("with-tls"))
    volumes, mounts = volumes_and_mounts(rendered)
    assert volumes["tokens"]["secret"]["secretName"] == "mcp-breaker-secrets"
    assert "optional" not in volumes["tokens"]["secret"]
    assert volumes["receivers-tls"]["secret"]["secretName"] == "mcp-breaker-otlp-tls"
    config = yaml.safe_load(config_file(rendered))
    assert config["receivers"]["auth"] == "token"
    assert config["auth"]["tokens_file"].startswith(mounts["tokens"]["mountPath"] + "/")
    refs = {e["name"] for e in container(rendered)["env"]}
    assert "MCP_BREAKER_ADVISORIES_TOKENS" in refs  # advisory-tokens counts too


def test_an_existing_secret_is_referenced_with_every_key_optional() -> None:
    rendered = render(example_values("with-tls"))
    assert not [doc for _, doc in manifests(rendered) if doc["kind"] == "Secret"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container(rendered)["env"]}
    assert refs == {
        env: {"name": "mcp-breaker-secrets", "key": key, "optional": True}
        for env, key in [
            ("MCP_BREAKER_ADVISORIES_TOKENS", "advisory-tokens"),
            ("MCP_BREAKER_ADVISORIES_ADMIN_TOKENS", "advisory-admin-tokens"),
            ("MCP_BREAKER_FORWARD_HEADERS", "forward-headers"),
        ]
    }


def test_the_redis_example_shares_state_with_the_password_from_its_secret(
    tmp_path: Path,
) -> None:
    rendered = render(example_values("with-redis-and-3-replicas"))
    assert one(rendered, "Deployment")["spec"]["replicas"] == 3
    config = yaml.safe_load(config_file(rendered))
    assert config["state"] == {
        "backend": "redis",
        "redis": {
            "url": "redis://redis-master.redis.svc.cluster.local:6379/0",
            "key_prefix": "mcp-breaker-prod",
        },
    }
    # The user's Secret, by name and key; the chart makes none and runs no Redis of its own.
    (env,) = container(rendered)["env"]
    assert env == {
        "name": "MCP_BREAKER_STATE_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "redis", "key": "redis-password"}},
    }
    kinds = {doc["kind"] for _, doc in manifests(rendered)}
    assert "Secret" not in kinds and "templates/redis-deployment.yaml" not in rendered
    check_config(config_file(rendered), tmp_path, {env["name"]: "from-the-secret"})


def test_the_embedded_redis_is_what_the_pods_are_pointed_at() -> None:
    values = {"redis": {"enabled": True, "password": "redis-pw", "embedded": {"enabled": True}}}
    rendered = render(with_values(values, **{"networkPolicy.enabled": True}))
    redis_service = yaml.safe_load(rendered["templates/redis-service.yaml"])
    redis_pod = yaml.safe_load(rendered["templates/redis-deployment.yaml"])["spec"]["template"]
    name, port = redis_service["metadata"]["name"], redis_service["spec"]["ports"][0]["port"]
    url = yaml.safe_load(config_file(rendered))["state"]["redis"]["url"]
    assert url == f"redis://{name}.{NAMESPACE}.svc:{port}/0"
    # Its Service selects the Redis pod, and the service's own Service does not.
    redis_labels = redis_pod["metadata"]["labels"]
    assert redis_service["spec"]["selector"].items() <= redis_labels.items()
    hop_selector = one(rendered, "Service")["spec"]["selector"]
    assert not hop_selector.items() <= redis_labels.items()
    # It requires the password the pods log in with: the same Secret key.
    (redis_container,) = redis_pod["spec"]["containers"]
    assert redis_container["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    (password_env,) = redis_container["env"]
    pod_env = {e["name"]: e for e in container(rendered)["env"]}
    assert (
        password_env["valueFrom"]
        == pod_env["MCP_BREAKER_STATE_REDIS_PASSWORD"]["valueFrom"]
        == {"secretKeyRef": {"name": "example-mcp-breaker", "key": "redis-password"}}
    )
    assert secret_env(rendered)["MCP_BREAKER_STATE_REDIS_PASSWORD"] == "redis-pw"
    # Only this release's pods may reach it.
    policies = [doc for _, doc in manifests(rendered) if doc["kind"] == "NetworkPolicy"]
    (guard,) = [p for p in policies if p["metadata"]["name"] == name]
    assert guard["spec"]["podSelector"]["matchLabels"] == redis_service["spec"]["selector"]
    assert guard["spec"]["ingress"][0]["from"] == [{"podSelector": {"matchLabels": hop_selector}}]


REFUSED = {
    "a secret in config": (
        {"config": {"advisories": {"tokens": {"t": "a"}}}},
        "config.advisories.tokens is set by the chart: use secrets.advisoryTokens",
    ),
    "forward headers in config": (
        {"config": {"forward": {"headers": {"authorization": "Bearer x"}}}},
        "config.forward.headers is set by the chart: use secrets.forwardHeaders",
    ),
    "a listen address in config": (
        {"config": {"advisories": {"endpoint": "0.0.0.0:5000"}}},
        "use ports.advisories.containerPort and listenAddress instead",
    ),
    "a token the environment form cannot carry": (
        {"secrets": {"advisoryTokens": {"abc==": "team"}}},
        "a token holds ',' or '='",
    ),
    "an existing secret and chart-made tokens": (
        {"secrets": {"existingSecret": "s", "advisoryTokens": {"t": "a"}}},
        "put the tokens and headers in that Secret",
    ),
    "TLS without its secret": ({"advisoryTls": {"enabled": True}}, "needs advisoryTls.secretName"),
    "receiver TLS without its secret": (
        {"receiversTls": {"enabled": True}},
        "receiversTls.enabled needs receiversTls.secretName",
    ),
    "mutual receiver TLS without TLS": (
        {"receiversTls": {"secretName": "otlp-tls", "mutual": True}},
        "receiversTls.mutual needs receiversTls.enabled",
    ),
    "a client CA for receivers without mutual TLS": (
        {"receiversTls": {"enabled": True, "secretName": "t", "clientCaSecretName": "ca"}},
        "set receiversTls.mutual too",
    ),
    "the receivers' TLS files in config": (
        {"config": {"receivers": {"tls": {"cert_file": "/certs/tls.crt"}}}},
        "config.receivers.tls is set by the chart: use receiversTls instead",
    ),
    "certificate authentication without mutual TLS": (
        {
            "config": {"receivers": {"auth": "certificate"}},
            "receiversTls": {"enabled": True, "secretName": "t"},
        },
        "config.receivers.auth: certificate needs mutual TLS on the receivers",
    ),
    "token authentication without a token": (
        {"config": {"receivers": {"auth": "token"}}},
        "config.receivers.auth: token needs tokens",
    ),
    "a tokens file with no tokens": (
        {"secrets": {"tokensFile": True}},
        "secrets.tokensFile needs the tokens",
    ),
    "a tokens file twice": (
        {
            "secrets": {"tokensFile": True, "existingSecret": "s"},
            "config": {"auth": {"tokens_file": "/mine/tokens"}},
        },
        "config.auth.tokens_file is set by the chart with secrets.tokensFile",
    ),
    "a token the file form cannot carry": (
        {"secrets": {"tokensFile": True, "advisoryTokens": {"#abc": "team"}}},
        "the file holds token=tenant lines",
    ),
    "a gRPC probe on the TLS port": (
        {
            "receiversTls": {"enabled": True, "secretName": "t"},
            "startupProbe": {"grpc": {"port": 4317}},
        },
        "startupProbe: the kubelet's gRPC probe speaks no TLS",
    ),
    "probes on a disabled metrics port, with receiver TLS": (
        {
            "receiversTls": {"enabled": True, "secretName": "t"},
            "ports": {"metrics": {"enabled": False}},
        },
        "tcpSocket: {port: otlp}",
    ),
    "no intake port": (
        {"ports": {"otlp": {"enabled": False}, "otlp-http": {"enabled": False}}},
        "at least one of otlp and otlp-http",
    ),
    "probes on a disabled metrics port": (
        {"ports": {"metrics": {"enabled": False}}},
        "give livenessProbe another check",
    ),
    "shared state without a Redis": ({"redis": {"enabled": True}}, "needs redis.url"),
    "both a Redis url and the embedded Redis": (
        {"redis": {"enabled": True, "url": "redis://r:6379/0", "embedded": {"enabled": True}}},
        "not both",
    ),
    "an embedded Redis nothing uses": (
        {"redis": {"embedded": {"enabled": True}}},
        "set redis.enabled too",
    ),
    "a Redis password twice": (
        {
            "redis": {
                "enabled": True,
                "url": "redis://r:6379/0",
                "existingSecret": "r",
                "password": "abc==",
            }
        },
        "put the password in that Secret",
    ),
    "a Redis password with no Secret to hold it": (
        {
            "secrets": {"existingSecret": "s"},
            "redis": {"enabled": True, "url": "redis://r:6379/0", "password": "abc=="},
        },
        "name it in redis.existingSecret",
    ),
    "credentials in the Redis url": (
        {"redis": {"enabled": True, "url": "redis://user:abc==@r:6379/0"}},
        "must not hold credentials",
    ),
    "the Redis url in config": (
        {"config": {"state": {"redis": {"url": "redis://r:6379/0"}}}},
        "use redis.url or redis.embedded.enabled instead",
    ),
    "the disk queue set in config": (
        {"config": {"forward": {"endpoint": "c:4317", "queue": {"storage": "disk"}}}},
        "config.forward.queue.storage is set by the chart: use persistence.enabled",
    ),
    "a queue directory set in config": (
        {"config": {"forward": {"queue": {"directory": "/data"}}}},
        "config.forward.queue.directory is set by the chart: use persistence",
    ),
    "fsync without the disk queue": (
        {"config": {"forward": {"endpoint": "c:4317", "queue": {"fsync": True}}}},
        "config.forward.queue.fsync is for the disk queue: set persistence.enabled too",
    ),
    "persistence without a next hop": (
        {"workload": "StatefulSet", "persistence": {"enabled": True}},
        "persistence.enabled needs config.forward.endpoint",
    ),
    "persistence on a Deployment without a claim": (
        {"config": {"forward": {"endpoint": "c:4317"}}, "persistence": {"enabled": True}},
        "for a volume per pod, set workload: StatefulSet",
    ),
    "one claim for two pods": (
        {
            "config": {"forward": {"endpoint": "c:4317"}},
            "persistence": {"enabled": True, "existingClaim": "queue"},
            "replicaCount": 2,
        },
        "two pods cannot share a queue",
    ),
    "an unknown workload": (
        {"workload": "DaemonSet"},
        "workload must be Deployment or StatefulSet",
    ),
    "a ServiceMonitor without a Service": (
        {"serviceMonitor": {"enabled": True}, "service": {"enabled": False}},
        "serviceMonitor.enabled needs service.enabled",
    ),
}


@pytest.fixture(scope="module")
def schemaless_chart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    """The chart without values.schema.json: what --skip-schema-validation renders."""
    copy_dir = tmp_path_factory.mktemp("chart") / "mcp-breaker"
    shutil.copytree(CHART_DIR, copy_dir, ignore=shutil.ignore_patterns("examples"))
    (copy_dir / "values.schema.json").unlink()
    with Chart.load(copy_dir) as chart:
        yield chart


@pytest.mark.parametrize(("values", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_the_chart_refuses_what_pods_could_not_serve(
    values: dict[str, Any], message: str, schemaless_chart: Chart
) -> None:
    """Refused with a reason by the templates themselves, so even past the schema
    (--skip-schema-validation); no message quotes a secret. (``helm lint`` only logs a
    template's ``fail``; ``helm install`` and ``helm template`` stop on it.)"""
    with pytest.raises(HelmError) as refused:
        schemaless_chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert message in str(refused.value)
    for secret in ("abc==", "Bearer x", "#abc"):
        assert secret not in str(refused.value)
    with pytest.raises(HelmError):
        render(values)


def test_the_pod_has_time_to_drain_its_queue() -> None:
    """terminationGracePeriodSeconds leaves forward.shutdown_grace_s plus 5 s, with the
    service's own default grace when the config leaves it out."""
    floor = int(DEFAULT_SHUTDOWN_GRACE_S) + 5
    assert render({"terminationGracePeriodSeconds": floor})
    with pytest.raises(HelmError, match="terminationGracePeriodSeconds"):
        render({"terminationGracePeriodSeconds": floor - 1})
    longer = {"config": {"forward": {"shutdown_grace_s": 60}}}
    with pytest.raises(HelmError, match=r"forward.shutdown_grace_s \(60\) \+ 5"):
        render(longer)
    assert render(with_values(longer, terminationGracePeriodSeconds=65))


def test_ports_drive_the_listen_addresses_and_the_switches() -> None:
    values = with_values(
        {},
        **{"ports.otlp-http.enabled": False, "ports.otlp.containerPort": 14317},
        listenAddress="[::]",
    )
    rendered = render(values)
    config = yaml.safe_load(config_file(rendered))
    assert config["receivers"] == {
        "grpc": {"enabled": True, "endpoint": "[::]:14317"},
        "http": {"enabled": False, "endpoint": "[::]:4318"},
    }
    ports = {p["name"]: p["containerPort"] for p in container(rendered)["ports"]}
    assert ports == {"otlp": 14317, "metrics": 9464, "advisories": 4320}
    service = {p["name"]: p for p in one(rendered, "Service")["spec"]["ports"]}
    assert sorted(service) == ["advisories", "metrics", "otlp"]
    assert service["otlp"]["targetPort"] == "otlp" and service["otlp"]["appProtocol"] == "grpc"


def test_the_pod_runs_as_the_image_user_on_a_read_only_root() -> None:
    rendered = render({})
    pod = one(rendered, "Deployment")["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert main["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert main["image"] == f"mcp-breaker:{__version__}"
    assert "command" not in main  # the image's entrypoint, `mcp-breaker serve`, runs
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert pod["automountServiceAccountToken"] is False


def test_the_image_is_pulled_by_digest_when_one_is_given() -> None:
    assert container(render(EVERYTHING))["image"] == "mcp-breaker@sha256:" + "ab" * 32
    assert container(render({"image": {"tag": "dev"}}))["image"] == "mcp-breaker:dev"


def test_the_chart_deploys_this_version() -> None:
    with Chart.load(CHART_DIR) as chart:
        assert chart.metadata["appVersion"] == __version__


# -- the alert rules and the dashboard: one source each -------------------------------------
def test_the_prometheus_rule_holds_the_alert_file_byte_for_byte(tmp_path: Path) -> None:
    """The PrometheusRule's spec is deploy/prometheus/alerts.yaml as it is, and what promtool
    tests: its unit tests pass against the spec taken out of the rendered object."""
    link = CHART_DIR / "files" / "alerts.yaml"
    assert link.is_symlink() and link.resolve() == ALERTS.resolve()
    text = render({"prometheusRule": {"enabled": True}})["templates/prometheusrule.yaml"]
    spec = text.split("\nspec:\n", 1)[1]
    lines = spec.splitlines(keepends=True)
    assert all(line.startswith("  ") or line == "\n" for line in lines)
    extracted = "".join(line[2:] if line != "\n" else line for line in lines)
    assert extracted == ALERTS.read_text(encoding="utf-8")
    rule_file = tmp_path / "from-the-chart.yaml"
    rule_file.write_text(extracted, encoding="utf-8")
    tests = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    assert tests["rule_files"] == ["alerts.yaml"]
    tests["rule_files"] = [rule_file.name]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run(
        [binary("promtool"), "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_the_prometheus_rule_pages_when_replicas_split() -> None:
    """The chart's rule carries the split alert (issue 27) as the file has it: a replica
    deciding alone keeps /readyz at 200, so only this pages."""
    values = {**example_values("with-redis-and-3-replicas"), "prometheusRule": {"enabled": True}}
    rule = one(render(values), "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    split = alerts["MCPBreakerReplicasSplit"]
    assert split["expr"].strip() == "min by (job, instance) (mcp_breaker_shared_state_up) == 0"
    assert (split["for"], split["labels"]["severity"]) == ("5m", "critical")


def test_the_dashboard_config_map_holds_the_dashboard_file() -> None:
    link = CHART_DIR / "files" / "mcp-breaker.json"
    assert link.is_symlink() and link.resolve() == DASHBOARD.resolve()
    rendered = render({"grafanaDashboard": {"enabled": True}})
    dashboards = [d for _, d in manifests(rendered) if d["metadata"]["name"].endswith("-dashboard")]
    (config_map,) = dashboards
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["data"]["mcp-breaker.json"] == DASHBOARD.read_text(encoding="utf-8")
    assert "templates/dashboard.yaml" not in render({})


def test_the_packaged_chart_carries_the_linked_files(tmp_path: Path) -> None:
    """``helm package`` follows the links: the archive holds the files themselves."""
    archive = package(CHART_DIR, destination=tmp_path)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())

        def read(name: str) -> str:
            member = tar.extractfile(f"mcp-breaker/{name}")
            assert member is not None, name
            return member.read().decode()

        assert read("files/alerts.yaml") == ALERTS.read_text(encoding="utf-8")
        assert read("files/mcp-breaker.json") == DASHBOARD.read_text(encoding="utf-8")
    assert not any("/examples/" in name for name in names)
    assert "mcp-breaker/values.schema.json" in names


# -- what the user reads --------------------------------------------------------------------
def value_paths(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaf values of values.yaml; an empty mapping or list is a leaf (free-form)."""
    if isinstance(node, dict) and node:
        for key, child in node.items():
            yield from value_paths(child, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def test_the_readme_lists_every_value_with_its_default() -> None:
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    readme = (CHART_DIR / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) == 5 and cells[1].startswith("`") and cells[2].startswith("`"):
            rows[cells[1].strip("`")] = cells[2][1:-1]
    expected = dict(value_paths(values))
    assert sorted(rows) == sorted(expected), "README.md's table and values.yaml differ"
    for key, default in expected.items():
        assert json.loads(rows[key]) == default, f"{key}: README says {rows[key]}"


NOTES_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "defaults": (
        {},
        [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://example-mcp-breaker.default.svc:4317",
            "No next hop is set",
            "No advisory tokens are set",
            "Anyone who reaches these ports may send spans",
        ],
    ),
    "token authentication from the chart's Secret": (
        {"config": {"receivers": {"auth": "token"}}, "secrets": {"advisoryTokens": {"t": "a"}}},
        [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://example-mcp-breaker.default.svc:4317",
            'OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer <token>"',
            "the Secret\nexample-mcp-breaker (key advisory-tokens)",
        ],
    ),
    "certificate authentication": (
        EVERYTHING,
        [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://example-mcp-breaker.default.svc:4317",
            "Over mutual TLS (receiversTls)",
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=client.crt",
            "its common\nname is the tenant",
        ],
    ),
    "with-redis-and-3-replicas": (
        example_values("with-redis-and-3-replicas"),
        ["share one breaker through Redis at redis://redis-master.redis.svc.cluster.local"],
    ),
    "embedded Redis": (
        {"redis": {"enabled": True, "embedded": {"enabled": True}}},
        ["NOT FOR PRODUCTION", "Set redis.url to a Redis you run"],
    ),
    "replicas without Redis": (
        {"replicaCount": 3},
        ["3 replicas without shared state", "Set redis.enabled and\nredis.url"],
    ),
    "with-disk-queue": (
        example_values("with-disk-queue"),
        ["spans wait on the pod's volume (/var/lib/mcp-breaker/queue)"],
    ),
    "with-tls": (
        example_values("with-tls"),
        [
            "spans wait in memory: a pod that dies loses them",
            "Every span is forwarded to otel-collector.observability.svc.cluster.local:4317",
            "over mutual TLS",
            "bearer token from the Secret mcp-breaker-secrets",
            "--tls-ca ca.crt",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://example-mcp-breaker.default.svc:4318/v1/traces",
            "OTEL_EXPORTER_OTLP_CERTIFICATE=ca.crt",
            'OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer <token>"',
            "(keys advisory-tokens and tokens-file)",
            "without a restart",
        ],
    ),
}


@pytest.mark.parametrize(("values", "said"), NOTES_CASES.values(), ids=NOTES_CASES.keys())
def test_the_notes_say_how_to_send_spans_and_subscribe(
    values: dict[str, Any], said: list[str]
) -> None:
    notes = render(values)["templates/NOTES.txt"]
    for text in said:
        assert text in notes, notes
    assert "example-mcp-breaker.default.svc:4320" in notes


# -- persistence: the disk queue ------------------------------------------------------------
def test_a_statefulset_gives_each_pod_a_claim_where_the_config_puts_the_queue(
    tmp_path: Path,
) -> None:
    rendered = render(example_values("with-disk-queue"))
    stateful = one(rendered, "StatefulSet")
    assert not [doc for _, doc in manifests(rendered) if doc["kind"] == "Deployment"]
    (claim,) = stateful["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "queue"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    (only,) = stateful["spec"]["template"]["spec"]["containers"]
    (mount,) = [m for m in only["volumeMounts"] if m["name"] == "queue"]
    config = yaml.safe_load(config_file(rendered))
    queue = config["forward"]["queue"]
    assert queue["storage"] == "disk"
    assert queue["directory"].startswith(mount["mountPath"] + "/")
    assert queue["fsync"] is True  # the user's key, left alone
    # The pod runs as the image's user; fsGroup makes the claim writable by it.
    assert stateful["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 10001
    assert check_config(config_file(rendered), tmp_path).endswith(": valid\n")


def test_a_deployment_mounts_an_existing_claim_and_is_recreated_not_rolled() -> None:
    rendered = render(
        {
            "config": {"forward": {"endpoint": "c:4317"}},
            "persistence": {"enabled": True, "existingClaim": "mcp-breaker-queue"},
        }
    )
    deployment = one(rendered, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["queue"]["persistentVolumeClaim"] == {"claimName": "mcp-breaker-queue"}
    assert "strategy" not in one(render({}), "Deployment")["spec"]  # the default: rolled


def test_the_autoscaler_targets_the_workload_of_the_kind_chosen() -> None:
    values = {"autoscaling": {"enabled": True}, "workload": "StatefulSet"}
    target = one(render(values), "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert target == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "example-mcp-breaker"}
