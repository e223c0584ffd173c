# Sourced by scripts/serve and scripts/test: make .venv and install the project into it.
# Re-installs only when pyproject.toml changed, so a second run starts at once.
ensure_venv() {
    local extras=$1 python=${PYTHON:-python3}
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "mcp-breaker needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
        exit 1
    fi
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    local stamp=".venv/.installed-${extras:-base}" want
    want=$(sha256sum pyproject.toml | cut -c1-16)
    # The test extra holds every other one (and the base): after ./scripts/test,
    # ./scripts/serve starts at once instead of installing into .venv again.
    if [ "$(cat .venv/.installed-test 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "installing mcp-breaker${extras:+[$extras]} into .venv ..." >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check \
            -e ".${extras:+[$extras]}"
        echo "$want" > "$stamp"
    fi
}
