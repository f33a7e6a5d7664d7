"""`natsd-store`: the way back to nats-server.

    natsd-store export <natsd store_dir> <new store_dir> [--key K [--cipher aes] [--prev-key P]]

writes every file-storage stream of a natsd store directory (every account, with its consumers
and their positions) as nats-server 2.15's file store under the new directory, which nats-server
then starts on (`-sd <new store_dir>`). The source is only read; run it with natsd stopped.
Each stream is written beside its final name and renamed into place once synced, so an
interrupted export leaves whole streams only, and running it again carries on with the streams
not yet written. Exit status 1 when a stream could not be exported (each one is named on stderr).

A store sealed with a JetStream key needs that key (and cipher); the streams are then written
sealed with it, as nats-server configured with the same `jetstream { key, cipher }` reads them.
Not carried: streams of more than one replica (their Raft logs: a cluster goes back to
nats-server through its backups, `nats stream backup` and `nats stream restore`) and
memory-storage streams (nothing of them is on disk).
"""
import argparse
import json
import os
import sys

from natsd.jetstream.engine import consumerconfig as cc
from natsd.jetstream.engine import jscrypt, persist
from natsd.jetstream.engine.store import open_store
from natsd.jetstream.engine.streamconfig import config_json
from natsd.jetstream.nsfs.crypt import StoreKeys
from natsd.jetstream.nsfs.image import image_of_store
from natsd.jetstream.nsfs.writer import write_stream_dir


def natsd_streams(store_dir):
    """(account, stream name, stream directory) of every stream directory natsd keeps."""
    top = os.path.join(store_dir, "jetstream")
    for account in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        streams = os.path.join(top, account, "streams")
        for name in sorted(os.listdir(streams)) if os.path.isdir(streams) else ():
            d = os.path.join(streams, name)
            if not name.startswith(".") and os.path.isfile(os.path.join(d, "meta.json")):
                yield account, name, d


def consumer_documents(stream_dir):
    out = []
    cdir = os.path.join(stream_dir, "consumers")
    for name in sorted(os.listdir(cdir)) if os.path.isdir(cdir) else ():
        meta = persist.read_json(os.path.join(cdir, name, "meta.json"))
        if not isinstance(meta, dict) or "config" not in meta:
            raise ValueError("%s: not a natsd consumer" % os.path.join(cdir, name, "meta.json"))
        state = persist.read_json(os.path.join(cdir, name, "state.json")) or {}
        out.append({"name": meta.get("name") or name, "created_ns": meta.get("created_ns"),
                    "config": cc.to_json(cc.decode_config(meta["config"])), "state": state})
    return out


def export_stream(stream_dir, target, account, server_key=None):
    """Write one natsd stream directory as nats-server's at `target`; with `server_key` (the
    JetStream key natsd sealed it with) nats-server's files are sealed with the same key."""
    path = os.path.join(stream_dir, "meta.json")
    crypt = None
    if os.path.exists(os.path.join(stream_dir, jscrypt.KEY_FILE)):
        if server_key is None:
            raise ValueError("%s: sealed with a JetStream key (give --key and --cipher)"
                             % os.path.join(stream_dir, jscrypt.KEY_FILE))
        try:
            crypt = jscrypt.open_stream_to_read(server_key, account, os.path.basename(stream_dir), stream_dir)
        except jscrypt.EncryptionError as e:
            raise ValueError("%s: %s" % (os.path.join(stream_dir, jscrypt.KEY_FILE), e))
    try:
        meta = json.loads(jscrypt.read_file(path, crypt))
    except (ValueError, jscrypt.EncryptionError) as e:
        raise ValueError("%s: not readable as natsd's stream metadata (%s)" % (path, e))
    cfg = meta["config"]
    if cfg.get("storage", "file") != "file":
        return "memory storage, nothing on disk"
    if int(cfg.get("num_replicas") or 1) > 1:
        raise ValueError("%s: a replicated stream (R%s); export works on single-replica streams"
                         % (path, cfg.get("num_replicas")))
    store = open_store("file", os.path.join(stream_dir, "msgs"), cfg, crypt=crypt)
    keys = None
    if server_key is not None:
        keys = StoreKeys(server_key.key, server_key.cipher, server_key.prev, account)
    try:
        image = image_of_store(store, config_json(cfg), meta.get("created"),
                               consumer_documents(stream_dir))
        write_stream_dir(target, image, keys)
        return "%d messages, %d consumers" % (store.state()["messages"], len(image.consumers))
    finally:
        store.close()


def export(source, destination, server_key=None, out=sys.stdout, err=sys.stderr):
    """Export every stream; returns the exit status."""
    if os.path.abspath(source) == os.path.abspath(destination):
        print("natsd-store: the destination must be a new directory, not the source", file=err)
        return 2
    failed = 0
    for account, name, d in natsd_streams(source):
        target = os.path.join(destination, "jetstream", account, "streams", name)
        if os.path.isdir(target):
            print("%s > %s: already exported" % (account, name), file=out)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            what = export_stream(d, target, account, server_key)
        except (OSError, ValueError, KeyError) as e:
            print("natsd-store: %s > %s not exported: %s" % (account, name, e), file=err)
            failed += 1
            continue
        print("%s > %s: %s" % (account, name, what), file=out)
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="natsd-store", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write a natsd store directory as nats-server's")
    e.add_argument("store_dir", help="natsd's store directory (the server's store_dir)")
    e.add_argument("new_store_dir", help="where nats-server's store directory is written")
    e.add_argument("--key", help="the JetStream key natsd's store is sealed with (jetstream { key })")
    e.add_argument("--cipher", default="chacha", help="its cipher: chacha (the default) or aes")
    e.add_argument("--prev-key", default="", help="jetstream { prev_encryption_key }, if any")
    args = p.parse_args(argv)
    server_key = jscrypt.ServerKey(args.key, args.cipher, args.prev_key) if args.key else None
    return export(args.store_dir, args.new_store_dir, server_key)


if __name__ == "__main__":
    sys.exit(main())
