"""bench/jsmodes.py: natsd-bench's JetStream and KV modes, on nats-py (asyncio).

Owns: stream/bucket preparation (`--create`, `--purge`, "Using stream: X", "Purging the stream")
and the workers of `js pub sync|async|batch`, `js ordered`, `js consume`, `js fetch`, `js push`,
`js get sync|batch`, `kv put`, `kv get`. Every client has its own connection; all clients run
on one asyncio loop in a helper thread. Results are bench.fastclient.ClientResult objects.

`js pub batch` is the atomic batch publish (Nats-Batch-Id / Nats-Batch-Sequence /
Nats-Batch-Commit headers, stream `allow_atomic`); `js get batch` is the batched direct get
($JS.API.DIRECT.GET.<stream> with {"batch": N, "seq": S, "next_by_subj": ">"}, ended by a
204 EOB status message). `js consume` emulates nats.go's Consume() with a pull-fetch loop.
"""
import asyncio
import json
import os
import random
import time

from bench.fastclient import BenchError, ClientResult
from bench import report

CONNECT_TIMEOUT = 5


async def _connect(url, name="natsd-bench"):
    import nats
    from nats.errors import NoServersError
    try:
        return await asyncio.wait_for(nats.connect(
            url, name=name, connect_timeout=CONNECT_TIMEOUT, allow_reconnect=False, max_reconnect_attempts=0,
            error_cb=_quiet, disconnected_cb=_quiet_nc, closed_cb=_quiet_nc, pending_size=64 * 1024 * 1024),
            CONNECT_TIMEOUT + 1)
    except (NoServersError, OSError, asyncio.TimeoutError) as e:
        raise BenchError("cannot connect to %s: %s" % (url, e or type(e).__name__)) from None


async def _quiet(_e=None):
    pass


async def _quiet_nc():
    pass


def _run(coro):
    return asyncio.run(coro)


# ---------------------------------------------------------------------------------- preparation
def prepare(a, mode, pr, counts):
    """Create/purge the stream or bucket as asked; returns the per-client message counts."""
    return _run(_prepare(a, mode, pr, counts))


async def _prepare(a, mode, pr, counts):
    from nats.js import api
    from nats.js.errors import NotFoundError, APIError
    nc = await _connect(a.server)
    try:
        js = nc.jetstream(timeout=a.timeout)
        if mode.startswith("kv-"):
            if a.create or mode == "kv-put":
                try:
                    await js.key_value(a.bucket)
                except Exception:
                    storage = api.StorageType.MEMORY if a.storage == "memory" else api.StorageType.FILE
                    await js.create_key_value(bucket=a.bucket, history=1, storage=storage, replicas=a.replicas,
                                              max_bytes=a.maxbytes)
            else:
                try:
                    await js.key_value(a.bucket)
                except Exception:
                    raise BenchError("bucket '%s' does not exist, create it with --create or run `kv put` first"
                                     % a.bucket)
            if a.purge:
                pr.log("Purging the bucket")
                await js.purge_stream("KV_" + a.bucket)
            return counts
        subj = getattr(a, "subject", None)
        if a.create:
            storage = api.StorageType.MEMORY if a.storage == "memory" else api.StorageType.FILE
            cfg = api.StreamConfig(name=a.stream, subjects=[(subj + ".*" if a.multisubject else subj) if subj else ">"],
                                   retention=api.RetentionPolicy.LIMITS,
                                   # counter streams may not discard new messages
                                   discard=api.DiscardPolicy.OLD if mode == "js-pub-counter" else api.DiscardPolicy.NEW,
                                   storage=storage, num_replicas=a.replicas, max_bytes=a.maxbytes,
                                   duplicate_window=a.dedupwindow, allow_direct=True)
            flags = STREAM_FLAGS.get(mode)
            try:
                if flags:
                    await _create_with(nc, cfg, flags)
                else:
                    await js.add_stream(cfg)
            except APIError as e:
                if getattr(e, "err_code", None) == 10058:        # exists with another config: update
                    try:
                        await js.update_stream(cfg)
                    except APIError as e2:
                        raise BenchError("could not create the stream. If you want to delete and re-define the "
                                         "stream use `nats stream delete %s`: %s" % (a.stream, e2)) from None
                else:
                    raise BenchError("could not create the stream %s: %s" % (a.stream, e)) from None
        else:
            try:
                await js.stream_info(a.stream)
            except NotFoundError:
                raise BenchError("stream '%s' does not exist, create it with --create" % a.stream) from None
            if mode.startswith("js-pub"):
                pr.log("Using stream: %s" % a.stream)
        if a.purge:
            pr.log("Purging the stream")
            await js.purge_stream(a.stream)
        if mode == "js-fetch" and a.prioritized:
            await _prioritized_consumer(nc, a)
        elif mode in ("js-consume", "js-fetch", "js-push"):
            ack = {"none": api.AckPolicy.NONE, "all": api.AckPolicy.ALL}.get(a.acks, api.AckPolicy.EXPLICIT)
            cc = api.ConsumerConfig(durable_name=a.consumer, deliver_policy=api.DeliverPolicy.ALL, ack_policy=ack,
                                    replay_policy=api.ReplayPolicy.INSTANT, max_ack_pending=a.batch * a.clients,
                                    inactive_threshold=10.0)
            if mode == "js-push":
                if a.clients != 1:
                    raise BenchError("js push delivers to one subscriber: use --clients 1")
                cc.deliver_subject = PUSH_SUBJECT % a.consumer
            try:
                await js.add_consumer(a.stream, cc)
            except APIError as e:
                raise BenchError("creating the durable consumer '%s': %s" % (a.consumer, e)) from None
        return counts
    finally:
        await nc.close()


