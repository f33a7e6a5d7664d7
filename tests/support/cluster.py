"""Clusters of real servers for tests: natsd and nats-server members, joined by routes.

Each member gets a config file (server name, ephemeral client, monitoring and route ports);
the first member is the seed the others route to, gossip completes the mesh. JetStream
clusters (start_js_cluster, js_cluster, clusters_of_each_kind) name every member in every route list, on ports
chosen before the start; members restart in place (restart_member, restart_all) and die by
kill -9 (kill9). Waiting is on conditions seen in /routez (every other member present, a
subject's interest arrived), never on sleeps. Members are ServerProcess objects
(tests/support/servers.py), killed by PID at teardown. Also here: the elected leaders read
from the logs, a slow disk (an LD_PRELOAD library) and the seeds of the fault scenarios.
"""
import contextlib
import os
import re
import signal

from tests.support.servers import ServerProcess, http_json, nats_server_cmd, natsd_cmd
from tests.support.waiting import poll

ROUTE_RE = re.compile(r"Listening for route connections on (\S+):(\d+)")


class Member:
    def __init__(self, kind, name, proc, conf):
        self.kind = kind
        self.name = name
        self.proc = proc
        self.conf = conf
        self.earlier = []               # the processes this member ran before (restart_member)
        self.route_port = int(proc.wait_log(ROUTE_RE.pattern).group(2))

    @property
    def url(self):
        return self.proc.url

    @property
    def route_url(self):
        return "nats://127.0.0.1:%d" % self.route_port

    def get(self, path):
        return http_json(self.proc.http_port, path)

    def remote_names(self):
        return {r.get("remote_name") for r in self.get("/routez").get("routes") or []}

    def route_subjects(self, remote=None):
        """Subjects the routes (from `remote`, or all) told this member about."""
        out = set()
        for r in self.get("/routez?subs=1").get("routes") or []:
            if remote is None or r.get("remote_name") == remote:
                out.update(r.get("subscriptions_list") or [])
        return out


def member_conf(tmp_path, name, routes=(), cluster="C1", extra="", cluster_extra="", route_port=-1):
    os.makedirs(str(tmp_path), exist_ok=True)
    path = os.path.join(str(tmp_path), "%s.conf" % name)
    rlist = ", ".join('"%s"' % r for r in routes)
    with open(path, "w") as f:
        f.write('server_name: %s\nhttp_port: -1\n%s\ncluster {\n  name: %s\n  port: %d\n'
                '  routes: [%s]\n%s\n}\n' % (name, extra, cluster, route_port, rlist, cluster_extra))
    return path


def start_member(kind, tmp_path, name, routes=(), cluster="C1", extra="", cluster_extra="",
                 route_port=-1, args=(), env=None):
    cmd = natsd_cmd() if kind == "natsd" else nats_server_cmd()
    conf = member_conf(tmp_path, name, routes, cluster, extra, cluster_extra, route_port)
    proc = ServerProcess(list(cmd) + ["-c", conf, "-p", "-1", "-a", "127.0.0.1"] + list(args),
                         env=None if env is None else dict(os.environ, **env))
    proc.wait_ready()
    return Member(kind, name, proc, conf)


def wait_mesh(members, timeout=20.0):
    """Until every member has routes to every other member."""
    want = {m.name for m in members}

    def missing():
        return {m.name: (want - {m.name}) - m.remote_names() for m in members}
    if not poll(lambda: not any(missing().values()), timeout, 0.05):
        raise AssertionError("cluster never meshed, missing: %r" % missing())


def wait_meta_leader(members, timeout=30.0):
    """Until every member names the same JetStream meta leader in /jsz. A cluster still
    electing its first leader leaves requests unanswered (nats-server and natsd alike), so
    the tests start once it has one."""
    def leaders():
        return {m.get("/jsz").get("meta_cluster", {}).get("leader", "") for m in members}
    if not poll(lambda: len(leaders()) == 1 and "" not in leaders(), timeout, 0.05):
        raise AssertionError("no meta leader that every member knows: %r" % leaders())


def wait_interest(members, subject, timeout=10.0):
    """Until every member saw `subject` in what its routes told it (from any member)."""
    def lacking():
        return [m.name for m in members if subject not in m.route_subjects()]
    if not poll(lambda: not lacking(), timeout, 0.05):
        raise AssertionError("interest in %r never reached %r" % (subject, lacking()))


