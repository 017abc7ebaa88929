"""compile, run and explain: every way in, and what comes back."""

import datetime
import decimal
import pathlib
import threading
import time

import pandas as pd
import pyarrow as pa
import pytest

import fox

REACH = """
edge(x, y) -> int32(x), int32(y).
.input edge.
reach(x, y) <- edge(x, y).
reach(x, z) <- reach(x, y), edge(y, z).
.output reach.
"""

# One input of every type, copied to one output of every type.
ALL_TYPES = """
t(i, l, f, s, d, b, m) -> int32(i), int64(l), float64(f), string(s), date(d), bool(b), decimal(m).
.input t.
u(i, l, f, s, d, b, m) -> int32(i), int64(l), float64(f), string(s), date(d), bool(b), decimal(m).
u(i, l, f, s, d, b, m) <- t(i, l, f, s, d, b, m).
.output u.
"""

EDGES = [(1, 2), (2, 3), (3, 4)]
REACHED = {(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)}


def rows(table: pa.Table) -> set:
    return set(zip(*(c.to_pylist() for c in table.columns)))


def test_compile_text_and_run_a_pyarrow_table():
    prog = fox.compile(REACH)
    assert prog.inputs == {"edge": [("x", "int32"), ("y", "int32")]}
    out = prog.run(inputs={"edge": pa.table({"a": [1, 2, 3], "b": [2, 3, 4]})}, backend="cpu")
    assert list(out) == ["reach"]
    t = out["reach"]
    assert isinstance(t, pa.Table)
    assert t.schema.names == ["x", "y"]
    assert t.schema.types == [pa.int32(), pa.int32()]
    assert rows(t) == REACHED


def test_run_takes_a_dataframe_a_list_of_tuples_and_a_record_batch():
    prog = fox.compile(REACH)
    df = pd.DataFrame({"src": [1, 2, 3], "dst": [2, 3, 4]})
    assert rows(prog.run(inputs={"edge": df}, backend="cpu")["reach"]) == REACHED
    assert rows(prog.run(inputs={"edge": EDGES}, backend="cpu")["reach"]) == REACHED
    batch = pa.record_batch({"a": pa.array([1, 2, 3], pa.int32()), "b": pa.array([2, 3, 4], pa.int32())})
    assert rows(prog.run(inputs={"edge": batch})["reach"]) == REACHED


def test_auto_backend_and_empty_inputs():
    prog = fox.compile(REACH)
    out = prog.run(inputs={"edge": []})
    assert out["reach"].num_rows == 0
    assert out["reach"].schema.types == [pa.int32(), pa.int32()]


def test_compile_a_path_str_or_pathlike(tmp_path: pathlib.Path):
    p = tmp_path / "reach.logic"
    p.write_text(REACH)
    for source in (str(p), p):
        assert rows(fox.compile(source).run(inputs={"edge": EDGES}, backend="cpu")["reach"]) == REACHED
    with pytest.raises(FileNotFoundError):
        fox.compile(str(tmp_path / "missing.logic"))
    with pytest.raises(TypeError):
        fox.compile(42)


def test_souffle_program_by_its_dl_path(tmp_path: pathlib.Path):
    p = tmp_path / "reach.dl"
    p.write_text(
        ".decl edge(x: number, y: number)\n.input edge\n"
        ".decl reach(x: number, y: number)\n.output reach\n"
        "reach(x, y) :- edge(x, y).\nreach(x, z) :- reach(x, y), edge(y, z).\n"
    )
    prog = fox.compile(p)
    assert list(prog.inputs) == ["edge"]
    assert rows(prog.run(inputs={"edge": EDGES}, backend="cpu")["reach"]) == REACHED
    # The same text compiles as Soufflé when told so.
    prog = fox.compile(p.read_text(), dialect="souffle")
    assert rows(prog.run(inputs={"edge": EDGES}, backend="cpu")["reach"]) == REACHED
    with pytest.raises(ValueError, match="not a dialect"):
        fox.compile(REACH, dialect="sql")


