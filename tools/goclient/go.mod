module goclient

go 1.19

// Built offline against Debian's packaged Go sources (see build.sh): nats.go 1.22.1,
// nkeys 0.3.0, nuid 1.0.1, x/crypto 0.4.0, x/sys 0.3.0.
require (
	github.com/nats-io/nats.go v1.22.1
	github.com/nats-io/nkeys v0.3.0 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.4.0 // indirect
	golang.org/x/sys v0.3.0 // indirect
)

replace (
	github.com/nats-io/nats.go => /usr/share/gocode/src/github.com/nats-io/nats.go
	github.com/nats-io/nkeys => /usr/share/gocode/src/github.com/nats-io/nkeys
	github.com/nats-io/nuid => /tmp/natsd-goclient/deps/nuid // shim made by build.sh (Debian's copy has no go.mod)
	golang.org/x/crypto => /usr/share/gocode/src/golang.org/x/crypto
	golang.org/x/sys => /usr/share/gocode/src/golang.org/x/sys
)
