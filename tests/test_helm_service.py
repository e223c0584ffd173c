"""The pod, without the cluster: the service started as the chart's Deployment starts it.

The chart is rendered with its minimal example (ports moved to free ones on loopback, the
next hop pointed at a real gRPC OTLP server here, tokens in a chart-made Secret). The
process is the image's entrypoint (the Dockerfile's ENTRYPOINT) with the container's
args, the ConfigMap's file where the volume would mount it, and the container's env with
each secretKeyRef read from the rendered Secret, and each Secret volume written where it
would be mounted, laid out as the kubelet lays it out. Then it is probed as the kubelet
would, fed spans by the OpenTelemetry SDK's OTLP exporters, asked by a harness with the
Secret's token, and stopped with SIGTERM.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from processor.advisories.v1 import advisories_pb2 as pb
from processor.advisories.v1 import advisories_pb2_grpc as pb_grpc
from tests.helm_chart import config_file, example_values, manifests, one, render
from tests.redis_server import RedisServer
from tests.replicas import SERVER, TOOL, tool_calls
from tests.sdk import export_grpc, export_http, record_spans
from tests.support import LOOPBACK, CaptureCollector, free_port, wait_until
from tests.test_advisories_service import (
    Pki,
    pki,  # noqa: F401 (a fixture)
)
from tests.test_dockerfile import stages

TOKEN, TENANT = "harness-token-1", "team-a"
START_S = 60  # deadlines on waiting, never measured durations
PORT_NAMES = ("otlp", "otlp-http", "metrics", "advisories")


class Pod:
    """The rendered container, run as a local process."""

    def __init__(
        self,
        rendered: dict[str, str],
        workdir: Path,
        kind: str = "Deployment",
        volume: Path | None = None,
        cluster_secrets: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """``volume``: the directory that stands for the pod's persistent volume, which
        outlives the pod (a StatefulSet's claim). ``cluster_secrets``: Secrets the cluster
        already holds (name -> key -> value), for the secretKeyRefs the chart does not own."""
        spec = one(rendered, kind)["spec"]["template"]["spec"]
        (self.container,) = spec["containers"]
        self.grace_s = float(spec["terminationGracePeriodSeconds"])
        self.ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        self.secrets = self._secrets(rendered, cluster_secrets or {})
        # The ConfigMap volume, where the container mounts it; the queue's, at ``volume``;
        # each Secret volume, in a directory of its own under ``workdir``.
        (mount,) = [m for m in self.container["volumeMounts"] if m["name"] == "config"]
        config_dir = workdir / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        text = config_file(rendered)
        for data in (m for m in self.container["volumeMounts"] if m["name"] == "queue"):
            assert volume is not None, "this pod mounts a volume: give it one"
            text = text.replace(data["mountPath"], str(volume))
        volumes = {v["name"]: v for v in spec["volumes"]}
        # volume name -> (its directory, the Secret it shows: name and items)
        self.secret_volumes: dict[str, tuple[Path, dict[str, Any]]] = {}
        for secret_mount in self.container["volumeMounts"]:
            # (A StatefulSet's queue is a claim template's, not in the pod's volumes.)
            source = volumes.get(secret_mount["name"], {}).get("secret")
            if source is None:
                continue
            assert secret_mount.get("readOnly") and "subPath" not in secret_mount
            directory = workdir / "volumes" / secret_mount["name"]
            self.secret_volumes[secret_mount["name"]] = (directory, source)
            project(directory, self._items(source))
            text = text.replace(f"{secret_mount['mountPath']}/", f"{directory}/")
        (config_dir / "config.yaml").write_text(text, encoding="utf-8")
        args = [a.replace(mount["mountPath"], str(config_dir)) for a in self.container["args"]]
        _, final = stages()
        entrypoint = json.loads(final.all("ENTRYPOINT")[-1])
        self.command = [*entrypoint, *args]
        self.env = self._environment()
        self.log_path = workdir / "pod.log"
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def _secrets(
        rendered: dict[str, str], cluster_secrets: dict[str, dict[str, str]]
    ) -> dict[str, dict[str, str]]:
        """Secret name -> key -> value: the chart's (decoded from the render) and those the
        cluster already holds."""
        by_name = {name: dict(data) for name, data in cluster_secrets.items()}
        for _, doc in manifests(rendered):
            if doc["kind"] == "Secret":
                data = doc["data"].items()
                by_name[doc["metadata"]["name"]] = {
                    k: base64.b64decode(v).decode() for k, v in data
                }
        return by_name

    def _items(self, source: dict[str, Any]) -> dict[str, str]:
        """A Secret volume's files: path -> content. A key the Secret lacks fails, as the
        kubelet fails to mount it (the chart marks no Secret volume optional)."""
        data = self.secrets[source["secretName"]]
        assert not source.get("optional")
        return {item["path"]: data[item["key"]] for item in source["items"]}

    def update_secret(self, name: str, data: dict[str, str]) -> None:
        """The Secret changes in the cluster: the kubelet rewrites every volume showing it,
        in place (the environment keeps what the container started with)."""
        self.secrets[name] = dict(data)
        for directory, source in self.secret_volumes.values():
            if source["secretName"] == name:
                project(directory, self._items(source))

    def _environment(self) -> dict[str, str]:
        """The container's env: each secretKeyRef read from the Secret it names."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BREAKER_")}
        # The image puts the environment's bin/ first on PATH; here that is this venv's.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        for item in self.container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref.get("optional") and ref["key"] not in self.secrets.get(ref["name"], {}):
                continue  # the kubelet leaves an optional variable out
            env[item["name"]] = self.secrets[ref["name"]][ref["key"]] if ref else item["value"]
        return env

    def start(self) -> Pod:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        return self

    def probe(self, name: str) -> int:
        """The probe's httpGet, as the kubelet sends it: its status, or 0 unanswered."""
        get = self.container[name]["httpGet"]
        port = self.ports[get["port"]] if isinstance(get["port"], str) else get["port"]
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{get['path']}", timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except (urllib.error.URLError, ConnectionError):
            return 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, as the kubelet sends it; the exit status within the grace period."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
            raise AssertionError(f"not stopped within {self.grace_s} s\n{self.log()}") from None


def project(directory: Path, files: dict[str, str]) -> None:
    """Write a Secret volume as the kubelet does (its atomic writer): the files in a fresh
    hidden directory, ``..data`` a link to it replaced in one rename, and each file a link
    through ``..data``. An update so replaces every file at once, under the same path."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "..data"
    before = os.readlink(data) if data.is_symlink() else None
    fresh = Path(tempfile.mkdtemp(prefix="..", dir=directory))
    for name, text in files.items():
        (fresh / name).write_text(text, encoding="utf-8")
    swap = directory / "..data_tmp"
    swap.symlink_to(fresh.name)
    os.replace(swap, data)
    for name in files:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(Path("..data") / name)
    if before is not None:
        shutil.rmtree(directory / before)


@pytest.fixture
def pod(next_hop: CaptureCollector, tmp_path: Path) -> Iterator[Pod]:
    values: dict[str, Any] = example_values("minimal")
    values["config"]["forward"]["endpoint"] = next_hop.endpoint
    values["listenAddress"] = LOOPBACK
    values["ports"] = {name: {"containerPort": free_port()} for name in PORT_NAMES}
    values["secrets"] = {"advisoryTokens": {TOKEN: TENANT}}
    running = Pod(render(values), tmp_path).start()
    try:
        yield running
    finally:
        if running.process is not None and running.process.poll() is None:
            running.process.kill()
            running.process.wait(30)


def check(port: int, token: str | None) -> grpc.StatusCode | pb.CheckResponse:
    with grpc.insecure_channel(f"{LOOPBACK}:{port}") as channel:
        stub = pb_grpc.AdvisoriesStub(channel)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        try:
            response: pb.CheckResponse = stub.Check(
                pb.CheckRequest(server="playwright", tool="browser_navigate", turn="t-1"),
                metadata=metadata,
                timeout=10,
            )
        except grpc.RpcError as error:
            code: grpc.StatusCode = error.code()
            return code
        return response


def test_the_pod_takes_spans_forwards_them_and_stops_clean(
    pod: Pod, next_hop: CaptureCollector
) -> None:
    assert pod.command[:2] == ["mcp-breaker", "serve"]
    assert pod.command[2] == "--config"
    wait_until(lambda: pod.probe("readinessProbe") == 200, START_S, f"/readyz\n{pod.log()}")
    assert pod.probe("livenessProbe") == 200

    # A harness's OpenTelemetry SDK, over both OTLP transports, as NOTES.txt tells it.
    over_grpc = record_spans(40, mcp_every=7)
    over_http = record_spans(25)
    assert export_grpc(f"{LOOPBACK}:{pod.ports['otlp']}", over_grpc).name == "SUCCESS"
    url = f"http://{LOOPBACK}:{pod.ports['otlp-http']}/v1/traces"
    assert export_http(url, over_http).name == "SUCCESS"
    sent = len(over_grpc) + len(over_http)
    wait_until(lambda: next_hop.span_count() == sent, START_S, f"forwarding\n{pod.log()}")
    names = {span.name for span in next_hop.spans()}
    assert "tools/call browser_navigate" in names and "agent turn" in names

    # The Secret's token reached the service through the environment: it is the only way in.
    port = pod.ports["advisories"]
    assert check(port, None) is grpc.StatusCode.UNAUTHENTICATED
    assert check(port, "not-the-token") is grpc.StatusCode.UNAUTHENTICATED
    allowed = check(port, TOKEN)
    assert isinstance(allowed, pb.CheckResponse) and allowed.verdict == pb.VERDICT_ALLOW

    # Its own metrics count what it did, on the port the ServiceMonitor would scrape.
    with urllib.request.urlopen(
        f"http://{LOOPBACK}:{pod.ports['metrics']}/metrics", timeout=10
    ) as response:
        scrape = response.read().decode()
    assert f"mcp_breaker_exporter_sent_spans_total {float(sent)}" in scrape

    assert pod.stop() == 0, pod.log()
    assert f"every accepted span was delivered to {next_hop.endpoint}" in pod.log()
    assert next_hop.span_count() == sent
    assert TOKEN not in pod.log()


def test_three_pods_on_one_redis_decide_as_one(next_hop: CaptureCollector, tmp_path: Path) -> None:
    """The Redis example's three pods, on a real redis-server that requires a password: the
    password comes from the Secret the example names (here, as the cluster would hold it),
    and a failure sent to one pod refuses the next call at the others."""
    password = "redis-" + secrets.token_hex(12)
    redis = RedisServer(tmp_path / "redis", password=password).start()
    pods: list[Pod] = []
    try:
        values: dict[str, Any] = example_values("with-redis-and-3-replicas")
        values["config"]["forward"]["endpoint"] = next_hop.endpoint
        values["redis"]["url"] = redis.url
        values["listenAddress"] = LOOPBACK
        replicas = values["replicaCount"]
        cluster = {values["redis"]["existingSecret"]: {values["redis"]["passwordKey"]: password}}
        for index in range(replicas):
            # One render per pod: on one machine each needs ports of its own.
            values["ports"] = {name: {"containerPort": free_port()} for name in PORT_NAMES}
            pods.append(
                Pod(render(values), tmp_path / f"pod-{index}", cluster_secrets=cluster).start()
            )
        for pod in pods:
            wait_until(lambda p=pod: p.probe("readinessProbe") == 200, START_S, pod.log())
        first, *others = pods
        for pod in pods:
            assert state_of(pod).shared_state.startswith("redis: up"), pod.log()

        # Three session failures reach the first pod only.
        failing = tool_calls([f"turn-{i}" for i in range(3)])
        assert export_grpc(f"{LOOPBACK}:{first.ports['otlp']}", failing).name == "SUCCESS"
        for pod in others:
            wait_until(
                lambda p=pod: refused_at(p),
                START_S,
                f"the server's circuit to open at every pod\n{pod.log()}",
            )
        wait_until(lambda: next_hop.span_count() == len(failing), START_S, first.log())
        for pod in pods:
            assert pod.stop() == 0, pod.log()
            assert password not in pod.log()
    finally:
        for pod in pods:
            if pod.process is not None and pod.process.poll() is None:
                pod.process.kill()
                pod.process.wait(30)
        redis.stop()


def state_of(pod: Pod) -> pb.GetStateResponse:
    with grpc.insecure_channel(f"{LOOPBACK}:{pod.ports['advisories']}") as channel:
        response: pb.GetStateResponse = pb_grpc.AdvisoriesStub(channel).GetState(
            pb.GetStateRequest(), timeout=10
        )
        return response


def refused_at(pod: Pod) -> bool:
    with grpc.insecure_channel(f"{LOOPBACK}:{pod.ports['advisories']}") as channel:
        response: pb.CheckResponse = pb_grpc.AdvisoriesStub(channel).Check(
            pb.CheckRequest(server=SERVER, tool=TOOL, turn="a-new-turn"), timeout=10
        )
    return bool(response.verdict == pb.VERDICT_DENY)


def test_the_stateful_pod_keeps_its_queue_across_a_kill(tmp_path: Path) -> None:
    """The with-disk-queue example: spans taken while the next hop is away, the container
    killed (SIGKILL, as an OOM kill), a new container on the same claim: they arrive."""
    port = free_port()  # the next hop, away for now
    values: dict[str, Any] = example_values("with-disk-queue")
    values["config"]["forward"]["endpoint"] = f"{LOOPBACK}:{port}"
    values["listenAddress"] = LOOPBACK
    values["ports"] = {name: {"containerPort": free_port()} for name in PORT_NAMES}
    values["secrets"] = {"advisoryTokens": {TOKEN: TENANT}}
    rendered = render(values)
    claim = one(rendered, "StatefulSet")["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    volume = tmp_path / "claim"
    first = Pod(rendered, tmp_path, "StatefulSet", volume).start()
    try:
        wait_until(lambda: first.probe("livenessProbe") == 200, START_S, first.log())
        spans = record_spans(60, mcp_every=6)
        assert export_grpc(f"{LOOPBACK}:{first.ports['otlp']}", spans).name == "SUCCESS"
    finally:
        assert first.process is not None
        first.process.kill()
        first.process.wait(30)
    assert (volume / "queue" / "forward-queue.sqlite3").exists()
    hop = CaptureCollector(port).start()
    second = Pod(rendered, tmp_path, "StatefulSet", volume).start()
    try:
        wait_until(lambda: hop.span_count() >= 60, START_S, f"redelivery\n{second.log()}")
        assert second.stop() == 0, second.log()
    finally:
        hop.stop()
        if second.process is not None and second.process.poll() is None:
            second.process.kill()
    assert {s.span_id for s in hop.spans()} == {
        span.context.span_id.to_bytes(8, "big") for span in spans
    }
    assert "disk queue: 60 spans in 1 request were left undelivered by the last run" in (
        second.log()
    )


def export_as_the_notes_say(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], spans: list[Any], *, http: bool
) -> str:
    """The OpenTelemetry SDK's exporter configured by nothing but the environment variables
    NOTES.txt gives: SUCCESS or FAILURE."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    with monkeypatch.context() as patched:
        # requests lets REQUESTS_CA_BUNDLE (set on some CI hosts) beat the exporter's own CA.
        unrelated = ("OTEL_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
        for name in [k for k in os.environ if k.startswith(unrelated)]:
            patched.delenv(name)
        for name, value in env.items():
            patched.setenv(name, value)
        exporter = Http() if http else Grpc()
        try:
            return exporter.export(spans).name
        finally:
            exporter.shutdown()


def test_the_tls_example_takes_spans_only_with_a_token_and_rotates_tokens_in_place(
    pki: Pki,  # noqa: F811
    next_hop: CaptureCollector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The with-tls example: the OTLP receivers over TLS with token authentication, the
    token map a file mounted from the user's Secret. Senders set up as NOTES.txt says get
    in with a token and not without; a token replaced in the Secret is refused, and its
    successor taken, by the same process: no restart."""
    values: dict[str, Any] = example_values("with-tls")
    values["config"]["forward"]["endpoint"] = next_hop.endpoint
    values["config"]["auth"] = {"tokens_reload_s": 0.2}  # the default 5 s, made short
    values["listenAddress"] = LOOPBACK
    values["ports"] = {name: {"containerPort": free_port()} for name in PORT_NAMES}
    rendered = render(values)
    notes = rendered["templates/NOTES.txt"]
    certificate = pki.server_cert.read_text()
    key = pki.server_key.read_text()
    ca = pki.ca.decode()
    tokens = {"tokens-file": f"# the harnesses\n{TOKEN}={TENANT}\n", "advisory-admin-tokens": "adm"}
    cluster = {
        values["secrets"]["existingSecret"]: tokens,
        values["receiversTls"]["secretName"]: {"tls.crt": certificate, "tls.key": key},
        values["advisoryTls"]["secretName"]: {"tls.crt": certificate, "tls.key": key, "ca.crt": ca},
    }
    running = Pod(rendered, tmp_path, cluster_secrets=cluster).start()
    try:
        wait_until(
            lambda: running.probe("readinessProbe") == 200, START_S, f"/readyz\n{running.log()}"
        )
        assert running.process is not None
        pid = running.process.pid
        grpc_url = f"https://{LOOPBACK}:{running.ports['otlp']}"
        http_url = f"https://{LOOPBACK}:{running.ports['otlp-http']}/v1/traces"
        assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://" in notes
        assert 'OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer <token>"' in notes
        base = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca_file)}

        def sender(url: str, token: str | None) -> dict[str, str]:
            env = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url}
            if token is not None:
                env["OTEL_EXPORTER_OTLP_HEADERS"] = f"authorization=Bearer {token}"
            return env

        spans = record_spans(12, mcp_every=4)

        def sends(url: str, token: str | None, *, http: bool = False) -> bool:
            result = export_as_the_notes_say(monkeypatch, sender(url, token), spans, http=http)
            return result == "SUCCESS"

        for url, http in ((grpc_url, False), (http_url, True)):
            assert sends(url, TOKEN, http=http), running.log()
            assert not sends(url, None, http=http)
            assert not sends(url, "not-a-token", http=http)
        wait_until(lambda: next_hop.span_count() == 2 * len(spans), START_S, running.log())

        # The Secret changes; the kubelet rewrites the mounted file; the service reads it.
        rotated = "harness-token-2"
        running.update_secret(
            values["secrets"]["existingSecret"], {**tokens, "tokens-file": f"{rotated}={TENANT}\n"}
        )
        wait_until(
            lambda: not sends(grpc_url, TOKEN), START_S, f"the old token refused\n{running.log()}"
        )
        assert sends(grpc_url, rotated) and sends(http_url, rotated, http=True)
        assert running.process.pid == pid and running.process.poll() is None
        assert "auth.tokens_file read again: 1 tokens" in running.log()
        assert running.stop() == 0, running.log()
        assert TOKEN not in running.log() and rotated not in running.log()
    finally:
        if running.process is not None and running.process.poll() is None:
            running.process.kill()
            running.process.wait(30)
