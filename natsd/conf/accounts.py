"""Config sections for accounts: users per account, JetStream and connection limits, exports
and imports (with nats-server's authorisation and cycle checks over the whole file), subject
mappings, and the checks that need every section read."""
from __future__ import annotations

import re

from natsd.options import (AccountLimits, AccountOpts, ExportOpts, ImportOpts, MappingDest,
                       NkeyUser, ServiceLatency)
from natsd.gofmt import go_quote
from natsd.subject import is_valid_literal_subject, is_valid_subject, subject_is_subset, subjects_overlap
from natsd.conf.parser import Node
from natsd.conf.reader import GO_TYPE, KIND_NAME, Reader, parse_duration, parse_size


def _wildcards_used(subject: str, to: str) -> str | None:
    """nats-server maps an import `to` over its subject; every `*` must be used."""
    if not to or to == subject:
        return None
    stoks, ttoks = subject.split("."), to.split(".")
    n_star = stoks.count("*")
    if "$" in to or "{{" in to:
        return None  # explicit $1 / {{wildcard(1)}} references: left to the server
    if ttoks.count("*") != n_star:
        return f"not using all of the token wildcard(s) in {to}"
    if (stoks[-1] == ">") != (ttoks[-1] == ">"):
        return f"the full wildcard must be the last token of both subjects in {to}"
    return None


def _stream_local(im: ImportOpts) -> str:
    if im.prefix:
        return f"{im.prefix.rstrip('.')}.{im.subject}"
    return im.to or im.subject



