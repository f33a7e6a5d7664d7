"""natsd/auth/ed25519.py: the public key of a seed, checked against RFC 8032's test vectors
and against PyNaCl (libsodium) for random seeds; and the server's own key pair signs what
nats-server's nkeys verifies."""
import random

import nacl.signing
import pytest

from natsd.auth import ed25519, nkey

RFC8032 = [  # (secret key, public key): section 7.1, TEST 1, 2, 3
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"),
]


@pytest.mark.parametrize("secret, public", RFC8032)
def test_rfc8032_vectors(secret, public):
    assert ed25519.public_key(bytes.fromhex(secret)).hex() == public


def test_random_seeds_give_libsodiums_keys():
    rnd = random.Random(25519)
    for _ in range(40):
        seed = rnd.randbytes(32)
        assert ed25519.public_key(seed) == bytes(nacl.signing.SigningKey(seed).verify_key)


def test_a_short_seed_is_refused():
    with pytest.raises(ValueError):
        ed25519.public_key(b"x" * 31)


def test_the_servers_key_signs_what_its_public_nkey_verifies():
    kp = nkey.new_key(nkey.SERVER)
    public = nkey.public_of(kp)
    assert public.startswith("N") and len(public) == 56 and nkey.is_valid_public(public, nkey.SERVER)
    sig = kp.sign(b"a nonce")
    assert nkey.verify(public, b"a nonce", sig)
    assert not nkey.verify(public, b"another nonce", sig)
