/*
 * A nats.c (libnats 3.4, Debian's libnats-dev) probe for the differential tests
 * (tests/clients/test_natsc.py): it runs the named steps against one server and prints, per
 * step, one JSON line of what the client saw: {"step": name, "ok": {...}}, or
 * {"step": name, "error": "where: status (last error)"} when something failed that should not.
 * Only what is the same on two runs of one server goes in: no ids, no times.
 *
 *   probe URL step...        steps: core jetstream consumers push kv errors tls auth
 *
 * tls connects on its own: NATSC_CA (trusted), NATSC_CERT and NATSC_KEY (the client's);
 * auth too, as NATSC_USER with NATSC_PASS, who may publish to pub.> and not subscribe to
 * secret.>.
 *
 * NATSC_REPLICAS=n gives every stream and bucket n replicas (on a cluster).
 */
#include <nats/nats.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a JSON text built as the step goes ---- */

typedef struct { char *s; size_t len, cap; int first; } Json;

static void put(Json *j, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = j->cap - j->len;
        va_start(ap, fmt);
        int n = vsnprintf(j->s + j->len, room, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t) n < room) { j->len += n; return; }
        j->cap = j->cap * 2 + (n > 0 ? n : 0) + 64;
        j->s = realloc(j->s, j->cap);
    }
}

static void str(Json *j, const char *s, int len)
{
    put(j, "\"");
    if (s == NULL) s = "";
    if (len < 0) len = (int) strlen(s);
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '"' || c == '\\') put(j, "\\%c", c);
        else if (c < 0x20) put(j, "\\u%04x", c);
        else put(j, "%c", c);
    }
    put(j, "\"");
}

/* a key of the object being written: the comma before all but the first */
static void key(Json *j, const char *k)
{
    put(j, j->first ? "" : ",");
    j->first = 0;
    str(j, k, -1);
    put(j, ":");
}

static void open_obj(Json *j, const char *k) { if (k) key(j, k); else { put(j, j->first ? "" : ","); } put(j, "{"); j->first = 1; }
static void close_obj(Json *j) { put(j, "}"); j->first = 0; }
static void open_arr(Json *j, const char *k) { key(j, k); put(j, "["); j->first = 1; }
static void close_arr(Json *j) { put(j, "]"); j->first = 0; }
static void kstr(Json *j, const char *k, const char *v) { key(j, k); str(j, v, -1); }
static void kint(Json *j, const char *k, long long v) { key(j, k); put(j, "%lld", v); }
static void kbool(Json *j, const char *k, bool v) { key(j, k); put(j, v ? "true" : "false"); }

/* a status as the client reports it: its text, the JetStream error code, the last error */
static void kstatus(Json *j, const char *k, natsStatus s, jsErrCode jerr)
{
    open_obj(j, k);
    kstr(j, "status", natsStatus_GetText(s));
    if (jerr) kint(j, "err_code", jerr);
    /* the library's last error, when it is this one's (it is never cleared), without the
       library's own source position */
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last);
    if (s != NATS_OK && last == s && text != NULL) {
        const char *p = strstr(text, "): ");
        kstr(j, "text", text[0] == '(' && p ? p + 3 : text);
    }
    close_obj(j);
}

/* ---- the step's frame ---- */

static char failed[512];
static int replicas = 1;         /* NATSC_REPLICAS */

#define CHECK(where, call) do { natsStatus _s = (call); if (_s != NATS_OK) { \
    snprintf(failed, sizeof failed, "%s: %s (%s)", where, natsStatus_GetText(_s), nats_GetLastError(NULL)); \
    goto out; } } while (0)

static void message(Json *j, const char *k, natsMsg *m)
{
    open_obj(j, k);
    const char *subject = natsMsg_GetSubject(m);
    kstr(j, "subject", strncmp(subject, "_INBOX.", 7) ? subject : "_INBOX.(the client's)");
    key(j, "data");
    str(j, natsMsg_GetData(m), natsMsg_GetDataLength(m));
    kbool(j, "reply", natsMsg_GetReply(m) != NULL);
    const char **keys = NULL;
    int n = 0;
    if (natsMsgHeader_Keys(m, &keys, &n) == NATS_OK && n > 0) {
        open_obj(j, "headers");
        /* in the order of the wire */
        for (int i = 0; i < n; i++) {
            const char **vals = NULL;
            int nv = 0;
            natsMsgHeader_Values(m, keys[i], &vals, &nv);
            open_arr(j, keys[i]);
            for (int v = 0; v < nv; v++) { put(j, v ? "," : ""); str(j, vals[v], -1); }
            close_arr(j);
            free((void *) vals);
        }
        close_obj(j);
        free((void *) keys);
    }
    close_obj(j);
}