PUSH_SUBJECT = "natsd-bench.push.%s"     # js push: the durable push consumer's deliver subject

# stream settings a mode needs that nats-py's StreamConfig may not know (nats-server 2.12+)
STREAM_FLAGS = {"js-pub-batch": {"allow_atomic": True}, "js-pub-counter": {"allow_msg_counter": True}}


async def _create_with(nc, cfg, flags):
    """Create (or update) the stream with a raw request carrying `flags`."""
    from nats.js.errors import APIError
    body = dict(cfg.as_dict(), **flags)
    for op in ("CREATE", "UPDATE"):
        r = await nc.request("$JS.API.STREAM.%s.%s" % (op, cfg.name), json.dumps(body).encode(), timeout=5)
        d = json.loads(r.data)
        err = d.get("error")
        if not err:
            return
        if op == "CREATE" and err.get("err_code") == 10058:        # exists: update it
            continue
        raise APIError(code=err.get("code"), err_code=err.get("err_code"), description=err.get("description"))


PRIORITY_GROUP = "bench"


async def _prioritized_consumer(nc, a):
    """A durable pull consumer with the `prioritized` priority policy (raw API: nats-py has no
    priority groups)."""
    cfg = {"durable_name": a.consumer, "deliver_policy": "all", "replay_policy": "instant",
           "ack_policy": a.acks, "max_ack_pending": a.batch * a.clients,
           "inactive_threshold": 10_000_000_000, "priority_policy": "prioritized",
           "priority_groups": [PRIORITY_GROUP]}
    r = await nc.request("$JS.API.CONSUMER.CREATE.%s.%s" % (a.stream, a.consumer),
                         json.dumps({"stream_name": a.stream, "config": cfg}).encode(), timeout=5)
    d = json.loads(r.data)
    if "error" in d:
        raise BenchError("creating the prioritized consumer '%s': %s" % (a.consumer, d["error"].get("description")))


# ---------------------------------------------------------------------------------- workers
def run(a, mode, counts, progress, stop):
    return _run(_run_all(a, mode, counts, progress, stop))


async def _run_all(a, mode, counts, progress, stop):
    fn = WORKERS[mode]
    offsets = [sum(counts[:i]) for i in range(len(counts))]
    tasks = [asyncio.create_task(_guard(fn, a, i + 1, n, offsets[i], progress, stop)) for i, n in enumerate(counts)]
    return list(await asyncio.gather(*tasks))


async def _guard(fn, a, client, count, offset, progress, stop):
    res = ClientResult(client, count)
    nc = None
    try:
        nc = await _connect(a.server)
        await fn(nc, a, res, count, offset, progress, stop)
        res.end = time.perf_counter()
    except BenchError as e:
        res.fail(e)
    except Exception as e:  # nats-py raises many kinds; never crash the run
        res.fail("%s: %s" % (type(e).__name__, e or ""))
    finally:
        if nc is not None:
            try:
                await asyncio.wait_for(nc.close(), 2)
            except Exception:
                pass
    if res.start is None:
        res.start = res.end
    return res


