#!/usr/bin/env python3
"""Generate the manifest test data (run from anywhere; writes next to itself).

golden-*.json   manifests as json.dumps(sort_keys=True, separators=(",", ":"),
                ensure_ascii=False) writes them; test_manifest.c builds the
                same manifests in C and compares bytes.
good/X.json     valid inputs; good/X.out is what wstore must serialise back
                (normalised: chunks/chunk_size defaults, unknown keys dropped,
                files sorted, schema_version 2, error null when READY).
bad/X.json      invalid inputs; first line of bad/X.err is a substring of the
                expected error message.
"""
import copy
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
WEIGHT_SUFFIXES = (".bin", ".ckpt", ".gguf", ".pt", ".pth", ".safetensors")


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def ftype(path):
    return "WEIGHT" if path.lower().endswith(WEIGHT_SUFFIXES) else "METADATA"


def record(ckpt, path, size, chunk_size, nchunks=None, digest=None):
    key = f"weight/models/{ckpt}/files/{sha(path)}"
    if nchunks is None:
        nchunks = -(-size // chunk_size) if chunk_size else 1
    if digest is None:
        digest = sha("") if size == 0 else sha("content:" + path)
    return {"path": path, "type": ftype(path), "key": key, "size": size,
            "sha256": digest,
            "chunks": [f"{key}/chunks/{i:08d}" for i in range(nchunks)],
            "chunk_size": chunk_size}


def manifest(ckpt, model, rev, status, src, created, updated, files, error):
    files = sorted(files, key=lambda f: f["path"].encode("utf-8"))
    return {"checkpoint_id": ckpt, "model_id": model, "revision": rev,
            "status": status, "source_uri": src, "created_at": created,
            "updated_at": updated,
            "total_size": sum(f["size"] for f in files),
            "files": files, "error": error, "schema_version": 2}


# Must match build_ready() in tests/unit/test_manifest.c.
GOLDEN_READY_CKPT = "Qwen3-golden.v2"
def golden_ready():
    c = GOLDEN_READY_CKPT
    files = [
        record(c, "model-00001-of-00002.safetensors", (1 << 62) + 1, 1 << 61),
        record(c, "config.json", 123, 64 * MiB),
        record(c, "empty.txt", 0, 64 * MiB),
        record(c, "ünï/日本.bin", (1 << 53) + 3, 1 << 52),
        record(c, 'odd/q"uote\\back\tslash\x01\x1f\x7f.txt', 1, 64 * MiB),
        record(c, "sub/dir/tokenizer.model", 64 * MiB + 1, 64 * MiB),
    ]
    return manifest(c, "Qwen/Qwen3-235B-A22B-模型-Ünï", "main", "READY",
                    "/data/models/Ünï/ckpt", 1700000000, 1700000123, files,
                    None)


# Must match build_failed() in tests/unit/test_manifest.c.
def golden_failed():
    c = "failed-ckpt"
    files = [
        record(c, "b.json", 0, 64, 0, ""),
        record(c, "a.safetensors", 100, 64, 1, ""),
    ]
    err = ("cannot put chunk 'x/y': connection reset\u2028next\ttab "
           "\"q\" \\ / é")
    return manifest(c, "org/模型", "abc123", "FAILED", "/src", 1, 2, files,
                    err)


def base():
    c = "demo-main"
    files = [record(c, "config.json", 123, 64 * MiB),
             record(c, "model.safetensors", 3 * MiB, 2 * MiB)]
    return manifest(c, "org/demo", "main", "READY", "/src/demo", 10, 20,
                    files, None)


def write(path, data):
    with open(os.path.join(HERE, path), "wb") as f:
        f.write(data)


def bad_cases():
    cases = {}

    def mut(name, expect, fn):
        m = base()
        fn(m)
        cases[name] = (dumps(m), expect)

    def f0(m, k, v):
        m["files"][0][k] = v

    mut("path-dotdot", "'../x': '.' or '..' segment",
        lambda m: f0(m, "path", "../x"))
    mut("path-absolute", "'/etc/x': absolute",
        lambda m: f0(m, "path", "/etc/x"))
    mut("path-dotdot-inner", "'a/../../x': '.' or '..' segment",
        lambda m: f0(m, "path", "a/../../x"))
    mut("path-empty-segment", "'a//b': empty segment",
        lambda m: f0(m, "path", "a//b"))
    mut("path-trailing-slash", "'a/': empty segment",
        lambda m: f0(m, "path", "a/"))
    mut("path-empty", "invalid file path '': empty",
        lambda m: f0(m, "path", ""))
    mut("path-nul", "\\u0000 is not allowed",
        lambda m: f0(m, "path", "a\x00b"))
    mut("path-missing", "file #0: missing key 'path'",
        lambda m: m["files"][0].pop("path"))
    mut("path-not-string", "file #1: key 'path' must be a string",
        lambda m: m["files"][1].__setitem__("path", 7))

    def dup(m):
        m["files"][1] = copy.deepcopy(m["files"][0])
        m["total_size"] = 246
    mut("duplicate-path", "duplicate file path 'config.json'", dup)
    mut("size-negative", "file 'config.json': size is negative",
        lambda m: f0(m, "size", -1))
    mut("size-float", "file 'config.json': key 'size' must be an integer",
        lambda m: f0(m, "size", 123.0))
    mut("size-string", "file 'config.json': key 'size' must be an integer",
        lambda m: f0(m, "size", "123"))
    mut("chunk-size-negative", "file 'config.json': chunk_size is negative",
        lambda m: f0(m, "chunk_size", -5))
    mut("chunk-count", "file 'model.safetensors': has 1 chunks, expected 2",
        lambda m: m["files"][1]["chunks"].pop())
    mut("chunk-count-empty-file", "has 1 chunks, expected 0",
        lambda m: (f0(m, "size", 0), m.__setitem__("total_size", 3 * MiB)))
    mut("no-chunks-legacy", "has no chunks but size 123",
        lambda m: (f0(m, "chunks", []), f0(m, "chunk_size", 0)))
    mut("chunks-not-array", "key 'chunks' must be an array",
        lambda m: f0(m, "chunks", "k"))
    mut("chunk-not-string", "chunk 0 is not a valid key",
        lambda m: f0(m, "chunks", [5]))
    mut("chunk-key-control", "chunk 0 is not a valid key",
        lambda m: f0(m, "chunks", ["a\nb"]))
    mut("key-empty", "file 'config.json': invalid key ''",
        lambda m: f0(m, "key", ""))
    mut("file-not-object", "file #1 is not an object",
        lambda m: m["files"].__setitem__(1, "x"))
    mut("files-not-array", "key 'files' must be an array",
        lambda m: m.__setitem__("files", {}))
    mut("bad-type", "invalid type 'BLOB'", lambda m: f0(m, "type", "BLOB"))
    mut("bad-status", "invalid status 'DONE'",
        lambda m: m.__setitem__("status", "DONE"))
    mut("status-lower", "invalid status 'ready'",
        lambda m: m.__setitem__("status", "ready"))
    mut("missing-model-id", "missing key 'model_id'",
        lambda m: m.pop("model_id"))
    mut("missing-error", "missing key 'error'", lambda m: m.pop("error"))
    mut("missing-schema-version", "missing key 'schema_version'",
        lambda m: m.pop("schema_version"))
    mut("schema-version-3", "unsupported schema_version 3",
        lambda m: m.__setitem__("schema_version", 3))
    mut("created-at-string", "key 'created_at' must be an integer",
        lambda m: m.__setitem__("created_at", "10"))
    mut("revision-null", "key 'revision' must be a string",
        lambda m: m.__setitem__("revision", None))
    mut("error-number", "key 'error' must be a string or null",
        lambda m: m.__setitem__("error", 5))
    mut("sha256-upper", "sha256 is not 64 lower-case hex digits",
        lambda m: f0(m, "sha256", m["files"][0]["sha256"].upper()))
    mut("sha256-short", "sha256 is not 64 lower-case hex digits",
        lambda m: f0(m, "sha256", "abc"))
    mut("sha256-empty-ready", "sha256 is not 64 lower-case hex digits",
        lambda m: f0(m, "sha256", ""))
    mut("bad-id-slash", "invalid checkpoint id 'a/b'",
        lambda m: m.__setitem__("checkpoint_id", "a/b"))
    mut("bad-id-dot", "invalid checkpoint id '.hidden'",
        lambda m: m.__setitem__("checkpoint_id", ".hidden"))
    mut("total-size-mismatch", "total_size is 5 but the files add up to",
        lambda m: m.__setitem__("total_size", 5))
    mut("total-size-negative", "total_size is negative",
        lambda m: m.__setitem__("total_size", -1))

    good = dumps(base())
    cases["size-huge"] = (good.replace(b'"size":123,',
                                       b'"size":9223372036854775808,'),
                          "too big integer")
    assert b"9223372036854775808" in cases["size-huge"][0]
    cases["duplicate-json-key"] = (good.replace(b'"revision":"main"',
                                                b'"revision":"main",'
                                                b'"revision":"x"'),
                                   "duplicate object key")
    cases["not-object"] = (b'["demo-main"]', "not a JSON object")
    cases["truncated"] = (good[:len(good) // 2], "line 1 column")
    cases["garbage"] = (b"hello", "line 1 column 5")
    cases["empty"] = (b"", "line ")
    cases["invalid-utf8"] = (good.replace(b"org/demo", b"org/\xff\xfe"),
                             "unable to decode byte 0xff")
    cases["trailing-garbage"] = (good + b"}", "end of file expected")
    return cases


def normalise(m):
    """What wstore writes back for a parsed manifest."""
    out = {k: m[k] for k in ("checkpoint_id", "model_id", "revision",
                             "status", "source_uri", "created_at",
                             "updated_at", "total_size", "error")}
    out["schema_version"] = 2
    if out["status"] == "READY":
        out["error"] = None
    files = []
    for f in m["files"]:
        r = {k: f[k] for k in ("path", "type", "key", "size", "sha256")}
        r["chunks"] = f.get("chunks", [f["key"]])
        r["chunk_size"] = f.get("chunk_size", 0)
        files.append(r)
    out["files"] = sorted(files, key=lambda f: f["path"].encode("utf-8"))
    out["total_size"] = sum(f["size"] for f in files)
    return out


def good_cases():
    cases = {}
    m = base()
    for f in m["files"]:
        f.pop("chunks")
        f["chunk_size"] = 0
    m["files"][1].pop("chunk_size")
    m["schema_version"] = 1
    cases["legacy-v1"] = m
    m = base()
    m["x_writer"] = {"name": "other", "v": [1, 2]}
    m["files"][0]["x_extra"] = True
    cases["unknown-keys"] = m
    m = base()
    m["files"].reverse()
    cases["unsorted-files"] = m
    m = base()
    m["error"] = "stale message"
    cases["ready-with-error"] = m
    m = base()
    m["status"] = "FAILED"
    m["error"] = "interrupted"
    m["files"][1]["sha256"] = ""
    m["files"][1]["chunks"] = []
    m["total_size"] = 0
    cases["failed-partial"] = m
    m = base()
    m["files"] = []
    m["total_size"] = 0
    cases["no-files"] = m
    m = base()
    m["files"][1]["chunk_size"] = 0
    cases["legacy-multichunk"] = m
    return cases


def main():
    write("golden-ready.json", dumps(golden_ready()))
    write("golden-failed.json", dumps(golden_failed()))
    for name, (data, expect) in sorted(bad_cases().items()):
        write(f"bad/{name}.json", data)
        write(f"bad/{name}.err", expect.encode("utf-8") + b"\n")
    for name, m in sorted(good_cases().items()):
        raw = json.dumps(m, indent=1, ensure_ascii=True).encode("ascii")
        write(f"good/{name}.json", raw + b"\n")
        write(f"good/{name}.out", dumps(normalise(m)))


if __name__ == "__main__":
    main()
