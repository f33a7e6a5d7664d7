// jsbench: JetStream consumer throughput with nats.go, for the modes gobench does not have
// (tools/js_compare.py's go-* modes; `tools/goclient/build.sh jsbench` builds it).
//
//	jsbench --server URL --mode ordered|push|prio|kvget|counter [--msgs N] [--size B] [--gets G]
//	        [--inflight F]
//
// Fills a fresh file stream GOJS (subject gojs.x) with N messages (async publish, 256 in
// flight), then times one consumer reading all of them:
//
//	ordered  an ordered push consumer (flow control and heartbeats, as nats.go sets them)
//	push     a durable push consumer, explicit acks, every message acked
//	prio     a pull consumer with a prioritized priority group (nats-server 2.12+), two
//	         clients on their own connections pulling batches of 100 with priorities 0 and 1,
//	         every message acked (the raw pull API: natsd-bench's `js fetch --prioritized`)
//	kvget    G sequential gets of random keys (seeded) from a KV bucket GOKV filled with N
//	         keys, timed instead of the reading; the rate is gets per second
//	counter  N increments (`Nats-Incr: +1`) of one counter in a stream GOCNT with
//	         allow_msg_counter (nats-server 2.12+), F requesters on one connection each
//	         waiting for its PubAck; the highest value acknowledged must come out as N
//
// Prints one line: RESULT mode=... msgs=N secs=S rate=R (messages per second).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// fillStall: how long a fill's PublishAsync waits for room in its window. nats.go's default,
// 200 ms, can fail a fill when one sync of the disk is slow (js_compare, 2026-11-28).
var fillStall = nats.StallWait(10 * time.Second)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "jsbench: "+format+"\n", args...)
	os.Exit(1)
}