def test_every_type_round_trips_from_pyarrow():
    prog = fox.compile(ALL_TYPES)
    d = datetime.date(1998, 9, 2)
    t = pa.table(
        {
            "i": pa.array([1, -2], pa.int32()),
            "l": pa.array([2**40, -(2**40)], pa.int64()),
            "f": pa.array([1.5, -0.25]),
            "s": pa.array(["héllo", ""]),
            "d": pa.array([d, datetime.date(1970, 1, 1)], pa.date32()),
            "b": pa.array([True, False]),
            "m": pa.array([decimal.Decimal("12.34"), decimal.Decimal("-0.05")], pa.decimal128(15, 2)),
        }
    )
    u = prog.run(inputs={"t": t}, backend="cpu")["u"]
    assert u.schema.types == [
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.date32(),
        pa.bool_(),
        pa.decimal128(38, 2),
    ]
    assert sorted(u.to_pylist(), key=lambda r: r["i"]) == sorted(
        [dict(zip(u.schema.names, r.values())) for r in t.to_pylist()], key=lambda r: r["i"]
    )


def test_every_type_round_trips_from_pandas_and_tuples():
    prog = fox.compile(ALL_TYPES)
    d = datetime.date(2024, 2, 29)
    want = [(7, 2**33, 0.5, "a", d, True, decimal.Decimal("1.10"))]
    out = prog.run(inputs={"t": want}, backend="cpu")["u"]
    assert rows(out) == set(want)
    # pandas keeps dates as timestamps (datetime64), strings as objects or Arrow strings,
    # and categories as dictionaries: all read into the declared types.
    df = pd.DataFrame(
        {
            "i": [7],
            "l": [2**33],
            "f": [0.5],
            "s": pd.Categorical(["a"]),
            "d": pd.to_datetime([d]),
            "b": [True],
            "m": [decimal.Decimal("1.1")],
        }
    )
    assert rows(prog.run(inputs={"t": df}, backend="cpu")["u"]) == set(want)


def test_dictionary_strings_round_trip():
    prog = fox.compile(
        "p(s, n) -> string(s), int32(n).\n.input p.\nq(s, c) -> string(s), int64(c).\n"
        "q(s, c) <- agg<<c = count()>> p(s, _).\n.output q.\n"
    )
    words = ["b", "a", "b", "c", "b"]
    table = pa.table({"s": pa.array(words).dictionary_encode(), "n": pa.array(range(5), pa.int32())})
    out = prog.run(inputs={"p": table}, backend="cpu")["q"]
    assert dict(rows(out)) == {"a": 1, "b": 3, "c": 1}


def test_inputs_not_given_are_read_from_data(tmp_path: pathlib.Path):
    (tmp_path / "edge.csv").write_text("1,2\n2,3\n3,4\n")
    prog = fox.compile(REACH)
    assert rows(prog.run(data=tmp_path, backend="cpu")["reach"]) == REACHED
    # A table given takes the place of the file.
    assert rows(prog.run(inputs={"edge": [(5, 6)]}, data=tmp_path, backend="cpu")["reach"]) == {(5, 6)}


def test_memory_limit():
    prog = fox.compile(REACH)
    for limit in ("512M", 1 << 30):
        assert rows(prog.run(inputs={"edge": EDGES}, backend="cpu", memory_limit=limit)["reach"]) == REACHED
    with pytest.raises(ValueError, match="memory_limit"):
        prog.run(inputs={"edge": EDGES}, memory_limit="lots")
    with pytest.raises(ValueError, match="memory_limit"):
        prog.run(inputs={"edge": EDGES}, memory_limit=-1)
    with pytest.raises(TypeError, match="memory_limit"):
        prog.run(inputs={"edge": EDGES}, memory_limit=1.5)


