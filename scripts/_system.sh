# Sourced by scripts/test: the Debian packages the tests run for real (Prometheus and its
# promtool; curl, which the quickstart's commands use; Chromium, which renders the analyze
# command's HTML report; redis-server, for the replicas' shared state; valgrind, which
# bench/instructions.py counts instructions with). Installed with apt
# when missing and we are root; otherwise say what to install.
ensure_system_packages() {
    local missing=()
    command -v promtool >/dev/null || missing+=(prometheus)
    command -v curl >/dev/null || missing+=(curl)  # docs/quickstart.md's commands use it
    command -v chromium >/dev/null || missing+=(chromium)
    command -v redis-server >/dev/null || missing+=(redis-server)  # the shared-state tests
    command -v valgrind >/dev/null || missing+=(valgrind)  # bench/instructions.py counts with it
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing ${missing[*]} with apt-get ..." >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    else
        echo "the tests need: ${missing[*]} (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
        exit 1
    fi
}
