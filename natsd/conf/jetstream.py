"""The `jetstream` config section: store, limits (server, account and batch), domain, sync."""
from __future__ import annotations

from natsd.conf.parser import Node
from natsd.conf.reader import KIND_NAME, Reader, parse_size


class JetStreamSection(Reader):
    # -- jetstream -------------------------------------------------------------
    def jetstream(self, k: str, n: Node):
        js = self.o.jetstream
        if n.kind in ("bool", "string"):
            on = self.switch(n)
            if on is not None:
                js.enabled = on
            return
        if n.kind != "map":
            self.err(n, f"Expected map, bool or string to define JetStream, got {KIND_NAME[n.kind]}")
            return
        enable = True
        for mk, mv in n.value.items():
            lk = mk.lower()
            if lk == "strict":
                js.strict = self.b(mv, mk, True)
            elif lk in ("store", "store_dir", "storedir"):
                if js.store_dir:
                    self.err(mv, "Duplicate 'store_dir' configuration")
                js.store_dir = self.s(mv, mk)
            elif lk in ("sync", "sync_interval"):
                if mv.kind == "string" and mv.value.lower() == "always":
                    js.sync_interval, js.sync_always = "always", True
                else:
                    js.sync_interval = self.duration(mv, mk, 120.0)
                    js.sync_interval_set = True
            elif lk in ("max_memory_store", "max_mem_store", "max_mem", "max_file_store", "max_file",
                        "max_outstanding_catchup", "max_buffered_size"):
                try:
                    size = parse_size(mv.value if mv.kind in ("integer", "string") else None)
                except ValueError as e:
                    name = "max_mem_store" if "mem" in lk else ("max_file_store" if "file" in lk else lk)
                    self.err(mv, f"{name} {e}")
                    continue
                if "mem" in lk:
                    js.max_memory = size
                elif "file" in lk:
                    js.max_store = size
                elif lk == "max_buffered_size":
                    js.max_buffered_size = size
                else:
                    js.max_outstanding_catchup = size
            elif lk == "domain":
                js.domain = self.s(mv, mk)
                if js.domain and any(c in js.domain for c in " .\t*>"):
                    self.err(mv, f"invalid domain name: {js.domain!r} (no spaces, dots or wildcards)")
            elif lk in ("enable", "enabled"):
                enable = self.b(mv, mk, True)
            elif lk in ("key", "ek", "encryption_key"):
                js.key = self.s(mv, mk)
            elif lk in ("prev_key", "prev_ek", "prev_encryption_key"):
                js.prev_key = self.s(mv, mk)
            elif lk == "cipher":
                c = self.s(mv, mk)
                if c.lower() not in ("chacha", "chachapoly", "aes"):
                    from natsd.gofmt import go_quote
                    self.err(mv, f"Unknown cipher type: {go_quote(c)}")   # Go's %q
                js.cipher = c
            elif lk == "extension_hint":
                js.extension_hint = self.s(mv, mk)
            elif lk == "limits":
                self.js_limits(mv)
            elif lk == "unique_tag":
                js.unique_tag = self.s(mv, mk).strip().lower()
            elif lk == "max_buffered_msgs":
                js.max_buffered_msgs = self.i(mv, mk, js.max_buffered_msgs)
            elif lk == "request_queue_limit":
                js.request_queue_limit = self.i(mv, mk)
            elif lk in ("tpm", "info_queue_limit", "meta_compact", "meta_compact_size", "meta_compact_sync",
                        "max_concurrent_io"):
                js.extra[lk] = mv.plain()
            else:
                self.unknown(mk, mv)
        js.enabled = enable

    def js_limits(self, n: Node):
        m = self.m(n, "limits")
        lim = self.o.jetstream.limits
        for k, v in (m or {}).items():
            lk = k.lower()
            if lk in ("max_ack_pending", "max_ha_assets", "max_request_batch"):
                lim[lk] = self.i(v, k)
            elif lk == "duplicate_window":
                lim[lk] = self.duration(v, k)
            elif lk == "batch":
                bm = self.m(v, k) or {}
                for bk, bv in bm.items():
                    if bk.lower() in ("max_inflight_per_stream", "max_inflight_total", "max_msgs"):
                        lim.setdefault("batch", {})[bk.lower()] = self.i(bv, bk)
                    elif bk.lower() == "timeout":
                        lim.setdefault("batch", {})["timeout"] = self.duration(bv, bk)
                    else:
                        self.unknown(bk, bv)
            else:
                self.unknown(k, v)

