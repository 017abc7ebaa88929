"""Every bad input is a clear Python exception naming what is wrong, never a crash."""

import datetime

import pandas as pd
import pyarrow as pa
import pytest

import fox

PROG = """
edge(x, y) -> int32(x), int32(y).
.input edge.
reach(x, y) <- edge(x, y).
.output reach.
"""

KEYED = """
person(id, name) -> int32(id), string(name).
.input person key (id).
.output person.
"""


@pytest.fixture(scope="module")
def prog():
    return fox.compile(PROG)


def test_wrong_column_count_of_a_pyarrow_table(prog):
    table = pa.table({"a": [1], "b": [2], "c": [3]})
    with pytest.raises(fox.RunError) as e:
        prog.run(inputs={"edge": table}, backend="cpu")
    assert str(e.value) == (
        "`inputs['edge']`: the table has 3 columns (`a`, `b`, `c`), but `edge` has 2 (`x`, `y`); "
        "the table's columns are matched by position"
    )


def test_wrong_column_count_of_a_dataframe(prog):
    with pytest.raises(fox.RunError, match=r"the table has 1 column \(`a`\), but `edge` has 2"):
        prog.run(inputs={"edge": pd.DataFrame({"a": [1, 2]})}, backend="cpu")


def test_wrong_column_count_of_a_row(prog):
    with pytest.raises(fox.RunError) as e:
        prog.run(inputs={"edge": [(1, 2), (3, 4, 5)]}, backend="cpu")
    assert str(e.value) == (
        "inputs['edge']: row 2 has 3 values, but `edge` has 2 columns (`x`, `y`); values are matched by position"
    )
    with pytest.raises(fox.RunError, match="row 1 is a int, not a tuple of 2 values"):
        prog.run(inputs={"edge": [1, 2]}, backend="cpu")


def test_a_type_that_does_not_fit(prog):
    table = pa.table({"x": ["a"], "y": [1]})
    with pytest.raises(fox.RunError) as e:
        prog.run(inputs={"edge": table}, backend="cpu")
    assert str(e.value) == (
        "`inputs['edge']`: column 1 (`x` in the table, `x` of `edge`) has the Arrow type Utf8, "
        "which does not fit the declared type int32"
    )
    with pytest.raises(fox.RunError, match=r"column 2 \(`y` in the table, `y` of `edge`\) has the Arrow type Float64"):
        prog.run(inputs={"edge": [(1, 2.5)]}, backend="cpu")
    with pytest.raises(fox.RunError, match=r"column 1 \(`x`, int32\)"):
        prog.run(inputs={"edge": [(1, 2), ("a", 3)]}, backend="cpu")


def test_a_value_out_of_range_names_its_row(prog):
    with pytest.raises(fox.RunError) as e:
        prog.run(inputs={"edge": pd.DataFrame({"x": [1, 3_000_000_000], "y": [0, 0]})}, backend="cpu")
    assert str(e.value) == "`inputs['edge']`: row 2: column 1 (`x`, int32): 3000000000 is out of the range of int32"


def test_nulls_are_refused(prog):
    with pytest.raises(fox.RunError, match=r"row 2: column 2 \(`y`, int32\): a null; Fox has no nulls"):
        prog.run(inputs={"edge": [(1, 2), (3, None)]}, backend="cpu")
    with pytest.raises(fox.RunError, match="a null"):
        prog.run(inputs={"edge": pd.DataFrame({"x": [1.0, None], "y": [1, 2]}).astype("Int32")}, backend="cpu")


def test_a_date_with_a_time_of_day_is_refused():
    prog = fox.compile("d(x) -> date(x).\n.input d.\n.output d.\n")
    ok = prog.run(inputs={"d": pd.DataFrame({"x": pd.to_datetime(["2024-01-02"])})}, backend="cpu")["d"]
    assert ok.column(0).to_pylist() == [datetime.date(2024, 1, 2)]
    with pytest.raises(fox.RunError, match="is not a midnight; a date holds no time of day"):
        prog.run(inputs={"d": pd.DataFrame({"x": pd.to_datetime(["2024-01-02 12:00"])})}, backend="cpu")


def test_a_repeated_key_is_refused():
    prog = fox.compile(KEYED)
    with pytest.raises(fox.RunError, match=r"inputs\['person'\].*rows 1 and 2 have the same key \(id\)"):
        prog.run(inputs={"person": [(1, "a"), (1, "b")]}, backend="cpu")


def test_unknown_relation_name(prog):
    with pytest.raises(ValueError) as e:
        prog.run(inputs={"edges": [(1, 2)]}, backend="cpu")
    assert str(e.value) == "inputs: `edges` is not an input relation of the program; its input relations are `edge`"
    # An output is no input either.
    with pytest.raises(ValueError, match="`reach` is not an input relation"):
        prog.run(inputs={"reach": [(1, 2)]}, backend="cpu")
    with pytest.raises(TypeError, match="not a relation name"):
        prog.run(inputs={1: [(1, 2)]}, backend="cpu")


def test_not_a_table(prog):
    with pytest.raises(TypeError, match=r"inputs\['edge'\]: a dict is not a table"):
        prog.run(inputs={"edge": {"x": [1]}}, backend="cpu")
    with pytest.raises(TypeError, match="inputs must be a dict"):
        prog.run(inputs=[("edge", [(1, 2)])], backend="cpu")


def test_a_missing_input_file_is_a_run_error(prog, tmp_path):
    with pytest.raises(fox.RunError, match="edge.csv"):
        prog.run(data=tmp_path, backend="cpu")


def test_unknown_backend(prog):
    with pytest.raises(ValueError, match='backend="tpu" is not a backend'):
        prog.run(inputs={"edge": [(1, 2)]}, backend="tpu")


def test_gpu_backend_without_a_gpu_is_a_clear_error(prog):
    try:
        out = prog.run(inputs={"edge": [(1, 2)]}, backend="gpu")
    except fox.RunError as e:
        assert str(e).startswith('no usable GPU for backend="gpu": '), str(e)
        assert len(str(e)) > len('no usable GPU for backend="gpu": ')
    else:
        # A machine with a GPU runs it there.
        assert out["reach"].num_rows == 1


def test_compile_errors_are_compile_errors():
    with pytest.raises(fox.CompileError, match=r"<string>:1:1"):
        fox.compile("(((")
    with pytest.raises(fox.CompileError, match="unknown predicate"):
        fox.compile("p(x) <- q(x).\n")


def test_a_table_for_an_input_no_rule_reads_is_checked_too():
    with pytest.warns(UserWarning):
        prog = fox.compile(
            "p(x) -> int32(x).\n.input p.\nq(x, y) -> int32(x), string(y).\n.input q.\n"
            "r(x) -> int32(x).\nr(x) <- p(x).\n.output r.\n"
        )
    assert set(prog.inputs) == {"p", "q"}
    assert prog.run(inputs={"p": [1], "q": [(1, "a")]}, backend="cpu")["r"].num_rows == 1
    with pytest.raises(fox.RunError, match=r"`inputs\['q'\]`: the table has 1 column"):
        prog.run(inputs={"p": [1], "q": pa.table({"x": [1]})}, backend="cpu")
    with pytest.raises(fox.RunError, match=r"`inputs\['q'\]`: column 2 \(`y` in the table"):
        prog.run(inputs={"p": [1], "q": [(1, 2)]}, backend="cpu")
