#!/bin/sh
# Builds the nats.c probe (probe.c, on Debian's libnats 3.4) for the differential tests into
# /tmp/natsd-natsc/probe, with apt as its only network. Prints the probe's path.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../probehelp.sh"
probe_out natsd-natsc
command -v gcc >/dev/null 2>&1 || apt_install gcc libc6-dev
apt_install libnats-dev
if [ ! -x "$OUT/probe" ] || ! cmp -s "$HERE/probe.c" "$OUT/probe.c"; then
    gcc -O1 -Wall -Wextra -o "$OUT/probe.new" "$HERE/probe.c" -lnats >&2
    cp "$HERE/probe.c" "$OUT/probe.c"
    mv "$OUT/probe.new" "$OUT/probe"
fi
echo "$OUT/probe"
