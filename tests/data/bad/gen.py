#!/usr/bin/env python3
"""Generate the end-to-end bad-input corpus run by tests/e2e/badinput.sh.

Each case is a directory NAME/ holding an `expect` file:
    kind   id | size | config | source | manifest
    exit   the exit status the CLI must return
    error  a text the one-line error must contain (fixed string)
and, by kind:
    id       `arg`: the checkpoint id (raw bytes); import, inspect and
             delete with it must all be refused
    size     `arg`: the --chunk-size value given to import
    config   `config.json`: passed with --config to `model list`
    source   `src/`: the import source; `setup` (optional, sh, run in a
             copy of the case directory) makes what git cannot hold
             (FIFOs, devices, symlinks, empty or unreadable entries);
             `source` (optional file) names another source path relative
             to the case directory
    manifest `manifest`: written over the manifest of checkpoint "hm"
             (imported from _good/ with --chunk-size 16 just before);
             inspect, verify, materialize-file and pull must all refuse it
             and write nothing
The files are committed; rerun this script after changing a case.
"""
import hashlib
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = []


def case(name, kind, exit_, error, files=None, setup=None, source=None):
    CASES.append((name, kind, exit_, error, files or {}, setup, source))


# ---- checkpoint ids --------------------------------------------------------
INVALID_ID = "invalid checkpoint id"
# "a/b" is a model name (ORG/NAME), which every command taking an id
# also takes: ids with a slash are refused as malformed names here
for name, arg in [
    ("id-empty", ""), ("id-slash", "a/b/c"), ("id-double-slash", "a//b"),
    ("id-leading-slash", "/a"), ("id-trailing-slash", "a/"),
    ("id-dot", "."), ("id-dotdot", ".."), ("id-traversal", "../etc"),
    ("id-hidden", ".hidden"), ("id-space", "a b"), ("id-question", "a?b"),
    ("id-too-long", "a" * 256), ("id-non-ascii", "mod\u00e8le"),
    ("id-newline", "a\nb"), ("id-tab", "a\tb"),
]:
    case(name, "id", 1, INVALID_ID, {"arg": arg.encode()})

# ---- sizes -----------------------------------------------------------------
for name, arg, err in [
    ("size-zero", "0", "invalid --chunk-size"),
    ("size-negative", "-1", "invalid --chunk-size"),
    ("size-bad-unit", "12XB", "unknown unit"),
    ("size-overflow", "99999999999999999999", "too large"),
    ("size-overflow-unit", "17179869184PiB", "too large"),
    ("size-over-4g", "5GiB", "at most 4GiB"),
    ("size-empty", "", "invalid --chunk-size"),
    ("size-unit-only", "MiB", "invalid --chunk-size"),
    ("size-nan", "nan", "invalid --chunk-size"),
    ("size-hex", "0x10", "invalid --chunk-size"),
    ("size-exponent", "1e3", "invalid --chunk-size"),
]:
    case(name, "size", 2, err, {"arg": arg.encode()})

# ---- config files ----------------------------------------------------------
for name, text, err in [
    ("config-bad-json", b'{"store": ', "config"),
    ("config-unknown-key", b'{"stor": "/tmp/x"}', "stor"),
    ("config-array-value", b'{"store": [1]}', "store"),
    ("config-bool-value", b'{"replica_num": true}', "replica_num"),
    ("config-object-value", b'{"store": {"a": 1}}', "store"),
    ("config-float-value", b'{"replica_num": 1.5}', "replica_num"),
    ("config-not-object", b'[1, 2]', "config"),
    ("config-empty", b'', "config"),
    ("config-duplicate-key", b'{"store": "/a", "store": "/b"}', "store"),
]:
    case(name, "config", 1, err, {"config.json": text})

# ---- sources ---------------------------------------------------------------