/* ---- steps ---- */

static void on_service(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void) sub; (void) closure;
    if (natsMsg_GetReply(msg))
        natsConnection_PublishString(nc, natsMsg_GetReply(msg), "pong");
    natsMsg_Destroy(msg);
}

static void step_core(Json *j, natsConnection *nc)
{
    natsSubscription *sub = NULL, *q1 = NULL, *q2 = NULL, *svc = NULL;
    natsMsg *m = NULL, *hm = NULL, *reply = NULL;
    CHECK("subscribe", natsConnection_SubscribeSync(&sub, nc, "c.>"));
    CHECK("queue 1", natsConnection_QueueSubscribeSync(&q1, nc, "q", "workers"));
    CHECK("queue 2", natsConnection_QueueSubscribeSync(&q2, nc, "q", "workers"));
    CHECK("service", natsConnection_Subscribe(&svc, nc, "svc", on_service, NULL));
    CHECK("flush", natsConnection_Flush(nc));
    CHECK("publish", natsConnection_PublishString(nc, "c.a", "hello"));
    CHECK("publish empty", natsConnection_Publish(nc, "c.b.c", NULL, 0));
    CHECK("msg", natsMsg_Create(&hm, "c.h", "c.reply", "with headers", 12));
    CHECK("header", natsMsgHeader_Set(hm, "X-One", "1"));
    CHECK("header", natsMsgHeader_Add(hm, "X-Many", "a"));
    CHECK("header", natsMsgHeader_Add(hm, "X-Many", "b"));
    CHECK("publish msg", natsConnection_PublishMsg(nc, hm));
    open_arr(j, "received");
    for (int i = 0; i < 3; i++) {
        CHECK("next", natsSubscription_NextMsg(&m, sub, 2000));
        message(j, NULL, m);
        natsMsg_Destroy(m);
        m = NULL;
    }
    close_arr(j);
    for (int i = 0; i < 20; i++)
        CHECK("publish q", natsConnection_PublishString(nc, "q", "work"));
    CHECK("flush", natsConnection_Flush(nc));
    int got = 0;
    natsSubscription *qs[2] = {q1, q2};
    for (int k = 0; k < 2; k++)
        while (natsSubscription_NextMsg(&m, qs[k], 300) == NATS_OK) { got++; natsMsg_Destroy(m); m = NULL; }
    kint(j, "queue_received", got);
    CHECK("request", natsConnection_RequestString(&reply, nc, "svc", "ping", 2000));
    message(j, "reply", reply);
    natsMsg_Destroy(reply);
    reply = NULL;
    natsStatus s = natsConnection_RequestString(&reply, nc, "nobody.home", "ping", 2000);
    kstatus(j, "no_responders", s, 0);
out:
    natsMsg_Destroy(m);
    natsMsg_Destroy(hm);
    natsMsg_Destroy(reply);
    natsSubscription_Destroy(sub);
    natsSubscription_Destroy(q1);
    natsSubscription_Destroy(q2);
    natsSubscription_Destroy(svc);
}

/* a stream `name` on the one subject (filter) `subjects` names, with the probe's replicas */
static void stream_config(jsStreamConfig *cfg, const char *name, const char **subjects)
{
    jsStreamConfig_Init(cfg);
    cfg->Name = name;
    cfg->Replicas = replicas;
    cfg->Subjects = subjects;
    cfg->SubjectsLen = 1;
}

/* A replicated stream answers its create before its leader's interest in its subjects has
   reached every server (on nats-server too): until then a publish through this server finds
   no responders. On a cluster, wait until a publish the stream refuses without storing (an
   expected last sequence it cannot have) gets an answer. */
static void wait_serving(jsCtx *js, const char *subject)
{
    if (replicas <= 1 || subject == NULL) return;
    char probe[256];
    size_t n = strlen(subject);
    if (n + 8 > sizeof probe) return;
    memcpy(probe, subject, n + 1);
    if (n > 0 && (probe[n - 1] == '>' || probe[n - 1] == '*')) strcpy(probe + n - 1, "ready");
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = (uint64_t) 1 << 40;
    po.MaxWait = 1000;
    for (int tries = 0; tries < 50; tries++) {
        jsPubAck *pa = NULL;
        natsStatus s = js_Publish(&pa, js, probe, NULL, 0, &po, NULL);
        jsPubAck_Destroy(pa);
        if (s != NATS_NO_RESPONDERS && s != NATS_TIMEOUT) return;
        nats_Sleep(200);
    }
}

