"""wstore - Python binding of libwstore, the file-level model weight store.

Standard library only: ctypes over ``libwstore.so`` (found through
``$WSTORE_LIBRARY``, else ``../../build/libwstore.so`` next to this package,
else the system's ``libwstore.so.0``).

    import wstore
    with wstore.Store("/var/lib/wstore") as st:
        print(st.list())
        st.pull("qwen3-8b", "/models/qwen3-8b")
        with st.open("qwen3-8b") as ck:
            for name, dtype, shape, data in ck.iter_tensors():
                ...             # data: memoryview, valid until next step

Every failure of the library raises :class:`WstoreError` (or one of its
subclasses) carrying the library's code and one-line message.  Handles are
freed by ``close()``, by leaving a ``with`` block, or when collected;
closing a parent (store, checkpoint) closes what was opened from it.
Stores, checkpoints and files may be read from several threads at once;
do not close one while another thread is using it.

See docs/python.md.
"""
import collections
import ctypes
import json
import mmap
import os
import weakref
from ctypes import byref, c_char, c_char_p, c_size_t, c_uint64, c_void_p

from . import _native
from ._native import lib


def _big_buffer(size):
    """A writable buffer of size bytes for large reads.  Anonymous memory
    with transparent huge pages where the kernel offers them: first touch
    of fresh 4 KiB pages runs far below the store's read rate
    (docs/performance.md), and a weight buffer is touched once per
    batch."""
    buf = mmap.mmap(-1, size)
    if hasattr(buf, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    return buf

__all__ = [
    "Store", "Checkpoint", "File", "Tensor", "TensorData",
    "WstoreError", "NotFound", "Exists", "InvalidArgument", "Corrupt",
    "Unavailable", "Busy", "VerifyError", "NotReady", "Canceled",
    "OutOfRange", "Unsupported", "Changed", "to_torch", "library_path",
    "DEFAULT_BATCH_BYTES",
]

__version__ = "0.2.0"
library_path = _native.library_path
# One default chunk: on stores without ranged reads (Mooncake) a smaller
# batch would fetch each chunk several times.  Larger batches save little
# and cost first-touch page faults on the buffer, far slower than reads
# into memory already mapped (docs/performance.md).
DEFAULT_BATCH_BYTES = 64 << 20
# The embedded file store reads any range at page-cache speed, so there a
# small buffer wins: the larger one costs its first touch
# (docs/performance.md).
FILE_STORE_BATCH_BYTES = 8 << 20

# ---- errors -----------------------------------------------------------------

_ERR_BASE = -30800


class WstoreError(Exception):
    """A failure reported by libwstore.

    ``code`` is the library's negative return value (a ``WSTORE_E*`` code,
    or ``-errno`` for an OS error); ``message`` is its one-line message
    (``wstore_last_error()``), naming the key, file or server at fault.
    """

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    @property
    def errno(self):
        """The OS errno for an OS error, else None."""
        return -self.code if _ERR_BASE < self.code < 0 else None

    def __str__(self):
        return self.message


class NotFound(WstoreError):
    """No such checkpoint, file, tensor or key (WSTORE_ENOTFOUND)."""


class Exists(WstoreError):
    """The checkpoint id is already taken (WSTORE_EEXISTS)."""


class InvalidArgument(WstoreError, ValueError):
    """Bad argument or input (WSTORE_EINVAL)."""


class Corrupt(WstoreError):
    """Stored data is damaged (WSTORE_ECORRUPT)."""


class Unavailable(WstoreError):
    """The backend is unreachable (WSTORE_EUNAVAIL)."""


class Busy(WstoreError):
    """Locked by someone else (WSTORE_EBUSY)."""


class VerifyError(WstoreError):
    """Verification found damage (WSTORE_EVERIFY).

    ``files`` lists ``(path, code, message)`` for every bad file found.
    """

    def __init__(self, code, message, files=()):
        super().__init__(code, message)
        self.files = list(files)


class NotReady(WstoreError):
    """The checkpoint is not READY (WSTORE_ENOTREADY)."""


class Canceled(WstoreError):
    """Interrupted by a progress callback (WSTORE_ECANCELED)."""


class OutOfRange(WstoreError):
    """A value is larger than its buffer, or an index is out of range
    (WSTORE_ERANGE)."""


class Unsupported(WstoreError):
    """The backend or record lacks a feature (WSTORE_EUNSUPPORTED)."""


class Changed(WstoreError):
    """The checkpoint being read was deleted, or replaced by another import
    of the same id, since it was opened (WSTORE_ECHANGED).  Nothing of the
    new import was returned; open the checkpoint again to read it."""


_CLASSES = {
    _ERR_BASE: NotFound, _ERR_BASE - 1: Exists, _ERR_BASE - 2: InvalidArgument,
    _ERR_BASE - 3: Corrupt, _ERR_BASE - 4: Unavailable, _ERR_BASE - 5: Busy,
    _ERR_BASE - 6: VerifyError, _ERR_BASE - 7: NotReady,
    _ERR_BASE - 8: Canceled, _ERR_BASE - 9: OutOfRange,
    _ERR_BASE - 10: Unsupported, _ERR_BASE - 11: Changed,
}
EVERIFY = _ERR_BASE - 6
_ERR_EXISTS = _ERR_BASE - 1
_ERR_BUSY = _ERR_BASE - 5


def _dec(b):
    return b.decode("utf-8", "replace") if b is not None else None


def _error(rc):
    """The exception for return code rc; call on the failing thread right
    after the failing call (the message is thread-local)."""
    msg = _dec(lib.wstore_last_error()) or _dec(lib.wstore_strerror(rc))
    return _CLASSES.get(rc, WstoreError)(rc, msg)


def _check(rc):
    if rc < 0:
        raise _error(rc)
    return rc


def _fn(name):
    if name in _native.missing:
        raise Unsupported(_ERR_BASE - 10,
                          "libwstore at '%s' lacks %s()" % (library_path, name))
    return getattr(lib, name)


def _b(s):
    """str / bytes / os.PathLike -> bytes for a const char * argument."""
    if s is None:
        return None
    if isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return s.encode("utf-8")
    return os.fsencode(s)


def _strv(items):
    """A NULL-terminated char *[] (or None), plus the list keeping it."""
    if items is None:
        return None
    if isinstance(items, (str, bytes)):
        items = [items]
    arr = (c_char_p * (len(items) + 1))(*[_b(x) for x in items], None)
    return ctypes.cast(arr, ctypes.POINTER(c_char_p)), arr


def _take_string(out):
    """The malloc'ed C string a call left in ``out`` (a c_void_p), freed;
    None when it left none."""
    if not out.value:
        return None
    try:
        return _dec(ctypes.string_at(out.value))
    finally:
        _native.libc.free(out)


class _Progress:
    """Wraps fn(done, total, path) -> truthy to cancel as a C callback; an
    exception raised by fn cancels the operation and is re-raised."""

    def __init__(self, fn):
        self.fn = fn
        self.exc = None
        self.c = _native.PROGRESS_FN(self._cb) if fn else _native.PROGRESS_FN()

    def _cb(self, done, total, path, _ctx):
        try:
            return 1 if self.fn(done, total, _dec(path)) else 0
        except BaseException as e:  # noqa: B902 - must not cross into C
            self.exc = e
            return 1

    def check(self, rc):
        if self.exc is not None:
            raise self.exc
        return _check(rc)


def _c_buffer(buf):
    """(address, nbytes, keepalive) for a writable C-contiguous buffer:
    a torch tensor (via data_ptr), or any object with the writable buffer
    protocol (bytearray, memoryview, numpy array, array.array, mmap)."""
    if hasattr(buf, "data_ptr") and hasattr(buf, "element_size"):
        dev = getattr(buf, "device", None)
        if dev is not None and getattr(dev, "type", "cpu") != "cpu":
            raise ValueError("wstore reads into host memory only; tensor is "
                             "on '%s'" % dev)
        if not buf.is_contiguous():
            raise ValueError("tensor is not contiguous")
        return buf.data_ptr(), buf.numel() * buf.element_size(), buf
    mv = memoryview(buf)
    if mv.readonly:
        raise TypeError("buffer is read-only")
    if not mv.c_contiguous:
        raise ValueError("buffer is not C-contiguous")
    n = mv.nbytes
    if n == 0:
        return None, 0, mv
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    arr = (c_char * n).from_buffer(mv)
    return ctypes.addressof(arr), n, arr


# ---- tensors ----------------------------------------------------------------

Tensor = collections.namedtuple(
    "Tensor", "file name dtype shape offset nbytes")
Tensor.__doc__ = ("A tensor of a safetensors shard: its file's relative "
                  "path, name, dtype ('BF16', 'F32', ...), shape (tuple), "
                  "absolute byte offset in the file and size in bytes.")

TensorData = collections.namedtuple("TensorData", "name dtype shape data")
TensorData.__doc__ = ("One item of Checkpoint.iter_tensors(): name, dtype "
                      "string, shape tuple and a memoryview of the raw "
                      "bytes (valid until the next iteration step).")

_TORCH_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
    "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64",
    "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
    "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}


def to_torch(dtype, shape, data):
    """A torch tensor viewing ``data`` (no copy) with the safetensors dtype
    string ``dtype`` and ``shape``.  It shares memory with ``data``: copy it
    (``.clone()`` or ``dest.copy_(t)``) before the buffer is reused.
    Imports torch on first use."""
    import torch
    tname = _TORCH_DTYPES.get(dtype)
    tdt = getattr(torch, tname, None) if tname else None
    if tdt is None:
        raise TypeError("torch has no dtype for safetensors '%s'" % dtype)
    if len(data) == 0:
        return torch.empty(tuple(shape), dtype=tdt)
    return torch.frombuffer(data, dtype=tdt).reshape(tuple(shape))


# ---- store ------------------------------------------------------------------

def _load_config(config):
    """Config handle: the file (explicit, else $WSTORE_CONFIG, else the
    default path when it exists), then WSTORE_* variables on top."""
    cfg = c_void_p()
    path = config
    required = config is not None or bool(os.environ.get("WSTORE_CONFIG"))
    if path is None:
        p = lib.wstore_config_default_path()
        if p:
            path = ctypes.string_at(p)
            _native.libc.free(p)
    if path is not None and (required or os.path.exists(path)):
        _check(lib.wstore_config_load(byref(cfg), _b(path)))
    else:
        _check(lib.wstore_config_new(byref(cfg)))
    try:
        _check(lib.wstore_config_load_env(cfg))
    except BaseException:
        lib.wstore_config_free(cfg)
        raise
    return cfg


class _Handle:
    """Owns one C handle and the children opened from it (closed first)."""

    _free = None

    def __init__(self, h):
        self._h = h
        self._children = weakref.WeakSet()

    def _handle(self):
        if not self._h:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._h

    def close(self):
        """Free the handle, after closing everything opened from it.
        Idempotent."""
        for c in list(getattr(self, "_children", ())):
            c.close()
        h, self._h = getattr(self, "_h", None), None
        if h:
            type(self)._free(h)

    @property
    def closed(self):
        return not self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Store(_Handle):
    """An open store.

    ``url`` is a store URL (``file:///dir`` or a plain path, ``redis://``,
    ``redis+unix://``, ``redis-cluster://``, ``mooncake``).  ``config`` is a
    JSON config file (as ``wstore config init`` writes); without it
    ``$WSTORE_CONFIG`` or ``~/.config/wstore/config.json`` is used when
    present.  ``WSTORE_<KEY>`` environment variables override the file, and
    ``url`` overrides the ``store`` key.  ``settings`` (a dict) sets config
    keys on top, e.g. ``{"replica_num": 2}`` for the copies an import needs.  With neither, the file store at
    ``$WSTORE_HOME`` (else ``~/.local/share/wstore``) is opened.
    """

    _free = staticmethod(lib.wstore_free)

    def __init__(self, url=None, config=None, settings=None):
        self._h = None
        cfg = _load_config(config)
        try:
            for k, v in (settings or {}).items():
                _check(lib.wstore_config_set(
                    cfg, _b(k), None if v is None else _b(str(v))))
            if url is not None:
                _check(lib.wstore_config_set(cfg, b"store", _b(url)))
            h = c_void_p()
            _check(lib.wstore_open(byref(h), cfg))
        finally:
            lib.wstore_config_free(cfg)
        super().__init__(h)

    @property
    def backend(self):
        """Backend name: "file", "mem", "redis", ..."""
        return _dec(lib.wstore_backend_name(self._handle()))

    def list(self, model=None):
        """Sorted checkpoint ids: all, or those of one model id."""
        arr = ctypes.POINTER(c_char_p)()
        n = c_size_t()
        if model is None:
            _check(lib.wstore_list(byref(arr), byref(n), self._handle()))
        else:
            _check(lib.wstore_list_model(byref(arr), byref(n),
                                         self._handle(), _b(model)))
        try:
            return [_dec(arr[i]) for i in range(n.value)]
        finally:
            lib.wstore_strings_free(arr)

    def inspect(self, id):
        """The manifest of checkpoint ``id`` as a dict (docs/format.md, "Manifest").
        Raises NotFound if there is none."""
        m = c_void_p()
        _check(lib.wstore_manifest_read(byref(m), self._handle(), _b(id)))
        try:
            return _manifest_dict(m)
        finally:
            lib.wstore_manifest_free(m)

    def verify(self, id, jobs=0, structure=True, progress=None):
        """Re-read every chunk and check sizes and SHA-256 digests, then
        (``structure``) safetensors/GGUF headers and the shard index.
        Returns None when all is good; raises VerifyError whose ``files``
        lists ``(path, code, message)`` of each bad file, NotReady for a
        FAILED checkpoint, or another WstoreError if the check could not
        run.  ``progress(done, total, path)`` may return True to cancel."""
        bad = []

        def on_file(path, rc, msg, _ctx):
            if rc != 0:
                bad.append((_dec(path), rc, _dec(msg)))

        cb = _native.VERIFY_FILE_FN(on_file)
        prog = _Progress(progress)
        opts = _native.VerifyOptions(version=_native.VERIFY_OPTIONS_VERSION,
                                     jobs=jobs, progress=prog.c, on_file=cb)
        rc = lib.wstore_verify(self._handle(), _b(id), byref(opts))
        if rc == EVERIFY or (rc >= 0 and bad):
            raise _verify_error(rc, bad)
        prog.check(rc)
        if structure:
            with self.open(id) as ck:
                ck.check_structure()

    def pull(self, id, dest, include=None, exclude=None, jobs=0, verify=True,
             force=False, progress=None):
        """Write every file of READY checkpoint ``id`` under directory
        ``dest`` (see ``wstore model pull``).  ``include``/``exclude`` are
        fnmatch globs (a string or a list) matched against whole relative
        paths.  Files already present and correct are skipped unless
        ``force``; ``verify=False`` skips SHA-256 checks.
        ``progress(done, total, path)`` may return True to cancel."""
        inc = _strv(include)
        exc = _strv(exclude)
        prog = _Progress(progress)
        opts = _native.PullOptions(
            version=_native.PULL_OPTIONS_VERSION,
            include=inc[0] if inc else None, exclude=exc[0] if exc else None,
            jobs=jobs, no_verify=0 if verify else 1, force=1 if force else 0,
            progress=prog.c)
        prog.check(_fn("wstore_pull")(self._handle(), _b(id), _b(dest),
                                      byref(opts)))

    def import_(self, source, checkpoint_id=None, model_id=None,
                revision=None, chunk_size=None, jobs=0, progress=None,
                include=(), exclude=(), force=False, reflink="auto"):
        """Import directory ``source`` as ``checkpoint_id`` of ``model_id``
        and return the checkpoint id.  ``checkpoint_id`` None: one derived
        from ``model_id`` and ``revision`` that no checkpoint has (as
        ``wstore model import`` without --checkpoint-id; another import
        taking it first makes this one derive again).
        ``chunk_size``: bytes (int) or a size string ("64MiB"); default
        64 MiB.  The source rules of ``wstore model import`` apply:
        version-control and tool folders are skipped, ``include`` and
        ``exclude`` are glob patterns, and a source that does not look
        like a checkpoint (no config, no weight file) is refused
        (InvalidArgument) unless ``force``.  ``reflink`` ("auto",
        "always", "never"): as ``wstore model import --reflink``, whether
        the file store clones source files on its copy-on-write file
        system instead of writing their bytes.  Raises Exists if the id is
        taken and READY."""
        if not model_id:
            raise ValueError("import_: model_id is required")
        if reflink not in _native.REFLINK:
            raise ValueError("import_: reflink must be 'auto', 'always' "
                             "or 'never', not %r" % (reflink,))
        cs = chunk_size or 0
        if isinstance(cs, (str, bytes)):
            v = c_uint64()
            _check(lib.wstore_parse_size(byref(v), _b(cs)))
            cs = v.value
        src = c_void_p()
        _check(lib.wstore_source_new(byref(src), _b(source), _b(revision)))
        try:
            for pat in include:
                _check(lib.wstore_source_include(src, _b(pat)))
            for pat in exclude:
                _check(lib.wstore_source_exclude(src, _b(pat)))
            lib.wstore_source_set_force(src, 1 if force else 0)
            prog = _Progress(progress)
            # a derived id another import took between deriving and
            # locking it: derive again (it is taken now), a few times
            for tries in range(9):
                cid = checkpoint_id
                if cid is None:
                    cid = self._derive_id(model_id, revision)
                opts = _native.ImportOptions(
                    version=_native.IMPORT_OPTIONS_VERSION,
                    checkpoint_id=_b(cid), model_id=_b(model_id),
                    revision=_b(revision), source=_b(source),
                    chunk_size=cs, jobs=jobs, progress=prog.c,
                    reflink=_native.REFLINK[reflink])
                rc = lib.wstore_import_from(self._handle(), byref(opts), src)
                if (checkpoint_id is None and tries < 8 and prog.exc is None
                        and rc in (_ERR_EXISTS, _ERR_BUSY)):
                    continue
                prog.check(rc)
                return cid
        finally:
            lib.wstore_source_free(src)

    def import_hub(self, repo, revision=None, endpoint=None, token=None,
                   checkpoint_id=None, model_id=None, chunk_size=None,
                   include=None, exclude=None, connections=0, retries=0,
                   stall_timeout=None, tls_ca_file=None, progress=None,
                   **limits):
        """Import Hub repository ``repo`` ("ORG/NAME") at ``revision``
        (default "main") straight from ``endpoint`` (default
        https://huggingface.co; as ``wstore model import --from-hub``) and
        return the checkpoint id.  ``token``: the bearer token, sent only
        to the endpoint's scheme, host and port.  ``include``/``exclude``:
        fnmatch globs.  ``stall_timeout``: seconds; ``tls_ca_file``: the
        CAs (PEM) of an https endpoint.  ``limits``: any of max_files,
        max_pages, max_file_size, max_total_size, max_json_size,
        max_redirects, min_rate, transfer_timeout_ms (docs/trust.md;
        0 or absent: the default).  An id READY with this model and commit
        is returned as it is; an import killed and run again fetches only
        what it had not verified."""
        for k in limits:
            if k not in _native.HUB_LIMITS:
                raise TypeError("import_hub: unknown limit %r" % (k,))
        cs = chunk_size or 0
        if isinstance(cs, (str, bytes)):
            v = c_uint64()
            _check(lib.wstore_parse_size(byref(v), _b(cs)))
            cs = v.value
        inc = _strv(include)
        exc = _strv(exclude)
        prog = _Progress(progress)
        ho = _native.HubOptions(
            version=_native.HUB_OPTIONS_VERSION, endpoint=_b(endpoint),
            repo=_b(repo), revision=_b(revision), token=_b(token),
            include=inc[0] if inc else None,
            exclude=exc[0] if exc else None, connections=connections,
            retries=retries,
            stall_timeout_ms=int((stall_timeout or 0) * 1000),
            tls_ca_file=_b(tls_ca_file), **limits)
        io = _native.ImportOptions(
            version=_native.IMPORT_OPTIONS_VERSION,
            checkpoint_id=_b(checkpoint_id), model_id=_b(model_id),
            chunk_size=cs, progress=prog.c)
        out = c_void_p()
        rc = _fn("wstore_import_hub")(byref(out), self._handle(), byref(io),
                                      byref(ho))
        cid = _take_string(out)
        prog.check(rc)
        return cid

    def export(self, id, output, progress=None):
        """Write READY checkpoint ``id`` as a bundle (one tar stream: its
        manifest, then every file; see ``wstore model export``) to
        ``output``: a path (written as a temp file next to it and renamed
        into place once complete), or an open binary file object or file
        descriptor (a pipe, a socket; written as it goes, not closed).
        Every file is checked against the manifest as it is read (Corrupt
        naming the file).  ``progress(done, total, path)`` may return True
        to cancel."""
        fd, path = -1, None
        if isinstance(output, int):
            fd = output
        elif hasattr(output, "fileno"):
            output.flush()
            fd = output.fileno()
        else:
            path = os.fsencode(output)
        prog = _Progress(progress)
        opts = _native.ExportOptions(version=_native.EXPORT_OPTIONS_VERSION,
                                     progress=prog.c)
        prog.check(_fn("wstore_export")(self._handle(), _b(id), fd, path,
                                        byref(opts)))

    def import_bundle(self, bundle, progress=None):
        """Import a bundle (as ``wstore model import --bundle``) and return
        its checkpoint id: ``bundle`` is a path, or an open binary file
        object or file descriptor read from its current position.  The
        checkpoint keeps the bundle's ids, revision and commit id; a
        truncated, tampered or hostile bundle raises InvalidArgument and
        leaves nothing READY.  Raises Exists if the id is READY here."""
        if isinstance(bundle, int) or hasattr(bundle, "fileno"):
            return self._import_bundle_fd(
                bundle if isinstance(bundle, int) else bundle.fileno(),
                progress)
        fd = os.open(bundle, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            return self._import_bundle_fd(fd, progress)
        finally:
            os.close(fd)

    def _import_bundle_fd(self, fd, progress):
        prog = _Progress(progress)
        opts = _native.ImportOptions(version=_native.IMPORT_OPTIONS_VERSION,
                                     progress=prog.c)
        out = c_void_p()
        rc = _fn("wstore_import_bundle")(byref(out), self._handle(), fd,
                                         byref(opts))
        cid = _take_string(out)
        prog.check(rc)
        return cid

    def copy(self, id, to, progress=None):
        """Copy READY checkpoint ``id`` to another store, ``to`` (a Store,
        or a store URL opened with this process's configuration), as
        ``wstore model copy`` does: streaming, every file checked, the
        same ids and commit id.  A copy already there with the same commit
        is left as it is; one interrupted and run again finishes."""
        dst = to if isinstance(to, Store) else Store(to)
        try:
            prog = _Progress(progress)
            opts = _native.ImportOptions(
                version=_native.IMPORT_OPTIONS_VERSION, progress=prog.c)
            prog.check(_fn("wstore_copy")(dst._handle(), self._handle(),
                                          _b(id), byref(opts)))
        finally:
            if dst is not to:
                dst.close()

    def _derive_id(self, model_id, revision):
        out = c_void_p()
        _check(_fn("wstore_checkpoint_id_derive")(
            byref(out), self._handle(), _b(model_id), _b(revision)))
        try:
            return _dec(ctypes.string_at(out.value))
        finally:
            _native.libc.free(out)

    def delete(self, id, missing_ok=False, wait=0, force=False):
        """Delete checkpoint ``id``.  Raises NotFound if it does not exist,
        unless ``missing_ok``.  While it is being read (read leases, see
        docs/cli/wstore-model-delete.md) the delete is refused (Busy),
        waits up to ``wait`` seconds for the readers (None: no limit), or
        with ``force`` goes ahead anyway."""
        o = _native.DeleteOptions()
        o.version = _native.DELETE_OPTIONS_VERSION
        o.force = 1 if force else 0
        o.wait_ms = -1 if wait is None else int(wait * 1000)
        rc = lib.wstore_delete_ext(self._handle(), _b(id), byref(o))
        if missing_ok and rc == _ERR_BASE:  # WSTORE_ENOTFOUND
            return
        _check(rc)

    def pin(self, id, pinned=True):
        """Pin checkpoint ``id`` (``pinned=False``: unpin): eviction never
        removes a pinned checkpoint."""
        _check(lib.wstore_pin(self._handle(), _b(id), 1 if pinned else 0))

    def open(self, id):
        """Open READY checkpoint ``id`` for reading: a :class:`Checkpoint`.
        Raises NotFound if absent, NotReady if FAILED."""
        ck = Checkpoint(self, id)
        self._children.add(ck)
        return ck


def _manifest_dict(m):
    out = c_void_p()
    n = c_size_t()
    _check(lib.wstore_manifest_serialize(byref(out), byref(n), m))
    try:
        return json.loads(ctypes.string_at(out, n.value).decode("utf-8"))
    finally:
        _native.libc.free(out)


def _verify_error(rc, bad):
    msg = _dec(lib.wstore_last_error()) if rc == EVERIFY else ""
    names = ", ".join("'%s'" % p for p, _, _ in bad)
    if names:
        msg = (msg + "; " if msg else "") + "bad files: " + names
    return VerifyError(EVERIFY, msg, bad)


# ---- checkpoints and files ------------------------------------------------------

class Checkpoint(_Handle):
    """A READY checkpoint open for reading (``Store.open``)."""

    _free = staticmethod(lib.wstore_checkpoint_free)

    def __init__(self, store, id):
        self._h = None
        h = c_void_p()
        _check(_fn("wstore_checkpoint_open")(byref(h), store._handle(),
                                             _b(id)))
        super().__init__(h)
        self.store = store      # the store must outlive the checkpoint
        self.id = id
        m = lib.wstore_checkpoint_manifest(h)
        self._info = {}
        for i in range(lib.wstore_manifest_file_count(m)):
            fi = _native.FileInfo()
            _check(lib.wstore_manifest_file_sized(byref(fi), ctypes.sizeof(fi),
                                                  m, i))
            self._info[_dec(fi.path)] = {
                "path": _dec(fi.path), "type": _dec(fi.type),
                "key": _dec(fi.key), "sha256": _dec(fi.sha256),
                "size": fi.size, "chunk_size": fi.chunk_size,
                "chunk_count": fi.chunk_count}
        self._tensors = None

    @property
    def files(self):
        """Relative paths of the checkpoint's files, sorted."""
        return list(self._info)

    def file_info(self, path):
        """Manifest record of one file: path, type, key, sha256, size,
        chunk_size, chunk_count."""
        try:
            return dict(self._info[path])
        except KeyError:
            raise NotFound(_ERR_BASE, "checkpoint '%s' has no file '%s'"
                           % (self.id, path)) from None

    @property
    def manifest(self):
        """The manifest as a dict."""
        return _manifest_dict(lib.wstore_checkpoint_manifest(self._handle()))

    def open(self, path):
        """Open one file by relative path: a :class:`File`.  NotFound if
        the checkpoint has no such file."""
        f = File(self, path)
        self._children.add(f)
        return f

    def check_structure(self):
        """Check safetensors/GGUF headers and model.safetensors.index.json;
        raises VerifyError listing the problems."""
        bad = []

        def on_problem(path, rc, msg, _ctx):
            bad.append((_dec(path), rc, _dec(msg)))

        cb = _native.VERIFY_FILE_FN(on_problem)
        rc = _fn("wstore_check_structure")(self._handle(), cb, None)
        if rc == EVERIFY or (rc >= 0 and bad):
            raise _verify_error(rc, bad)
        _check(rc)

    def tensors(self):
        """Every tensor of every ``.safetensors`` file: a list of
        :class:`Tensor`, by shard path, then file order (headers are read
        once and cached)."""
        if self._tensors is None:
            out = []
            for p in self._info:
                if p.endswith(".safetensors"):
                    with self.open(p) as f:
                        out.extend(f.tensors())
            self._tensors = out
        return list(self._tensors)

    def iter_tensors(self, batch_bytes=None):
        """Yield ``(name, dtype, shape, data)`` (a :class:`TensorData`) for
        every tensor of every ``.safetensors`` shard, by shard path then
        file order.

        Runs of consecutive tensors are read with one range read into ONE
        buffer allocated once, of ``max(min(batch_bytes, total), largest
        tensor)`` bytes; ``batch_bytes`` defaults to 8 MiB on the embedded
        file store and 64 MiB (one default chunk) elsewhere.  ``data`` is a memoryview into that buffer: it is
        valid only until the next iteration step.  Copy what you keep
        (``dest.copy_(wstore.to_torch(dtype, shape, data))``,
        ``bytes(data)``)."""
        if batch_bytes is None:
            batch_bytes = (FILE_STORE_BATCH_BYTES
                           if self.store.backend == "file"
                           else DEFAULT_BATCH_BYTES)
        tensors = self.tensors()
        largest = max((t.nbytes for t in tensors), default=0)
        total = sum(t.nbytes for t in tensors)
        size = max(min(batch_bytes, total), largest, 1)
        buf = _big_buffer(size)
        view = memoryview(buf)
        # Pins buf (it cannot be resized while this lives) and gives its
        # address once for all reads.
        cbuf = (c_char * size).from_buffer(buf)
        addr = ctypes.addressof(cbuf)
        i = 0
        while i < len(tensors):
            path = tensors[i].file
            with self.open(path) as f:
                while i < len(tensors) and tensors[i].file == path:
                    start = end = tensors[i].offset
                    j = i
                    while (j < len(tensors) and tensors[j].file == path and
                           tensors[j].offset == end and
                           end + tensors[j].nbytes - start <= size):
                        end += tensors[j].nbytes
                        j += 1
                    got = f._pread_addr(addr, end - start, start)
                    if got != end - start:
                        raise Corrupt(_ERR_BASE - 3,
                                      "short read of '%s' at %d: %d of %d "
                                      "bytes" % (path, start, got,
                                                 end - start))
                    for t in tensors[i:j]:
                        o = t.offset - start
                        yield TensorData(t.name, t.dtype, t.shape,
                                         view[o:o + t.nbytes])
                    i = j
        del cbuf

    def tensors_into(self, dests):
        """Read tensors by name into caller buffers: ``dests`` maps a tensor
        name to a writable buffer (bytearray, memoryview, numpy array, CPU
        torch tensor) of at least the tensor's size.  One batched read per
        shard (wstore_safetensors_read).  NotFound for an unknown name,
        OutOfRange for a buffer too small."""
        where = {t.name: t.file for t in self.tensors()}
        by_file = collections.OrderedDict()
        for name, buf in dests.items():
            if name not in where:
                raise NotFound(_ERR_BASE, "checkpoint '%s' has no tensor "
                               "'%s'" % (self.id, name))
            by_file.setdefault(where[name], []).append((name, buf))
        for path, items in by_file.items():
            with self.open(path) as f:
                f._safetensors_read(items)

    def __repr__(self):
        return "<wstore.Checkpoint %r%s>" % (self.id,
                                             " closed" if self.closed else "")


class File(_Handle):
    """One file of an open checkpoint (``Checkpoint.open``)."""

    _free = staticmethod(lib.wstore_file_free)

    def __init__(self, ck, path):
        self._h = None
        h = c_void_p()
        _check(lib.wstore_file_open(byref(h), ck._handle(), _b(path)))
        super().__init__(h)
        self.checkpoint = ck    # must outlive the file
        self.path = _dec(lib.wstore_file_path(h))
        self.size = lib.wstore_file_size(h)

    def _pread_addr(self, addr, n, offset):
        got = c_size_t()
        _check(lib.wstore_file_pread(self._handle(), addr, n, offset,
                                     byref(got)))
        return got.value

    def pread(self, buf, offset=0):
        """Read ``len(buf)`` bytes (its size in bytes) at ``offset`` into the
        writable buffer ``buf``: bytearray, memoryview (slices too), numpy
        array, array.array, mmap, or a contiguous CPU torch tensor.  Returns
        the number of bytes read: all of them, or fewer only at the end of
        the file (0 at or past it).  The GIL is released while reading, so
        several threads may read at once."""
        if offset < 0:
            raise ValueError("negative offset")
        addr, n, keep = _c_buffer(buf)
        if n == 0:
            return 0
        got = self._pread_addr(addr, n, offset)
        del keep
        return got

    def read(self, n=None, offset=0):
        """Up to ``n`` bytes at ``offset`` (default: to the end) as bytes."""
        if n is None:
            n = max(self.size - offset, 0)
        buf = ctypes.create_string_buffer(n) if n else None
        if not n:
            return b""
        got = self._pread_addr(ctypes.addressof(buf), n, offset)
        return buf.raw[:got]

    def summary(self):
        """Per-file summary: format ("safetensors", "gguf", "other"),
        tensor_count, param_count, kv_count, gguf_version, dtypes (list)."""
        s = _native.FileSummaryInfo()
        _check(_fn("wstore_file_summary_sized")(byref(s), ctypes.sizeof(s),
                                                self._handle()))
        d = _dec(s.dtypes)
        return {"format": _dec(s.format), "tensor_count": s.tensor_count,
                "param_count": s.param_count, "kv_count": s.kv_count,
                "gguf_version": s.gguf_version,
                "dtypes": d.split(",") if d else []}

    def _safetensors(self):
        st = c_void_p()
        _check(lib.wstore_safetensors_open(byref(st), self._handle()))
        return st

    def tensors(self):
        """The tensors of this safetensors file (header read and validated
        by the library): a list of :class:`Tensor` in file order.  Corrupt
        if the header is malformed."""
        st = self._safetensors()
        try:
            out = []
            ti = _native.TensorInfo()
            for i in range(lib.wstore_safetensors_count(st)):
                _check(lib.wstore_safetensors_tensor_sized(
                    byref(ti), ctypes.sizeof(ti), st, i))
                out.append(Tensor(self.path, _dec(ti.name), _dec(ti.dtype),
                                  tuple(ti.shape[k] for k in range(ti.ndim)),
                                  ti.offset, ti.nbytes))
            return out
        finally:
            lib.wstore_safetensors_free(st)

    def metadata(self, key):
        """Value of a safetensors ``__metadata__`` key, or None."""
        st = self._safetensors()
        try:
            return _dec(lib.wstore_safetensors_metadata(st, _b(key)))
        finally:
            lib.wstore_safetensors_free(st)

    def _safetensors_read(self, items):
        n = len(items)
        names = (c_char_p * n)(*[_b(k) for k, _ in items])
        bufs = (c_void_p * n)()
        caps = (c_uint64 * n)()
        keep = []
        for i, (_, buf) in enumerate(items):
            addr, size, k = _c_buffer(buf)
            keep.append(k)
            bufs[i] = addr
            caps[i] = size
        st = self._safetensors()
        try:
            _check(lib.wstore_safetensors_read(
                st, ctypes.cast(names, ctypes.POINTER(c_char_p)), bufs, caps,
                n))
        finally:
            lib.wstore_safetensors_free(st)
        del keep

    def __repr__(self):
        return "<wstore.File %r size=%d>" % (self.path, self.size)
