"""hub_client.py ENDPOINT REPO SRC CACHE SHA TOKEN - the Python Hugging Face
client (huggingface_hub, on PYTHONPATH: 0.x or 1.x) against `wstore serve`.

Prints one "ok - ..." or "not ok - ..." line per check (serve_hub.sh turns
them into TAP lines): snapshot_download compared byte for byte with SRC,
hf_hub_download of one file, a revision given as commit id, list_repo_refs,
HfFileSystem, a wrong token reported as an authentication problem, the
cached blobs named by the Hub's object ids (git blob SHA-1 of files kept in
git, SHA-256 of LFS files), and on 1.x `hf cache verify` and `hf download`.
"""
import hashlib
import os
import subprocess
import sys

endpoint, repo, src, cache, sha, token = sys.argv[1:7]
os.environ["HF_ENDPOINT"] = endpoint
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_HUB_CACHE"] = cache
os.environ.pop("HF_TOKEN", None)

import huggingface_hub as hh  # noqa: E402

VERSION = hh.__version__


def check(name, fn):
    try:
        why = fn()
    except Exception as e:  # a failed check, with its reason
        why = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    if why:
        print("not ok - %s %s (%s)" % (VERSION, name, why))
    else:
        print("ok - %s %s" % (VERSION, name))
    sys.stdout.flush()


def files_of(root):
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = p
    return out


SRC = files_of(src)


def same_tree(got):
    have = files_of(got)
    if set(have) != set(SRC):
        return "files %s, wanted %s" % (sorted(have), sorted(SRC))
    for rel, p in SRC.items():
        with open(p, "rb") as a, open(have[rel], "rb") as b:
            if a.read() != b.read():
                return "bytes of %s differ" % rel
    return None


def snapshot():
    d = hh.snapshot_download(repo, token=token)
    if os.path.basename(d) != sha:
        return "snapshot folder %s, wanted the commit %s" % (d, sha)
    return same_tree(d)


def one_file():
    p = hh.hf_hub_download(repo, "config.json", token=token)
    return None if open(p, "rb").read() == open(SRC["config.json"], "rb").read() else "bytes differ"


def by_commit():
    d = hh.snapshot_download(repo, revision=sha, token=token)
    return same_tree(d)


def refs():
    r = hh.HfApi().list_repo_refs(repo, token=token)
    main = [b for b in r.branches if b.name == "main"]
    if not main or main[0].target_commit != sha:
        return "branches %s" % (r.branches,)
    return None


def fs():
    f = hh.HfFileSystem(token=token)
    names = sorted(os.path.basename(p) for p in f.ls(repo, detail=False))
    want = sorted({rel.split(os.sep)[0] for rel in SRC})
    if names != want:
        return "ls %s, wanted %s" % (names, want)
    with f.open(repo + "/config.json", "rb") as fh:
        if fh.read() != open(SRC["config.json"], "rb").read():
            return "read of config.json differs"
    return None


def git_blob(p):
    data = open(p, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def blobs():
    # the cache names each blob by the ETag: git blob id or SHA-256
    root = os.path.join(cache, "models--" + repo.replace("/", "--"), "blobs")
    have = set(os.listdir(root))
    want = set()
    for rel, p in SRC.items():
        # weight files (wstore's WEIGHT type) are LFS files on the Hub
        if rel.endswith((".safetensors", ".bin")):
            want.add(hashlib.sha256(open(p, "rb").read()).hexdigest())
        else:
            want.add(git_blob(p))
    if have != want:
        return "blobs %s, wanted %s" % (sorted(have - want), sorted(want - have))
    return None


def wrong_token():
    # the Hub's 401 carries X-Error-Code, which the clients turn into
    # RepositoryNotFoundError (an authentication problem); without it a
    # bare HTTP error, or on 0.x "check your connection"
    from huggingface_hub.errors import RepositoryNotFoundError
    for name, fn in (("hf_hub_download", lambda: hh.hf_hub_download(
            repo, "config.json", token="hf_wrong", cache_dir=cache + "-wrong")),
            ("snapshot_download", lambda: hh.snapshot_download(
                repo, token="hf_wrong", cache_dir=cache + "-wrong"))):
        try:
            fn()
        except RepositoryNotFoundError as e:
            if "401" not in str(e):
                return "%s: not a 401: %s" % (name, str(e).splitlines()[0])
            continue
        except Exception as e:
            return "%s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0])
        return "%s: a wrong token was accepted" % name
    return None


def hf_download():
    dest = cache + "-cli"
    out = subprocess.run([sys.executable, "-m", "huggingface_hub.cli.hf", "download",
                          repo, "--local-dir", dest],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, HF_TOKEN=token))
    if out.returncode != 0:
        return "exit %d: %s" % (out.returncode, (out.stdout + out.stderr).strip().splitlines()[-1:])
    # --local-dir keeps its own metadata in .cache/huggingface
    have = {k: v for k, v in files_of(dest).items() if not k.startswith(".cache")}
    if set(have) != set(SRC):
        return "files %s" % sorted(have)
    for rel, p in SRC.items():
        if open(p, "rb").read() != open(have[rel], "rb").read():
            return "bytes of %s differ" % rel
    return None


def cache_verify():
    out = subprocess.run([sys.executable, "-m", "huggingface_hub.cli.hf", "cache",
                          "verify", repo, "--cache-dir", cache],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HF_TOKEN=token))
    if out.returncode != 0:
        return "exit %d: %s" % (out.returncode, (out.stdout + out.stderr).strip().splitlines()[-1:])
    return None


check("snapshot_download: every file byte for byte, in the commit's folder", snapshot)
check("hf_hub_download of one file", one_file)
check("snapshot_download at the commit id", by_commit)
check("list_repo_refs: main at the commit", refs)
check("HfFileSystem: ls and read", fs)
check("cache blobs named by git blob SHA-1 / SHA-256", blobs)
check("a wrong token: an authentication error, not a connection one", wrong_token)
if VERSION.startswith("1."):
    check("hf cache verify", cache_verify)
    check("hf download --local-dir: every file byte for byte", hf_download)