static natsStatus add_stream(jsStreamInfo **si, jsCtx *js, jsStreamConfig *cfg, jsErrCode *jerr)
{
    natsStatus s = js_AddStream(si, js, cfg, NULL, jerr);
    if (s == NATS_OK && cfg->SubjectsLen > 0) wait_serving(js, cfg->Subjects[0]);
    return s;
}

static void puback(Json *j, const char *k, jsPubAck *pa)
{
    open_obj(j, k);
    kstr(j, "stream", pa->Stream);
    kint(j, "seq", (long long) pa->Sequence);
    kbool(j, "duplicate", pa->Duplicate);
    if (pa->Domain) kstr(j, "domain", pa->Domain);
    close_obj(j);
}

static void state(Json *j, const char *k, jsStreamState *st)
{
    open_obj(j, k);
    kint(j, "msgs", (long long) st->Msgs);
    kint(j, "bytes", (long long) st->Bytes);
    kint(j, "first_seq", (long long) st->FirstSeq);
    kint(j, "last_seq", (long long) st->LastSeq);
    kint(j, "num_subjects", st->NumSubjects);
    kint(j, "num_deleted", (long long) st->NumDeleted);
    kint(j, "consumers", st->Consumers);
    close_obj(j);
}

static void step_jetstream(Json *j, jsCtx *js)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsPubAck *pa = NULL;
    jsPubOptions po;
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"js.>"};
    stream_config(&cfg, "JS1", subjects);
    cfg.Storage = js_FileStorage;
    CHECK("add stream", add_stream(&si, js, &cfg, &jerr));
    kstr(j, "created", si->Config->Name);
    kint(j, "replicas", si->Config->Replicas);
    jsStreamInfo_Destroy(si);
    si = NULL;
    open_arr(j, "acks");
    const char *subj[] = {"js.a", "js.b", "js.a"};
    for (int i = 0; i < 3; i++) {
        CHECK("publish", js_Publish(&pa, js, subj[i], "data", 4, NULL, &jerr));
        puback(j, NULL, pa);
        jsPubAck_Destroy(pa);
        pa = NULL;
    }
    close_arr(j);
    jsPubOptions_Init(&po);
    po.MsgId = "id-1";
    CHECK("publish id", js_Publish(&pa, js, "js.c", "once", 4, &po, &jerr));
    puback(j, "first_with_id", pa);
    jsPubAck_Destroy(pa);
    pa = NULL;
    CHECK("publish id again", js_Publish(&pa, js, "js.c", "once", 4, &po, &jerr));
    puback(j, "duplicate", pa);
    jsPubAck_Destroy(pa);
    pa = NULL;
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = 2;
    natsStatus s = js_Publish(&pa, js, "js.a", "x", 1, &po, &jerr);
    kstatus(j, "wrong_last_seq", s, jerr);
    jsPubAck_Destroy(pa);
    pa = NULL;
    jsPubOptions_Init(&po);
    po.ExpectLastSubjectSeq = 3;
    CHECK("publish last subject seq", js_Publish(&pa, js, "js.a", "y", 1, &po, &jerr));
    puback(j, "right_last_subject_seq", pa);
    jsPubAck_Destroy(pa);
    pa = NULL;
    jsPubOptions_Init(&po);
    po.ExpectStream = "OTHER";
    jerr = 0;
    s = js_Publish(&pa, js, "js.a", "z", 1, &po, &jerr);
    kstatus(j, "wrong_stream", s, jerr);
    jsPubAck_Destroy(pa);
    pa = NULL;
    CHECK("info", js_GetStreamInfo(&si, js, "JS1", NULL, &jerr));
    state(j, "state", &si->State);
    jsStreamInfo_Destroy(si);
    si = NULL;
    CHECK("get", js_GetMsg(&m, js, "JS1", 2, NULL, &jerr));
    message(j, "get_2", m);
    natsMsg_Destroy(m);
    m = NULL;
    CHECK("get last", js_GetLastMsg(&m, js, "JS1", "js.a", NULL, &jerr));
    message(j, "last_js_a", m);
    natsMsg_Destroy(m);
    m = NULL;
    jerr = 0;
    s = js_GetMsg(&m, js, "JS1", 99, NULL, &jerr);
    kstatus(j, "get_missing", s, jerr);
    CHECK("delete", js_DeleteMsg(js, "JS1", 1, NULL, &jerr));
    jerr = 0;
    s = js_DeleteMsg(js, "JS1", 1, NULL, &jerr);
    kstatus(j, "delete_again", s, jerr);
    CHECK("erase", js_EraseMsg(js, "JS1", 2, NULL, &jerr));
    CHECK("info", js_GetStreamInfo(&si, js, "JS1", NULL, &jerr));
    state(j, "after_deletes", &si->State);
    jsStreamInfo_Destroy(si);
    si = NULL;
    CHECK("purge", js_PurgeStream(js, "JS1", NULL, &jerr));
    CHECK("info", js_GetStreamInfo(&si, js, "JS1", NULL, &jerr));
    state(j, "after_purge", &si->State);
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.MaxMsgs = 5;
    CHECK("update", js_UpdateStream(&si, js, &cfg, NULL, &jerr));
    kint(j, "updated_max_msgs", si->Config->MaxMsgs);
    jsStreamInfo_Destroy(si);
    si = NULL;
