#!/usr/bin/env python3
"""Writes a random directed graph G(n, m) as an edge list `src,dst` (no self-loops, no
duplicate edges), deterministic for a given seed.

    python3 bench/gnm.py N M SEED > DIR/edge.csv
"""
import random
import sys

n, m, seed = (int(a) for a in sys.argv[1:4])
if m > n * (n - 1):
    sys.exit(f"G({n}, {m}): a simple directed graph on {n} nodes has at most {n * (n - 1)} edges")
rng = random.Random(seed)
edges = set()
while len(edges) < m:
    a, b = rng.randrange(n), rng.randrange(n)
    if a != b:
        edges.add((a, b))
sys.stdout.write("".join(f"{a},{b}\n" for a, b in sorted(edges)))
