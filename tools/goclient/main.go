// goclient: a nats.go client that runs a list of steps against one server and prints what it
// saw as one JSON line per step, so tests can run the same steps against natsd and
// nats-server and compare. Used by the differential tests; not a benchmark (that is gobench).
//
//	goclient -url nats://127.0.0.1:4222 [-creds F | -jwt TOKEN] step...
//
// Steps:
//
//	echo:SUBJ   subscribe to SUBJ, publish to it, flush; reports whether the message came back
//	sub:SUBJ    subscribe and flush
//	pub:SUBJ    publish and flush
//	req:SUBJ    a request with a 1 s timeout; reports the reply's data
//	closed:SECS wait up to SECS seconds for the server to close the connection
//
// Every step reports the asynchronous errors the server sent meanwhile ("errors") and the
// connection's last error ("last"), in nats.go's words.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

type report map[string]interface{}

type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err.Error())
	l.mu.Unlock()
}

// take returns the errors seen since the last take.
func (l *errorLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.errs
	l.errs = nil
	if out == nil {
		out = []string{}
	}
	return out
}

func emit(r report) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func lastError(nc *nats.Conn) string {
	if err := nc.LastError(); err != nil {
		return err.Error()
	}
	return ""
}

// settle lets the server's answer to what was just flushed (an -ERR) arrive.
func settle(nc *nats.Conn) {
	nc.FlushTimeout(time.Second)
	time.Sleep(100 * time.Millisecond)
}

func run(nc *nats.Conn, errs *errorLog, closed chan struct{}, step string) report {
	verb, arg, _ := strings.Cut(step, ":")
	r := report{"step": step}
	switch verb {
	case "echo":
		sub, err := nc.SubscribeSync(arg)
		if err == nil {
			nc.Publish(arg, []byte("x"))
			nc.FlushTimeout(time.Second)
			_, err = sub.NextMsg(time.Second)
			r["got"] = err == nil
			sub.Unsubscribe()
		} else {
			r["got"] = false
		}
		settle(nc)
	case "sub":
		nc.SubscribeSync(arg)
		settle(nc)
	case "pub":
		nc.Publish(arg, []byte("x"))
		settle(nc)
	case "req":
		msg, err := nc.Request(arg, []byte("x"), time.Second)
		if err != nil {
			r["reply_error"] = err.Error()
		} else {
			r["reply"] = string(msg.Data)
		}
	case "closed":
		secs, _ := strconv.ParseFloat(arg, 64)
		select {
		case <-closed:
			r["closed"] = true
		case <-time.After(time.Duration(secs * float64(time.Second))):
			r["closed"] = false
		}
	default:
		fmt.Fprintf(os.Stderr, "goclient: unknown step %q\n", step)
		os.Exit(2)
	}
	r["errors"] = errs.take()
	r["last"] = lastError(nc)
	return r
}

func main() {
	url := flag.String("url", nats.DefaultURL, "server URL")
	creds := flag.String("creds", "", "a .creds file (user JWT and nkey seed)")
	bearer := flag.String("jwt", "", "a bearer user JWT, sent with no signature")
	flag.Parse()

	errs := &errorLog{}
	closed := make(chan struct{})
	opts := []nats.Option{
		nats.NoReconnect(),
		nats.Timeout(3 * time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs.add(err) }),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
	}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	if *bearer != "" {
		token := *bearer
		opts = append(opts, nats.UserJWT(
			func() (string, error) { return token, nil },
			func([]byte) ([]byte, error) { return nil, nil }))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		emit(report{"step": "connect", "ok": false, "error": err.Error()})
		return
	}
	emit(report{"step": "connect", "ok": true})
	for _, step := range flag.Args() {
		emit(run(nc, errs, closed, step))
	}
	nc.Close()
}