out:
    jsStreamInfo_Destroy(si);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
}

/* a delivered message's data and metadata (an ephemeral consumer's name, the server's
   choice, left out) */
static void metadata_of(Json *j, natsMsg *m, bool named)
{
    jsMsgMetaData *md = NULL;
    open_obj(j, NULL);
    kstr(j, "data", natsMsg_GetData(m));
    if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
        kstr(j, "stream", md->Stream);
        if (named) kstr(j, "consumer", md->Consumer);
        kint(j, "stream_seq", (long long) md->Sequence.Stream);
        kint(j, "consumer_seq", (long long) md->Sequence.Consumer);
        kint(j, "delivered", (long long) md->NumDelivered);
        kint(j, "pending", (long long) md->NumPending);
        jsMsgMetaData_Destroy(md);
    }
    close_obj(j);
}

static void metadata(Json *j, natsMsg *m) { metadata_of(j, m, true); }

static void consumer_info(Json *j, const char *k, jsConsumerInfo *ci)
{
    open_obj(j, k);
    kstr(j, "name", ci->Name);
    kint(j, "delivered_consumer", (long long) ci->Delivered.Consumer);
    kint(j, "delivered_stream", (long long) ci->Delivered.Stream);
    kint(j, "ack_floor_consumer", (long long) ci->AckFloor.Consumer);
    kint(j, "ack_floor_stream", (long long) ci->AckFloor.Stream);
    kint(j, "num_ack_pending", ci->NumAckPending);
    kint(j, "num_redelivered", ci->NumRedelivered);
    kint(j, "num_pending", (long long) ci->NumPending);
    close_obj(j);
}

