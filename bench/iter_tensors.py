#!/usr/bin/env python3
"""Read every tensor of a checkpoint with the Python binding's
iter_tensors (one reused buffer), as an engine's weight iterator would.
usage: iter_tensors.py STORE CHECKPOINT_ID"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import wstore  # noqa: E402

store_url, ckpt = sys.argv[1], sys.argv[2]
total = 0
with wstore.Store(store_url) as s:
    ck = s.open(ckpt)
    for name, dtype, shape, view in ck.iter_tensors():
        total += view.nbytes
print(total)
