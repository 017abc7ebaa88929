#!/usr/bin/env python3
"""Run the 22 TPC-H queries on DuckDB: the baseline for Fox's `foxbench tpch`.

Loads the eight TPC-H tables from dbgen-style `.tbl` files (`|`-separated, a trailing
`|`, no header) into an in-memory DuckDB database, runs each query once to warm up and
then --repeat times, and prints per query the number of rows, the time of the first
(cold) run and the median of the hot runs, in milliseconds.

The queries are the official TPC-H SQL with the validation parameters (the same ones as
tpch/queries/qNN.logic), the row limits of the specification (Q2 100, Q3 10, Q10 20,
Q18 100, Q21 100), Q15 written with a CTE instead of a view, and Q18's sum(l_quantity)
named sum_quantity. Output column names are the ones of the Fox output predicates.

    python3 tpch/bench-duckdb.py --data DIR [--threads N] [--repeat K] [--queries 1,6,...]
                                 [--answers-out DIR] [--json FILE] [--fox-json FILE]

--answers-out DIR writes DIR/qNN.csv (a header row, RFC 4180 quoting, dates YYYY-MM-DD,
decimals with all their digits, rows in ORDER BY order). --json FILE writes the timings.
--fox-json FILE reads the JSON of Fox's benchmark (a list of objects with "query" and
"median_ms") and prints Fox's medians next to DuckDB's, with the ratio DuckDB / Fox.
"""

import argparse
import csv
import datetime
import decimal
import json
import math
import os
import statistics
import sys
import time

import duckdb

# The schema: TPC-H column names and types, in the column order of the .tbl files.
TABLES = {
    "part": [
        ("p_partkey", "INTEGER"),
        ("p_name", "VARCHAR"),
        ("p_mfgr", "VARCHAR"),
        ("p_brand", "VARCHAR"),
        ("p_type", "VARCHAR"),
        ("p_size", "INTEGER"),
        ("p_container", "VARCHAR"),
        ("p_retailprice", "DECIMAL(15,2)"),
        ("p_comment", "VARCHAR"),
    ],
    "supplier": [
        ("s_suppkey", "INTEGER"),
        ("s_name", "VARCHAR"),
        ("s_address", "VARCHAR"),
        ("s_nationkey", "INTEGER"),
        ("s_phone", "VARCHAR"),
        ("s_acctbal", "DECIMAL(15,2)"),
        ("s_comment", "VARCHAR"),
    ],
    "partsupp": [
        ("ps_partkey", "INTEGER"),
        ("ps_suppkey", "INTEGER"),
        ("ps_availqty", "INTEGER"),
        ("ps_supplycost", "DECIMAL(15,2)"),
        ("ps_comment", "VARCHAR"),
    ],
    "customer": [
        ("c_custkey", "INTEGER"),
        ("c_name", "VARCHAR"),
        ("c_address", "VARCHAR"),
        ("c_nationkey", "INTEGER"),
        ("c_phone", "VARCHAR"),
        ("c_acctbal", "DECIMAL(15,2)"),
        ("c_mktsegment", "VARCHAR"),
        ("c_comment", "VARCHAR"),
    ],
    "orders": [
        ("o_orderkey", "INTEGER"),
        ("o_custkey", "INTEGER"),
        ("o_orderstatus", "VARCHAR"),
        ("o_totalprice", "DECIMAL(15,2)"),
        ("o_orderdate", "DATE"),
        ("o_orderpriority", "VARCHAR"),
        ("o_clerk", "VARCHAR"),
        ("o_shippriority", "INTEGER"),
        ("o_comment", "VARCHAR"),
    ],
    "lineitem": [
        ("l_orderkey", "INTEGER"),
        ("l_partkey", "INTEGER"),
        ("l_suppkey", "INTEGER"),
        ("l_linenumber", "INTEGER"),
        ("l_quantity", "DECIMAL(15,2)"),
        ("l_extendedprice", "DECIMAL(15,2)"),
        ("l_discount", "DECIMAL(15,2)"),
        ("l_tax", "DECIMAL(15,2)"),
        ("l_returnflag", "VARCHAR"),
        ("l_linestatus", "VARCHAR"),
        ("l_shipdate", "DATE"),
        ("l_commitdate", "DATE"),
        ("l_receiptdate", "DATE"),
        ("l_shipinstruct", "VARCHAR"),
        ("l_shipmode", "VARCHAR"),
        ("l_comment", "VARCHAR"),
    ],
    "nation": [
        ("n_nationkey", "INTEGER"),
        ("n_name", "VARCHAR"),
        ("n_regionkey", "INTEGER"),
        ("n_comment", "VARCHAR"),
    ],
    "region": [
        ("r_regionkey", "INTEGER"),
        ("r_name", "VARCHAR"),
        ("r_comment", "VARCHAR"),
    ],
}