def start_js_cluster(kind, tmp_path, names="ABC", extra=lambda name: "", js="", env=lambda name: None,
                     cluster_extra="", elected=True):
    """A JetStream cluster as nats-server requires one: every member's route list names every
    member (itself included), on route ports chosen before the start. `extra(name)` adds to a
    member's config, `js` to every member's jetstream block (or `js(name)` to that member's),
    `cluster_extra` to every cluster block, `env(name)` to its environment; each gets its own
    store directory. Returned once meshed and, with `elected`, once every member knows the
    meta leader."""
    from tools.serverproc import free_port
    ports = {n: free_port() for n in names}
    routes = ["nats://127.0.0.1:%d" % p for p in ports.values()]
    members = []
    try:
        for n in names:
            members.append(start_member(kind, tmp_path, n, routes=routes, route_port=ports[n],
                                        extra=js_extra(tmp_path, n, extra(n), js(n) if callable(js) else js),
                                        cluster_extra=cluster_extra, env=env(n)))
        wait_mesh(members)
        if elected:
            wait_meta_leader(members)
    except BaseException:
        for m in members:
            m.proc.kill()
        raise
    return members


@contextlib.contextmanager
def js_cluster(kind, tmp_path, names="ABC", **kw):
    """start_js_cluster (its keywords too) as a context: every member in the list at the end is
    killed (replace members in place, `members[i] = ...`, to have a restarted one killed too)."""
    members = start_js_cluster(kind, tmp_path, names, **kw)
    try:
        yield members
    finally:
        for m in members:
            m.proc.kill()


def clusters_of_each_kind(tmp_path, kinds=("nats-server", "natsd"), **kw):
    """(kind, members) of a fresh JetStream cluster of nats-server, then of natsd (js_cluster,
    its keywords too, in tmp_path/kind), each killed when the loop moves on."""
    for kind in kinds:
        with js_cluster(kind, tmp_path / kind, **kw) as members:
            yield kind, members


def js_extra(tmp_path, name, extra="", js=""):
    return "%s\njetstream { store_dir: '%s'\n%s }" % (extra, os.path.join(str(tmp_path), "store-" + name), js)


def restart_member(member, tmp_path, extra="", env=None):
    """The same member again (config, route port and store), after it died."""
    routes = re.findall(r'"(nats://[^"]+)"', open(member.conf).read())
    again = start_member(member.kind, tmp_path, member.name, routes=routes, route_port=member.route_port,
                         extra=js_extra(tmp_path, member.name, extra), env=env)
    again.earlier = member.earlier + [member.proc]
    return again


ELECTED_RE = re.compile(r"raft (\S+) in group (\S+): elected leader for term (\d+)")


def leaders_by_term(members):
    """{(group, term): peer} from the "elected leader" lines of every process each natsd member
    ran; fails if two peers were elected in one term of one group."""
    leaders = {}
    for m in members:
        for proc in m.earlier + [m.proc]:
            for line in list(proc.lines):
                hit = ELECTED_RE.search(line)
                if hit:
                    peer, group, term = hit.groups()
                    first = leaders.setdefault((group, int(term)), peer)
                    assert first == peer, "two leaders of %s in term %s: %s and %s" % (group, term, first, peer)
    return leaders


def restart_all(members, tmp_path):
    """Restart every member of `members` in place, one at a time, so that a restart that fails
    leaves the ones already started in the list (and killed by its owner)."""
    for i, m in enumerate(members):
        members[i] = restart_member(m, tmp_path)


SLOW_SYNC_C = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
/* A slow disk: every fsync and fdatasync waits SLOW_SYNC_US microseconds first. */
static useconds_t pause_us(void) { const char *s = getenv("SLOW_SYNC_US"); return s ? (useconds_t)atol(s) : 0; }
int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    usleep(pause_us());
    return real(fd);
}
int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    usleep(pause_us());
    return real(fd);
}
'''


def slow_disk_env(tmp_path, micros):
    """The environment for a server whose fsync/fdatasync calls each take `micros` longer:
    an LD_PRELOAD library compiled here (gcc is there: it builds natsd's Cython core)."""
    import subprocess
    src = os.path.join(str(tmp_path), "slowsync.c")
    lib = os.path.join(str(tmp_path), "slowsync.so")
    if not os.path.exists(lib):
        with open(src, "w") as f:
            f.write(SLOW_SYNC_C)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl"], check=True)
    return {"LD_PRELOAD": lib, "SLOW_SYNC_US": str(micros)}


def fault_seeds(default):
    """The seeds of a real-process fault scenario: `default` in the suite (its time budget),
    1..N with NATSD_FAULT_SEEDS=N in the environment (`make faults` runs 20), B+1..B+N with
    NATSD_FAULT_SEED_BASE=B as well (seeds no earlier run tried)."""
    n = int(os.environ.get("NATSD_FAULT_SEEDS") or 0)
    base = int(os.environ.get("NATSD_FAULT_SEED_BASE") or 0)
    return list(range(base + 1, base + n + 1)) if n > 0 else list(default)


def kill9(*members):
    """kill -9 each member and wait until it is gone."""
    for m in members:
        m.proc.proc.send_signal(signal.SIGKILL)
    for m in members:
        m.proc.proc.wait(5)
