#!/usr/bin/env python3
"""An independent count of the k-cliques of an undirected graph, with networkx.

Usage:
    python3 queries/count_cliques.py EDGES [--k 3|4|5]

EDGES is an edge list as `foxrun --graph PATH --symmetrize` reads it: two integer
vertex ids a line, separated by whitespace, a comma or a tab; further columns ignored;
blank lines and lines starting with `#` or `%` skipped. The graph is taken as
undirected, without self-loops or duplicate edges. To check Fox on a generated graph,
write its edges with `foxrun` and compare the counts:

    cat > /tmp/edges.logic <<'X'
    edge(x, y) -> int32(x), int32(y).
    .input edge.
    e(x, y) <- edge(x, y), x < y.
    .output e.
    X
    foxrun /tmp/edges.logic --graph rmat:10 --out /tmp/g      # writes /tmp/g/e.csv
    python3 queries/count_cliques.py /tmp/g/e.csv --k 4
    foxrun queries/clique4_count.logic --graph rmat:10

Prints the number of k-cliques (each counted once).
"""
import argparse
import sys

import networkx as nx


def read_edges(path):
    g = nx.Graph()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            parts = s.replace(",", " ").split()
            try:
                a, b = int(parts[0]), int(parts[1])
            except (ValueError, IndexError):
                if n == 1:  # a header row (as `foxrun --out` writes)
                    continue
                sys.exit(f"{path}:{n}: not an edge: {s!r}")
            if a != b:
                g.add_edge(a, b)
    return g


def main():
    p = argparse.ArgumentParser(description="Count the k-cliques of an edge list with networkx.")
    p.add_argument("edges")
    p.add_argument("--k", type=int, default=3, choices=[3, 4, 5])
    a = p.parse_args()
    g = read_edges(a.edges)
    if a.k == 3:
        print(sum(nx.triangles(g).values()) // 3)
        return
    count = 0
    for c in nx.enumerate_all_cliques(g):
        if len(c) == a.k:
            count += 1
        elif len(c) > a.k:
            break
    print(count)


if __name__ == "__main__":
    main()
