"""Start-up conversion: the streams nats-server left in an account's directory become natsd
streams, with every message, sequence, timestamp and consumer position.

A stream directory is nats-server's when it has `meta.inf` and no natsd `meta.json`. Each one is
converted on its own, in steps that survive a crash at any point:

1. the directory is renamed to `.<name>.nats-server` beside it (one rename: nothing is copied
   and the original is never written to);
2. the stream is restored from it as a backup would be (natsd/jetstream/engine/snapshot.py
   restore_image) and synced; a natsd directory left by an interrupted attempt is removed first;
3. the original moves to `<store_dir>/nats-server-original/jetstream/<account>/streams/<name>`,
   where it stays until the operator removes it.

A start that finds `.<name>.nats-server` resumes at step 2. A stream that cannot be read is
logged with the file at fault and put back as it was; the account's other streams load.
"""
import logging
import os
import time

from natsd.jetstream.nsfs.codec import FormatError
from natsd.jetstream.nsfs.reader import read_meta, read_stream_dir
from natsd.jetstream.nsfs.writer import fsync_dir

log = logging.getLogger("natsd")

ASIDE = ".%s.nats-server"
KEPT = "nats-server-original"


def is_nats_server_stream(path):
    return os.path.isfile(os.path.join(path, "meta.inf")) and not os.path.exists(os.path.join(path, "meta.json"))


def pending(streams_dir):
    """Names of the streams in `streams_dir` still to convert (new or interrupted)."""
    names = set()
    for entry in os.listdir(streams_dir) if os.path.isdir(streams_dir) else ():
        if entry.startswith(".") and entry.endswith(".nats-server"):
            names.add(entry[1:-len(".nats-server")])
        elif not entry.startswith(".") and is_nats_server_stream(os.path.join(streams_dir, entry)):
            names.add(entry)
    return sorted(names)


def replicas(path, keys=None):
    """The `num_replicas` a nats-server stream directory's `meta.inf` names (0 if unreadable)."""
    try:
        return int(read_meta(path, keys=keys, context=os.path.basename(path))[0].get("num_replicas") or 0)
    except (OSError, ValueError, TypeError):
        return 0


def convert_account(jsa, restore_image, check_config, keys=None, replicated_too=True):
    """Convert the account's nats-server streams; `restore_image(jsa, cfg, image)` builds one
    and `check_config(doc)` turns a `meta.inf` config into the one the stream is created with;
    `keys` (crypt.StoreKeys) open encrypted streams. Without `replicated_too` (on a cluster)
    the streams of more than one replica are left to the cluster's conversion."""
    streams_dir = jsa.dir
    for name in pending(streams_dir):
        aside = os.path.join(streams_dir, ASIDE % name)
        target = os.path.join(streams_dir, name)
        if not replicated_too and not os.path.isdir(aside) and \
                replicas(target, keys.for_account(jsa.name) if keys else None) > 1:
            log.info("  nats-server stream '%s > %s' has more than one replica: the cluster's "
                     "conversion takes it, with its Raft groups", jsa.name, name)
            continue
        t0 = time.monotonic()
        try:
            if not os.path.isdir(aside):
                os.rename(target, aside)
                fsync_dir(streams_dir)
                log.info("  Converting nats-server stream '%s > %s' (its files are kept until "
                         "the conversion is complete)", jsa.name, name)
            else:
                log.info("  Resuming the conversion of nats-server stream '%s > %s'", jsa.name, name)
            image = read_stream_dir(aside, keys.for_account(jsa.name) if keys else None, name)
            cfg = check_config(dict(image.config))
            if cfg["name"] != name:
                raise FormatError("%s: names stream %r" % (os.path.join(aside, "meta.inf"), cfg["name"]))
            if name in jsa.streams:
                jsa.delete_stream(name)         # a half-made stream of an interrupted attempt
            try:
                st = restore_image(jsa, cfg, image)
            finally:
                for w in image.warnings:
                    log.warning("  Stream '%s > %s': %s", jsa.name, name, w)
        except Exception as e:          # unreadable files, a full disk: this stream waits
            if os.path.isdir(aside) and not os.path.exists(target):
                os.rename(aside, target)        # back where nats-server keeps it
                fsync_dir(streams_dir)
            log.error("  Could not convert nats-server stream '%s > %s': %s (its files are left "
                      "as they are)", jsa.name, name, e)
            continue
        kept = os.path.join(os.path.dirname(jsa.engine.store_dir), KEPT, "jetstream", jsa.name,
                            "streams", name)
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        if os.path.exists(kept):
            kept += ".%d" % time.time_ns()
        os.rename(aside, kept)
        fsync_dir(streams_dir)
        state = st.store.state()
        log.info("  Converted nats-server stream '%s > %s': %s messages, %d consumers in %.3fs; "
                 "the original files are in %s", jsa.name, name, "{:,}".format(state["messages"]),
                 len(st.consumers), time.monotonic() - t0, kept)