static void step_consumers(Json *j, jsCtx *js)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsConsumerConfig cc;
    natsSubscription *sub = NULL;
    natsMsgList list = {0};
    jsErrCode jerr = 0;
    const char *subjects[] = {"work.>"};
    stream_config(&cfg, "JS2", subjects);
    CHECK("add stream", add_stream(&si, js, &cfg, &jerr));
    for (int i = 1; i <= 5; i++) {
        char data[8];
        snprintf(data, sizeof data, "m%d", i);
        CHECK("publish", js_Publish(NULL, js, i % 2 ? "work.odd" : "work.even", data, (int) strlen(data), NULL, &jerr));
    }
    jsConsumerConfig_Init(&cc);
    cc.Durable = "pull";
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = 30LL * 1000000000LL;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = "JS2";
    so.Config = cc;
    CHECK("pull subscribe", js_PullSubscribe(&sub, js, "work.>", "pull", NULL, &so, &jerr));
    CHECK("fetch", natsSubscription_Fetch(&list, sub, 3, 2000, &jerr));
    open_arr(j, "first_fetch");
    for (int i = 0; i < list.Count; i++)
        metadata(j, list.Msgs[i]);
    close_arr(j);
    CHECK("ack", natsMsg_AckSync(list.Msgs[0], NULL, &jerr));
    CHECK("nak", natsMsg_Nak(list.Msgs[1], NULL));
    CHECK("term", natsMsg_Term(list.Msgs[2], NULL));
    natsMsgList_Destroy(&list);
    /* nats-server takes acks off a queue of their own: the next fetch waits until the term
       (and the nak before it) was applied, leaving the nak'd message alone pending */
    for (int tries = 0; tries < 200; tries++) {
        CHECK("consumer info", js_GetConsumerInfo(&ci, js, "JS2", "pull", NULL, &jerr));
        int64_t pending = ci->NumAckPending;
        jsConsumerInfo_Destroy(ci);
        ci = NULL;
        if (pending == 1)
            break;
        nats_Sleep(10);
    }
    CHECK("fetch", natsSubscription_Fetch(&list, sub, 5, 2000, &jerr));
    open_arr(j, "second_fetch");
    for (int i = 0; i < list.Count; i++) {
        metadata(j, list.Msgs[i]);
        natsMsg_AckSync(list.Msgs[i], NULL, &jerr);
    }
    close_arr(j);
    natsMsgList_Destroy(&list);
    natsStatus s = natsSubscription_Fetch(&list, sub, 1, 300, &jerr);
    kstatus(j, "nothing_left", s, jerr);
    natsMsgList_Destroy(&list);
    CHECK("consumer info", js_GetConsumerInfo(&ci, js, "JS2", "pull", NULL, &jerr));
    consumer_info(j, "info", ci);
    jsConsumerInfo_Destroy(ci);
    ci = NULL;
    jsConsumerConfig_Init(&cc);
    cc.Durable = "bad";
    cc.AckPolicy = js_AckNone;
    cc.MaxAckPending = 10;
    jerr = 0;
    s = js_AddConsumer(&ci, js, "JS2", &cc, NULL, &jerr);
    kstatus(j, "ack_none_with_max_ack_pending", s, jerr);
    jsConsumerInfo_Destroy(ci);
    ci = NULL;
    jerr = 0;
    s = js_GetConsumerInfo(&ci, js, "JS2", "missing", NULL, &jerr);
    kstatus(j, "missing_consumer", s, jerr);
    CHECK("info", js_GetStreamInfo(&si, js, "JS2", NULL, &jerr));
    state(j, "stream", &si->State);
out:
    jsStreamInfo_Destroy(si);
    jsConsumerInfo_Destroy(ci);
    natsMsgList_Destroy(&list);
    natsSubscription_Destroy(sub);
}

static void step_push(Json *j, jsCtx *js)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsSubOptions so;
    natsSubscription *ordered = NULL, *durable = NULL;
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"p.>"};
    stream_config(&cfg, "JS3", subjects);
    CHECK("add stream", add_stream(&si, js, &cfg, &jerr));
    for (int i = 1; i <= 6; i++) {
        char data[8];
        snprintf(data, sizeof data, "p%d", i);
        CHECK("publish", js_Publish(NULL, js, i % 2 ? "p.odd" : "p.even", data, (int) strlen(data), NULL, &jerr));
    }
    jsSubOptions_Init(&so);
    so.Ordered = true;
    CHECK("ordered", js_SubscribeSync(&ordered, js, "p.>", NULL, &so, &jerr));
    open_arr(j, "ordered");
    for (int i = 0; i < 6; i++) {
        CHECK("ordered next", natsSubscription_NextMsg(&m, ordered, 2000));
        metadata_of(j, m, false);
        natsMsg_Destroy(m);
        m = NULL;
    }
    close_arr(j);
    jsSubOptions_Init(&so);
    so.ManualAck = true;
    so.Config.Durable = "odd";
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = 30LL * 1000000000LL;
    CHECK("durable push", js_SubscribeSync(&durable, js, "p.odd", NULL, &so, &jerr));
    open_arr(j, "durable");
    for (int i = 0; i < 4; i++) {
        CHECK("durable next", natsSubscription_NextMsg(&m, durable, 2000));
        metadata(j, m);
        /* the first is nak'd once and comes again after the rest */
        if (i == 0) CHECK("nak", natsMsg_Nak(m, NULL));
        else CHECK("ack", natsMsg_AckSync(m, NULL, &jerr));
        natsMsg_Destroy(m);
        m = NULL;
    }
    close_arr(j);
    CHECK("consumer info", js_GetConsumerInfo(&ci, js, "JS3", "odd", NULL, &jerr));
    consumer_info(j, "durable_info", ci);
    kbool(j, "push_bound", ci->PushBound);
    kstr(j, "filter", ci->Config->FilterSubject);
