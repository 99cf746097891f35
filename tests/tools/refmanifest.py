#!/usr/bin/env python3
"""An independent reference of the data contract's manifest (docs/format.md,
"Manifest"), written from the contract in Python: given a source directory and the
import parameters, print the manifest bytes a conforming importer must
publish.  The end-to-end suite compares wstore's manifest with it byte for
byte (timestamps and source_uri are taken from wstore's own manifest).

usage: refmanifest.py SRC CKPT MODEL REVISION CHUNK_SIZE ACTUAL_MANIFEST
"""
import hashlib
import json
import os
import sys

WEIGHT = (".bin", ".ckpt", ".gguf", ".pt", ".pth", ".safetensors")


def h(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def main():
    src, ckpt, model, rev, cs, actual = sys.argv[1:7]
    cs = int(cs)
    with open(actual, "rb") as f:
        act = json.loads(f.read())
    files = []
    for root, dirs, names in os.walk(src, followlinks=True):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, src).replace(os.sep, "/")
            data = open(p, "rb").read()
            key = f"weight/models/{ckpt}/files/{h(rel)}"
            nchunks = (len(data) + cs - 1) // cs
            files.append({
                "path": rel,
                "type": "WEIGHT" if rel.lower().endswith(WEIGHT) else "METADATA",
                "key": key,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "chunks": [f"{key}/chunks/{i:08d}" for i in range(nchunks)],
                "chunk_size": cs,
            })
    files.sort(key=lambda r: r["path"].encode("utf-8"))
    m = {
        "checkpoint_id": ckpt, "model_id": model, "revision": rev,
        "status": "READY", "source_uri": act["source_uri"],
        "created_at": act["created_at"], "updated_at": act["updated_at"],
        "total_size": sum(f["size"] for f in files), "files": files,
        "error": None, "schema_version": 2,
    }
    sys.stdout.write(json.dumps(m, sort_keys=True, separators=(",", ":"),
                                ensure_ascii=False))


if __name__ == "__main__":
    main()
