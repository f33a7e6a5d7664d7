"""The `natsd` command: nats-server's command line, signals, config reload, lame duck mode."""
import errno
import logging
import os
import signal
import socket
import sys
import time
import traceback

from natsd import VERSION, NATSD_VERSION
from natsd.output import logger
from natsd.conf import ConfigError
from natsd.conf.unsupported import start_error
from natsd.conf.flags import FlagError, FlagSyntaxError, HELP_TEXT, parse_command_line

log = logging.getLogger("natsd")

_SIGNAL_NUMBERS = {"stop": signal.SIGKILL, "quit": signal.SIGINT, "term": signal.SIGTERM,
                   "reopen": signal.SIGUSR1, "reload": signal.SIGHUP, "ldm": signal.SIGUSR2}
_SIGNAL_NAMES = {signal.SIGINT: "interrupt", signal.SIGTERM: "terminated",
                 signal.SIGHUP: "hangup", signal.SIGUSR1: "user defined signal 1",
                 signal.SIGUSR2: "user defined signal 2"}


def main(argv=None):
    """Errors are printed as nats-server prints them (tools parse its stderr):
    `nats-server: <error>` and exit 1, except Go flag-package errors (the message, then the
    usage on stdout, exit 0).  natsd's own refusals start with `natsd: `."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        cl = parse_command_line(argv)
    except FlagSyntaxError as e:
        print(e, file=sys.stderr)
        _usage()
        return 0
    except FlagError as e:
        _print_warnings(e.warnings)
        print("nats-server: %s" % e, file=sys.stderr)
        return 1
    except ConfigError as e:
        print("nats-server: %s" % e.report(), file=sys.stderr)
        return 1
    if cl.show_help:
        _usage()
        return 0
    if cl.show_version:
        print("nats-server: v%s (natsd %s)" % (VERSION, NATSD_VERSION))
        return 0
    if cl.show_tls_help:
        print("TLS is not supported by natsd yet.")
        return 0
    opts = cl.opts
    if cl.check_config:
        if cl.refusals:
            _print_refusals(cl.refusals)
            return 1
        print("nats-server: configuration file %s is valid (%s)" % (opts.config_file, opts.config_digest),
              file=sys.stderr)
        return 0
    if cl.signal:
        return send_signal(cl.signal, opts)
    _print_warnings(opts.warnings)
    err = start_error(opts)
    if err:
        print("nats-server: %s" % err, file=sys.stderr)
        return 1
    if cl.refusals:
        _print_refusals(cl.refusals)
        return 1
    problem = _apply_environment(opts, os.environ)
    if problem:
        _print_refusals([problem])
        return 1
    try:
        logger.configure(opts)
    except logger.LogDestinationError as e:
        # nats-server's log.Fatalf: Go's standard logger line, exit 1
        print("%s %s" % (time.strftime("%Y/%m/%d %H:%M:%S"), e), file=sys.stderr)
        return 1
    return run_server(opts)


def _usage():
    """nats-server's usage(): the text, framed by blank lines, on stdout."""
    print("\n" + HELP_TEXT)


def _print_warnings(warnings):
    """nats-server prints a config's warnings on stderr before it starts (`-t` fails on them)."""
    if warnings:
        sys.stderr.write("".join(w + "\n" for w in warnings))
        sys.stderr.flush()


def _apply_environment(opts, environ):
    """natsd's own environment settings into opts; the refusal for a bad one, else None."""
    raw = environ.get("NATSD_POLL_US")
    if raw is not None:
        if not raw.isdigit() or int(raw) > 1_000_000:
            return "NATSD_POLL_US=%r: want whole microseconds from 0 to 1000000" % raw
        opts.poll_us = float(int(raw))
    raw = environ.get("NATSD_SEND_RING")
    if raw is not None:
        if raw not in ("0", "1"):
            return "NATSD_SEND_RING=%r: want 1 (on) or 0 (off)" % raw
        opts.send_ring = raw == "1"
    raw = environ.get("NATSD_NEW_FILES_US")
    if raw is not None:
        if not raw.isdigit() or int(raw) > 10_000_000:
            return "NATSD_NEW_FILES_US=%r: want whole microseconds from 0 to 10000000" % raw
        opts.new_files_us = float(int(raw))
    raw = environ.get("NATSD_REUSE_PORT")
    if raw is not None:
        if raw not in ("0", "1"):
            return "NATSD_REUSE_PORT=%r: want 1 (share the client port) or 0" % raw
        opts.reuse_port = raw == "1"
    return None


def _print_refusals(refusals):
    for r in refusals:
        print("natsd: %s" % r, file=sys.stderr)


