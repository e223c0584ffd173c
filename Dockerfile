# The mcp-breaker image: `mcp-breaker serve` as a non-root user, from the wheel.
#
#   docker build -t mcp-breaker:0.1.0 .
#   docker run --rm -p 4317:4317 -p 4318:4318 -p 9464:9464 -p 4320:4320 mcp-breaker:0.1.0 \
#       --forward-endpoint otel-collector:4317
#
# Arguments after the image name go to `mcp-breaker serve` (the Helm chart passes
# `--config /etc/mcp-breaker/config/config.yaml`). Both stages use the same base, so the
# virtual environment built in the first runs unchanged in the second. Pin it by digest
# too where your registry allows: python:3.11.13-slim-bookworm@sha256:...

# -- build: the wheel, and a virtual environment with it and its dependencies -----------
FROM python:3.11.13-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/service.lock ./requirements/
COPY processor ./processor
COPY clients/python/pyproject.toml clients/python/README.md ./clients/python/
COPY clients/python/mcp_breaker_client ./clients/python/mcp_breaker_client
# The dependencies from the lock (pinned, with hashes: the same versions on every build;
# scripts/lock refreshes it), then the two wheels alone: the client's core (what a call is
# and how it ended, which the service shares with harnesses) and the service.
RUN python -m pip wheel --no-deps --wheel-dir /dist ./clients/python . \
    && python -m venv /opt/mcp-breaker \
    && /opt/mcp-breaker/bin/pip install --require-hashes -r requirements/service.lock \
    && /opt/mcp-breaker/bin/pip install --no-deps /dist/mcp_breaker_client-*.whl /dist/mcp_breaker-*.whl \
    && /opt/mcp-breaker/bin/pip uninstall --yes pip setuptools

# -- run: the environment alone; no compiler, no pip, no sources ------------------------
FROM python:3.11.13-slim-bookworm
LABEL org.opencontainers.image.title="mcp-breaker" \
      org.opencontainers.image.description="An OpenTelemetry hop that breaks circuits on dead MCP tools" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 mcp-breaker \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin mcp-breaker
COPY --from=build /opt/mcp-breaker /opt/mcp-breaker
# Unbuffered logs reach `kubectl logs` at once; no .pyc written on a read-only root.
ENV PATH=/opt/mcp-breaker/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
# OTLP/gRPC, OTLP/HTTP, the advisories, /metrics with /healthz and /readyz.
EXPOSE 4317 4318 4320 9464
ENTRYPOINT ["mcp-breaker", "serve"]
