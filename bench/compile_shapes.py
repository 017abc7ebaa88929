#!/usr/bin/env python3
"""Generates a Fox program of one shape and size, for bench/compile.sh.

    python3 bench/compile_shapes.py SHAPE N > q.logic

Shapes (each literal on a line of its own, as a person would write it):
  cmp      one rule with N comparisons `x > 0`
  chain    one rule with a comparison chain `0 <= x <= x <= … <= 1000000` of N comparisons
  unsafe   one rule whose head has N variables the body does not bind (N errors)
  unknown  one rule whose body reads N undeclared predicates (N errors)
  joins    one rule joining N atoms in a path `e(x0, x1), e(x1, x2), …`
  rules    N rules of one predicate, each with its own comparison
  strata   N predicates, each defined from the previous one
  facts    N facts
  singles  one rule with N variables that occur once (N warnings)
  recursive  N rules of one recursive predicate
  negations  one rule with N negated atoms of N input predicates
"""
import sys

DECL = "e(x, y) -> int32(x), int32(y).\n.input e.\n"


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    shape, n = sys.argv[1], int(sys.argv[2])
    w = sys.stdout.write
    if shape == "cmp":
        w(DECL + "p(x) <- e(x, _)")
        for _ in range(n):
            w(",\n    x > 0")
        w(".\n.output p.\n")
    elif shape == "chain":
        w(DECL + "p(x) <- e(x, _),\n    0 <= x")
        for _ in range(n - 1):
            w("\n    <= x")
        w("\n    <= 1000000.\n.output p.\n")
    elif shape == "unsafe":
        w(DECL + "p(x")
        for i in range(n):
            w(f",\n    v{i}")
        w(") <- e(x, _).\n.output p.\n")
    elif shape == "unknown":
        w(DECL + "p(x) <- e(x, _)")
        for i in range(n):
            w(f",\n    u{i}(x)")
        w(".\n.output p.\n")
    elif shape == "joins":
        w(DECL + f"p(x0, x{n}) <- e(x0, x1)")
        for i in range(1, n):
            w(f",\n    e(x{i}, x{i + 1})")
        w(".\n.output p.\n")
    elif shape == "rules":
        w(DECL)
        for i in range(n):
            w(f"p(x) <- e(x, _), x > {i}.\n")
        w(".output p.\n")
    elif shape == "strata":
        w(DECL + "p0(x) <- e(x, _).\n")
        for i in range(1, n):
            w(f"p{i}(x) <- p{i - 1}(x).\n")
        w(f".output p{n - 1}.\n")
    elif shape == "facts":
        w("e2(x, y) -> int32(x), int32(y).\n")
        for i in range(n):
            w(f"e2({i}, {i + 1}).\n")
        w(".output e2.\n")
    elif shape == "singles":
        w(DECL + "p(x) <- e(x, _)")
        for i in range(n):
            w(f",\n    e(x, y{i})")
        w(".\n.output p.\n")
    elif shape == "recursive":
        w(DECL + "r(x, y) <- e(x, y).\n")
        for i in range(n):
            w(f"r(x, z) <- r(x, y), e(y, z), z > {i}.\n")
        w(".output r.\n")
    elif shape == "negations":
        w(DECL)
        for i in range(n):
            w(f"q{i}(x) -> int32(x).\n.input q{i}.\n")
        w("p(x) <- e(x, _)")
        for i in range(n):
            w(f",\n    !q{i}(x)")
        w(".\n.output p.\n")
    else:
        sys.exit(f"unknown shape `{shape}`\n{__doc__}")


if __name__ == "__main__":
    main()