def test_explain_returns_the_plan():
    prog = fox.compile(REACH)
    text = prog.explain()
    assert text.startswith("physical plan")
    assert "scan edge" in text
    assert "kernel" in text.lower()
    # Planned with the statistics of the inputs given.
    with_stats = prog.explain(inputs={"edge": EDGES})
    assert "scan · rows ~1.0M" in text
    assert "scan edge" in with_stats and "· rows ~3 ·" in with_stats, with_stats


def test_compile_error_carries_the_location_line_and_caret(tmp_path: pathlib.Path):
    with pytest.raises(fox.CompileError) as e:
        fox.compile("p(x) -> int32(x).\nq(x) <- p(x), r(x).\n")
    msg = str(e.value)
    assert "<string>:2:15" in msg, msg
    assert "q(x) <- p(x), r(x)." in msg
    assert "^" in msg
    assert "1 error" in msg
    p = tmp_path / "bad.logic"
    p.write_text("p(x) -> int32(x).\n\nq(x) <- p(x), r(x).\n")
    with pytest.raises(fox.CompileError, match=r"bad\.logic:3:15"):
        fox.compile(p)
    assert issubclass(fox.CompileError, Exception)


def test_warnings_are_python_warnings():
    with pytest.warns(UserWarning, match="variable `y` occurs only once") as w:
        fox.compile("p(x) -> int32(x).\n.input p.\nq(x) -> int32(x).\nq(x) <- p(x), p(y).\n.output q.\n")
    # Attributed to the caller's line, not to the package.
    assert w[0].filename == __file__


def test_outputs_move_to_pyarrow_without_copies():
    prog = fox.compile("n(x) -> int32(x).\n.input n.\nm(x, y) -> int32(x), int64(y).\nm(x, x + 1) <- n(x).\n.output m.\n")
    n = 200_000
    table = pa.table({"x": pa.array(range(n), pa.int32())})
    before = pa.total_allocated_bytes()
    out = prog.run(inputs={"n": table}, backend="cpu")["m"]
    # The 2.4 MB of results live in Fox's buffers, which pyarrow took over: pyarrow's
    # own pool allocated nothing for them.
    assert out.num_rows == n
    assert pa.total_allocated_bytes() - before < 64 * 1024
    assert out.column("y")[n - 1].as_py() == n


def test_the_gil_is_released_while_a_plan_runs():
    prog = fox.compile(REACH)

    def run_beside_a_ticking_thread(n: int):
        """Runs the closure of a chain of n edges while another thread ticks: the ticks
        made during the run, and its length."""
        chain = pa.table({"x": pa.array(range(n), pa.int32()), "y": pa.array(range(1, n + 1), pa.int32())})
        ticks = []
        running = threading.Event()
        done = threading.Event()

        def tick():
            running.set()
            while not done.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.001)

        t = threading.Thread(target=tick)
        t.start()
        running.wait()
        start = time.perf_counter()
        out = prog.run(inputs={"edge": chain}, backend="cpu")
        end = time.perf_counter()
        done.set()
        t.join()
        assert out["reach"].num_rows == n * (n + 1) // 2
        return [x for x in ticks if start < x < end], end - start

    # A chain long enough for the run to last a while, whatever the build's speed.
    n = 600
    during, took = run_beside_a_ticking_thread(n)
    while took < 0.1 and n < 5000:
        n *= 2
        during, took = run_beside_a_ticking_thread(n)
    assert took >= 0.1, "the run is too short to tell"
    # The thread kept running while the program ran (it could not, were the GIL held).
    assert len(during) >= 10, (len(during), took)


def test_souffle_records_and_adt_values_read_from_input_files():
    from conftest import REPO

    prog = fox.compile(REPO / "tests/souffle/record_input.dl")
    out = prog.run(backend="cpu", data=REPO / "tests/souffle/record_input/facts")
    assert rows(out["pair_b"]) == {(1, "alpha"), (2, "two words"), (3, 'quo,ted "x"'), (4, "")}
    assert rows(out["named"]) == {(3, "hello world"), (5, "a)b")}
    assert rows(out["greens"]) == {("grass",), ("leaf",)}