def _check(stop):
    if stop is not None and stop.is_set():
        raise BenchError("interrupted")


def _subject(a, n):
    if a.multisubject:
        m = a.multisubjectmax
        return "%s.%d" % (a.subject, n % m if m else n)
    return a.subject


def _msg_id(a, n):
    return {"Nats-Msg-Id": "%s-%d" % (a._bench_id, n)} if a.deduplication else None


async def w_pub_sync(nc, a, res, count, offset, progress, stop):
    js = nc.jetstream(timeout=a.timeout)
    payload = os.urandom(a.size)
    res.start = time.perf_counter()
    for i in range(count):
        _check(stop)
        t0 = time.perf_counter()
        await js.publish(_subject(a, offset + i), payload, headers=_msg_id(a, offset + i))
        res.latencies.append(time.perf_counter() - t0)
        res.msgs += 1
        res.bytes += a.size
        progress(res.client, res.msgs)
        if a.sleep:
            await asyncio.sleep(a.sleep)


async def w_pub_async(nc, a, res, count, offset, progress, stop):
    js = nc.jetstream(timeout=a.timeout)
    payload = os.urandom(a.size)
    res.start = time.perf_counter()
    batch = max(1, a.batch)
    i = 0
    while i < count:
        _check(stop)
        n = min(batch, count - i)
        t0 = time.perf_counter()
        futs = [await js.publish_async(_subject(a, offset + i + k), payload, headers=_msg_id(a, offset + i + k))
                for k in range(n)]
        acks = await asyncio.wait_for(asyncio.gather(*futs), a.timeout + 5)
        del acks
        res.latencies.append((time.perf_counter() - t0) / n)
        i += n
        res.msgs = i
        res.bytes = i * a.size
        progress(res.client, i)
        if a.sleep:
            await asyncio.sleep(a.sleep)


