"""S2 compression of routes and leaf node links: the modes, and how two servers agree on one.

Each side announces its mode in INFO (`compression`). nats-server's rules: `off` on either
side (or a peer that says nothing: an older server) means none; `accept` compresses only if
the other side asks to; otherwise the asking side's level is used (`s2_auto` picks one from
the connection's round-trip time: uncompressed, fast, better or best past each threshold).
The wire format is in natsd/_core/s2.pyx; the negotiation itself (who switches when, relative
to which INFO) in natsd/cluster/routeproto.py and natsd/leafnodes/leafnode.py.
"""
from natsd.gofmt import go_duration, go_quote, parse_go_duration

OFF = "off"
ACCEPT = "accept"
NOT_SUPPORTED = "not supported"
S2_AUTO = "s2_auto"
S2_UNCOMPRESSED = "s2_uncompressed"
S2_FAST = "s2_fast"
S2_BETTER = "s2_better"
S2_BEST = "s2_best"
LEVELS = (S2_UNCOMPRESSED, S2_FAST, S2_BETTER, S2_BEST)
DEFAULT_RTT_THRESHOLDS = (0.010, 0.050, 0.100)


class CompressionError(ValueError):
    pass


class Compression:
    """A configured mode (nats-server's CompressionOpts, normalized)."""

    def __init__(self, mode, rtt_thresholds=()):
        self.mode = mode
        self.rtt_thresholds = tuple(rtt_thresholds)

    @classmethod
    def parse(cls, value, default_on, unset=ACCEPT):
        """A config value (string, bool, or {mode, rtt_thresholds}); `default_on` is the
        mode `true`/`on` means. Raises CompressionError with nats-server's words."""
        rtts = []
        if value is None:
            mode = unset
        elif isinstance(value, bool):
            mode = default_on if value else OFF
        elif isinstance(value, dict):
            mode = ""
            for k, v in value.items():
                lk = k.lower()
                if lk == "mode":
                    mode = str(v)
                elif lk in ("rtt_thresholds", "thresholds", "rtts", "rtt"):
                    rtts = [parse_go_duration(str(x).strip()) / 1e9 for x in (v or [])]
            if not mode:
                mode = unset
        else:
            mode = str(value)
        m = mode.lower()
        if m in ("on", "enabled", "true"):
            m = default_on
        if m in ("not supported", "not_supported"):
            return cls(NOT_SUPPORTED)
        if m in ("disabled", "off", "false"):
            return cls(OFF)
        if m == "accept":
            return cls(ACCEPT)
        if m in ("auto", "s2_auto"):
            return cls(S2_AUTO, _thresholds(mode, rtts) if rtts else DEFAULT_RTT_THRESHOLDS)
        for level in ("fast", "better", "best"):
            if m in (level, "s2_" + level):
                return cls("s2_" + level)
        raise CompressionError("unsupported compression mode %s" % _q(mode))

    @property
    def negotiates(self):
        """nats-server's needsCompression: anything but off / not supported."""
        return self.mode not in ("", OFF, NOT_SUPPORTED)

    def info_mode(self, chosen):
        """What our INFO announces once a mode was chosen (auto stays auto)."""
        return S2_AUTO if self.mode == S2_AUTO else chosen

    def select(self, remote, rtt):
        """The mode of a link between us and a peer announcing `remote` (which may be "")."""
        if not remote or remote == NOT_SUPPORTED:
            return NOT_SUPPORTED
        if remote == OFF:
            return OFF
        if remote == ACCEPT:
            chosen = OFF if self.mode == ACCEPT else self.mode
        elif remote in (S2_AUTO,) + LEVELS:
            if self.mode == ACCEPT:
                chosen = S2_FAST if remote == S2_AUTO else remote
            else:
                chosen = self.mode
        else:
            raise CompressionError("unsupported route compression mode %s" % _q(remote))
        if chosen == S2_AUTO:
            chosen = auto_level(rtt, self.rtt_thresholds or DEFAULT_RTT_THRESHOLDS)
        return chosen


def auto_level(rtt, thresholds):
    """nats-server's selectS2AutoModeBasedOnRTT."""
    idx = None
    for i, d in enumerate(thresholds):
        if rtt <= d:
            idx = i
            break
    if idx is None:
        idx = 3 if len(thresholds) >= 3 else len(thresholds) - 1
    return LEVELS[min(idx, 3)]


def compresses(mode):
    return mode in LEVELS


def codec(mode):
    """The S2 codec of a chosen level."""
    from natsd._core.s2 import S2Codec
    return S2Codec(mode[3:])


def _thresholds(mode, rtts):
    out = []
    for n in rtts:
        n = max(n, 0)
        if out and n != 0 and any(n < v for v in out):
            raise CompressionError("RTT threshold values %s should be in ascending order" % _go_list(rtts))
        out.append(n)
    while out and out[-1] == 0:
        out.pop()
    if len(out) > 4:
        raise CompressionError("compression mode %s should have no more than 4 RTT thresholds: %s"
                               % (_q(mode), _go_list(rtts)))
    if not out:
        raise CompressionError("compression mode %s requires at least one RTT threshold" % _q(mode))
    return out


def _q(s):
    return go_quote(s)


def _go_list(rtts):
    return "[%s]" % " ".join(go_duration(int(x * 1e9)) for x in rtts)
