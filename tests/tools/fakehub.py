#!/usr/bin/python3
"""fakehub.py - a small Hub protocol server for the hub-import suite that
misbehaves on request.

  fakehub.py DIR CONTROL LOG PORTFILE

Serves the files under DIR as repository org/fake (one commit), with the
Hub's endpoints: /api/models/org/fake/revision/REV, .../tree/REV
(recursive), /org/fake/resolve/REV/PATH (Range: bytes=N-).  Files ending
in .safetensors are LFS files (oid of the pointer, lfs.oid = SHA-256);
the others carry their git blob SHA-1.  A second listener (the "CDN")
serves LFS files when they are redirected.  Writes "PORT CDNPORT" to
PORTFILE once listening, and one line per request to LOG:
"SERVER METHOD PATH RANGE AUTH" (AUTH: "auth" when an Authorization
header came, else "-").

CONTROL is a JSON file read at every request (missing: {}); the request
counts below start over whenever its content changes:
  token        required bearer token (401 otherwise; not by the CDN)
  corrupt      [PATH...]  one byte of these files is flipped
  cut          [PATH...]  these files are sent half, then the connection
                          closes (every time)
  cut_once     [PATH...]  the same, on the first request of each only
  r429         {PATH: N}  the first N requests answer 429, Retry-After: 1
  r500         {PATH: N}  the first N requests answer 500
  redirect     true: LFS files are sent by a 302 to the CDN listener
  redirect_loop true: LFS files answer a 302 to their own URL, for ever
  hold         [PATH...]  these files are never answered (the request
                          waits until the client goes away)
  slow         [PATH...]  these files send 1 byte, then stall
  commits      {COMMIT: DIR}  more commits of org/fake, each the files
                          under its DIR (COMMIT: 40 hex digits)
  refs         {REF: COMMIT}  what each branch or tag names (default:
                          every revision names the commit of DIR)
  down         true: every request is answered 503
  trickle      [PATH...]  these files send 1 byte a second
  errbody      [PATH...]  these files answer 500 with a body that never
                          ends (1 MiB a second)
  link         "self": the tree listing links itself as the next page;
               "other": it links its second page on the CDN's port;
               "pages": one file per page, each linking the next
  extra        [ENTRY...] entries added to the tree listing as they are
  first_delay  {PATH: S}  these files wait S seconds (after their headers)
                          before their first byte
  rate         {PATH: B}  these files are sent at B bytes a second

Files over 8 MiB are read from disk as they are sent (never whole into
memory), and their hashes are kept while their size and mtime stay.
The time each file's first byte was written goes to LOG.first as
"PATH SECONDS" (time.time()).
"""
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

DIR, CONTROL, LOG, PORTFILE = sys.argv[1:5]
REPO = "org/fake"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
LOCK = threading.Lock()
COUNTS = {}
CDN_PORT = [0]


LAST = [None]


def control():
    """The control file; a new one starts the request counts over."""
    try:
        with open(CONTROL) as f:
            text = f.read()
    except FileNotFoundError:
        text = "{}"
    with LOCK:
        if text != LAST[0]:
            LAST[0] = text
            COUNTS.clear()
    return json.loads(text)


def commit_dir(c, rev):
    """(commit, directory) that revision rev names, or (None, None)."""
    commits = c.get("commits", {})
    rev = c.get("refs", {}).get(rev, rev)
    if rev in commits:
        return rev, commits[rev]
    if c.get("refs") and rev != COMMIT:
        return None, None
    return COMMIT, DIR


def files(d=DIR):
    out = []
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.relpath(os.path.join(root, n), d)
            out.append(p)
    return sorted(out)


BIG = 8 << 20
HASHES = {}


