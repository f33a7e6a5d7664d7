#!/bin/sh
# Builds goclient (a nats.go probe for the differential tests) offline into
# /tmp/natsd-goclient/goclient from Debian's Go toolchain and packaged nats.go sources:
# apt is the only network it needs. Prints the binary's path.
# `build.sh jsbench` builds the JetStream consumer benchmark (./jsbench) instead.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../probehelp.sh"
probe_out natsd-goclient
apt_install golang-go golang-github-nats-io-go-nats-dev golang-github-nats-io-nkeys-dev \
    golang-github-nats-io-nuid-dev golang-golang-x-crypto-dev golang-golang-x-sys-dev

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
