"""The `natsd` command: nats-server's command line, signals, config reload, lame duck mode."""
import logging
import os
import signal
import socket
import sys

from natsd import VERSION, NATSD_VERSION, logger
from natsd.conf import ConfigError, load_file
from natsd.flags import FlagError, HELP_TEXT, parse_command_line

log = logging.getLogger("natsd")

_SIGNAL_NUMBERS = {"stop": signal.SIGKILL, "quit": signal.SIGINT, "term": signal.SIGTERM,
                   "reopen": signal.SIGUSR1, "reload": signal.SIGHUP, "ldm": signal.SIGUSR2}
_SIGNAL_NAMES = {signal.SIGINT: "interrupt", signal.SIGTERM: "terminated",
                 signal.SIGHUP: "hangup", signal.SIGUSR1: "user defined signal 1",
                 signal.SIGUSR2: "user defined signal 2"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        cl = parse_command_line(argv)
    except FlagError as e:
        print("natsd: %s" % e, file=sys.stderr)
        print(HELP_TEXT, file=sys.stderr)
        return 1
    except ConfigError as e:
        print("nats-server: %s" % e, file=sys.stderr)
        return 1
    if cl.show_help:
        print(HELP_TEXT)
        return 0
    if cl.show_version:
        print("nats-server: v%s (natsd %s)" % (VERSION, NATSD_VERSION))
        return 0
    if cl.show_tls_help:
        print("TLS is not supported by natsd yet.")
        return 0
    opts = cl.opts
    if cl.check_config:
        print("nats-server: configuration file %s is valid (%s)" % (opts.config_file, opts.config_digest))
        return 0
    if cl.signal:
        return send_signal(cl.signal, opts)
    logger.configure(opts)
    for flag in cl.unsupported:
        log.warning("Flag %s is accepted but not supported by natsd yet", flag)
    return run_server(opts)


def run_server(opts):
    from natsd.server import Server
    try:
        server = Server(opts)
        server.start()
    except OSError as e:
        log.critical("Error listening on port: %s", e)
        return 1
    except Exception as e:
        log.critical("%s", e)
        return 1
    install_signal_handlers(server)
    try:
        server.run()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


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
        logger.configure(server.opts)

    def on_ldm(signum, frame):
        log.info('Trapped "%s" signal', _SIGNAL_NAMES[signum])
        server.enter_lame_duck_mode()

    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGHUP, on_reload)
    signal.signal(signal.SIGUSR1, on_reopen)
    signal.signal(signal.SIGUSR2, on_ldm)


def reload_config(server):
    path = server.opts.config_file
    if not path:
        log.error("Failed to reload server configuration: no config file")
        return
    try:
        new = load_file(path)
    except ConfigError as e:
        log.error("Failed to reload server configuration: %s", e)
        return
    except OSError as e:
        log.error("Failed to reload server configuration: %s", e)
        return
    _keep_command_line(server.opts, new)
    server.reload(new)


def _keep_command_line(old, new):
    """Settings that only a restart changes (listen address, ports) keep their running values."""
    for name in ("host", "port", "http_host", "http_port", "https_port"):
        setattr(new, name, getattr(old, name))


def send_signal(spec, opts):
    cmd, _, target = spec.partition("=")
    pid = None
    if target:
        try:
            pid = int(target)
        except ValueError:
            try:
                pid = int(open(target).read().strip())
            except (OSError, ValueError) as e:
                print("natsd: cannot read pid from %s: %s" % (target, e), file=sys.stderr)
                return 1
    elif opts.pid_file:
        try:
            pid = int(open(opts.pid_file).read().strip())
        except (OSError, ValueError) as e:
            print("natsd: cannot read pid file %s: %s" % (opts.pid_file, e), file=sys.stderr)
            return 1
    if pid is None:
        print("natsd: no pid given: use --signal %s=<pid> or a pid file (-P)" % cmd, file=sys.stderr)
        return 1
    try:
        os.kill(pid, _SIGNAL_NUMBERS[cmd])
    except OSError as e:
        print("natsd: %s" % e, file=sys.stderr)
        return 1
    return 0


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
