#!/bin/sh
# Installs the nats.js probe (probe.mjs, nats.js 3 as package-lock.json pins it) for the
# differential tests into /tmp/natsd-natsjs, with the machine's Node.js and the npm registry
# as its only network. Prints the probe's path.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=/tmp/natsd-natsjs
# one install at a time (the test workers each ask for it)
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { echo "need root to apt-get install nodejs npm" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null 2>&1; }
fi
if [ ! -d "$OUT/node_modules" ] || ! cmp -s "$HERE/package-lock.json" "$OUT/package-lock.json"; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$OUT/"
    (cd "$OUT" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
cp "$HERE/probe.mjs" "$OUT/probe.mjs"
echo "$OUT/probe.mjs"
