#!/usr/bin/env python3
"""Print every cycle in the call graph between the library's modules (one
module = one object file of the static library given), found from the
symbols each object defines and uses (nm); print nothing when there is
none.  A cycle is listed once, as modules joined by ' -> '."""
import re
import subprocess
import sys

archive = sys.argv[1]
out = subprocess.run(['nm', '-A', archive], capture_output=True, text=True,
                     check=True).stdout
defs, uses = {}, {}
for line in out.splitlines():
    m = re.match(r'^[^:]*:([^:]+\.o):\s*(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$', line)
    if not m:
        continue
    obj, kind, sym = m.groups()
    mod = re.sub(r'^.*?src_lib_', '', obj)[:-len('.c.o')]
    if kind == 'U':
        uses.setdefault(mod, set()).add(sym)
    elif kind in 'TDBRW':
        defs[sym] = mod
edges = {m: sorted({defs[s] for s in u if s in defs and defs[s] != m})
         for m, u in uses.items()}

index, low, stack, on, sccs = {}, {}, [], set(), []
def strong(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in edges.get(v, []):
        if w not in index:
            strong(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for v in sorted(edges):
    if v not in index:
        strong(v)
for c in sccs:
    print('modules calling each other: ' + ', '.join(c))