out:
    jsStreamInfo_Destroy(si);
    jsConsumerInfo_Destroy(ci);
    natsMsg_Destroy(m);
    natsSubscription_Destroy(ordered);
    natsSubscription_Destroy(durable);
}

static void entry(Json *j, const char *k, kvEntry *e)
{
    open_obj(j, k);
    kstr(j, "key", kvEntry_Key(e));
    key(j, "value");
    str(j, kvEntry_Value(e), kvEntry_ValueLen(e));
    kint(j, "revision", (long long) kvEntry_Revision(e));
    kint(j, "op", kvEntry_Operation(e));
    close_obj(j);
}

static void step_kv(Json *j, jsCtx *js)
{
    kvConfig kc;
    kvStore *kv = NULL;
    kvEntry *e = NULL;
    kvEntryList hist = {0};
    kvKeysList keys = {0};
    kvWatcher *w = NULL;
    uint64_t rev = 0;
    kvConfig_Init(&kc);
    kc.Bucket = "KV1";
    kc.History = 5;
    kc.Replicas = replicas;
    CHECK("create bucket", js_CreateKeyValue(&kv, js, &kc));
    wait_serving(js, "$KV.KV1.>");
    CHECK("put", kvStore_PutString(&rev, kv, "a", "1"));
    kint(j, "put_a1", (long long) rev);
    CHECK("put", kvStore_PutString(&rev, kv, "a", "2"));
    CHECK("put", kvStore_PutString(&rev, kv, "b", "x"));
    kint(j, "put_b", (long long) rev);
    CHECK("get", kvStore_Get(&e, kv, "a"));
    entry(j, "get_a", e);
    kvEntry_Destroy(e);
    e = NULL;
    natsStatus s = kvStore_CreateString(&rev, kv, "a", "again");
    kstatus(j, "create_existing", s, 0);
    s = kvStore_UpdateString(&rev, kv, "a", "3", 1);
    kstatus(j, "update_wrong_revision", s, 0);
    CHECK("update", kvStore_UpdateString(&rev, kv, "a", "3", 2));
    kint(j, "updated", (long long) rev);
    CHECK("delete", kvStore_Delete(kv, "b"));
    s = kvStore_Get(&e, kv, "b");
    kstatus(j, "get_deleted", s, 0);
    kvEntry_Destroy(e);
    e = NULL;
    CHECK("create after delete", kvStore_CreateString(&rev, kv, "b", "y"));
    kint(j, "created_after_delete", (long long) rev);
    CHECK("history", kvStore_History(&hist, kv, "a", NULL));
    open_arr(j, "history_a");
    for (int i = 0; i < hist.Count; i++)
        entry(j, NULL, hist.Entries[i]);
    close_arr(j);
    CHECK("keys", kvStore_Keys(&keys, kv, NULL));
    open_arr(j, "keys");
    for (int i = 0; i < keys.Count; i++) { put(j, i ? "," : ""); str(j, keys.Keys[i], -1); }
    close_arr(j);
    CHECK("watch", kvStore_WatchAll(&w, kv, NULL));
    open_arr(j, "watched");
    for (;;) {
        CHECK("watch next", kvWatcher_Next(&e, w, 2000));
        if (e == NULL)
            break;              /* the initial values are done */
        entry(j, NULL, e);
        kvEntry_Destroy(e);
        e = NULL;
    }
    CHECK("put", kvStore_PutString(&rev, kv, "c", "live"));
    CHECK("watch next", kvWatcher_Next(&e, w, 2000));
    entry(j, NULL, e);
    kvEntry_Destroy(e);
    e = NULL;
    close_arr(j);
    CHECK("purge", kvStore_Purge(kv, "a", NULL));
    s = kvStore_Get(&e, kv, "a");
    kstatus(j, "get_purged", s, 0);
    kvEntry_Destroy(e);
    e = NULL;
    s = kvStore_GetRevision(&e, kv, "c", 1);
    kstatus(j, "get_other_keys_revision", s, 0);
out:
    kvEntry_Destroy(e);
    kvEntryList_Destroy(&hist);
    kvKeysList_Destroy(&keys);
    kvWatcher_Destroy(w);
    kvStore_Destroy(kv);
}