def run_server(opts):
    from natsd.server import InitError, MonitorError, Server
    try:
        server = Server(opts)
    except InitError as e:
        print("nats-server: %s" % e, file=sys.stderr)
        return 1
    try:
        install_signal_handlers(server)     # before "Server is ready": launchers signal at once
        server.start()
    except MonitorError as e:
        log.critical("Can't start monitoring: %s", e)
        return 1
    except OSError as e:
        log.critical("%s", _listen_error(opts, e))
        return 1
    except Exception as e:
        log.critical("%s", e)
        return 1
    try:
        server.run()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def run():
    """The `natsd` command and `python -m natsd`: main(), then the process ends at once, as
    nats-server's does within a millisecond of closing its connections. A client that
    reconnects elsewhere must not find this server still there (launchers wait for the exit
    before they count a reconnection); the interpreter's teardown has nothing left to do."""
    rc = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _go_addr(host, port):
    """net.JoinHostPort"""
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def _go_listen_error(host, port, e):
    """The text of Go's net.Listen("tcp", host:port) error."""
    if isinstance(e, socket.gaierror):
        return "listen tcp: lookup %s: no such host" % host
    msg = e.strerror or str(e)
    msg = msg[:1].lower() + msg[1:]
    op = "bind: " if e.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL) else ""
    return "listen tcp %s: %s%s" % (_go_addr(host, port), op, msg)


def _listen_error(opts, e):
    """nats-server's fatal error for the listener that failed to open (found from where
    the error was raised: the monitor, the leafnode, route or gateway listener, else the client
    port)."""
    files = [f.filename.replace(os.sep, "/") for f in traceback.extract_tb(e.__traceback__)]
    if any("/monitor/" in f for f in files):
        return "Can't start monitoring: can't listen to the monitor port: %s" % (
            _go_listen_error(opts.http_host, opts.http_port, e))
    if any(f.endswith("/leafnode.py") for f in files):
        return "Error listening on leafnode port: %d - %s" % (
            opts.leafnode.port, _go_listen_error(opts.leafnode.host, opts.leafnode.port, e))
    if any(f.endswith("/cluster/routes.py") for f in files):
        co = opts.cluster
        return "Error listening on router port: %d - %s" % (
            co.port, _go_listen_error(co.host or "0.0.0.0", max(co.port, 0), e))
    if any(f.endswith("/gateways/gateways.py") for f in files):
        g = opts.gateway
        return "Error listening on gateway port: %d - %s" % (
            g.port, _go_listen_error(g.host or "0.0.0.0", max(g.port, 0), e))
    return 'Error listening on port: %s, "%s"' % (
        _go_addr(opts.host, opts.port), _go_listen_error(opts.host, opts.port, e).replace('"', '\\"'))


def install_signal_handlers(server):
    # Python runs signal handlers between bytecodes; the wakeup fd makes epoll return at once.
    rsock, wsock = socket.socketpair()
    rsock.setblocking(False)
    wsock.setblocking(False)
    signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    server.loop.add_handler(rsock.fileno(), _Drain(rsock))
    server._signal_socks = (rsock, wsock)

    def on_stop(signum, frame):
        log.info('Trapped "%s" signal', _SIGNAL_NAMES.get(signum, signum))
        server.shutdown()

    def on_reload(signum, frame):
        log.info('Trapped "%s" signal', _SIGNAL_NAMES[signum])
        reload_config(server)

    def on_reopen(signum, frame):
        log.info("Reopening log file")
        try:
            logger.configure(server.opts)
        except logger.LogDestinationError as e:
            log.error("Failed to reopen the log: %s", e)

    def on_ldm(signum, frame):
        log.info('Trapped "%s" signal', _SIGNAL_NAMES[signum])
        server.enter_lame_duck_mode()

    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGHUP, on_reload)
    signal.signal(signal.SIGUSR1, on_reopen)
    signal.signal(signal.SIGUSR2, on_ldm)


def reload_config(server):
    error = server.reload_config_file()
    if error is not None:
        log.error("Failed to reload server configuration: %s", error)


def send_signal(spec, opts):
    cmd, _, target = spec.partition("=")
    pid = None
    if target:
        # nats-server: the contents of the file named `target` if it can be read, else
        # `target` itself, must be a pid.
        try:
            with open(target) as f:
                target = f.read()
        except OSError:
            pass
        try:
            pid = int(target.strip())
        except ValueError:
            print("nats-server: invalid pid: %s" % target, file=sys.stderr)
            return 1
    else:
        # nats-server resolves its own processes by name: ours are `natsd` / `python -m natsd`
        pids = natsd_pids()
        if len(pids) != 1:
            print("nats-server: " + ("no natsd processes running" if not pids else
                                     "multiple natsd processes running:" +
                                     "".join("\n%d" % p for p in pids)), file=sys.stderr)
            return 1
        pid = pids[0]
    try:
        os.kill(pid, _SIGNAL_NUMBERS[cmd])
    except OSError as e:
        msg = e.strerror or str(e)
        print('nats-server: \nsignal "%s" %d: %s' % (cmd, pid, msg[:1].lower() + msg[1:]), file=sys.stderr)
        return 1
    return 0


def natsd_pids():
    """Pids of the running natsd servers (not this process): argv[0] is `natsd`, or a Python
    running `-m natsd`."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0]:
            continue
        if os.path.basename(argv[0]) == b"natsd" or any(
                argv[i] == b"-m" and argv[i + 1] == b"natsd" for i in range(len(argv) - 1)):
            if b"--signal" not in argv and b"-sl" not in argv:
                out.append(int(entry))
    return sorted(out)


class _Drain:
    def __init__(self, sock):
        self.sock = sock

    def on_event(self, events):
        try:
            while self.sock.recv(512):
                pass
        except (BlockingIOError, InterruptedError):
            pass


if __name__ == "__main__":
    sys.exit(main())
