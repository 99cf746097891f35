#!/usr/bin/env python3
"""Print every include cycle among the quoted includes of the C files under
the given folders (a header including itself through others); print nothing
when there is none.  Quoted includes resolve against the including file's
folder, then against the given folders (as -I would)."""
import os
import re
import sys

roots = [os.path.abspath(r) for r in sys.argv[1:]]
files = []
for r in roots:
    for d, _, names in os.walk(r):
        files += [os.path.join(d, n) for n in names if n.endswith(('.c', '.h'))]

def resolve(f, inc):
    for base in [os.path.dirname(f)] + roots:
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(p):
            return p
    return None

edges = {}
for f in files:
    with open(f, encoding='utf-8') as fh:
        incs = re.findall(r'^#include "([^"]+)"', fh.read(), re.M)
    edges[f] = [p for p in (resolve(f, i) for i in incs) if p]

state = {}
found = []
def visit(n, stack):
    state[n] = 1
    stack.append(n)
    for m in edges.get(n, []):
        if state.get(m) == 1:
            found.append(stack[stack.index(m):] + [m])
        elif not state.get(m):
            visit(m, stack)
    stack.pop()
    state[n] = 2

for f in sorted(edges):
    if not state.get(f):
        visit(f, [])
for c in found:
    print(' -> '.join(os.path.relpath(p) for p in c))
