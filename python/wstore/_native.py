"""Loading libwstore.so and declaring the C prototypes the binding uses.

Private module: everything public lives in ``wstore`` itself.  Every
function used is declared here with its argtypes and restype so that ctypes
never guesses (a guessed ``int`` return would truncate pointers).

The library is looked for, in order:
  1. ``$WSTORE_LIBRARY`` (a path to libwstore.so);
  2. ``../../build/libwstore.so`` next to this package (the repository
     layout: python/wstore/ and build/);
  3. the installed library by its soname, ``libwstore.so.0``, where the
     dynamic loader finds it (its cache: Debian's package, or ``make
     install`` followed by ldconfig; ``LD_LIBRARY_PATH``);
  4. ``libwstore.so.0`` in the library directory of the prefix this
     package was installed under (``make install PREFIX=/opt/x`` puts both
     under /opt/x/lib), for an install the loader does not know of;
  5. ``ctypes.util.find_library("wstore")``.
The soname comes before any unversioned name, so that a library of
another ABI (libwstore.so.1) is never picked up by mistake.
"""
import ctypes
import ctypes.util
import os
import sysconfig
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int,
                    c_int64, c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

__all__ = ["lib", "libc", "library_path"]


SONAME = "libwstore.so.0"


def _prefix_libdirs(here):
    """<prefix>/lib/<multiarch> and <prefix>/lib for a package installed
    in <prefix>/lib/python3.X/{site,dist}-packages/wstore."""
    lib = os.path.normpath(os.path.join(here, "..", "..", ".."))
    multiarch = sysconfig.get_config_var("MULTIARCH")
    out = [os.path.join(lib, multiarch)] if multiarch else []
    return out + [lib]


def _candidates():
    env = os.environ.get("WSTORE_LIBRARY")
    if env:
        # An explicit choice is never silently replaced by another copy.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.normpath(os.path.join(here, "..", "..", "build",
                                         "libwstore.so"))]
    out.append(SONAME)
    out += [os.path.join(d, SONAME) for d in _prefix_libdirs(here)]
    found = ctypes.util.find_library("wstore")
    if found:
        out.append(found)
    return out


def _load():
    errors = []
    for cand in _candidates():
        if os.sep in cand and not os.path.exists(cand):
            errors.append("%s: no such file" % cand)
            continue
        try:
            return ctypes.CDLL(cand), cand
        except OSError as e:
            errors.append(str(e))
    raise ImportError("wstore: cannot load libwstore.so (set WSTORE_LIBRARY "
                      "to its path): " + "; ".join(errors))


lib, library_path = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None

# ---- types ----------------------------------------------------------------

PROGRESS_FN = CFUNCTYPE(c_int, c_uint64, c_uint64, c_char_p, c_void_p)
VERIFY_FILE_FN = CFUNCTYPE(None, c_char_p, c_int, c_char_p, c_void_p)


class FileInfo(Structure):
    _fields_ = [("path", c_char_p), ("type", c_char_p), ("key", c_char_p),
                ("sha256", c_char_p), ("size", c_uint64),
                ("chunk_size", c_uint64), ("chunk_count", c_uint64)]


class TensorInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_char_p), ("ndim", c_uint32),
                ("shape", POINTER(c_int64)), ("offset", c_uint64),
                ("nbytes", c_uint64)]


class FileSummaryInfo(Structure):
    _fields_ = [("format", c_char_p), ("tensor_count", c_uint64),
                ("param_count", c_uint64), ("kv_count", c_uint64),
                ("gguf_version", c_uint32), ("dtypes", c_char * 384)]


class ImportOptions(Structure):
    _fields_ = [("version", c_uint), ("checkpoint_id", c_char_p),
                ("model_id", c_char_p), ("revision", c_char_p),
                ("source", c_char_p), ("chunk_size", c_uint64),
                ("reserved", c_uint32), ("jobs", c_uint32),
                ("progress", PROGRESS_FN), ("progress_ctx", c_void_p),
                # version 2: the eviction callback (never set here)
                ("on_evict", c_void_p), ("on_evict_ctx", c_void_p),
                # version 3
                ("reflink", c_uint32)]