static void step_errors(Json *j, jsCtx *js)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"err.>"};
    const char *overlap[] = {"err.a"};
    natsStatus s = js_GetStreamInfo(&si, js, "NOPE", NULL, &jerr);
    kstatus(j, "missing_stream", s, jerr);
    stream_config(&cfg, "E1", subjects);
    CHECK("add stream", add_stream(&si, js, &cfg, &jerr));
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.Name = "E2";
    cfg.Subjects = overlap;
    jerr = 0;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    kstatus(j, "overlapping_subjects", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;
    cfg.Name = "E1";
    cfg.Subjects = subjects;
    cfg.MaxMsgs = 7;
    jerr = 0;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    kstatus(j, "same_name_other_config", s, jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;
    jerr = 0;
    s = js_Publish(&pa, js, "no.stream.here", "x", 1, NULL, &jerr);
    kstatus(j, "publish_without_stream", s, jerr);
    jsPubAck_Destroy(pa);
    pa = NULL;
    jerr = 0;
    s = js_DeleteStream(js, "NOPE", NULL, &jerr);
    kstatus(j, "delete_missing_stream", s, jerr);
    jerr = 0;
    s = js_PurgeStream(js, "NOPE", NULL, &jerr);
    kstatus(j, "purge_missing_stream", s, jerr);
out:
    jsStreamInfo_Destroy(si);
    jsPubAck_Destroy(pa);
}

/* a TLS connection with the CA and client certificate given (NULL: none) -> its status */
static natsStatus tls_connect(natsConnection **nc, const char *url, const char *ca,
                              const char *cert, const char *keyfile)
{
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK) s = natsOptions_SetURL(o, url);
    if (s == NATS_OK) s = natsOptions_SetSecure(o, true);
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(o, false);
    if (s == NATS_OK && ca) s = natsOptions_LoadCATrustedCertificates(o, ca);
    if (s == NATS_OK && cert) s = natsOptions_LoadCertificatesChain(o, cert, keyfile);
    if (s == NATS_OK) s = natsConnection_Connect(nc, o);
    natsOptions_Destroy(o);
    return s;
}

static void step_tls(Json *j, const char *url)
{
    const char *ca = getenv("NATSC_CA"), *cert = getenv("NATSC_CERT"), *keyfile = getenv("NATSC_KEY");
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    CHECK("connect", tls_connect(&nc, url, ca, cert, keyfile));
    CHECK("subscribe", natsConnection_SubscribeSync(&sub, nc, "tls.>"));
    CHECK("flush", natsConnection_Flush(nc));
    CHECK("publish", natsConnection_PublishString(nc, "tls.a", "secret"));
    CHECK("next", natsSubscription_NextMsg(&m, sub, 2000));
    message(j, "round_trip", m);
    natsMsg_Destroy(m);
    m = NULL;
    natsSubscription_Destroy(sub);
    sub = NULL;
    natsConnection_Destroy(nc);
    nc = NULL;
    /* refused: no client certificate; a server certificate the client does not trust */
    natsStatus s = tls_connect(&nc, url, ca, NULL, NULL);
    open_obj(j, "without_client_certificate");
    kstr(j, "status", natsStatus_GetText(s));
    close_obj(j);
    natsConnection_Destroy(nc);
    nc = NULL;
    s = tls_connect(&nc, url, NULL, cert, keyfile);
    open_obj(j, "untrusted_server");
    kstr(j, "status", natsStatus_GetText(s));
    close_obj(j);
out:
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
}

/* what the connection's error handler was told, in order (it runs on the library's thread) */
static pthread_mutex_t errors_lock = PTHREAD_MUTEX_INITIALIZER;
static char async_errors[4][256];
static int n_async_errors;

static void on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void) closure;
    const char *text = NULL;
    natsConnection_GetLastError(nc, &text);
    pthread_mutex_lock(&errors_lock);
    if (n_async_errors < 4)
        snprintf(async_errors[n_async_errors++], sizeof async_errors[0], "%s%s: %s",
                 sub ? "subscription " : "", natsStatus_GetText(err), text ? text : "");
    pthread_mutex_unlock(&errors_lock);
}

static void wait_async_errors(int n)
{
    for (int tries = 0; tries < 200; tries++) {
        pthread_mutex_lock(&errors_lock);
        int have = n_async_errors;
        pthread_mutex_unlock(&errors_lock);
        if (have >= n)
            return;
        nats_Sleep(10);
    }
}