# The 22 queries: the TPC-H text with the validation parameters substituted.
QUERIES = {
    1: """
select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from
    lineitem
where
    l_shipdate <= date '1998-12-01' - interval '90' day
group by
    l_returnflag,
    l_linestatus
order by
    l_returnflag,
    l_linestatus
""",
    2: """
select
    s_acctbal,
    s_name,
    n_name,
    p_partkey,
    p_mfgr,
    s_address,
    s_phone,
    s_comment
from
    part,
    supplier,
    partsupp,
    nation,
    region
where
    p_partkey = ps_partkey
    and s_suppkey = ps_suppkey
    and p_size = 15
    and p_type like '%BRASS'
    and s_nationkey = n_nationkey
    and n_regionkey = r_regionkey
    and r_name = 'EUROPE'
    and ps_supplycost = (
        select
            min(ps_supplycost)
        from
            partsupp,
            supplier,
            nation,
            region
        where
            p_partkey = ps_partkey
            and s_suppkey = ps_suppkey
            and s_nationkey = n_nationkey
            and n_regionkey = r_regionkey
            and r_name = 'EUROPE'
    )
order by
    s_acctbal desc,
    n_name,
    s_name,
    p_partkey
limit 100
""",
    3: """
select
    l_orderkey,
    sum(l_extendedprice * (1 - l_discount)) as revenue,
    o_orderdate,
    o_shippriority
from
    customer,
    orders,
    lineitem
where
    c_mktsegment = 'BUILDING'
    and c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and o_orderdate < date '1995-03-15'
    and l_shipdate > date '1995-03-15'
group by
    l_orderkey,
    o_orderdate,
    o_shippriority
order by
    revenue desc,
    o_orderdate
limit 10
""",
    4: """
select
    o_orderpriority,
    count(*) as order_count
from
    orders
where
    o_orderdate >= date '1993-07-01'
    and o_orderdate < date '1993-07-01' + interval '3' month
    and exists (
        select
            *
        from
            lineitem
        where
            l_orderkey = o_orderkey
            and l_commitdate < l_receiptdate
    )
group by
    o_orderpriority
order by
    o_orderpriority
""",
    5: """
select
    n_name,
    sum(l_extendedprice * (1 - l_discount)) as revenue
from
    customer,
    orders,
    lineitem,
    supplier,
    nation,
    region
where
    c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and l_suppkey = s_suppkey
    and c_nationkey = s_nationkey
    and s_nationkey = n_nationkey
    and n_regionkey = r_regionkey
    and r_name = 'ASIA'
    and o_orderdate >= date '1994-01-01'
    and o_orderdate < date '1994-01-01' + interval '1' year
group by
    n_name
order by
    revenue desc
""",
    6: """
select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= date '1994-01-01'
    and l_shipdate < date '1994-01-01' + interval '1' year
    and l_discount between 0.06 - 0.01 and 0.06 + 0.01
    and l_quantity < 24
""",
    7: """
select
    supp_nation,
    cust_nation,
    l_year,
    sum(volume) as revenue
from
    (
        select
            n1.n_name as supp_nation,
            n2.n_name as cust_nation,
            extract(year from l_shipdate) as l_year,
            l_extendedprice * (1 - l_discount) as volume
        from
            supplier,
            lineitem,
            orders,
            customer,
            nation n1,
            nation n2
        where
            s_suppkey = l_suppkey
            and o_orderkey = l_orderkey
            and c_custkey = o_custkey
            and s_nationkey = n1.n_nationkey
            and c_nationkey = n2.n_nationkey
            and (
                (n1.n_name = 'FRANCE' and n2.n_name = 'GERMANY')
                or (n1.n_name = 'GERMANY' and n2.n_name = 'FRANCE')
            )
            and l_shipdate between date '1995-01-01' and date '1996-12-31'
    ) as shipping
group by
    supp_nation,
    cust_nation,
    l_year
order by
    supp_nation,
    cust_nation,
    l_year
""",
    8: """
select
    o_year,
    sum(case
        when nation = 'BRAZIL' then volume
        else 0
    end) / sum(volume) as mkt_share
from
    (
        select
            extract(year from o_orderdate) as o_year,
            l_extendedprice * (1 - l_discount) as volume,
            n2.n_name as nation
        from
            part,
            supplier,
            lineitem,
            orders,
            customer,
            nation n1,
            nation n2,
            region
        where
            p_partkey = l_partkey
            and s_suppkey = l_suppkey
            and l_orderkey = o_orderkey
            and o_custkey = c_custkey
            and c_nationkey = n1.n_nationkey
            and n1.n_regionkey = r_regionkey
            and r_name = 'AMERICA'
            and s_nationkey = n2.n_nationkey
            and o_orderdate between date '1995-01-01' and date '1996-12-31'
            and p_type = 'ECONOMY ANODIZED STEEL'
    ) as all_nations
group by
    o_year
order by
    o_year
""",
    9: """
select
    nation,
    o_year,
    sum(amount) as sum_profit
from
    (
        select
            n_name as nation,
            extract(year from o_orderdate) as o_year,
            l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
        from
            part,
            supplier,
            lineitem,
            partsupp,
            orders,
            nation
        where
            s_suppkey = l_suppkey
            and ps_suppkey = l_suppkey
            and ps_partkey = l_partkey
            and p_partkey = l_partkey
            and o_orderkey = l_orderkey
            and s_nationkey = n_nationkey
            and p_name like '%green%'
    ) as profit
group by
    nation,
    o_year
order by
    nation,
    o_year desc
""",
    10: """
select
    c_custkey,
    c_name,
    sum(l_extendedprice * (1 - l_discount)) as revenue,
    c_acctbal,
    n_name,
    c_address,
    c_phone,
    c_comment
from
    customer,
    orders,
    lineitem,
    nation
where
    c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and o_orderdate >= date '1993-10-01'
    and o_orderdate < date '1993-10-01' + interval '3' month
    and l_returnflag = 'R'
    and c_nationkey = n_nationkey
group by
    c_custkey,
    c_name,
    c_acctbal,
    c_phone,
    n_name,
    c_address,
    c_comment
order by
    revenue desc
limit 20
""",
    11: """
select
    ps_partkey,
    sum(ps_supplycost * ps_availqty) as value
from
    partsupp,
    supplier,
    nation
where
    ps_suppkey = s_suppkey
    and s_nationkey = n_nationkey
    and n_name = 'GERMANY'
group by
    ps_partkey having
        sum(ps_supplycost * ps_availqty) > (
            select
                sum(ps_supplycost * ps_availqty) * 0.0001
            from
                partsupp,
                supplier,
                nation
            where
                ps_suppkey = s_suppkey
                and s_nationkey = n_nationkey
                and n_name = 'GERMANY'
        )
order by
    value desc
""",
    12: """
select
    l_shipmode,
    sum(case
        when o_orderpriority = '1-URGENT'
            or o_orderpriority = '2-HIGH'
            then 1
        else 0
    end) as high_line_count,
    sum(case
        when o_orderpriority <> '1-URGENT'
            and o_orderpriority <> '2-HIGH'
            then 1
        else 0
    end) as low_line_count
from
    orders,
    lineitem
where
    o_orderkey = l_orderkey
    and l_shipmode in ('MAIL', 'SHIP')
    and l_commitdate < l_receiptdate
    and l_shipdate < l_commitdate
    and l_receiptdate >= date '1994-01-01'
    and l_receiptdate < date '1994-01-01' + interval '1' year
group by
    l_shipmode
order by
    l_shipmode
""",
    13: """
select
    c_count,
    count(*) as custdist
from
    (
        select
            c_custkey,
            count(o_orderkey)
        from
            customer left outer join orders on
                c_custkey = o_custkey
                and o_comment not like '%special%requests%'
        group by
            c_custkey
    ) as c_orders (c_custkey, c_count)
group by
    c_count
order by
    custdist desc,
    c_count desc
""",
    14: """
select
    100.00 * sum(case
        when p_type like 'PROMO%'
            then l_extendedprice * (1 - l_discount)
        else 0
    end) / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from
    lineitem,
    part
where
    l_partkey = p_partkey
    and l_shipdate >= date '1995-09-01'
    and l_shipdate < date '1995-09-01' + interval '1' month
""",
    15: """
with revenue0 (supplier_no, total_revenue) as (
    select
        l_suppkey,
        sum(l_extendedprice * (1 - l_discount))
    from
        lineitem
    where
        l_shipdate >= date '1996-01-01'
        and l_shipdate < date '1996-01-01' + interval '3' month
    group by
        l_suppkey
)
select
    s_suppkey,
    s_name,
    s_address,
    s_phone,
    total_revenue
from
    supplier,
    revenue0
where
    s_suppkey = supplier_no
    and total_revenue = (
        select
            max(total_revenue)
        from
            revenue0
    )
order by
    s_suppkey
""",
    16: """
select
    p_brand,
    p_type,
    p_size,
    count(distinct ps_suppkey) as supplier_cnt
from
    partsupp,
    part
where
    p_partkey = ps_partkey
    and p_brand <> 'Brand#45'
    and p_type not like 'MEDIUM POLISHED%'
    and p_size in (49, 14, 23, 45, 19, 3, 36, 9)
    and ps_suppkey not in (
        select
            s_suppkey
        from
            supplier
        where
            s_comment like '%Customer%Complaints%'
    )
group by
    p_brand,
    p_type,
    p_size
order by
    supplier_cnt desc,
    p_brand,
    p_type,
    p_size
""",
    17: """
select
    sum(l_extendedprice) / 7.0 as avg_yearly
from
    lineitem,
    part
where
    p_partkey = l_partkey
    and p_brand = 'Brand#23'
    and p_container = 'MED BOX'
    and l_quantity < (
        select
            0.2 * avg(l_quantity)
        from
            lineitem
        where
            l_partkey = p_partkey
    )
""",
    18: """
select
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice,
    sum(l_quantity) as sum_quantity
from
    customer,
    orders,
    lineitem
where
    o_orderkey in (
        select
            l_orderkey
        from
            lineitem
        group by
            l_orderkey having
                sum(l_quantity) > 300
    )
    and c_custkey = o_custkey
    and o_orderkey = l_orderkey
group by
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice
order by
    o_totalprice desc,
    o_orderdate
limit 100
""",
    19: """
select
    sum(l_extendedprice* (1 - l_discount)) as revenue
from
    lineitem,
    part
where
    (
        p_partkey = l_partkey
        and p_brand = 'Brand#12'
        and p_container in ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
        and l_quantity >= 1 and l_quantity <= 1 + 10
        and p_size between 1 and 5
        and l_shipmode in ('AIR', 'AIR REG')
        and l_shipinstruct = 'DELIVER IN PERSON'
    )
    or
    (
        p_partkey = l_partkey
        and p_brand = 'Brand#23'
        and p_container in ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
        and l_quantity >= 10 and l_quantity <= 10 + 10
        and p_size between 1 and 10
        and l_shipmode in ('AIR', 'AIR REG')
        and l_shipinstruct = 'DELIVER IN PERSON'
    )
    or
    (
        p_partkey = l_partkey
        and p_brand = 'Brand#34'
        and p_container in ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
        and l_quantity >= 20 and l_quantity <= 20 + 10
        and p_size between 1 and 15
        and l_shipmode in ('AIR', 'AIR REG')
        and l_shipinstruct = 'DELIVER IN PERSON'
    )
""",
    20: """
select
    s_name,
    s_address
from
    supplier,
    nation
where
    s_suppkey in (
        select
            ps_suppkey
        from
            partsupp
        where
            ps_partkey in (
                select
                    p_partkey
                from
                    part
                where
                    p_name like 'forest%'
            )
            and ps_availqty > (
                select
                    0.5 * sum(l_quantity)
                from
                    lineitem
                where
                    l_partkey = ps_partkey
                    and l_suppkey = ps_suppkey
                    and l_shipdate >= date '1994-01-01'
                    and l_shipdate < date '1994-01-01' + interval '1' year
            )
    )
    and s_nationkey = n_nationkey
    and n_name = 'CANADA'
order by
    s_name
""",
    21: """
select
    s_name,
    count(*) as numwait
from
    supplier,
    lineitem l1,
    orders,
    nation
where
    s_suppkey = l1.l_suppkey
    and o_orderkey = l1.l_orderkey
    and o_orderstatus = 'F'
    and l1.l_receiptdate > l1.l_commitdate
    and exists (
        select
            *
        from
            lineitem l2
        where
            l2.l_orderkey = l1.l_orderkey
            and l2.l_suppkey <> l1.l_suppkey
    )
    and not exists (
        select
            *
        from
            lineitem l3
        where
            l3.l_orderkey = l1.l_orderkey
            and l3.l_suppkey <> l1.l_suppkey
            and l3.l_receiptdate > l3.l_commitdate
    )
    and s_nationkey = n_nationkey
    and n_name = 'SAUDI ARABIA'
group by
    s_name
order by
    numwait desc,
    s_name
limit 100
""",
    22: """
select
    cntrycode,
    count(*) as numcust,
    sum(c_acctbal) as totacctbal
from
    (
        select
            substring(c_phone from 1 for 2) as cntrycode,
            c_acctbal
        from
            customer
        where
            substring(c_phone from 1 for 2) in
                ('13', '31', '23', '29', '30', '18', '17')
            and c_acctbal > (
                select
                    avg(c_acctbal)
                from
                    customer
                where
                    c_acctbal > 0.00
                    and substring(c_phone from 1 for 2) in
                        ('13', '31', '23', '29', '30', '18', '17')
            )
            and not exists (
                select
                    *
                from
                    orders
                where
                    o_custkey = c_custkey
            )
    ) as custsale
group by
    cntrycode
order by
    cntrycode
""",
}


