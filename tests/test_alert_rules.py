"""The Prometheus alert rules in deploy/prometheus: valid, unit-tested, and on real metrics.

promtool (Debian's ``prometheus`` package) checks the rule file and runs its unit tests;
the rest reads both YAML files: every alert has a test where it fires and one where it
must stay quiet, and every metric and label the rules and tests name is in the catalogue.
promtool missing is a failure, not a skip: these rules ship to people's Prometheus.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from processor.telemetry.catalogue import CATALOGUE, Kind, MetricSpec

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "deploy" / "prometheus"
ALERTS = RULES_DIR / "alerts.yaml"
ALERT_TESTS = RULES_DIR / "alerts.test.yaml"

SEVERITIES = {"critical", "warning", "info"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Labels every scraped series may carry besides the catalogue's own.
TARGET_LABELS = {"job", "instance"}
METRIC_NAME = re.compile(r"\bmcp_breaker_[a-zA-Z0-9_]+")
SELECTOR = re.compile(r"\b(mcp_breaker_[a-zA-Z0-9_]+)\s*\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


# -- helpers ----------------------------------------------------------------------------
def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.relative_to(ROOT)}: not a YAML mapping"
    return cast(dict[str, Any], data)


def alert_rules() -> list[dict[str, Any]]:
    return [
        cast(dict[str, Any], rule)
        for group in load(ALERTS)["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


def rule_cases() -> Iterator[dict[str, Any]]:
    for test in load(ALERT_TESTS)["tests"]:
        yield from cast(list[dict[str, Any]], test.get("alert_rule_test") or [])


def input_series() -> Iterator[str]:
    for test in load(ALERT_TESTS)["tests"]:
        for series in test.get("input_series") or []:
            yield cast(str, series["series"])


def scraped_names() -> dict[str, MetricSpec]:
    """Every sample name the service exposes, to the spec that declares it."""
    names = {spec.scraped_name: spec for spec in CATALOGUE}
    for spec in CATALOGUE:
        if spec.kind is Kind.HISTOGRAM:
            names.update({spec.full_name + suffix: spec for suffix in HISTOGRAM_SUFFIXES})
    return names


def allowed_labels(name: str, spec: MetricSpec) -> set[str]:
    labels = set(spec.labels) | TARGET_LABELS
    if spec.kind is Kind.STATESET:
        labels.add(spec.full_name)  # a stateset's state label is named after the metric
    if spec.bounded:
        labels.add("otel_metric_overflow")
    if name.endswith("_bucket"):
        labels.add("le")
    return labels


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("promtool")
    if executable is None:
        pytest.fail(
            "promtool not found on PATH: install Prometheus (Debian: apt install prometheus)"
        )
    return subprocess.run(
        [executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- promtool ---------------------------------------------------------------------------
def test_promtool_accepts_the_rule_file() -> None:
    result = promtool("check", "rules", relative(ALERTS))
    assert result.returncode == 0, f"promtool check rules:\n{result.stdout}\n{result.stderr}"


def test_promtool_unit_tests_pass() -> None:
    result = promtool("test", "rules", relative(ALERT_TESTS))
    assert result.returncode == 0, f"promtool test rules:\n{result.stdout}\n{result.stderr}"
    assert "SUCCESS" in result.stdout, result.stdout


# -- the rules' shape -------------------------------------------------------------------
def test_every_alert_has_for_severity_summary_and_description() -> None:
    rules = alert_rules()
    assert rules, "no alerts in alerts.yaml"
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), f"alert names repeat: {names}"
    for rule in rules:
        name = rule["alert"]
        assert "for" in rule, f"{name}: no for:"
        assert rule.get("labels", {}).get("severity") in SEVERITIES, f"{name}: severity"
        annotations = rule.get("annotations", {})
        for key in ("summary", "description"):
            assert str(annotations.get(key, "")).strip(), f"{name}: no {key} annotation"


def test_every_alert_is_tested_firing_and_quiet() -> None:
    defined = {rule["alert"] for rule in alert_rules()}
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in rule_cases():
        name = case["alertname"]
        assert name in defined, f"alerts.test.yaml tests {name}, which alerts.yaml lacks"
        if "exp_alerts" not in case:
            continue
        expected = case["exp_alerts"]
        assert isinstance(expected, list), f"{name} at {case['eval_time']}: exp_alerts"
        if expected:
            fires.add(name)
            for alert in expected:
                assert alert.get("exp_labels"), f"{name} at {case['eval_time']}: exp_labels"
                assert alert.get("exp_annotations"), f"{name}: exp_annotations"
        else:
            quiet.add(name)
    assert defined - fires == set(), "alerts never tested firing"
    assert defined - quiet == set(), "alerts never tested staying quiet (exp_alerts: [])"


# -- the catalogue ----------------------------------------------------------------------
def test_rules_use_only_catalogued_metrics_and_labels() -> None:
    known = scraped_names()
    for rule in alert_rules():
        name, expr = rule["alert"], QUOTED.sub('""', str(rule["expr"]))
        used = set(METRIC_NAME.findall(expr))
        assert used, f"{name}: reads no mcp_breaker_ metric"
        unknown = used - known.keys()
        assert not unknown, f"{name}: not in the catalogue: {sorted(unknown)}"
        for metric, matchers in SELECTOR.findall(expr):
            labels = set(MATCHER_LABEL.findall(matchers))
            extra = labels - allowed_labels(metric, known[metric])
            assert not extra, f"{name}: {metric} has no label {sorted(extra)}"


def test_unit_tests_feed_only_catalogued_series() -> None:
    known = scraped_names()
    for series in input_series():
        metric = series.split("{", 1)[0].strip()
        assert metric in known, f"input series {series!r}: metric not in the catalogue"
        matchers = series.split("{", 1)[1] if "{" in series else ""
        labels = set(MATCHER_LABEL.findall(QUOTED.sub('""', matchers)))
        extra = labels - allowed_labels(metric, known[metric])
        assert not extra, f"input series {series!r}: {metric} has no label {sorted(extra)}"