static natsStatus user_connect(natsConnection **nc, const char *url, const char *user, const char *pass)
{
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK) s = natsOptions_SetURL(o, url);
    if (s == NATS_OK) s = natsOptions_SetUserInfo(o, user, pass);
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(o, false);
    if (s == NATS_OK) s = natsOptions_SetErrorHandler(o, on_async_error, NULL);
    if (s == NATS_OK) s = natsConnection_Connect(nc, o);
    natsOptions_Destroy(o);
    return s;
}

static void step_auth(Json *j, const char *url)
{
    const char *user = getenv("NATSC_USER"), *pass = getenv("NATSC_PASS");
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL, *denied = NULL;
    natsMsg *m = NULL;
    natsStatus s = user_connect(&nc, url, user, "wrong");
    kstatus(j, "wrong_password", s, 0);
    natsConnection_Destroy(nc);
    nc = NULL;
    CHECK("connect", user_connect(&nc, url, user, pass));
    CHECK("subscribe", natsConnection_SubscribeSync(&sub, nc, "pub.>"));
    CHECK("flush", natsConnection_Flush(nc));
    CHECK("publish", natsConnection_PublishString(nc, "pub.a", "allowed"));
    CHECK("next", natsSubscription_NextMsg(&m, sub, 2000));
    message(j, "allowed", m);
    /* one at a time: the handler reads the connection's last error, which the next -ERR
       would replace */
    CHECK("publish denied", natsConnection_PublishString(nc, "secret.x", "denied"));
    natsConnection_Flush(nc);
    wait_async_errors(1);
    natsConnection_SubscribeSync(&denied, nc, "secret.>");
    natsConnection_Flush(nc);
    wait_async_errors(2);
    open_arr(j, "async_errors");
    pthread_mutex_lock(&errors_lock);
    for (int i = 0; i < n_async_errors; i++) { put(j, i ? "," : ""); str(j, async_errors[i], -1); }
    pthread_mutex_unlock(&errors_lock);
    close_arr(j);
    kbool(j, "still_connected", !natsConnection_IsClosed(nc));
out:
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
    natsSubscription_Destroy(denied);
    natsConnection_Destroy(nc);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: probe URL step...\n");
        return 2;
    }
    if (getenv("NATSC_REPLICAS"))
        replicas = atoi(getenv("NATSC_REPLICAS"));
    for (int i = 2; i < argc; i++) {
        natsConnection *nc = NULL;
        jsCtx *js = NULL;
        Json j = {malloc(256), 0, 256, 1};
        failed[0] = 0;
        if (!strcmp(argv[i], "tls") || !strcmp(argv[i], "auth")) {
            put(&j, "{");
            (argv[i][0] == 't' ? step_tls : step_auth)(&j, argv[1]);
            put(&j, "}");
            goto report;
        }
        natsStatus s = natsConnection_ConnectTo(&nc, argv[1]);
        if (s == NATS_OK)
            s = natsConnection_JetStream(&js, nc, NULL);
        for (int tries = 0; s == NATS_OK && replicas > 1 && tries < 100; tries++) {
            /* a cluster answers once it has elected its meta leader */
            jsAccountInfo *ai = NULL;
            if (js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK) {
                jsAccountInfo_Destroy(ai);
                break;
            }
            nats_Sleep(200);
        }
        if (s != NATS_OK) {
            snprintf(failed, sizeof failed, "connect: %s (%s)", natsStatus_GetText(s), nats_GetLastError(NULL));
        } else {
            put(&j, "{");
            if (!strcmp(argv[i], "core")) step_core(&j, nc);
            else if (!strcmp(argv[i], "jetstream")) step_jetstream(&j, js);
            else if (!strcmp(argv[i], "consumers")) step_consumers(&j, js);
            else if (!strcmp(argv[i], "push")) step_push(&j, js);
            else if (!strcmp(argv[i], "kv")) step_kv(&j, js);
            else if (!strcmp(argv[i], "errors")) step_errors(&j, js);
            else snprintf(failed, sizeof failed, "unknown step %s", argv[i]);
            put(&j, "}");
        }
    report:;
        Json line = {malloc(256), 0, 256, 1};
        put(&line, "{");
        kstr(&line, "step", argv[i]);
        if (failed[0]) kstr(&line, "error", failed);
        else { key(&line, "ok"); put(&line, "%s", j.s); }
        put(&line, "}");
        printf("%s\n", line.s);
        fflush(stdout);
        free(j.s);
        free(line.s);
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
    }
    nats_Close();
    return 0;
}