func fill(js nats.JetStreamContext, n, size int) {
	js.DeleteStream("GOJS")
	if _, err := js.AddStream(&nats.StreamConfig{Name: "GOJS", Subjects: []string{"gojs.x"},
		Storage: nats.FileStorage}); err != nil {
		fail("add stream: %v", err)
	}
	payload := bytes.Repeat([]byte("x"), size)
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync("gojs.x", payload, fillStall); err != nil {
			fail("publish: %v", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(120 * time.Second):
		fail("the stream was not filled within 120 s")
	}
}

func main() {
	server := flag.String("server", nats.DefaultURL, "server URL")
	mode := flag.String("mode", "ordered", "ordered | push | prio | kvget | counter")
	msgs := flag.Int("msgs", 100000, "messages to fill the stream with and read")
	size := flag.Int("size", 128, "payload bytes")
	gets := flag.Int("gets", 20000, "kvget: the gets timed")
	inflight := flag.Int("inflight", 1, "counter: requesters waiting for their PubAcks at once")
	flag.Parse()

	nc, err := nats.Connect(*server)
	if err != nil {
		fail("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(256))
	if err != nil {
		fail("jetstream: %v", err)
	}
	if *mode == "kvget" {
		kvGets(js, *msgs, *size, *gets)
		return
	}
	if *mode == "counter" {
		counter(nc, *msgs, *inflight)
		return
	}
	fill(js, *msgs, *size)

	var got int64
	done := make(chan struct{})
	want := int64(*msgs)
	var opts []nats.SubOpt
	var cb nats.MsgHandler
	switch *mode {
	case "ordered":
		opts = []nats.SubOpt{nats.OrderedConsumer()}
		cb = func(m *nats.Msg) {
			if atomic.AddInt64(&got, 1) == want {
				close(done)
			}
		}
	case "push":
		opts = []nats.SubOpt{nats.Durable("gojs"), nats.ManualAck(), nats.AckExplicit(), nats.DeliverAll()}
		cb = func(m *nats.Msg) {
			m.Ack()
			if atomic.AddInt64(&got, 1) == want {
				close(done)
			}
		}
	case "prio":
	default:
		fail("unknown mode %q", *mode)
	}
	if *mode == "prio" {
		prioritized(nc, *server, want)
		return
	}
	start := time.Now()
	sub, err := js.Subscribe("gojs.x", cb, opts...)
	if err != nil {
		fail("subscribe: %v", err)
	}
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		fail("read %d of %d messages within 120 s", atomic.LoadInt64(&got), want)
	}
	secs := time.Since(start).Seconds()
	sub.Unsubscribe()
	nc.Flush()
	fmt.Printf("RESULT mode=%s msgs=%d secs=%.4f rate=%.0f\n", *mode, want, secs, float64(want)/secs)
}

// prioritized times two pulling clients of a consumer with a prioritized group reading the
// whole stream, each acking every message it gets.
func prioritized(nc *nats.Conn, server string, want int64) {
	cfg, _ := json.Marshal(map[string]interface{}{"stream_name": "GOJS", "config": map[string]interface{}{
		"durable_name": "prio", "ack_policy": "explicit", "priority_groups": []string{"g"},
		"priority_policy": "prioritized"}})
	r, err := nc.Request("$JS.API.CONSUMER.CREATE.GOJS.prio", cfg, 5*time.Second)
	if err != nil || bytes.Contains(r.Data, []byte(`"error"`)) {
		fail("create the consumer: %v %s", err, r.Data)
	}
	var got int64
	done := make(chan struct{})
	start := time.Now()
	for c := 0; c < 2; c++ {
		conn, err := nats.Connect(server)
		if err != nil {
			fail("connect: %v", err)
		}
		defer conn.Close()
		inbox := nats.NewInbox()
		ch := make(chan *nats.Msg, 4096)
		if _, err := conn.ChanSubscribe(inbox, ch); err != nil {
			fail("subscribe: %v", err)
		}
		req := []byte(fmt.Sprintf(`{"batch":100,"expires":1000000000,"group":"g","priority":%d}`, c))
		go func(conn *nats.Conn) {
			for {
				if err := conn.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.GOJS.prio", inbox, req); err != nil {
					return
				}
				for n := 0; n < 100; {
					m := <-ch
					if len(m.Data) == 0 && m.Header.Get("Status") != "" {
						break // 404, 408, 409: this request is over
					}
					conn.Publish(m.Reply, []byte("+ACK"))
					n++
					if atomic.AddInt64(&got, 1) == want {
						close(done)
					}
				}
			}
		}(conn)
	}
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		fail("read %d of %d messages within 120 s", atomic.LoadInt64(&got), want)
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("RESULT mode=prio msgs=%d secs=%.4f rate=%.0f\n", want, secs, float64(want)/secs)
}

// kvGets fills a bucket with `keys` keys (async publishes to $KV.GOKV.<key>), then times
// `gets` sequential gets of keys drawn with a fixed seed.
func kvGets(js nats.JetStreamContext, keys, size, gets int) {
	js.DeleteKeyValue("GOKV")
	kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: "GOKV", Storage: nats.FileStorage})
	if err != nil {
		fail("create the bucket: %v", err)
	}
	payload := bytes.Repeat([]byte("v"), size)
	for i := 0; i < keys; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.GOKV.k%d", i), payload, fillStall); err != nil {
			fail("put: %v", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(120 * time.Second):
		fail("the bucket was not filled within 120 s")
	}
	rnd := rand.New(rand.NewSource(1127))
	start := time.Now()
	for i := 0; i < gets; i++ {
		e, err := kv.Get(fmt.Sprintf("k%d", rnd.Intn(keys)))
		if err != nil || len(e.Value()) != size {
			fail("get: %v", err)
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("RESULT mode=kvget msgs=%d secs=%.4f rate=%.0f\n", gets, secs, float64(gets)/secs)
}

// counter times `n` increments of one counter split among `inflight` requesters, each
// waiting for its PubAck, and checks that the highest value acknowledged is n.
func counter(nc *nats.Conn, n, inflight int) {
	nc.Request("$JS.API.STREAM.DELETE.GOCNT", nil, 5*time.Second)
	cfg := []byte(`{"name":"GOCNT","subjects":["gocnt.>"],"storage":"file","allow_msg_counter":true,"allow_direct":true}`)
	r, err := nc.Request("$JS.API.STREAM.CREATE.GOCNT", cfg, 5*time.Second)
	if err != nil {
		fail("create the stream: %v", err)
	}
	if bytes.Contains(r.Data, []byte(`"error"`)) {
		fail("create the stream: %s", r.Data)
	}
	type ack struct {
		Val   string `json:"val"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	var highest int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < inflight; w++ {
		share := n / inflight
		if w < n%inflight {
			share++
		}
		wg.Add(1)
		go func(share int) {
			defer wg.Done()
			m := nats.NewMsg("gocnt.c")
			m.Header.Set("Nats-Incr", "+1")
			for i := 0; i < share; i++ {
				r, err := nc.RequestMsg(m, 5*time.Second)
				if err != nil {
					fail("increment: %v", err)
				}
				var a ack
				if json.Unmarshal(r.Data, &a) != nil || a.Error != nil {
					fail("increment refused: %s", r.Data)
				}
				v, err := strconv.ParseInt(a.Val, 10, 64)
				if err != nil {
					fail("the PubAck's val %q", a.Val)
				}
				for {
					old := atomic.LoadInt64(&highest)
					if v <= old || atomic.CompareAndSwapInt64(&highest, old, v) {
						break
					}
				}
			}
		}(share)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if highest != int64(n) {
		fail("the counter reached %d after %d increments", highest, n)
	}
	fmt.Printf("RESULT mode=counter msgs=%d secs=%.4f rate=%.0f\n", n, secs, float64(n)/secs)
}