def st_file(tensors, data, n=None, pad=0):
    h = json.dumps(tensors, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def t(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


GOOD_ST = st_file({"w": t("F32", [2, 2], 0, 16)}, bytes(16))
CFG = b'{"model_type": "test"}\n'

case("src-missing", "source", 1, "cannot open source", source="nope")
case("src-is-a-file", "source", 1, "is not a directory",
     {"afile": b"x"}, source="afile")
case("src-empty-dir", "source", 1, "holds no files",
     setup="mkdir -p src\n")
case("src-only-empty-subdirs", "source", 1, "holds no files",
     setup="mkdir -p src/a/b src/c\n")
case("src-fifo", "source", 1, "FIFO",
     {"src/config.json": CFG}, setup="mkfifo src/pipe\n")
case("src-device", "source", 1, "device",
     {"src/config.json": CFG}, setup="ln -s /dev/null src/null\n")
case("src-symlink-loop", "source", 1, "looping symlink",
     {"src/config.json": CFG}, setup="ln -s loop-b src/loop-a\n"
     "ln -s loop-a src/loop-b\n")
case("src-dir-loop", "source", 1, "symlink loop",
     {"src/config.json": CFG}, setup="mkdir -p src/sub\nln -s .. src/sub/up\n")
case("src-dangling-symlink", "source", 1, "dangling symlink",
     {"src/config.json": CFG}, setup="ln -s does-not-exist src/gone.bin\n")
# root reads any file whatever its mode, so the case drops to an
# unprivileged user with setpriv when run as root (badinput.sh)
case("src-unreadable-file", "source", 1, "Permission denied",
     {"src/config.json": CFG, "src/secret.bin": b"0123456789"},
     setup="chmod 000 src/secret.bin\n")
case("src-unreadable-dir", "source", 1, "Permission denied",
     {"src/config.json": CFG, "src/sub/x.bin": b"0123"},
     setup="chmod 000 src/sub\n")
case("st-tiny", "source", 1, "model.safetensors",
     {"src/model.safetensors": b"\x08\x00\x00"})
case("st-header-too-big", "source", 1, "model.safetensors",
     {"src/model.safetensors": struct.pack("<Q", 1 << 40) + b"{}"})
case("st-header-past-eof", "source", 1, "model.safetensors",
     {"src/model.safetensors": struct.pack("<Q", 4096) + b'{"w":'})
case("st-not-json", "source", 1, "model.safetensors",
     {"src/model.safetensors": st_file({}, b"")[:8] + b"not json"})
case("st-lying-size", "source", 1, "model.safetensors",
     {"src/model.safetensors":
      st_file({"w": t("F32", [4, 4], 0, 64)}, bytes(32))})
case("st-trailing-bytes", "source", 1, "model.safetensors",
     {"src/model.safetensors":
      st_file({"w": t("F32", [2], 0, 8)}, bytes(16))})
case("st-gap", "source", 1, "model.safetensors",
     {"src/model.safetensors":
      st_file({"a": t("U8", [4], 0, 4), "b": t("U8", [4], 8, 12)},
              bytes(12))})
case("st-overlap", "source", 1, "model.safetensors",
     {"src/model.safetensors":
      st_file({"a": t("U8", [8], 0, 8), "b": t("U8", [8], 4, 12)},
              bytes(12))})
case("st-shape-mismatch", "source", 1, "model.safetensors",
     {"src/model.safetensors": st_file({"w": t("F32", [10], 0, 8)},
                                       bytes(8))})
case("st-unknown-dtype", "source", 1, "model.safetensors",
     {"src/model.safetensors": st_file({"w": t("F33", [2], 0, 8)},
                                       bytes(8))})
case("st-truncated-shard", "source", 1, "model-00002-of-00002.safetensors",
     {"src/model-00001-of-00002.safetensors": GOOD_ST,
      "src/model-00002-of-00002.safetensors": GOOD_ST[:-5]})
case("index-missing-shard", "source", 1, "not in the source",
     {"src/model-00001-of-00002.safetensors": GOOD_ST,
      "src/model.safetensors.index.json": json.dumps(
          {"metadata": {"total_size": 32},
           "weight_map": {"a": "model-00001-of-00002.safetensors",
                          "b": "model-00002-of-00002.safetensors"}}).encode()})
case("index-bad-json", "source", 1, "not valid JSON",
     {"src/model.safetensors": GOOD_ST,
      "src/model.safetensors.index.json": b'{"weight_map": {'})
case("index-no-weight-map", "source", 1, "weight_map",
     {"src/model.safetensors": GOOD_ST,
      "src/model.safetensors.index.json": b'{"metadata": {}}'})

# ---- hostile manifests -----------------------------------------------------
# The good checkpoint "hm": _good/ imported with --chunk-size 16.
GOOD = {"config.json": CFG, "weights.bin": bytes(range(40))}
CS = 16


def sha(b):
    return hashlib.sha256(b).hexdigest()


def good_manifest():
    files = []
    for path in sorted(GOOD):
        data = GOOD[path]
        key = "weight/models/hm/files/" + sha(path.encode())
        n = (len(data) + CS - 1) // CS
        files.append({
            "path": path, "key": key, "size": len(data), "sha256": sha(data),
            "type": "WEIGHT" if path.endswith(".bin") else "METADATA",
            "chunks": ["%s/chunks/%08d" % (key, i) for i in range(n)],
            "chunk_size": CS})
    return {"checkpoint_id": "hm", "model_id": "M", "revision": "main",
            "status": "READY", "source_uri": "/src", "created_at": 1,
            "updated_at": 1, "total_size": sum(len(v) for v in GOOD.values()),
            "files": files, "error": None, "schema_version": 2}


def mcase(name, error, mutate, raw=None):
    m = good_manifest()
    if raw is None:
        mutate(m)
        raw = json.dumps(m, sort_keys=True, separators=(",", ":"),
                         ensure_ascii=False).encode()
    case(name, "manifest", 1, error, {"manifest": raw})


def setf(i, k, v):
    def f(m):
        m["files"][i][k] = v
    return f


def both(*fs):
    def f(m):
        for g in fs:
            g(m)
    return f


mcase("man-dotdot-path", "path", setf(1, "path", "../weights.bin"))
mcase("man-dotdot-inside", "path", setf(1, "path", "a/../../weights.bin"))
mcase("man-absolute-path", "path", setf(1, "path", "/tmp/weights.bin"))
mcase("man-empty-segment", "path", setf(1, "path", "a//weights.bin"))
mcase("man-trailing-slash", "path", setf(1, "path", "weights/"))
mcase("man-nul-path", "is not allowed", setf(1, "path", "weights\u0000.bin"))
mcase("man-duplicate-path", "duplicate", setf(1, "path", "config.json"))
mcase("man-negative-size", "size", setf(1, "size", -40))
mcase("man-huge-size", "too big integer", setf(1, "size", 2 ** 64 + 1))
mcase("man-size-too-big-for-chunks", "chunk",
      setf(1, "size", 1 << 40))
mcase("man-too-few-chunks", "chunk",
      lambda m: m["files"][1]["chunks"].pop())
mcase("man-too-many-chunks", "chunk",
      lambda m: m["files"][1]["chunks"].append(
          m["files"][1]["chunks"][0][:-8] + "00000009"))
mcase("man-chunk-size-negative", "chunk_size", setf(1, "chunk_size", -16))
mcase("man-chunks-not-array", "chunks", setf(1, "chunks", "x"))
mcase("man-bad-status", "status", lambda m: m.update(status="DONE"))
mcase("man-bad-type", "invalid type", setf(1, "type", "EXEC"))
mcase("man-chunk-key-dotdot", "not a valid key",
      lambda m: m["files"][1]["chunks"].__setitem__(
          0, "weight/models/hm/../../../etc/passwd"))
mcase("man-chunk-key-absolute", "not a valid key",
      lambda m: m["files"][1]["chunks"].__setitem__(0, "/etc/passwd"))
mcase("man-wrong-id", "names checkpoint", lambda m: m.update(
    checkpoint_id="other"))
mcase("man-schema-3", "schema_version", lambda m: m.update(
    schema_version=3))
mcase("man-bad-sha256", "sha256", setf(1, "sha256", "xyz"))
mcase("man-files-not-array", "files", lambda m: m.update(files={}))
mcase("man-total-size-lies", "total_size", lambda m: m.update(
    total_size=12345))
mcase("man-not-json", "manifest is corrupt", None, raw=b'{"checkpoint_id":')
mcase("man-empty", "manifest is corrupt", None, raw=b"")


def main():
    for entry in os.listdir(HERE):
        p = os.path.join(HERE, entry)
        if os.path.isdir(p):
            shutil.rmtree(p)
    good = os.path.join(HERE, "_good")
    for path, data in GOOD.items():
        os.makedirs(good, exist_ok=True)
        with open(os.path.join(good, path), "wb") as f:
            f.write(data)
    for name, kind, exit_, error, files, setup, source in CASES:
        d = os.path.join(HERE, name)
        os.makedirs(d)
        with open(os.path.join(d, "expect"), "w") as f:
            f.write("kind %s\nexit %d\nerror %s\n" % (kind, exit_, error))
        for path, data in files.items():
            p = os.path.join(d, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        if setup:
            with open(os.path.join(d, "setup"), "w") as f:
                f.write(setup)
        if source:
            with open(os.path.join(d, "source"), "w") as f:
                f.write(source + "\n")
    print("%d cases" % len(CASES))


if __name__ == "__main__":
    main()
