#!/usr/bin/env python3
"""plan.py - the floor's plan (bench/floor.c) from `wstore --json model
inspect ID` on stdin: one line per chunk, "KEY OFFSET LENGTH FILESIZE
PATH", tab separated, in the manifest's order."""
import json
import sys

m = json.load(sys.stdin)
for f in m["files"]:
    cs, size = f["chunk_size"], f["size"]
    for i, key in enumerate(f["chunks"]):
        off = i * cs
        print(f"{key}\t{off}\t{min(cs, size - off)}\t{size}\t{f['path']}")
