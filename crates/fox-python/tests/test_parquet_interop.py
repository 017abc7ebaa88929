"""Parquet written by another tool (pyarrow) reads as the .tbl files do, and Parquet
written by foxrun reads back in pyarrow with the right types and values."""

import datetime
import decimal
import pathlib
import subprocess
import warnings

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import fox
from conftest import REPO, fox_binary

SF = "0.01"


def arrow_type(ty: str) -> pa.DataType:
    """The Arrow type pyarrow writes a TPC-H column of Fox type `ty` as."""
    if ty.startswith("decimal("):
        return pa.decimal128(15, int(ty[len("decimal(") : -1]))
    return {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(), "date": pa.date32()}[ty]


@pytest.fixture(scope="module")
def tpch(tmp_path_factory):
    """TPC-H at SF 0.01: the .tbl files of `foxbench tpch-gen`, and the same tables
    written as Parquet by pyarrow (its defaults: dictionary-encoded strings, Snappy)."""
    root = tmp_path_factory.mktemp("tpch")
    tbl, parquet = root / "tbl", root / "parquet"
    subprocess.run([fox_binary("foxbench"), "tpch-gen", "--sf", SF, "--out", tbl], check=True, capture_output=True)
    parquet.mkdir()
    with warnings.catch_warnings():
        # A program of declarations only: its inputs are read by no rule.
        warnings.simplefilter("ignore")
        schema = fox.compile(REPO / "tpch" / "schema.logic").inputs
    assert len(schema) == 8
    for table, columns in schema.items():
        names = [c for c, _ in columns]
        types = {c: arrow_type(t) for c, t in columns}
        # dbgen ends each line with the separator: one more, empty, column.
        data = pacsv.read_csv(
            tbl / f"{table}.tbl",
            read_options=pacsv.ReadOptions(column_names=names + ["_end"]),
            parse_options=pacsv.ParseOptions(delimiter="|"),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=names),
        )
        assert data.schema.names == names
        if table == "orders":
            # Dates as pandas keeps them (timestamps at midnight) also read into `date`.
            i = names.index("o_orderdate")
            data = data.set_column(i, "o_orderdate", data.column(i).cast(pa.timestamp("ms")))
        # Several row groups for the largest table.
        pq.write_table(data, parquet / f"{table}.parquet", row_group_size=10_000)
    return tbl, parquet


def run_tpch(data: pathlib.Path, out: pathlib.Path) -> dict[str, str]:
    subprocess.run(
        [
            fox_binary("foxbench"),
            "tpch",
            "--data",
            data,
            "--backend",
            "cpu",
            "--repeat",
            "0",
            "--dir",
            REPO / "tpch" / "queries",
            "--out",
            out,
        ],
        check=True,
        capture_output=True,
    )
    return {p.name: p.read_text() for p in sorted(out.glob("q*.csv"))}


def test_tpch_from_pyarrow_parquet_equals_tpch_from_tbl(tpch, tmp_path):
    tbl, parquet = tpch
    assert not list(parquet.glob("*.tbl"))
    from_tbl = run_tpch(tbl, tmp_path / "from_tbl")
    from_parquet = run_tpch(parquet, tmp_path / "from_parquet")
    assert sorted(from_tbl) == [f"q{q:02}.csv" for q in range(1, 23)]
    assert sum(text.count("\n") - 1 for text in from_tbl.values()) > 100
    for name in from_tbl:
        assert from_parquet[name] == from_tbl[name], name


def test_the_parquet_tables_pyarrow_wrote_are_what_fox_reads(tpch):
    _, parquet = tpch
    meta = pq.ParquetFile(parquet / "lineitem.parquet").metadata
    assert meta.num_row_groups > 1
    schema = pq.read_schema(parquet / "lineitem.parquet")
    assert schema.field("l_shipdate").type == pa.date32()
    assert schema.field("l_extendedprice").type == pa.decimal128(15, 2)
    assert pq.read_schema(parquet / "orders.parquet").field("o_orderdate").type == pa.timestamp("ms")


ALL_TYPES = """
t(i, l, f, s, d, b, m) -> int32(i), int64(l), float64(f), string(s), date(d), bool(b), decimal(m).
.input t from "t.csv".
r(i, l, f, s, d, b, m, w) -> int32(i), int64(l), float64(f), string(s), date(d), bool(b), decimal(m), decimal(w, 4).
r(i, l * 2, f / 2.0, s, d + 1, b, m, m * m) <- t(i, l, f, s, d, b, m).
.output r order by i.
"""


def test_foxrun_parquet_output_reads_back_in_pyarrow(tmp_path):
    (tmp_path / "prog.logic").write_text(ALL_TYPES)
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.csv").write_text("2,-5000000000,1.5,héllo,1998-09-02,true,12.34\n1,7,-0.5,,1970-01-01,false,-0.05\n")
    out = tmp_path / "out"
    subprocess.run(
        [
            fox_binary("foxrun"),
            tmp_path / "prog.logic",
            "--data",
            data,
            "--backend",
            "cpu",
            "--format",
            "parquet",
            "--out",
            out,
        ],
        check=True,
        capture_output=True,
    )
    table = pq.read_table(out / "r.parquet")
    assert table.schema.names == ["i", "l", "f", "s", "d", "b", "m", "w"]
    assert table.schema.types == [
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.date32(),
        pa.bool_(),
        pa.decimal128(38, 2),
        pa.decimal128(38, 4),
    ]
    assert all(not f.nullable for f in table.schema)
    assert table.to_pylist() == [
        {
            "i": 1,
            "l": 14,
            "f": -0.25,
            "s": "",
            "d": datetime.date(1970, 1, 2),
            "b": False,
            "m": decimal.Decimal("-0.05"),
            "w": decimal.Decimal("0.0025"),
        },
        {
            "i": 2,
            "l": -10_000_000_000,
            "f": 0.75,
            "s": "héllo",
            "d": datetime.date(1998, 9, 3),
            "b": True,
            "m": decimal.Decimal("12.34"),
            "w": decimal.Decimal("152.2756"),
        },
    ]
    # The same program through the Python package gives the same table.
    prog = fox.compile(tmp_path / "prog.logic")
    assert prog.run(data=data, backend="cpu")["r"].to_pylist() == table.to_pylist()
