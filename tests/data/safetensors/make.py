#!/usr/bin/env python3
"""Generate the data-driven safetensors cases (run from anywhere).

good/*.safetensors must parse; bad/*.safetensors must be refused with an
error containing the text of the sibling .err file.  The files are
committed; rerun this script after changing a case.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def raw(header_bytes, data=b"", n=None):
    """File bytes: u64 LE length (n, default the real one), header, data."""
    if n is None:
        n = len(header_bytes)
    return struct.pack("<Q", n) + header_bytes + data


def st(tensors, data, meta=None, pad=0, sort=False):
    h = dict(tensors)
    if meta is not None:
        h["__metadata__"] = meta
    text = json.dumps(h, separators=(",", ":"), sort_keys=sort).encode()
    return raw(text + b" " * pad, data)


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


GOOD = {
    "basic": st({"w": t("F32", [2, 3], 0, 24), "b": t("BF16", [3], 24, 30)},
                bytes(range(30))),
    # padded to a multiple of 8 with spaces, as the reference writer does
    "padded": st({"x": t("F16", [4], 0, 8)}, b"\1" * 8, pad=5),
    "metadata": st({"x": t("U8", [3], 0, 3)}, b"abc",
                   meta={"format": "pt", "note": "h\u00e9llo"}),
    "empty": raw(b"{}"),
    "empty_padded": raw(b"{}      "),
    "metadata_only": st({}, b"", meta={"format": "pt"}),
    "scalar": st({"s": t("F64", [], 0, 8)}, b"\0" * 8),
    "zero_size": st({"z": t("F32", [0, 5], 0, 0), "a": t("I8", [2], 0, 2)},
                    b"\7\7"),
    "f4_even": st({"q": t("F4", [2, 3], 0, 3)}, b"\0" * 3),
    "f6": st({"q": t("F6_E2M3", [4], 0, 3), "r": t("F6_E3M2", [8], 3, 9)},
             b"\0" * 9),
    # tensors listed out of offset order in the JSON
    "unordered": st({"b": t("I32", [1], 4, 8), "a": t("U32", [1], 0, 4)},
                    b"\0" * 8),
}


def all_dtypes():
    bits = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8,
            "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
            "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
            "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
            "C64": 64, "F64": 64, "I64": 64, "U64": 64}
    tensors, off = {}, 0
    for name, b in bits.items():
        n = (8 * 4) * b // 8  # 32 elements: a whole number of bytes
        tensors["t_" + name] = t(name, [4, 8], off, off + n)
        off += n
    return st(tensors, b"\x55" * off)


GOOD["all_dtypes"] = all_dtypes()

BAD = {
    "short_prefix": (b"\1\0\0", "shorter than the 8-byte header length"),
    "n_too_big": (raw(b"{}", n=100000001), "exceeds the limit of 100000000"),
    "n_gt_file": (raw(b'{"a":', n=64), "exceeds the file size"),
    "truncated_header": (raw(b'{"x":{"dtype":"U8","shape":[1],'
                             b'"data_offsets":[0,1]}}')[:20],
                         "exceeds the file size"),
    "not_json": (raw(b"hello world"), "header is not a JSON object"),
    "invalid_json": (raw(b'{"x": [1, 2'), "header is not valid JSON"),
    "array_header": (raw(b"[1,2,3]"), "header is not a JSON object"),
    "duplicate_key": (raw(b'{"a":{"dtype":"U8","shape":[1],'
                          b'"data_offsets":[0,1]},"a":{"dtype":"U8",'
                          b'"shape":[1],"data_offsets":[1,2]}}', b"xy"),
                      "duplicate"),
    "bad_dtype": (st({"x": t("F12", [1], 0, 2)}, b"\0\0"),
                  "unknown dtype 'F12'"),
    "missing_dtype": (st({"x": {"shape": [1], "data_offsets": [0, 1]}},
                         b"\0"), "missing dtype"),
    "shape_mismatch": (st({"x": t("F32", [2, 3], 0, 20)}, b"\0" * 20),
                       "span 20 bytes but shape and dtype F32 need 24"),
    "negative_shape": (st({"x": t("U8", [-1], 0, 0)}, b""),
                       "shape entry 0 is not a non-negative integer"),
    "float_shape": (st({"x": t("U8", [1.0], 0, 1)}, b"\0"),
                    "shape entry 0 is not a non-negative integer"),
    "shape_overflow": (st({"x": t("U8", [2**62, 2**62], 0, 0)}, b""),
                       "shape product overflows"),
    "gap": (st({"a": t("U8", [2], 0, 2), "b": t("U8", [2], 3, 5)},
               b"\0" * 5), "gap in tensor data"),
    "gap_at_start": (st({"a": t("U8", [2], 1, 3)}, b"\0" * 3),
                     "gap in tensor data"),
    "overlap": (st({"a": t("U8", [4], 0, 4), "b": t("U8", [2], 2, 4)},
                   b"\0" * 4), "overlaps the previous tensor"),
    "end_lt_size": (st({"a": t("U8", [2], 0, 2)}, b"\0" * 3),
                    "tensor data ends at"),
    "end_gt_size": (st({"a": t("U8", [4], 0, 4)}, b"\0" * 2),
                    "tensor data ends at"),
    "f4_odd": (st({"q": t("F4", [3], 0, 2)}, b"\0" * 2),
               "are not a whole number of bytes"),
    "offsets_reversed": (st({"a": t("U8", [0], 4, 2)}, b""),
                         "before begin"),
    "offsets_three": (st({"a": {"dtype": "U8", "shape": [1],
                                "data_offsets": [0, 1, 2]}}, b"\0"),
                      "data_offsets is not [begin, end]"),
    "offset_huge": (raw(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":'
                        b'[0,99999999999999999999]}}'),
                    "header is not valid JSON"),
    "entry_not_object": (raw(b'{"a":[1,2]}'), "entry is not an object"),
    "metadata_not_string": (st({}, b"", meta={"a": 1}),
                            "__metadata__ value of 'a' is not a string"),
    "metadata_not_object": (raw(b'{"__metadata__":[1]}'),
                            "__metadata__ is not an object"),
    "nul_in_header": (raw(b'{"a\0b":1}'), "header is not valid JSON"),
    "bad_utf8": (raw(b'{"\xff":1}'), "header is not valid JSON"),
    "shape_not_array": (st({"x": {"dtype": "U8", "shape": 3,
                                  "data_offsets": [0, 3]}}, b"\0" * 3),
                        "shape is not an array"),
}


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    for sub in ("good", "bad"):
        d = os.path.join(HERE, sub)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
    for name, data in GOOD.items():
        write(os.path.join(HERE, "good", name + ".safetensors"), data)
    for name, (data, err) in BAD.items():
        write(os.path.join(HERE, "bad", name + ".safetensors"), data)
        write(os.path.join(HERE, "bad", name + ".err"), err.encode() + b"\n")


if __name__ == "__main__":
    main()
