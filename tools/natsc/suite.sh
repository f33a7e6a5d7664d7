#!/bin/sh
# Runs nats.c's own test suite (test/list_test.txt, one test per process, as its ctest does)
# against a server executable: natsd's `natsd`, or nats-server for the comparison.
#   tools/natsc/suite.sh <nats.c source tree> <server executable> [results file]
# Builds the suite into <tree>/build first (cmake, OpenSSL; no streaming). The suite uses fixed
# ports (4222...): run nothing else that binds them meanwhile. NATS_TEST_SERVER_VERSION is set
# to 2.15.1 so that the JetStream, KV and object store tests run rather than skip.
set -eu
SRC=$(cd "$1" && pwd); EXE=$2; OUT=${3:-/dev/stdout}
if [ ! -x "$SRC/build/bin/testsuite" ]; then
    mkdir -p "$SRC/build"
    (cd "$SRC/build" && cmake .. -DNATS_BUILD_STREAMING=OFF -DNATS_BUILD_WITH_TLS=ON \
        -DCMAKE_BUILD_TYPE=Release >&2 && make -j2 testsuite >&2)
fi
export NATS_TEST_SERVER_EXE="$EXE" NATS_TEST_SERVER_VERSION="nats-server: v2.15.1"
cd "$SRC/test"
pass=0; fail=0
for t in $(sed -n 's/^_test(\(.*\))$/\1/p' list_test.txt); do
    if timeout 300 "$SRC/build/bin/testsuite" "$t" 2>&1 | grep -aq "ALL PASSED"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL $t" >> "$OUT"
    fi
done
echo "passed $pass, failed $fail" >> "$OUT"
