"""Config sections for who may connect: `authorization` (with `auth_callout`), users and nkeys,
permissions (`allow_responses` included). Operator (JWT) mode is conf/operator.py."""
from __future__ import annotations

from natsd.auth import nkey
from natsd.gofmt import go_quote
from natsd.options import AuthCalloutOpts, NkeyUser, Permissions, ResponsePermission, SubjectPermission, User
from natsd.subject import is_valid_subject
from natsd.conf.parser import Node
from natsd.conf.reader import GO_TYPE, Reader, parse_duration

# the connection types a user may be limited to (nats-io/jwt's ConnectionType* names)
CONNECTION_TYPES = {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}


class AuthSections(Reader):
    # -- authorization / users / permissions ----------------------------------
    def authorization(self, k: str, n: Node):
        m = self.m(n, k)
        if m is None:
            return
        o = self.o
        users: list[User | NkeyUser] | None = None
        default_perms = None

        def timeout(kk, v):
            if v.kind in ("integer", "float"):
                o.auth_timeout = float(v.value)
            elif v.kind == "string":
                try:
                    o.auth_timeout = parse_duration(v.value)
                except ValueError as e:
                    self.err(v, f"error parsing authorization config, 'timeout' {e}")
            else:
                self.err(v, "error parsing authorization config, 'timeout' wrong type")
            if o.auth_timeout > 60:
                self.warn(v, f"timeout of {o.auth_timeout} seconds is high, consider keeping it under "
                             "60 seconds. possibly caused by unquoted duration; use '1m' instead of 1m")

        def set_users(kk, v):
            nonlocal users
            users = self.users(v, kk, None)

        def perms(kk, v):
            nonlocal default_perms
            default_perms = self.permissions(v, kk)

        self.dispatch(m, {
            "user": lambda kk, v: setattr(o, "username", self.s(v, kk)),
            "username": lambda kk, v: setattr(o, "username", self.s(v, kk)),
            "pass": lambda kk, v: setattr(o, "password", self.s(v, kk)),
            "password": lambda kk, v: setattr(o, "password", self.s(v, kk)),
            "token": lambda kk, v: setattr(o, "authorization", self.s(v, kk)),
            "timeout": timeout,
            "users": set_users,
            "default_permission": perms, "default_permissions": perms, "permissions": perms,
            "auth_callout": self.auth_callout, "auth_hook": self.auth_callout,
            "proxy_required": lambda kk, v: o.extra.__setitem__("proxy_required", self.b(v, kk)),
        })
        o.default_permissions = default_perms
        if (o.username or o.password) and o.authorization:
            self.err(n, "Cannot have a user/pass and token")
        if users is not None:
            if o.username:
                self.err(n, "Can not have a single user/pass and a users array")
            if o.authorization:
                self.err(n, "Can not have a token and a users array")
            for u in users:
                if default_perms is not None and u.permissions is None:
                    u.permissions = default_perms
                (o.nkeys if isinstance(u, NkeyUser) else o.users).append(u)

    def auth_callout(self, k: str, n: Node):
        """nats-server's parseAuthCallout: every key checked, issuer and auth_users required."""
        if n.kind != "map":
            self.err(n, f"Expected authorization callout to be a map/struct, got {self.show(n)}")
            return
        ac = AuthCalloutOpts()
        for key, v in n.value.items():
            lk = key.lower()
            if lk == "issuer":
                ac.issuer = self.s(v, key)
                if not nkey.is_valid_public(ac.issuer, nkey.ACCOUNT):
                    self.err(v, f"Expected callout user to be a valid public account nkey, got {go_quote(ac.issuer)}")
                    return
            elif lk in ("account", "acc"):
                ac.account = self.s(v, key)
            elif lk in ("auth_users", "users"):
                if v.kind != "array":
                    self.err(v, f"Expected auth_users field to be an array, got {GO_TYPE.get(v.kind, v.kind)}")
                    return
                ac.auth_users = self.strs(v, key)
            elif lk in ("xkey", "key"):
                ac.xkey = self.s(v, key)
                if not nkey.is_valid_public(ac.xkey, nkey.CURVE):
                    self.err(v, f"Expected callout xkey to be a valid public xkey, got {go_quote(ac.xkey)}")
                    return
            elif lk == "allowed_accounts":
                if v.kind != "array":
                    self.err(v, f"Expected allowed accounts field to be an array, got {GO_TYPE.get(v.kind, v.kind)}")
                    return
                ac.allowed_accounts = self.strs(v, key)
            elif not v.used_variable:
                self.err(v, f"Unknown field {go_quote(key)} parsing authorization callout")
        ac.account = ac.account or "$G"
        if not ac.issuer:
            self.err(n, "Authorization callouts require an issuer to be specified")
        elif not ac.auth_users:
            self.err(n, "Authorization callouts require authorized users to be specified")
        else:
            self.o.auth_callout = ac
            self.auth_callout_node = n

    def users(self, n: Node, what: str, account: str | None) -> list[User | NkeyUser]:
        """`users: [{user, password, permissions, ...}, {nkey: U...}]`, with duplicate detection."""
        if not self.want(n, ("array",), what):
            return []
        out: list[User | NkeyUser] = []
        for un in n.value:
            if un.kind != "map":
                self.err(un, f"Expected user entry to be a map/struct, got {self.show(un)}")
                continue
            name = password = nkey = ""
            perms = None
            conn_types: list[str] = []
            proxy = False
            for k, v in un.value.items():
                lk = k.lower()
                if lk == "nkey":
                    nkey = self.s(v, k)
                elif lk in ("user", "username"):
                    name = self.s(v, k)
                elif lk in ("pass", "password"):
                    password = self.s(v, k)
                elif lk in ("permission", "permissions", "authorization"):
                    perms = self.permissions(v, k)
                elif lk in ("allowed_connection_types", "connection_types", "clients"):
                    conn_types = self.strs(v, k)
                    unknown = [t.upper() for t in conn_types if t.upper() not in CONNECTION_TYPES]
                    if unknown:                 # (Go's %q of a []string)
                        self.err(v, "invalid connection types [%s]" % " ".join(go_quote(t) for t in unknown))
                elif lk == "proxy_required":
                    proxy = self.b(v, k)
                else:
                    self.unknown(k, v)
            grants = dict(permissions=perms, account=account, allowed_connection_types=conn_types,
                          proxy_required=proxy, pos=un.pos)
            if not nkey and not name:
                self.err(un, "User entry requires a user")
                continue
            if nkey:
                if name or password:
                    self.err(un, "Nkey users do not take usernames or passwords")
                    continue
                if not (nkey.startswith("U") and len(nkey) == 56):
                    self.err(un, "Not a valid public nkey for a user")
                    continue
                u: User | NkeyUser = NkeyUser(nkey, **grants)
                ident = nkey
            else:
                u = User(name, password, **grants)
                ident = name
            if ident in self.usernames:
                kind = "nkey" if nkey else "user"
                self.err(un, f'Duplicate {kind} "{ident}" detected')
                continue
            self.usernames[ident] = un
            out.append(u)
        return out

    def permissions(self, n: Node, what: str) -> Permissions | None:
        m = self.m(n, what)
        if m is None:
            return None
        p = Permissions()
        for k, v in m.items():
            lk = k.lower()
            if lk in ("pub", "publish", "import"):
                p.publish = self.subject_permission(v, k, allow_queue=False)
            elif lk in ("sub", "subscribe", "export"):
                p.subscribe = self.subject_permission(v, k, allow_queue=True)
            elif lk in ("publish_allow_responses", "allow_responses"):
                if v.kind == "bool":
                    p.response = ResponsePermission() if v.value else None
                elif v.kind == "map":
                    p.response = self.allow_responses(v)
                else:
                    self.err(v, "error parsing response permissions, expected a boolean or a map")
                if p.response is not None and p.publish is None:
                    p.publish = SubjectPermission()
            elif not v.used_variable:
                self.err(v, f'Unknown field "{k}" parsing permissions')
        return p

    def allow_responses(self, n: Node) -> ResponsePermission:
        rp = ResponsePermission()
        for k, v in n.value.items():
            lk = k.lower()
            if lk in ("max", "max_msgs", "max_messages", "max_responses"):
                mx = self.i(v, k)
                if mx:
                    rp.max_msgs = mx
            elif lk in ("expires", "expiration", "ttl"):
                if v.kind != "string":
                    self.err(v, "error parsing expires, not a duration string")
                    continue
                d = self.duration(v, "expires", None)
                if d:
                    rp.expires = d
            elif not v.used_variable:
                self.err(v, f'Unknown field "{k}" parsing permissions')
        return rp

    def subject_permission(self, n: Node, what: str, allow_queue: bool) -> SubjectPermission | None:
        if n.kind == "map":
            if not n.value:
                return None
            sp = SubjectPermission()
            for k, v in n.value.items():
                if k.lower() == "allow":
                    sp.allow = self.perm_subjects(v, k, allow_queue)
                elif k.lower() == "deny":
                    sp.deny = self.perm_subjects(v, k, allow_queue)
                elif not v.used_variable:
                    self.err(v, f'Unknown field name "{k}" parsing subject permissions, '
                                "only 'allow' or 'deny' are permitted")
            return sp
        return SubjectPermission(allow=self.perm_subjects(n, what, allow_queue))

    def perm_subjects(self, n: Node, what: str, allow_queue: bool) -> list[str]:
        subs = self.strs(n, what)
        for s in subs:
            if is_valid_subject(s):
                continue
            parts = s.split()
            if allow_queue and len(parts) == 2 and all(is_valid_subject(x) for x in parts):
                continue
            self.err(n, f'subject "{s}" is not a valid subject')
        return subs
