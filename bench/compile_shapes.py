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
  cycle    one rule joining N atoms in a cycle `e(x0, x1), …, e(xN-1, x0)` (a multi-way join)
  atoms    one rule with N atoms `q0(x), q1(x), …` of N input predicates of one variable
  eqjoins  one rule joining N atoms in a path through equalities `e(x0, y0), …, y0 = x1, …`
  columns  a predicate of N columns, read from a file with a key of all its columns, and one
           rule that reads it
  order    one rule joining N atoms `f(x0, x1, x2), f(x2, x3, x4), …` in a path, with the
           comparisons `x0 < x1, x1 < x2, …` (which imply `x0 < x2`, bound by one atom)
  loops    N recursive predicates, each defined from the previous one (N loop blocks)
  typos    N declared predicates `pred0`, … and one rule that reads N misspelled ones
           `prde0`, … (N errors, each with a "did you mean")
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
    elif shape == "cycle":
        w(DECL + "p(x0) <- e(x0, x1)")
        for i in range(1, n):
            w(f",\n    e(x{i}, x{(i + 1) % n})")
        w(".\n.output p.\n")
    elif shape == "atoms":
        w(DECL)
        for i in range(n):
            w(f"q{i}(x) -> int32(x).\n.input q{i}.\n")
        w("p(x) <- e(x, _)")
        for i in range(n):
            w(f",\n    q{i}(x)")
        w(".\n.output p.\n")
    elif shape == "eqjoins":
        w(DECL + f"p(x0, y{n - 1}) <- e(x0, y0)")
        for i in range(1, n):
            w(f",\n    e(x{i}, y{i}), y{i - 1} = x{i}")
        w(".\n.output p.\n")
    elif shape == "columns":
        cols = ", ".join(f"c{i}" for i in range(n))
        w(f"wide({cols}) ->\n    " + ",\n    ".join(f"int32(c{i})" for i in range(n)) + ".\n")
        w(f".input wide key ({cols}).\n")
        w("p(x0) <- wide(x0" + ", _" * (n - 1) + ").\n.output p.\n")
    elif shape == "order":
        w("f(x, y, z) -> int32(x), int32(y), int32(z).\n.input f.\n")
        w(f"p(x0, x{2 * n}) <- f(x0, x1, x2)")
        for i in range(1, n):
            w(f",\n    f(x{2 * i}, x{2 * i + 1}, x{2 * i + 2})")
        for i in range(2 * n):
            w(f",\n    x{i} < x{i + 1}")
        w(".\n.output p.\n")
    elif shape == "loops":
        w(DECL + "r0(x, y) <- e(x, y).\nr0(x, z) <- r0(x, y), e(y, z).\n")
        for i in range(1, n):
            w(f"r{i}(x, y) <- r{i - 1}(x, y).\nr{i}(x, z) <- r{i}(x, y), r{i - 1}(y, z).\n")
        w(f".output r{n - 1}.\n")
    elif shape == "typos":
        w(DECL)
        for i in range(n):
            w(f"pred{i}(x) -> int32(x).\n.input pred{i}.\n")
        w("p(x) <- e(x, _)")
        for i in range(n):
            w(f",\n    prde{i}(x)")
        w(".\n.output p.\n")
    else:
        sys.exit(f"unknown shape `{shape}`\n{__doc__}")


if __name__ == "__main__":
    main()