class HubOptions(Structure):
    _fields_ = [("version", c_uint), ("endpoint", c_char_p),
                ("repo", c_char_p), ("revision", c_char_p),
                ("token", c_char_p), ("include", POINTER(c_char_p)),
                ("exclude", POINTER(c_char_p)), ("connections", c_uint32),
                ("retries", c_uint32), ("stall_timeout_ms", c_uint32),
                ("reserved", c_uint32),
                # version 2: the limits (docs/trust.md) and the CA file
                ("max_files", c_uint32), ("max_pages", c_uint32),
                ("max_file_size", c_uint64), ("max_total_size", c_uint64),
                ("max_json_size", c_uint64), ("max_redirects", c_uint32),
                ("min_rate", c_uint32), ("transfer_timeout_ms", c_uint32),
                ("reserved2", c_uint32), ("tls_ca_file", c_char_p)]


HUB_LIMITS = ("max_files", "max_pages", "max_file_size", "max_total_size",
              "max_json_size", "max_redirects", "min_rate",
              "transfer_timeout_ms")


# ImportOptions.reflink
REFLINK = {"auto": 0, "always": 1, "never": 2}


class VerifyOptions(Structure):
    _fields_ = [("version", c_uint), ("jobs", c_uint32),
                ("progress", PROGRESS_FN), ("progress_ctx", c_void_p),
                ("on_file", VERIFY_FILE_FN), ("on_file_ctx", c_void_p)]


class PullOptions(Structure):
    _fields_ = [("version", c_uint), ("include", POINTER(c_char_p)),
                ("exclude", POINTER(c_char_p)), ("jobs", c_uint32),
                ("no_verify", c_int), ("force", c_int),
                ("progress", PROGRESS_FN), ("progress_ctx", c_void_p)]


class ExportOptions(Structure):
    _fields_ = [("version", c_uint), ("progress", PROGRESS_FN),
                ("progress_ctx", c_void_p)]


class DeleteOptions(Structure):
    _fields_ = [("version", c_uint), ("force", c_int), ("wait_ms", c_int64),
                ("progress", PROGRESS_FN), ("progress_ctx", c_void_p)]


# The versions of the option structs as defined here: the library accepts
# every version it ever defined (ImportOptions is import's version 3; its
# eviction callback is left NULL).
DELETE_OPTIONS_VERSION = 1
IMPORT_OPTIONS_VERSION = 3
HUB_OPTIONS_VERSION = 2
VERIFY_OPTIONS_VERSION = 1
PULL_OPTIONS_VERSION = 1
EXPORT_OPTIONS_VERSION = 1

# ---- prototypes -------------------------------------------------------------

_P = c_void_p  # opaque handle
_PP = POINTER(c_void_p)
_STRV = POINTER(c_char_p)