class AccountSections(Reader):
    # -- accounts --------------------------------------------------------------
    def accounts(self, k: str, n: Node):
        o = self.o
        if n.kind == "array":   # `accounts: [A, B]` just names them
            for it in n.value:
                name = self.s(it, k)
                if name == "$G":
                    self.err(it, '"$G" is a Reserved Account')
                elif name in o.accounts:
                    self.err(it, f"Duplicate Account Entry: {name}")
                elif name:
                    o.accounts[name] = AccountOpts(name=name, pos=it.pos)
            return
        m = self.m(n, k)
        for name, an in (m or {}).items():
            if an.used_variable:
                continue
            if an.kind != "map":
                self.err(an, "Expected map entries for accounts")
                continue
            if name == "$G":
                self.err(an, '"$G" is a Reserved Account')
                continue
            acc = AccountOpts(name=name, pos=an.pos)
            o.accounts[name] = acc
            users_node = None
            for ak, av in an.value.items():
                lk = ak.lower()
                if lk == "nkey":
                    v = self.s(av, ak)
                    if not (v.startswith("A") and len(v) == 56):
                        self.err(av, f'Not a valid public nkey for an account: "{v}"')
                    acc.nkey = v
                elif lk == "imports":
                    self.account_imports(av, acc)
                elif lk == "exports":
                    self.account_exports(av, acc)
                elif lk == "jetstream":
                    self.account_jetstream(av, acc)
                elif lk == "users":
                    users_node = av
                    acc.users = self.users(av, ak, name)
                elif lk == "default_permissions":
                    acc.default_permissions = self.permissions(av, ak)
                elif lk in ("mappings", "maps"):
                    self.mappings(av, ak, acc.mappings, {})
                elif lk == "limits":
                    self.account_limits(av, acc.limits)
                elif lk in ("msg_trace", "trace_dest"):
                    self.msg_trace(av, ak, acc)
                else:
                    self.unknown(ak, av)
            if acc.default_permissions is not None:
                for u in acc.users:
                    if u.permissions is None:
                        u.permissions = acc.default_permissions
            if acc.users and users_node is not None:
                if o.username:
                    self.err(users_node, "Can not have a single user/pass and accounts")
                if o.authorization:
                    self.err(users_node, "Can not have a token and accounts")
            for u in acc.users:
                (o.nkeys if isinstance(u, NkeyUser) else o.users).append(u)

    def account_jetstream(self, n: Node, acc: AccountOpts):
        if n.kind in ("bool", "string"):
            on = self.switch(n)
            if on is not None:
                acc.jetstream = on
        elif n.kind == "map":
            acc.jetstream = True
            known = {"max_memory", "max_mem", "mem", "memory", "max_store", "max_file", "max_disk", "store",
                     "disk", "max_streams", "streams", "max_consumers", "consumers", "max_bytes_required",
                     "max_stream_bytes", "max_bytes", "mem_max_stream_bytes", "memory_max_stream_bytes",
                     "disk_max_stream_bytes", "store_max_stream_bytes", "max_ack_pending", "cluster_traffic"}
            for k, v in n.value.items():
                lk = k.lower()
                if lk in ("enabled", "enable"):
                    acc.jetstream = self.b(v, k, True)
                elif lk in ("disabled", "disable"):
                    acc.jetstream = not self.b(v, k, False)
                elif lk in known:
                    val = v.value
                    if lk in ("max_memory", "max_mem", "mem", "memory", "max_store", "max_file", "max_disk",
                              "store", "disk") and v.kind in ("integer", "string"):
                        try:
                            val = parse_size(v.value)
                        except ValueError as e:
                            self.err(v, f"{k} {e}")
                    acc.jetstream_limits[lk] = val
                else:
                    self.unknown(k, v)
        else:
            self.err(n, f"Expected map, bool or string to define JetStream, got {KIND_NAME[n.kind]}")

    def account_limits(self, n: Node, lim: AccountLimits):
        m = self.m(n, "limits")
        fields = {"max_connections": "max_connections", "max_conn": "max_connections",
                  "max_subscriptions": "max_subscriptions", "max_subs": "max_subscriptions",
                  "max_payload": "max_payload", "max_pay": "max_payload",
                  "max_leafnodes": "max_leafnodes", "max_leafs": "max_leafnodes"}
        for k, v in (m or {}).items():
            f = fields.get(k.lower())
            if f is None:
                self.unknown(k, v)
            else:
                setattr(lim, f, self.i(v, k, -1))

    def _typed_entries(self, n: Node, key: str, what: str):
        """The entries of an `exports` or `imports` array, each a map with its type ("stream"
        or "service"); an item that is not a map is an error."""
        if not self.want(n, ("array",), key):
            return
        for item in n.value:
            if item.kind != "map":
                self.err(item, f"{what} Items should be a map with type entry, got {KIND_NAME[item.kind]}")
                continue
            yield item

    def account_exports(self, n: Node, acc: AccountOpts):
        for en in self._typed_entries(n, "exports", "Export"):
            ex = ExportOpts(pos=en.pos)
            kind_seen = False
            rt_node = lat_node = None
            for k, v in en.value.items():
                lk = k.lower()
                if lk in ("stream", "service"):
                    if kind_seen:
                        self.err(v, f'Detected {lk} "{v.plain()}" but already saw a {ex.kind}')
                        continue
                    kind_seen = True
                    ex.kind = lk
                    ex.subject = self.s(v, k)
                elif lk in ("response", "response_type"):
                    rt_node = v
                    rt = self.s(v, k).lower()
                    names = {"single": "Singleton", "singleton": "Singleton", "stream": "Stream",
                             "chunk": "Chunked", "chunked": "Chunked"}
                    if rt not in names:
                        self.err(v, f'Unknown response type: "{v.value}"')
                    else:
                        ex.response_type = names[rt]
                elif lk in ("threshold", "response_threshold", "response_max_time", "response_time"):
                    rt_node = v
                    if v.kind != "string":
                        self.err(v, "Expected response threshold to be a parseable time duration, "
                                    f"got {KIND_NAME[v.kind]}")
                        continue
                    try:
                        ex.response_threshold = parse_duration(v.value)
                    except ValueError:
                        self.err(v, f'Expected response threshold to be a parseable time duration, got "{v.value}"')
                elif lk == "accounts":
                    ex.accounts = self.strs(v, k)
                    self.export_accounts.append((ex, v))
                elif lk == "latency":
                    lat_node = v
                    ex.latency = self.latency(v)
                elif lk == "account_token_position":
                    ex.account_token_position = self.i(v, k)
                elif lk == "allow_trace":
                    ex.allow_trace = self.b(v, k)
                else:
                    self.unknown(k, v)
            if not kind_seen:
                self.err(en, 'export needs a "stream" or "service" subject')
                continue
            if ex.kind == "stream":
                if rt_node is not None:
                    self.err(rt_node, "Detected response directive on non-service")
                if lat_node is not None:
                    self.err(lat_node, "Detected latency directive on non-service")
            if ex.subject and not is_valid_subject(ex.subject):
                self.err(en, f'Error adding {ex.kind} export "{ex.subject}": subject is not valid')
            elif not ex.position_is_wildcard():
                self.err(en, f'Error adding {ex.kind} export "{ex.subject}": sublist: invalid subject')
            elif (ex.kind == "service" and ex.latency is not None and ex.latency.subject
                  and not is_valid_literal_subject(ex.latency.subject)):
                self.err(lat_node, f'Error adding service latency sampling for "{ex.subject}" on subject '
                                   f'"{ex.latency.subject}": invalid publish subject')
            acc.exports.append(ex)

    def latency(self, n: Node) -> ServiceLatency | None:
        if n.kind == "string":
            return ServiceLatency(subject=n.value)
        m = self.m(n, "latency")
        if m is None:
            return None
        lat = ServiceLatency()
        for k, v in m.items():
            if k == "sampling":
                if v.kind == "integer":
                    lat.sampling = v.value
                elif v.kind == "string" and v.value.strip().lower() == "headers":
                    lat.sampling = 0
                    continue
                elif v.kind == "string":
                    text = v.value.strip().removesuffix("%")
                    try:
                        lat.sampling = int(text)
                    except ValueError:
                        self.err(v, f'Failed to parse latency sample: strconv.Atoi: parsing "{text}": invalid syntax')
                        return None
                else:
                    self.err(v, f"Expected latency sample to be a string or map/struct, got {GO_TYPE[v.kind]}")
                    return None
                if not 1 <= lat.sampling <= 100:       # (nats-server stops at its first error here)
                    self.err(v, "bad sampling percentage, should be 1-100")
                    return None
            elif k == "subject":
                lat.subject = self.s(v, k)
        if not lat.subject:
            self.err(n, "Latency subject required, but missing")
        return lat

    def account_imports(self, n: Node, acc: AccountOpts):
        for imn in self._typed_entries(n, "imports", "Import"):
            im = ImportOpts(pos=imn.pos)
            kind_seen = False
            for k, v in imn.value.items():
                lk = k.lower()
                if lk in ("stream", "service"):
                    if kind_seen:
                        self.err(v, f"Detected {lk} but already saw a {im.kind}")
                        continue
                    kind_seen = True
                    im.kind = lk
                    sm = self.m(v, k) or {}
                    for sk, sv in sm.items():
                        if sk.lower() == "account":
                            im.account = self.s(sv, sk)
                        elif sk.lower() == "subject":
                            im.subject = self.s(sv, sk)
                        else:
                            self.unknown(sk, sv)
                    if not im.account or not im.subject:
                        self.err(v, f"Expected an account and a subject for {lk} import")
                elif lk == "prefix":
                    im.prefix = self.s(v, k)
                elif lk == "to":
                    im.to = self.s(v, k)
                elif lk == "share":
                    im.share = self.b(v, k)
                elif lk == "allow_trace":
                    im.allow_trace = self.b(v, k)
                else:
                    self.unknown(k, v)
            if not kind_seen:
                self.err(imn, 'import needs a "stream" or "service" entry')
                continue
            if im.to and im.subject:
                bad = _wildcards_used(im.subject, im.to)
                if bad:
                    frm, to = (im.subject, im.to) if im.kind == "stream" else (im.to, im.subject)
                    self.err(imn, f'Error adding {im.kind} import "{im.subject}": failed to create mapping '
                                  f'transform for {im.kind} import subject from "{frm}" to "{to}": '
                                  f'invalid mapping destination: {bad}')
            if im.kind == "service" and im.account and im.subject:
                local = im.to or im.subject
                seen = self._svc_import_subjects.setdefault(id(acc), {}).setdefault(local, [])
                dup = next((d for d in seen if d.account == im.account), None)
                if dup is not None:
                    self.err(imn, f'Duplicate service import subject "{local}", previously used in import '
                                  f'for account "{dup.account}", subject "{dup.subject}"')
                    continue
                seen.append(im)
            if im.kind == "service" and im.prefix:
                self.err(imn, '"prefix" is only for stream imports, use "to"')
            acc.imports.append(im)
            if im.account and im.subject:
                self.imports.append((acc, im, imn))

    def mappings(self, n: Node, what: str, out: dict[str, list[MappingDest]], positions: dict):
        m = self.m(n, what)
        for subj, v in (m or {}).items():
            if not is_valid_subject(subj):
                self.err(v, f'Subject "{subj}" is not a valid subject')
                continue
            positions[subj] = v.pos
            dests: list[MappingDest] = []
            if v.kind == "string":
                dests.append(MappingDest(subject=v.value))
            else:                       # a list of destinations, or one (anything else is not one)
                items = v.value if v.kind == "array" else [v]
                for dn in items:
                    d = self.map_dest(dn)
                    if d is not None:
                        dests.append(d)
                if sum(d.weight for d in dests if not d.cluster) > 100:
                    self.err(v, f'Error adding mapping for "{subj}" : total weight needs to be <= 100')
            out[subj] = dests

    def map_dest(self, n: Node) -> MappingDest | None:
        if n.kind != "map":
            self.err(n, "Expected an entry for the mapping destination")
            return None
        d = MappingDest()
        weighted = False
        for k, v in n.value.items():
            lk = k.lower()
            if lk in ("dest", "destination"):
                d.subject = self.s(v, k)
            elif lk == "weight":
                if v.kind == "string":
                    try:
                        w = int(v.value.removesuffix("%"))
                    except ValueError:
                        self.err(v, f'Invalid weight "{v.value}" for mapping destination')
                        return None
                elif v.kind == "integer":
                    w = v.value
                else:
                    self.err(v, f"Unknown entry type for weight of {self.show(v)}")
                    return None
                if not 0 <= w <= 100:
                    self.err(v, f"Invalid weight {w} for mapping destination")
                    return None
                d.weight, weighted = w, True
            elif lk == "cluster":
                d.cluster = self.s(v, k)
            else:
                self.err(v, f'Unknown field "{k}" for mapping destination')
                return None
        if not weighted:
            self.err(n, f'Missing weight for mapping destination "{d.subject}"')
            return None
        return d


    # -- checks that need the whole file -------------------------------------------
    def cross_checks(self):
        o = self.o
        accs = o.accounts
        for ex, v in self.export_accounts:
            for an in ex.accounts or []:
                if an not in accs:
                    self.err(v, f'"{an}" account not defined for {ex.kind} export')
        # nats-server adds every stream import, then every service import, refusing any
        # that would close a cycle (accounts.go serviceImportFormsCycle/streamImportFormsCycle).
        self._added_imports = {}
        ordered = ([x for x in self.imports if x[1].kind == "stream"] +
                   [x for x in self.imports if x[1].kind == "service"])
        for acc, im, node in ordered:
            target = accs.get(im.account)
            if target is None:
                self.err(node, f'"{im.account}" account not defined for {im.kind} import')
                continue
            ok = any(ex.kind == im.kind and subject_is_subset(im.subject, ex.subject)
                     and ex.allows(acc.name, im.subject) for ex in target.exports)
            if not ok:
                self.err(node, f'Error adding {im.kind} import "{im.subject}": {im.kind} import not authorized')
                continue
            if self._import_forms_cycle(acc, im):
                self.err(node, f'Error adding {im.kind} import "{im.subject}": import forms a cycle')
                continue
            self._added_imports.setdefault(acc.name, []).append(im)
        for r, node in getattr(self, "remote_nodes", []):
            if r.account and r.account != "$G" and r.account not in accs:
                self.err(node, f'leafnode remote account "{r.account}" is not defined in "accounts"')
        if o.auth_callout is not None:
            for name in o.auth_callout.allowed_accounts:
                if name not in accs:
                    self.err(self.auth_callout_node,
                             f"auth_callout allowed account {go_quote(name)} not found in configured accounts")
        sysacc = o.system_account
        if sysacc and sysacc != "$SYS" and sysacc not in accs and not o.operator_mode:
            self.err(self.system_account_node, f'system account "{sysacc}" is not defined in "accounts"')
        if o.no_auth_user:
            names = {u.username for u in o.users} | {u.nkey for u in o.nkeys}
            if o.no_auth_user not in names:
                self.err(self.no_auth_node, f'no_auth_user: "{o.no_auth_user}" not present as user or nkey '
                                            "in authorization block or account configuration")

    def _import_forms_cycle(self, acc, im: ImportOpts) -> bool:
        """Would adding `im` to `acc` close an import cycle? (checks imports added so far)"""
        accs = self.o.accounts
        added = self._added_imports

        def svc(name: str, frm: str, visited: set[str], depth: int = 0) -> bool:
            if depth > 1024:
                return True
            for si in added.get(name, ()):
                if si.kind != "service" or not subjects_overlap(frm, si.subject):
                    continue
                if si.account in visited:
                    return True
                visited.add(name)
                f = si.to or si.subject
                nf = f if subject_is_subset(f, frm) else frm
                if svc(si.account, nf, visited, depth + 1):
                    return True
            return False

        def stream(name: str, to: str, visited: set[str], depth: int = 0) -> bool:
            if depth > 1024:
                return True
            a = accs.get(name)
            if a is None or not any(ex.kind == "stream" and subject_is_subset(to, ex.subject)
                                    for ex in a.exports):
                return False
            for si in added.get(name, ()):
                sto = _stream_local(si) if si.kind == "stream" else None
                if sto is None or not subjects_overlap(to, sto):
                    continue
                if si.account in visited:
                    return True
                visited.add(name)
                if stream(si.account, sto if subject_is_subset(sto, to) else to, visited, depth + 1):
                    return True
            return False

        if im.kind == "service":
            frm = im.to or im.subject
            if "*" in im.subject or ">" in im.subject:     # transformUntokenize the local subject
                frm = re.sub(r"\$\d+|\{\{\s*wildcard\s*\(\s*\d+\s*\)\s*\}\}", "*", frm)
            return svc(im.account, frm, {acc.name})
        return (stream(im.account, _stream_local(im), {acc.name})
                or stream(im.account, im.subject, {acc.name}))

    def msg_trace(self, n, key, acc):
        """An account's `msg_trace` (`trace_dest`): a destination subject, or a map of `dest`
        and `sampling` (1..100, or "N%"), with nats-server's errors. A destination without a
        sampling traces every message; a sampling without a destination is ignored, with a
        warning."""
        def dest(v, k):
            if v.kind != "string":
                return f"Field {go_quote(k)} should be a string, got {GO_TYPE[v.kind]}"
            if not is_valid_literal_subject(v.value):
                return f"Trace destination {go_quote(v.value)} is not valid"
            acc.msg_trace["dest"] = v.value
            return None

        def sampling(v, k):
            if v.kind == "integer":
                n = v.value
            elif v.kind == "string":
                try:
                    n = int(v.value[:-1] if v.value.endswith("%") else v.value)
                except ValueError:
                    return f"Invalid trace destination sampling value {go_quote(v.value)}"
            else:
                return (f"Trace destination sampling field {go_quote(k)} should be an integer or a "
                        f"percentage, got {GO_TYPE[v.kind]}")
            if n <= 0 or n > 100:
                return f"Ttrace destination sampling value {n} is invalid, needs to be [1..100]"
            acc.msg_trace["sampling"] = n
            return None

        # the first error of the map is the only one reported, as nats-server returns there
        if n.kind == "string":
            error, at = dest(n, key), n
        elif n.kind == "map":
            error = at = None
            for k, v in n.value.items():
                if k.lower() == "dest":
                    error, at = dest(v, k), v
                elif k.lower() == "sampling":
                    error, at = sampling(v, k), v
                elif not v.used_variable:
                    error, at = f"Unknown field {go_quote(k)} parsing account message trace map/struct {go_quote(key)}", v
                if error:
                    break
        else:
            error, at = (f"Expected account message trace {go_quote(key)} to be a string or a "
                         f"map/struct, got {GO_TYPE[n.kind]}"), n
        if error:
            self.err(at, error)
            return
        if acc.msg_trace.get("dest") and not acc.msg_trace.get("sampling"):
            acc.msg_trace["sampling"] = 100
        elif acc.msg_trace.get("sampling") and not acc.msg_trace.get("dest"):
            self.warn(n, "Trace destination sampling ignored since no destination was set")
            acc.msg_trace.pop("sampling")