def hashes(full):
    """(sha256, git blob sha1) of the file, kept while it is unchanged."""
    st = os.stat(full)
    key = (full, st.st_size, st.st_mtime_ns)
    if key not in HASHES:
        h256, h1 = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % st.st_size)
        with open(full, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h256.update(b)
                h1.update(b)
        HASHES[key] = (h256.hexdigest(), h1.hexdigest())
    return HASHES[key]


def entry(path, d=DIR):
    full = os.path.join(d, path)
    size = os.path.getsize(full)
    sha, blob = hashes(full)
    e = {"type": "file", "path": path, "size": size}
    if path.endswith(".safetensors"):
        ptr = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\n"
               "size %d\n" % (sha, size)).encode()
        e["oid"] = hashlib.sha1(b"blob %d\0" % len(ptr) + ptr).hexdigest()
        e["lfs"] = {"oid": sha, "size": size, "pointerSize": len(ptr)}
    else:
        e["oid"] = blob
    return e


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_name = "hub"

    def log_message(self, *a):
        pass

    def log_req(self):
        with LOCK, open(LOG, "a") as f:
            f.write("%s %s %s %s %s\n" % (
                self.server_name, self.command, self.path,
                self.headers.get("Range", "-").replace(" ", ""),
                "auth" if self.headers.get("Authorization") else "-"))

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, xcode, msg):
        self.reply(code, json.dumps({"error": msg}).encode(),
                   [("X-Error-Code", xcode), ("X-Error-Message", msg),
                    ("Content-Type", "application/json")])

    def nth(self, key):
        with LOCK:
            COUNTS[key] = COUNTS.get(key, 0) + 1
            return COUNTS[key]

    def do_GET(self):
        self.log_req()
        c = control()
        tok = c.get("token")
        if tok and self.server_name == "hub" and self.headers.get("Authorization") != "Bearer " + tok:
            return self.error(401, "", "Invalid credentials in Authorization header")
        if c.get("down"):
            return self.reply(503, b"down")
        path = urlparse(self.path).path
        api = "/api/models/" + REPO + "/"
        if path.startswith("/api/models/") and not path.startswith(api):
            return self.error(404, "RepoNotFound", "Repository not found")
        for verb in ("revision/", "tree/"):
            if path.startswith(api + verb):
                rev = unquote(path[len(api + verb):].split("/", 1)[0])
                commit, d = commit_dir(c, rev)
                if not commit:
                    return self.error(404, "RevisionNotFound",
                                      "Invalid rev id: " + rev)
                if verb == "tree/":
                    return self.tree(c, path, d)
                sib = [{"rfilename": p} for p in files(d)]
                return self.reply(200, json.dumps(
                    {"id": REPO, "sha": commit, "siblings": sib}).encode())
        pre = "/" + REPO + "/resolve/"
        if not path.startswith(pre):
            return self.error(404, "RepoNotFound", "Repository not found")
        rev, rel = path[len(pre):].split("/", 1)
        rel = unquote(rel)
        commit, d = commit_dir(c, unquote(rev))
        if not commit or rel not in files(d):
            return self.error(404, "EntryNotFound", "Entry not found")
        self.send_file(c, rel, d)

    def tree(self, c, path, d):
        listing = [entry(p, d) for p in files(d)] + c.get("extra", [])
        q = urlparse(self.path).query
        cursor = int(q.split("cursor=")[1]) if "cursor=" in q else 0
        link = c.get("link")
        here = "http://127.0.0.1:%d" % self.server.server_address[1]
        if link == "self":
            return self.reply(200, json.dumps(listing).encode(),
                              [("Link", '<%s%s>; rel="next"' % (here, self.path))])
        if link == "other" and cursor == 0:
            nxt = "http://127.0.0.1:%d%s?recursive=true&cursor=1" % (CDN_PORT[0], path)
            return self.reply(200, json.dumps(listing[:1]).encode(),
                              [("Link", '<%s>; rel="next"' % nxt)])
        if link == "other":
            return self.reply(200, json.dumps(listing[1:]).encode())
        if link == "pages":
            hdr = []
            if cursor + 1 < len(listing):
                hdr = [("Link", '<%s%s?recursive=true&cursor=%d>; rel="next"'
                        % (here, path, cursor + 1))]
            return self.reply(200, json.dumps(listing[cursor:cursor + 1]).encode(), hdr)
        return self.reply(200, json.dumps(listing).encode())

    def send_file(self, c, rel, d=DIR):
        if rel in c.get("hold", []):
            time.sleep(3600)
        n = self.nth(rel)
        if n <= c.get("r429", {}).get(rel, 0):
            return self.reply(429, b"slow down", [("Retry-After", "1")])
        if n <= c.get("r500", {}).get(rel, 0):
            return self.reply(500, b"oops")
        if rel in c.get("errbody", []):
            self.send_response(500)
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
            for _ in range(3600):
                self.wfile.write(b"x" * (1 << 20))
                time.sleep(1)
            return
        if c.get("redirect_loop") and rel.endswith(".safetensors"):
            return self.reply(302, b"", [("Location", self.path)])
        if (c.get("redirect") and rel.endswith(".safetensors")
                and self.server_name == "hub"):
            return self.reply(302, b"", [("Location", "http://127.0.0.1:%d%s"
                                          % (CDN_PORT[0], self.path))])
        full = os.path.join(d, rel)
        if os.path.getsize(full) > BIG:
            return self.send_big(c, rel, full)
        data = bytearray(open(full, "rb").read())
        if rel in c.get("corrupt", []) and data:
            data[len(data) // 2] ^= 0xFF
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
        body = bytes(data[start:])
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" %
                             (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if rel in c.get("trickle", []):
            for b in body:
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(1)
            return
        if rel in c.get("slow", []):
            self.wfile.write(body[:1])
            self.wfile.flush()
            time.sleep(3600)
        if rel in c.get("cut", []) or (rel in c.get("cut_once", []) and n == 1):
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.paced(c, rel, body)

    def first_byte(self, c, rel):
        """Wait first_delay, then note when the first byte goes out."""
        time.sleep(c.get("first_delay", {}).get(rel, 0))
        with LOCK, open(LOG + ".first", "a") as f:
            f.write("%s %.6f\n" % (rel, time.time()))

    def paced(self, c, rel, body, first=True):
        """body at the file's rate (all at once without one)."""
        if first:
            self.first_byte(c, rel)
        rate = c.get("rate", {}).get(rel)
        if not rate:
            self.wfile.write(body)
            return
        piece = max(1, min(len(body), rate // 10))
        for i in range(0, len(body), piece):
            t = time.time()
            self.wfile.write(body[i:i + piece])
            self.wfile.flush()
            time.sleep(max(0, piece / rate - (time.time() - t)))

    def send_big(self, c, rel, full):
        """A large file from disk in pieces (Range: bytes=N- too)."""
        size = os.path.getsize(full)
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" %
                             (start, size - 1, size))
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        flip = size // 2 if rel in c.get("corrupt", []) else -1
        with open(full, "rb") as f:
            f.seek(start)
            if rel in c.get("slow", []):
                self.wfile.write(f.read(1))
                self.wfile.flush()
                time.sleep(3600)
                return
            pos, first = start, True
            while pos < size:
                b = bytearray(f.read(1 << 20))
                if pos <= flip < pos + len(b):
                    b[flip - pos] ^= 0xFF
                self.paced(c, rel, bytes(b), first)
                first = False
                pos += len(b)


class Cdn(Hub):
    server_name = "cdn"


def main():
    hub = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    cdn = ThreadingHTTPServer(("127.0.0.1", 0), Cdn)
    hub.daemon_threads = cdn.daemon_threads = True
    CDN_PORT[0] = cdn.server_address[1]
    threading.Thread(target=cdn.serve_forever, daemon=True).start()
    with open(PORTFILE + ".tmp", "w") as f:
        f.write("%d %d\n" % (hub.server_address[1], CDN_PORT[0]))
    os.rename(PORTFILE + ".tmp", PORTFILE)
    hub.serve_forever()


main()
