#!/bin/sh
# Builds goclient (a nats.go probe for the differential tests) offline into
# /tmp/natsd-goclient/goclient from Debian's Go toolchain and packaged nats.go sources:
# apt is the only network it needs. Prints the binary's path.
# `build.sh jsbench` builds the JetStream consumer benchmark (./jsbench) instead.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=/tmp/natsd-goclient
# one build at a time (the test workers each ask for it; apt and go share state)
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
PKGS="golang-go golang-github-nats-io-go-nats-dev golang-github-nats-io-nkeys-dev golang-github-nats-io-nuid-dev golang-golang-x-crypto-dev golang-golang-x-sys-dev"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || { echo "need root to apt-get install:$missing" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1; }
fi

mkdir -p "$OUT/deps/nuid" "$OUT/cache" "$OUT/gopath"
cp /usr/share/gocode/src/github.com/nats-io/nuid/nuid.go "$OUT/deps/nuid/"
printf 'module github.com/nats-io/nuid\n\ngo 1.16\n' > "$OUT/deps/nuid/go.mod"
cd "$HERE"
TARGET=${1:-goclient}
case "$TARGET" in
    goclient) PKG=. ;;
    jsbench) PKG=./jsbench ;;
    *) echo "build.sh: unknown target $TARGET (goclient, jsbench)" >&2; exit 2 ;;
esac
GOPROXY=off GOFLAGS=-mod=readonly GOSUMDB=off GOCACHE="$OUT/cache" GOPATH="$OUT/gopath" CGO_ENABLED=0 \
    go build -trimpath -o "$OUT/$TARGET" "$PKG" >&2
echo "$OUT/$TARGET"
