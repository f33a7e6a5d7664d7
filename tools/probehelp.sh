# Sourced by the client probes' build scripts (tools/goclient/build.sh, tools/natsjs/install.sh,
# tools/natsc/build.sh).

# probe_out NAME: OUT=/tmp/NAME, made and held under a lock on fd 9 until the script ends
# (one build at a time: the test workers each ask for it; apt and the tools share state)
probe_out() {
    OUT=/tmp/$1
    mkdir -p "$OUT"
    exec 9>"$OUT/.lock"
    flock 9
}

# apt_install PKG...: installs those of the Debian packages that are missing (root only)
apt_install() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    [ "$(id -u)" = 0 ] || { echo "need root to apt-get install:$missing" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1; }
}