def parse_args():
    p = argparse.ArgumentParser(description="Run the 22 TPC-H queries on DuckDB and time them.")
    p.add_argument("--data", required=True, help="folder with the eight TPC-H .tbl files")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="DuckDB threads (default: all cores)")
    p.add_argument("--repeat", type=int, default=5, help="hot runs per query after one warm-up run (default 5)")
    p.add_argument("--queries", default="all", help="comma-separated query numbers, e.g. 1,6,14 (default: all)")
    p.add_argument("--answers-out", metavar="DIR", help="write each query's result to DIR/qNN.csv")
    p.add_argument("--json", metavar="FILE", help="write the timings as JSON to FILE")
    p.add_argument("--fox-json", metavar="FILE", help="Fox's benchmark JSON, to print the two side by side")
    a = p.parse_args()
    if a.queries == "all":
        a.queries = sorted(QUERIES)
    else:
        try:
            a.queries = [int(q) for q in a.queries.split(",") if q.strip()]
        except ValueError:
            p.error(f"--queries: expected numbers separated by commas, got {a.queries!r}")
        bad = [q for q in a.queries if q not in QUERIES]
        if bad:
            p.error(f"--queries: no TPC-H query {bad[0]} (1 to 22)")
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    if a.threads is None or a.threads < 1:
        p.error("--threads must be at least 1")
    return a