_PROTOS = {
    # errors and helpers
    "wstore_strerror": (c_char_p, [c_int]),
    "wstore_last_error": (c_char_p, []),
    "wstore_parse_size": (c_int, [POINTER(c_uint64), c_char_p]),
    "wstore_validate_checkpoint_id": (c_int, [c_char_p]),
    # configuration
    "wstore_config_new": (c_int, [_PP]),
    "wstore_config_load": (c_int, [_PP, c_char_p]),
    "wstore_config_set": (c_int, [_P, c_char_p, c_char_p]),
    "wstore_config_get": (c_char_p, [_P, c_char_p]),
    "wstore_config_load_env": (c_int, [_P]),
    "wstore_config_default_path": (c_void_p, []),  # malloc'ed, freed by us
    "wstore_config_free": (None, [_P]),
    # store
    "wstore_open": (c_int, [_PP, _P]),
    "wstore_free": (None, [_P]),
    "wstore_backend_name": (c_char_p, [_P]),
    # manifests
    "wstore_manifest_read": (c_int, [_PP, _P, c_char_p]),
    "wstore_manifest_serialize": (c_int, [POINTER(c_void_p),
                                          POINTER(c_size_t), _P]),
    "wstore_manifest_free": (None, [_P]),
    "wstore_manifest_file_count": (c_size_t, [_P]),
    # the sized forms: the struct's size as defined here goes with it, so
    # that a later library with larger structs fills only what fits
    "wstore_manifest_file_sized": (c_int, [POINTER(FileInfo), c_size_t, _P,
                                           c_size_t]),
    "wstore_manifest_checkpoint_id": (c_char_p, [_P]),
    "wstore_manifest_model_id": (c_char_p, [_P]),
    "wstore_manifest_total_size": (c_uint64, [_P]),
    # import / list / delete / verify / pull
    "wstore_import": (c_int, [_P, POINTER(ImportOptions)]),
    "wstore_import_from": (c_int, [_P, POINTER(ImportOptions), _P]),
    "wstore_import_hub": (c_int, [_PP, _P, POINTER(ImportOptions),
                                  POINTER(HubOptions)]),
    "wstore_source_new": (c_int, [POINTER(_P), c_char_p, c_char_p]),
    "wstore_source_free": (None, [_P]),
    "wstore_source_include": (c_int, [_P, c_char_p]),
    "wstore_source_exclude": (c_int, [_P, c_char_p]),
    "wstore_source_set_force": (None, [_P, c_int]),
    "wstore_list": (c_int, [POINTER(_STRV), POINTER(c_size_t), _P]),
    "wstore_list_model": (c_int, [POINTER(_STRV), POINTER(c_size_t), _P,
                                  c_char_p]),
    "wstore_strings_free": (None, [_STRV]),
    "wstore_checkpoint_id_derive": (c_int, [_PP, _P, c_char_p, c_char_p]),
    "wstore_delete": (c_int, [_P, c_char_p]),
    "wstore_delete_ext": (c_int, [_P, c_char_p, POINTER(DeleteOptions)]),
    "wstore_pin": (c_int, [_P, c_char_p, c_int]),
    "wstore_verify": (c_int, [_P, c_char_p, POINTER(VerifyOptions)]),
    "wstore_pull": (c_int, [_P, c_char_p, c_char_p, POINTER(PullOptions)]),
    # bundles and copies between stores
    "wstore_export": (c_int, [_P, c_char_p, c_int, c_char_p,
                              POINTER(ExportOptions)]),
    "wstore_import_bundle": (c_int, [_PP, _P, c_int,
                                     POINTER(ImportOptions)]),
    "wstore_copy": (c_int, [_P, _P, c_char_p, POINTER(ImportOptions)]),
    # read API
    "wstore_checkpoint_open": (c_int, [_PP, _P, c_char_p]),
    "wstore_checkpoint_manifest": (c_void_p, [_P]),
    "wstore_checkpoint_free": (None, [_P]),
    "wstore_file_open": (c_int, [_PP, _P, c_char_p]),
    "wstore_file_size": (c_uint64, [_P]),
    "wstore_file_path": (c_char_p, [_P]),
    "wstore_file_pread": (c_int, [_P, c_void_p, c_size_t, c_uint64,
                                  POINTER(c_size_t)]),
    "wstore_file_free": (None, [_P]),
    "wstore_file_summary_sized": (c_int, [POINTER(FileSummaryInfo),
                                          c_size_t, _P]),
    "wstore_check_structure": (c_int, [_P, VERIFY_FILE_FN, c_void_p]),
    # safetensors
    "wstore_safetensors_open": (c_int, [_PP, _P]),
    "wstore_safetensors_header_size": (c_uint64, [_P]),
    "wstore_safetensors_count": (c_size_t, [_P]),
    "wstore_safetensors_tensor_sized": (c_int, [POINTER(TensorInfo),
                                                c_size_t, _P, c_size_t]),
    "wstore_safetensors_find": (c_int64, [_P, c_char_p]),
    "wstore_safetensors_metadata": (c_char_p, [_P, c_char_p]),
    "wstore_safetensors_read": (c_int, [_P, _STRV, POINTER(c_void_p),
                                        POINTER(c_uint64), c_size_t]),
    "wstore_safetensors_free": (None, [_P]),
}

missing = []
for _name, (_res, _args) in _PROTOS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        # Reported when used (see wstore._fn), so that an older library
        # still serves the functions it has.
        missing.append(_name)
        continue
    _fn.restype = _res
    _fn.argtypes = _args
