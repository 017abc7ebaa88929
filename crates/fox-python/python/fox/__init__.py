"""Fox from Python: compile a LogiQL (or Soufflé) program and run it on Arrow tables.

    import fox
    prog = fox.compile("reach.logic")            # or the program's text
    out = prog.run(inputs={"edge": table})        # {"reach": pyarrow.Table, ...}

An input may be a ``pyarrow.Table`` (or ``RecordBatch``, or any object with
``__arrow_c_stream__``), a ``pandas.DataFrame`` or a list of tuples; its columns are
matched by position to the relation's declaration and read by the rules of Parquet
input (each column's type must fit the declared type, values convert exactly, no
nulls). Inputs not given are read from their ``.input`` files under ``data`` (the
current directory by default), as ``foxrun`` reads them.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

import pyarrow as pa

from . import _fox
from ._fox import CompileError, RunError

__all__ = ["compile", "Program", "CompileError", "RunError"]

# The file names taken for paths even when no such file exists (so that a misspelt path
# is reported as a missing file, not compiled as a program's text).
_PROGRAM_SUFFIXES = (".logic", ".dl")


def compile(source: str | os.PathLike, *, dialect: str | None = None) -> "Program":
    """Compiles a program given as its text or as the path of its file.

    A ``str`` is a path when it is one line naming an existing file or ending in
    ``.logic`` or ``.dl``, and the program's text otherwise. ``dialect`` is ``"logiql"``
    or ``"souffle"``; by default a ``.dl`` file is Soufflé and anything else LogiQL.
    Raises ``CompileError`` (its message: each diagnostic with ``file:line:col``, the
    source line and a caret) when the program has errors; warnings are issued as
    ``UserWarning``.
    """
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
    elif isinstance(source, str):
        one_line = "\n" not in source and source.strip() == source and source != ""
        is_path = one_line and (source.endswith(_PROGRAM_SUFFIXES) or os.path.isfile(source))
        path = source if is_path else None
    else:
        raise TypeError(
            f"fox.compile takes a program's text (str) or its path (str or os.PathLike), not {type(source).__name__}"
        )
    if path is None:
        return Program(_fox.compile(text=source, dialect=dialect))
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no such program file", path)
    return Program(_fox.compile(path=path, dialect=dialect))


class Program:
    """A compiled program. Each run plans it anew with the statistics of its inputs."""

    def __init__(self, inner: Any):
        self._inner = inner
        self._inputs = {name: list(cols) for name, cols in inner._inputs()}

    @property
    def inputs(self) -> dict[str, list[tuple[str, str]]]:
        """The declared input relations: name → [(column, type), ...] in declaration order."""
        return {name: list(cols) for name, cols in self._inputs.items()}

    def run(
        self,
        inputs: Mapping[str, Any] | None = None,
        backend: str = "auto",
        memory_limit: int | str | None = None,
        data: str | os.PathLike | None = None,
    ) -> dict[str, pa.Table]:
        """Runs the program and returns each output predicate's rows as a ``pyarrow.Table``.

        ``inputs`` maps input relations to tables (see the module's documentation);
        ``backend`` is ``"auto"`` (the GPU when one is usable, otherwise the CPU),
        ``"gpu"`` or ``"cpu"``; ``memory_limit`` bounds the memory the run may use on the
        backend (bytes, or a size such as ``"512M"``); ``data`` is the folder the inputs
        not given are read from. The GIL is released while the program is planned and
        run. Raises ``RunError`` for data that does not fit its declaration or a failed
        run, ``ValueError`` or ``TypeError`` for bad arguments.
        """
        tables = self._tables(inputs)
        outputs = self._inner._run(tables, backend, memory_limit, _path_or_none(data))
        return {name: pa.RecordBatchReader.from_stream(stream).read_all() for name, stream in outputs}

    def explain(self, inputs: Mapping[str, Any] | None = None, data: str | os.PathLike | None = None) -> str:
        """The plan: the physical plan (each operator with its algorithm and estimated
        rows) followed by the kernels. Planned with the statistics of ``inputs`` (and of
        the files under ``data``) when given, as ``run`` plans; without statistics
        otherwise."""
        tables = self._tables(inputs)
        return self._inner._explain(tables, _path_or_none(data))

    def __repr__(self) -> str:
        names = ", ".join(self._inputs) or "none"
        return f"<fox.Program inputs: {names}>"

    def _tables(self, inputs: Mapping[str, Any] | None) -> list[tuple[str, str, Any]]:
        if inputs is None:
            return []
        if not isinstance(inputs, Mapping):
            raise TypeError(f"inputs must be a dict of relation name to table, not {type(inputs).__name__}")
        tables = []
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise TypeError(f"inputs: the key {name!r} is not a relation name (str)")
            if name not in self._inputs:
                known = ", ".join(f"`{n}`" for n in self._inputs)
                which = f"its input relations are {known}" if known else "it declares no input relation"
                raise ValueError(f"inputs: `{name}` is not an input relation of the program; {which}")
            shown = f"inputs[{name!r}]"
            tables.append((name, shown, _as_arrow(shown, name, value, self._inputs[name])))
        return tables


def _path_or_none(data: str | os.PathLike | None) -> str | None:
    return None if data is None else os.fspath(data)


def _as_arrow(shown: str, name: str, value: Any, columns: list[tuple[str, str]]) -> Any:
    """``value`` as an object with ``__arrow_c_stream__`` (a pyarrow.Table for what is not one)."""
    if isinstance(value, pa.Table):
        return value
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        try:
            return pa.Table.from_pandas(value, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise RunError(f"{shown}: the DataFrame does not convert to Arrow: {e}") from e
    if hasattr(value, "__arrow_c_stream__"):
        return value
    if isinstance(value, (list, tuple)):
        return _rows_to_table(shown, name, value, columns)
    raise TypeError(
        f"{shown}: a {type(value).__name__} is not a table; give a pyarrow.Table, a pandas.DataFrame or a list of tuples"
    )


# The Arrow type of an empty column of each declared type.
_EMPTY_TYPES = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "date": pa.date32(),
    "bool": pa.bool_(),
}


def _empty_type(ty: str) -> pa.DataType:
    if ty in _EMPTY_TYPES:
        return _EMPTY_TYPES[ty]
    if ty.startswith("decimal(") and ty.endswith(")"):
        return pa.decimal128(18, int(ty[len("decimal(") : -1]))
    return pa.null()


def _rows_to_table(shown: str, name: str, rows: list | tuple, columns: list[tuple[str, str]]) -> pa.Table:
    """A list of tuples (one per row, values by position) as a table whose column types
    pyarrow infers from the values (a float64 column takes ints too); Fox then checks
    them against the declaration as for any table. A relation of one column also takes
    bare values."""
    n = len(columns)
    cols = ", ".join(f"`{c}`" for c, _ in columns)
    values: list[list[Any]] = [[] for _ in range(n)]
    for i, row in enumerate(rows):
        if not isinstance(row, (tuple, list)):
            if n == 1:
                row = (row,)
            else:
                raise RunError(
                    f"{shown}: row {i + 1} is a {type(row).__name__}, not a tuple of {n} values ({cols} of `{name}`)"
                )
        if len(row) != n:
            raise RunError(
                f"{shown}: row {i + 1} has {len(row)} value{'' if len(row) == 1 else 's'}, "
                f"but `{name}` has {n} column{'' if n == 1 else 's'} ({cols}); values are matched by position"
            )
        for c, v in enumerate(row):
            values[c].append(v)
    arrays = []
    for c, ((col, ty), vals) in enumerate(zip(columns, values)):
        try:
            if not vals:
                arrays.append(pa.array([], type=_empty_type(ty)))
            elif ty == "float64":
                arrays.append(pa.array(vals, type=pa.float64()))
            else:
                arrays.append(pa.array(vals))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise RunError(f"{shown}: column {c + 1} (`{col}`, {ty}): {e}") from e
    return pa.Table.from_arrays(arrays, names=[c for c, _ in columns])
