#!/usr/bin/env python3
"""Generate a small Hugging Face style checkpoint directory for demos,
tests and benchmarks: config/tokenizer files, N safetensors shards with
valid headers and random data, and model.safetensors.index.json.

usage: mkckpt.py DIR [--size BYTES] [--shards N] [--seed S]
"""
import argparse
import json
import os
import random
import struct

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


def tensor_plan(total, shards, rng):
    """Split roughly total bytes into shards of named tensors."""
    per_shard = max(total // shards, 4096)
    plan = []
    layer = 0
    for s in range(shards):
        tensors = []
        left = per_shard
        while left > 0:
            dtype = "BF16" if layer % 3 else "F32"
            cols = 256
            rows = max(1, min(left // (cols * DTYPE_BYTES[dtype]),
                              rng.randint(64, 4096)))
            tensors.append((f"model.layers.{layer}.mlp.weight", dtype,
                            [rows, cols]))
            left -= rows * cols * DTYPE_BYTES[dtype]
            layer += 1
        if s == 0:
            tensors.append(("model.norm.weight", "F32", [cols]))
        plan.append(tensors)
    return plan


def write_shard(path, tensors, rng):
    header, offset = {}, 0
    for name, dtype, shape in tensors:
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    block = rng.randbytes(1 << 20)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        left = offset
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
            block = block[7:] + block[:7]  # vary the data a little
    return offset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--size", type=int, default=8 << 20)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.dir, exist_ok=True)
    plan = tensor_plan(a.size, a.shards, rng)
    weight_map, total = {}, 0
    for i, tensors in enumerate(plan):
        name = f"model-{i + 1:05d}-of-{len(plan):05d}.safetensors"
        total += write_shard(os.path.join(a.dir, name), tensors, rng)
        for t in tensors:
            weight_map[t[0]] = name
    meta = {
        "config.json": {"architectures": ["DemoForCausalLM"],
                        "model_type": "demo", "hidden_size": 256,
                        "torch_dtype": "bfloat16"},
        "generation_config.json": {"do_sample": False},
        "tokenizer_config.json": {"model_max_length": 4096},
        "tokenizer.json": {"version": "1.0", "model": {"type": "BPE"}},
        "model.safetensors.index.json": {"metadata": {"total_size": total},
                                         "weight_map": weight_map},
    }
    for name, obj in meta.items():
        with open(os.path.join(a.dir, name), "w") as f:
            json.dump(obj, f, indent=2)


if __name__ == "__main__":
    main()
