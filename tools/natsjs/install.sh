#!/bin/sh
# Installs the nats.js probe (probe.mjs, nats.js 3 as package-lock.json pins it) for the
# differential tests into /tmp/natsd-natsjs, with the machine's Node.js and the npm registry
# as its only network. Prints the probe's path.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../probehelp.sh"
probe_out natsd-natsjs
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
if [ ! -d "$OUT/node_modules" ] || ! cmp -s "$HERE/package-lock.json" "$OUT/package-lock.json"; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$OUT/"
    (cd "$OUT" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
cp "$HERE/probe.mjs" "$OUT/probe.mjs"
echo "$OUT/probe.mjs"