async def w_pub_batch(nc, a, res, count, offset, progress, stop):
    """Atomic batch publish: the last message of each batch commits and gets the PubAck."""
    payload = os.urandom(a.size)
    res.start = time.perf_counter()
    batch = max(1, a.batch)
    i = 0
    while i < count:
        _check(stop)
        n = min(batch, count - i)
        bid = os.urandom(11).hex()
        t0 = time.perf_counter()
        for k in range(n - 1):
            await nc.publish(_subject(a, offset + i + k), payload,
                             headers={"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(k + 1)})
        r = await nc.request(_subject(a, offset + i + n - 1), payload, timeout=a.timeout,
                             headers={"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(n),
                                      "Nats-Batch-Commit": "1"})
        d = json.loads(r.data or b"{}")
        if "error" in d:
            raise BenchError("batch publish failed: %s" % d["error"].get("description"))
        res.latencies.append((time.perf_counter() - t0) / n)
        i += n
        res.msgs = i
        res.bytes = i * a.size
        progress(res.client, i)


async def w_ordered(nc, a, res, count, offset, progress, stop):
    js = nc.jetstream(timeout=a.timeout)
    done = asyncio.get_running_loop().create_future()

    async def cb(msg):
        if res.start is None:
            res.start = time.perf_counter()
        res.msgs += 1
        res.bytes += len(msg.data)
        if res.msgs % 100 == 0 or res.msgs >= count:
            progress(res.client, res.msgs)
        if res.msgs >= count and not done.done():
            done.set_result(True)

    sub = await js.subscribe(">", stream=a.stream, cb=cb, ordered_consumer=True, idle_heartbeat=2.0)
    try:
        await _until_done(done, res, count, a, stop)
        res.end = time.perf_counter()
    finally:
        await sub.unsubscribe()


async def _until_done(done, res, count, a, stop):
    """Wait for a subscriber's `done`, failing when no message came for --timeout."""
    while not done.done():
        _check(stop)
        last = res.msgs
        try:
            await asyncio.wait_for(asyncio.shield(done), a.timeout)
        except asyncio.TimeoutError:
            if res.msgs == last:
                raise BenchError("no message for %s (got %d of %d)" % (report.go_duration(a.timeout),
                                                                      res.msgs, count)) from None


async def _pull_loop(nc, a, res, count, progress, stop):
    js = nc.jetstream(timeout=a.timeout)
    psub = await js.pull_subscribe("", durable=a.consumer, stream=a.stream)
    from nats.errors import TimeoutError as NatsTimeout
    misses = 0
    while res.msgs < count:
        _check(stop)
        try:
            msgs = await psub.fetch(min(a.batch, count - res.msgs), timeout=a.timeout)
        except (NatsTimeout, asyncio.TimeoutError):
            misses += 1
            if misses >= 2:
                raise BenchError("fetch timed out (got %d of %d)" % (res.msgs, count)) from None
            continue
        if res.start is None:
            res.start = time.perf_counter()
        for m in msgs:
            if a.acks == "explicit":
                if a.doubleack:
                    await m.ack_sync()
                else:
                    await m.ack()
            res.msgs += 1
            res.bytes += len(m.data)
        if a.acks == "all" and msgs:
            await msgs[-1].ack()
        progress(res.client, res.msgs)
        if a.sleep:
            await asyncio.sleep(a.sleep)
    res.end = time.perf_counter()


async def w_pub_counter(nc, a, res, count, offset, progress, stop):
    """Counter increments: `Nats-Incr: 1` with no payload. `--batch N` keeps N increments in
    flight, a new one leaving as each PubAck arrives (as nats.go's PublishAsync with
    PublishAsyncMaxPending); the default 1 waits for each PubAck before the next."""
    res.start = time.perf_counter()
    incr = {"Nats-Incr": "1"}
    window = asyncio.Semaphore(max(1, a.batch))
    failed = []
    done = 0

    async def one(i):
        nonlocal done
        try:
            t0 = time.perf_counter()
            r = await nc.request(_subject(a, offset + i), b"", timeout=a.timeout, headers=incr)
            if b'"error"' in r.data:
                failed.append(json.loads(r.data)["error"].get("description"))
            res.latencies.append(time.perf_counter() - t0)
            done += 1
            if done % 100 == 0 or done == count:
                progress(res.client, done)
        finally:
            window.release()
    tasks = []
    for i in range(count):
        _check(stop)
        if failed:
            break
        await window.acquire()
        tasks.append(asyncio.ensure_future(one(i)))
    await asyncio.gather(*tasks)
    if failed:
        raise BenchError("counter increment failed: %s" % failed[0])
    res.msgs = done
    res.bytes = 0


async def _prioritized_loop(nc, a, res, count, progress, stop):
    """Pull requests naming the priority group, client n asking with priority n % 10."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    subject = "$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (a.stream, a.consumer)
    misses = 0
    while res.msgs < count:
        _check(stop)
        want = min(a.batch, count - res.msgs)
        await nc.publish(subject, json.dumps({
            "batch": want, "expires": int(a.timeout * 1e9), "group": PRIORITY_GROUP,
            "priority": res.client % 10}).encode(), reply=inbox)
        got = 0
        while got < want:
            try:
                m = await sub.next_msg(timeout=a.timeout + 1)
            except Exception:
                break
            if m.headers and m.headers.get("Status"):
                break                           # 408 at expiry: ask again
            if res.start is None:
                res.start = time.perf_counter()
            if a.acks == "explicit":
                await nc.publish(m.reply, b"+ACK")
            got += 1
            res.msgs += 1
            res.bytes += len(m.data)
        if got == 0:
            misses += 1
            if misses >= 2:
                raise BenchError("fetch timed out (got %d of %d)" % (res.msgs, count))
        progress(res.client, res.msgs)
    res.end = time.perf_counter()
    await sub.unsubscribe()


async def w_consume(nc, a, res, count, offset, progress, stop):
    await _pull_loop(nc, a, res, count, progress, stop)


async def w_push(nc, a, res, count, offset, progress, stop):
    """A durable push consumer (created by prepare): every delivery acked as --acks says
    (explicit: each; all: every --batch-th), counted until `count` arrived."""
    done = asyncio.get_running_loop().create_future()
    every = a.batch if a.acks == "all" else 1

    async def cb(msg):
        if res.start is None:
            res.start = time.perf_counter()
        res.msgs += 1
        res.bytes += len(msg.data)
        if a.acks != "none" and (res.msgs % every == 0 or res.msgs >= count):
            await nc.publish(msg.reply, b"+ACK")
        if res.msgs % 100 == 0 or res.msgs >= count:
            progress(res.client, res.msgs)
        if res.msgs >= count and not done.done():
            done.set_result(True)

    sub = await nc.subscribe(PUSH_SUBJECT % a.consumer, cb=cb)
    try:
        await _until_done(done, res, count, a, stop)
        res.end = time.perf_counter()
    finally:
        await sub.unsubscribe()


async def w_fetch(nc, a, res, count, offset, progress, stop):
    if a.prioritized:
        await _prioritized_loop(nc, a, res, count, progress, stop)
    else:
        await _pull_loop(nc, a, res, count, progress, stop)


async def w_get_sync(nc, a, res, count, offset, progress, stop):
    info = json.loads((await nc.request("$JS.API.STREAM.INFO." + a.stream, b"", timeout=a.timeout)).data)
    first = info.get("state", {}).get("first_seq") or 1
    res.start = time.perf_counter()
    subj = "$JS.API.DIRECT.GET." + a.stream
    for i in range(count):
        _check(stop)
        t0 = time.perf_counter()
        r = await nc.request(subj, json.dumps({"seq": first + offset + i}).encode(), timeout=a.timeout)
        st = r.headers.get("Status") if r.headers else None
        if st and st != "200":
            raise BenchError("direct get of seq %d failed: %s %s" % (first + offset + i, st,
                                                                      r.headers.get("Description", "")))
        res.latencies.append(time.perf_counter() - t0)
        res.msgs += 1
        res.bytes += len(r.data)
        progress(res.client, res.msgs)
        if a.sleep:
            await asyncio.sleep(a.sleep)


async def w_get_batch(nc, a, res, count, offset, progress, stop):
    inbox = nc.new_inbox()
    q = asyncio.Queue()

    async def cb(msg):
        q.put_nowait(msg)

    sub = await nc.subscribe(inbox, cb=cb)
    subj = "$JS.API.DIRECT.GET." + a.stream
    seq = 1
    res.start = time.perf_counter()
    try:
        while res.msgs < count:
            _check(stop)
            n = min(a.batch, count - res.msgs)
            await nc.publish(subj, json.dumps({"seq": seq, "batch": n, "next_by_subj": ">"}).encode(), reply=inbox)
            while True:
                try:
                    m = await asyncio.wait_for(q.get(), a.timeout)
                except asyncio.TimeoutError:
                    raise BenchError("batched direct get timed out (got %d of %d)" % (res.msgs, count)) from None
                st = m.headers.get("Status") if m.headers else None
                if st == "204":         # EOB
                    break
                if st and st != "200":
                    raise BenchError("batched direct get failed: %s %s" % (st, m.headers.get("Description", "")))
                res.msgs += 1
                res.bytes += len(m.data)
                s = m.headers.get("Nats-Sequence") if m.headers else None
                seq = int(s) + 1 if s else seq + 1
            progress(res.client, res.msgs)
    finally:
        await sub.unsubscribe()


async def w_kv_put(nc, a, res, count, offset, progress, stop):
    kv = await nc.jetstream(timeout=a.timeout).key_value(a.bucket)
    payload = os.urandom(a.size)
    res.start = time.perf_counter()
    for i in range(count):
        _check(stop)
        t0 = time.perf_counter()
        await kv.put(str(offset + i), payload)
        res.latencies.append(time.perf_counter() - t0)
        res.msgs += 1
        res.bytes += a.size
        progress(res.client, res.msgs)
        if a.sleep:
            await asyncio.sleep(a.sleep)


async def w_kv_get(nc, a, res, count, offset, progress, stop):
    from nats.js.errors import KeyNotFoundError
    kv = await nc.jetstream(timeout=a.timeout).key_value(a.bucket)
    rnd = random.Random(offset)
    res.start = time.perf_counter()
    for i in range(count):
        _check(stop)
        key = str(rnd.randrange(a.randomize)) if a.randomize else str(offset + i)
        t0 = time.perf_counter()
        try:
            e = await kv.get(key)
            res.bytes += len(e.value or b"")
        except KeyNotFoundError:
            pass
        res.latencies.append(time.perf_counter() - t0)
        res.msgs += 1
        progress(res.client, res.msgs)
        if a.sleep:
            await asyncio.sleep(a.sleep)


WORKERS = {
    "js-pub-sync": w_pub_sync, "js-pub-async": w_pub_async, "js-pub-batch": w_pub_batch,
    "js-pub-counter": w_pub_counter,
    "js-ordered": w_ordered, "js-consume": w_consume, "js-fetch": w_fetch,
    "js-push": w_push,
    "js-get-sync": w_get_sync, "js-get-batch": w_get_batch, "kv-put": w_kv_put, "kv-get": w_kv_get,
}
