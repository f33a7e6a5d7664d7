"""Stand-ins for the natsd.options config objects (same attribute names)."""

from types import SimpleNamespace

import pytest


def subject_perm(allow=(), deny=()):
    return SimpleNamespace(allow=list(allow), deny=list(deny))


def perms_cfg(publish=None, subscribe=None, response=None):
    return SimpleNamespace(publish=publish, subscribe=subscribe, response=response)


def user(username, password, permissions=None, account=None, allowed_connection_types=None):
    return SimpleNamespace(username=username, password=password, permissions=permissions,
                           account=account, allowed_connection_types=allowed_connection_types or [])


def nkey_user(nkey, permissions=None, account=None, allowed_connection_types=None):
    return SimpleNamespace(nkey=nkey, permissions=permissions, account=account,
                           allowed_connection_types=allowed_connection_types or [])


def account(name, users=(), default_permissions=None):
    for u in users:
        u.account = name
    return SimpleNamespace(name=name, users=list(users), default_permissions=default_permissions)


def options(**kw):
    base = dict(username="", password="", authorization="", users=[], nkeys=[], no_auth_user="",
                default_permissions=None, accounts={})
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.fixture
def cfg():
    return SimpleNamespace(subject_perm=subject_perm, perms=perms_cfg, user=user, nkey_user=nkey_user,
                           account=account, options=options)