def sql_string(s):
    return "'" + s.replace("'", "''") + "'"


def load(con, data_dir):
    """Creates the eight tables and loads the .tbl files; returns the row counts."""
    counts = {}
    for table, columns in TABLES.items():
        path = os.path.join(data_dir, table + ".tbl")
        if not os.path.isfile(path):
            sys.exit(f"bench-duckdb: {path}: no such file")
        con.execute(f"create table {table} ({', '.join(f'{c} {t}' for c, t in columns)})")
        # The trailing `|` of each line makes an empty last field: read it into a dummy
        # column (null_padding also accepts lines without it) and leave it out.
        read_cols = ", ".join(f"{sql_string(c)}: {sql_string(t)}" for c, t in columns)
        read_cols += ", '_trailing': 'VARCHAR'"
        con.execute(
            f"insert into {table} select {', '.join(c for c, _ in columns)} "
            f"from read_csv({sql_string(path)}, delim = '|', header = false, quote = '', escape = '', "
            f"null_padding = true, auto_detect = false, columns = {{{read_cols}}})"
        )
        counts[table] = con.execute(f"select count(*) from {table}").fetchone()[0]
    return counts


def csv_value(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # all the digits of the scale, never an exponent
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_answer(path, columns, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        w.writerow(columns)
        for r in rows:
            w.writerow([csv_value(v) for v in r])


def run_query(con, sql):
    t0 = time.perf_counter()
    cur = con.execute(sql)
    rows = cur.fetchall()
    ms = (time.perf_counter() - t0) * 1000.0
    return ms, [d[0] for d in cur.description], rows


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    a = parse_args()
    con = duckdb.connect(":memory:")
    con.execute(f"set threads = {a.threads}")
    t0 = time.perf_counter()
    counts = load(con, a.data)
    load_s = time.perf_counter() - t0
    plural = lambda n: "" if n == 1 else "s"  # noqa: E731
    print(
        f"DuckDB {duckdb.__version__}, {a.threads} thread{plural(a.threads)}; "
        f"loaded {a.data} in {load_s:.1f} s ({counts['lineitem']:,} lineitem rows); "
        f"{a.repeat} hot run{plural(a.repeat)} per query after a warm-up run"
    )
    if a.answers_out:
        os.makedirs(a.answers_out, exist_ok=True)

    results = []
    print(f"{'query':>5} {'rows':>6} {'first ms':>10} {'median ms':>10}")
    for q in a.queries:
        first_ms, columns, rows = run_query(con, QUERIES[q])
        times = [run_query(con, QUERIES[q])[0] for _ in range(a.repeat)]
        med = statistics.median(times)
        if a.answers_out:
            write_answer(os.path.join(a.answers_out, f"q{q:02d}.csv"), columns, rows)
        results.append(
            {
                "query": q,
                "rows": len(rows),
                "first_ms": round(first_ms, 3),
                "median_ms": round(med, 3),
                "runs_ms": [round(t, 3) for t in times],
            }
        )
        print(f"{'Q%d' % q:>5} {len(rows):>6} {first_ms:>10.1f} {med:>10.1f}", flush=True)
    medians = [r["median_ms"] for r in results]
    print(f"{'total':>5} {'':>6} {'':>10} {sum(medians):>10.1f}")
    print(f"{'geo':>5} {'':>6} {'':>10} {geomean(medians):>10.1f}   (geometric mean of the medians)")

    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {
                    "system": "duckdb",
                    "duckdb_version": duckdb.__version__,
                    "threads": a.threads,
                    "repeat": a.repeat,
                    "data": os.path.abspath(a.data),
                    "load_s": round(load_s, 3),
                    "queries": results,
                },
                f,
                indent=1,
            )
            f.write("\n")

    if a.fox_json:
        compare(results, a.fox_json)


def compare(results, fox_json):
    with open(fox_json) as f:
        fox = json.load(f)
    if isinstance(fox, dict):  # also accept an object holding the list under "queries"
        fox = fox.get("queries", [])
    fox_ms = {}
    for r in fox:
        if "query" in r and r.get("median_ms") is not None:
            fox_ms[int(str(r["query"]).lstrip("Qq"))] = float(r["median_ms"])
    print()
    print(f"Fox ({fox_json}) against DuckDB: median hot times; ratio > 1 means Fox is faster")
    print(f"{'query':>5} {'Fox ms':>10} {'DuckDB ms':>10} {'DuckDB/Fox':>11}")
    ratios = []
    for r in results:
        q, d = r["query"], r["median_ms"]
        f_ms = fox_ms.get(q)
        if f_ms is None:
            print(f"{'Q%d' % q:>5} {'-':>10} {d:>10.1f} {'-':>11}")
            continue
        ratio = d / f_ms if f_ms > 0 else float("inf")
        if math.isfinite(ratio) and ratio > 0:
            ratios.append(ratio)
        print(f"{'Q%d' % q:>5} {f_ms:>10.1f} {d:>10.1f} {ratio:>11.2f}")
    if ratios:
        print(f"{'geo':>5} {'':>10} {'':>10} {geomean(ratios):>11.2f}   (geometric mean of {len(ratios)} ratios)")


if __name__ == "__main__":
    main()
