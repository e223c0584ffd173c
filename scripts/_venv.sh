# Sourced by scripts/serve and scripts/test: make .venv and install the project into it,
# its dependencies from a lock file (requirements/*.lock: pinned, with hashes; refreshed by
# scripts/lock), so that every install resolves the same versions. Re-installs only when
# pyproject.toml or the lock changed, so a second run starts at once.
ensure_venv() {
    local extras=$1 python=${PYTHON:-python3} lock
    case "$extras" in
        "") lock=requirements/service.lock ;;
        examples) lock=requirements/serve.lock ;;
        test) lock=requirements/test.lock ;;
        *) echo "ensure_venv: no lock file for extras '$extras'" >&2; return 1 ;;
    esac
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "mcp-breaker needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
        exit 1
    fi
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    local stamp=".venv/.installed-${extras:-base}" want
    want=$(cat pyproject.toml clients/python/pyproject.toml "$lock" | sha256sum | cut -c1-16)
    # The test lock holds every other one: after ./scripts/test, ./scripts/serve starts at
    # once instead of installing into .venv again.
    if [ "$(cat .venv/.installed-test 2>/dev/null)" = "$(cat pyproject.toml clients/python/pyproject.toml requirements/test.lock | sha256sum | cut -c1-16)" ]; then
        return 0
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "installing mcp-breaker${extras:+[$extras]} into .venv (versions from $lock) ..." >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check \
            --require-hashes -r "$lock"
        # The client (clients/python, a distribution of its own that the service uses),
        # then the service itself, both editable; their dependencies are all in place.
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
            -e clients/python -e ".${extras:+[$extras]}"
        echo "$want" > "$stamp"
    fi
}
