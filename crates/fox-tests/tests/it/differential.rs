//! The engine (plan → lower → run on the CPU backend) against the reference evaluator.
//!
//! `FOX_DIFF_CASES=N` sets the number of random programs (300 by default);
//! `FOX_DIFF_SEED=S` runs the random program of seed `S` only, to reproduce a failure.

use crate::common;

use common::{differential, differential_with};
use fox_tests::gen::{case, typed_rows, GenOptions, Rng};
use fox_tests::{compile, Inputs};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Random typed data for every `.input` of `source`.
fn random_inputs(source: &str, seed: u64, domain: usize) -> Inputs {
    let prog = compile(source).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(seed);
    let mut inputs = Inputs::new();
    for spec in &prog.inputs {
        let info = &prog.preds[spec.pred.0 as usize];
        let n = *rng.pick(&[0, 1, 5, 20, 40]);
        inputs.insert(info.name.clone(), typed_rows(&mut rng, &info.columns, n, domain));
    }
    inputs
}

/// Runs `source` on the inputs of several seeds and collects the failures.
fn check_with_random_data(what: &str, source: &str, seeds: std::ops::Range<u64>, domain: usize) -> Vec<String> {
    check_forced(what, source, seeds, domain, fox_phys::JoinChoice::Auto)
}

/// [`check_with_random_data`] with every equi-join's algorithm forced by `join`.
fn check_forced(
    what: &str,
    source: &str,
    seeds: std::ops::Range<u64>,
    domain: usize,
    join: fox_phys::JoinChoice,
) -> Vec<String> {
    let mut failures = Vec::new();
    for seed in seeds {
        let inputs = random_inputs(source, seed, domain);
        if let Err(e) = differential_with(source, &inputs, join) {
            let mut data = String::new();
            for (name, rows) in &inputs {
                data.push_str(&format!(
                    "{name} ({} rows):\n{}",
                    rows.len(),
                    fox_tests::data::file_text(rows, ",")
                ));
            }
            failures.push(format!(
                "{what}, join {}, data seed {seed}:\n{e}\n--- data ---\n{data}",
                join.name()
            ));
        }
    }
    failures
}

fn report(failures: Vec<String>) {
    if !failures.is_empty() {
        let n = failures.len();
        let shown: Vec<String> = failures.into_iter().take(5).collect();
        panic!("{n} failure(s); the first ones:\n\n{}", shown.join("\n==========\n"));
    }
}

/// Every program of `tests/programs/` on its data (`tests/programs/data/`), or on random
/// data when its inputs are not there.
#[test]
fn test_programs_match_the_reference() {
    let dir = root().join("tests/programs");
    let mut failures = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/programs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "logic"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "tests/programs holds too few programs");
    for f in files {
        let source = std::fs::read_to_string(&f).expect("readable program");
        let prog = compile(&source).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let what = f.display().to_string();
        match common::read_inputs(&dir.join("data"), &prog) {
            Ok(inputs) => {
                if let Err(e) = differential(&source, &inputs) {
                    failures.push(format!("{what}:\n{e}"));
                }
            }
            Err(_) => failures.extend(check_with_random_data(&what, &source, 0..4, 6)),
        }
    }
    report(failures);
}

/// Every program of `queries/` on random graphs (small domains give dense graphs, cycles,
/// triangles and cliques).
#[test]
fn queries_match_the_reference() {
    let dir = root().join("queries");
    let mut failures = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("queries")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "logic"))
        .collect();
    files.sort();
    for f in files {
        let source = std::fs::read_to_string(&f).expect("readable program");
        let what = f.display().to_string();
        failures.extend(check_with_random_data(&what, &source, 0..3, 7));
        failures.extend(check_with_random_data(&what, &source, 100..101, 14));
    }
    report(failures);
}

/// Programs over typed data: strings, dates, decimals, floats, functional predicates,
/// in-lists, disjunction, negation, every aggregate, order by and limit.
const TYPED: &[(&str, &str)] = &[
    (
        "strings",
        r#"part(id, name, kind) -> int32(id), string(name), string(kind).
        .input part.
        brass(id) <- part(id, _, k), like(k, "%BRASS").
        not_brass(id) <- part(id, _, k), !like(k, "%BR_SS%").
        promo(id, s) <- part(id, _, k), prefix(k, "PROMO"), s = substr(k, 7, 3).
        lens(id, n) <- part(id, nm, _), n = strlen(nm).
        joined(id, c) <- part(id, a, b), c = concat(concat(a, "/"), b).
        early(c) <- joined(_, c), c < "P".
        after(k) <- part(_, k, _), k > "M", k != "über".
        listed(id) <- part(id, k, _), k in ("BRASS", "MEDIUM TIN").
        first[] = m <- agg<<m = min(k)>> part(_, _, k).
        last[g] = m <- agg<<m = max(k)>> part(g, _, k).
        .output brass. .output not_brass. .output promo. .output lens order by n desc, id limit 4.
        .output joined. .output early. .output after. .output listed. .output first. .output last."#,
    ),
    (
        "dates",
        r#"orders(k, placed, shipped) -> int32(k), date(placed), date(shipped).
        .input orders.
        lead(k, d) <- orders(k, p, s), d = s - p.
        due(k, d) <- orders(k, p, _), d = p + 90.
        before(k, d) <- orders(k, p, _), d = p - 7.
        parts(k, a, b, c) <- orders(k, p, _), a = year(p), b = month(p), c = day(p).
        in_1996(k) <- orders(k, p, _), p >= date("1996-01-01"), p < date("1997-01-01").
        late(k) <- orders(k, p, s), s - p > 100.
        latest[] = d <- agg<<d = max(s)>> orders(_, _, s).
        earliest[k] = d <- agg<<d = min(p)>> orders(k, p, _).
        .output lead. .output due order by d desc, k limit 5. .output before. .output parts.
        .output in_1996. .output late. .output latest. .output earliest."#,
    ),
    (
        "decimals",
        r#"item(id, price, disc, qty) -> int32(id), decimal(price), decimal(disc, 4), int64(qty).
        .input item.
        net(id, n) <- item(id, p, d, _), n = p * (1 - d).
        third(id, t) <- item(id, p, _, _), t = p / 3.
        per(id, r) <- item(id, p, _, q), r = p / (q + 100).
        rounded(id, r) <- item(id, p, _, _), r = round(p, 1).
        absolute(id, a) <- item(id, p, _, _), a = abs(p).
        plus(id, s) <- item(id, p, d, _), s = p + d.
        totals(id, s, a, n) <- agg<<s = sum(p), a = avg(p), n = count()>> item(id, p, _, _).
        grand[] = s <- agg<<s = sum(p * q)>> item(_, p, _, q).
        avg_qty[] = a <- agg<<a = avg(q)>> item(_, _, _, q).
        dbl(id, x) <- item(id, p, _, _), x = to_float(p) * 2.0.
        trunc(id, x) <- item(id, p, _, _), x = to_int(p).
        cheap(id) <- item(id, p, _, _), p < 10.
        .output net. .output third. .output per. .output rounded. .output absolute. .output plus.
        .output totals order by s desc limit 3. .output grand. .output avg_qty. .output dbl. .output trunc.
        .output cheap."#,
    ),
    (
        "floats",
        r#"m(k, x) -> int32(k), float64(x).
        .input m.
        scaled(k, y) <- m(k, x), y = x * 1.5f - 2.
        ints(k, i) <- m(k, x), i = to_int(x).
        r(k, y) <- m(k, x), y = round(x, 1).
        big(k) <- m(k, x), x > 100.
        mx[k] = v <- agg<<v = max(x)>> m(k, x).
        mn[] = v <- agg<<v = min(x)>> m(_, x).
        .output scaled. .output ints. .output r. .output big. .output mx. .output mn."#,
    ),
    (
        "functional, disjunction, negation",
        r#"e(a, b) -> int32(a), int32(b).
        .input e.
        deg[x] = n <- agg<<n = count()>> e(x, _).
        hub(x) <- deg[x] > 2.
        same(x, n) <- deg[x] = n, e(x, x).
        sel(x) <- e(x, y), y in (1, 3, 5).
        either(x) <- e(x, 1) ; e(1, x).
        both(x) <- (e(x, 2) ; e(2, x)), !e(x, x).
        leaf(x) <- e(_, x), !e(x, _).
        nodes[] = n <- agg<<n = count()>> e(x, _).
        tagged(x, t) <- e(x, _), x < 2, t = "low" ; e(x, _), x >= 2, t = "high".
        .output deg. .output hub. .output same. .output sel. .output either. .output both. .output leaf.
        .output nodes. .output tagged."#,
    ),
    (
        "band joins",
        r#"a(x, t, d, p) -> int32(x), int64(t), date(d), decimal(p).
        b(y, t, d, p) -> int32(y), int64(t), date(d), decimal(p).
        .input a. .input b.
        win(x, y) <- a(x, t1, _, _), b(y, t2, _, _), t2 >= t1, t2 <= t1 + 2.
        open(x, y, d) <- a(x, t1, d, _), b(y, t2, _, _), t2 > t1 - 1, t2 < t1 + 3.
        less(x, y, p) <- a(x, t1, _, p), b(y, t2, _, _), t1 < t2.
        flipped(x, y, d) <- a(x, t1, _, _), b(y, t2, d, _), t1 >= t2, t1 <= t2 + 1, x != y.
        ids(x, y) <- a(x, _, _, _), b(y, _, _, _), y >= x, y <= x + 1.
        days(x, y) <- a(x, _, d1, _), b(y, _, d2, _), d2 >= d1 - 30, d2 < d1 + 30.
        price(x, y) <- a(x, _, _, p1), b(y, _, _, p2), p2 >= p1, p2 <= p1 + 100.00.
        wide(x, y, p) <- a(x, t1, _, _), b(y, t2, _, p), t2 <= t1 + 1000000.
        self(x, y) <- a(x, t1, _, _), a(y, t2, _, _), t1 < t2, t2 <= t1 + 1.
        n[] = c <- agg<<c = count()>> a(_, t1, _, _), b(_, t2, _, _), t2 >= t1, t2 <= t1 + 3.
        keyed(x, y) <- a(x, t1, d, _), b(y, t2, d, _), t2 >= t1 - 1, t2 < t1 + 2.
        keyed2(x, y, t2) <- a(x, t1, d, p), b(y, t2, d, p), t1 > t2.
        later(x, y) <- a(x, t1, _, _), a(y, t2, _, _), x = y, t2 > t1.
        .output keyed. .output keyed2. .output later.
        .output win. .output open. .output less. .output flipped. .output ids. .output days.
        .output price. .output wide. .output self. .output n."#,
    ),
    (
        "filtered cross products",
        r#"a(x, u, f, s) -> int32(x), int32(u), float64(f), string(s).
        b(y, v, g, t) -> int32(y), int32(v), float64(g), string(t).
        .input a. .input b.
        prod(x, y) <- a(x, u, _, _), b(y, v, _, _), u * v > 6.
        sum(x, y, f) <- a(x, _, f, _), b(y, _, g, _), f + g = 1.5.
        diff(x, s, t) <- a(x, _, _, s), b(_, _, _, t), s != t.
        odd(u, v) <- a(_, u, _, _), b(_, v, _, _), abs(u - 2 * v) = 1 ; a(_, u, _, _), b(_, v, _, _), u = v.
        any() <- a(_, u, _, _), b(_, v, _, _), u * v = 4.
        self(x, y) <- a(x, u, _, _), a(y, v, _, _), u - v != 1, x != y.
        n[] = c <- agg<<c = count()>> a(_, u, _, _), b(_, v, _, _), u * v > 4.
        .output prod. .output sum. .output diff. .output odd. .output any. .output self. .output n."#,
    ),
    (
        "equi-joins",
        r#"a(x, k, s, f) -> int32(x), int64(k), string(s), float64(f).
        b(y, k, s, p, d) -> int32(y), int64(k), string(s), decimal(p), date(d).
        .input a. .input b.
        j1(x, y) <- a(x, k, _, _), b(y, k, _, _, _).
        j2(x, y, p) <- a(x, k, s, _), b(y, k, s, p, _).
        j3(x, y) <- a(x, _, s, _), b(y, _, s, _, _), x != y.
        j4(x, f) <- a(x, k, _, f), a(k2, _, _, f), k2 = k.
        j5(x, d) <- a(x, k, _, _), b(k2, _, _, _, d), k2 = x, k < 3.
        j6(x, y, z) <- a(x, k, _, _), b(y, k, s, _, _), a(z, _, s, _).
        semi(x) <- a(x, k, _, _), b(_, k, _, _, _).
        anti(x) <- a(x, k, s, _), !b(_, k, s, _, _).
        same(x, k) <- a(x, k, _, _), b(x, k, _, _, _).
        diff(x, k) <- a(x, k, _, _), !b(x, k, _, _, _).
        band(x, y) <- a(x, k, _, _), b(y, k2, _, _, _), k2 >= k, k2 <= k + 1.
        n[k] = c <- agg<<c = count()>> a(_, k, _, _), b(_, k, _, _, _).
        s[] = t <- agg<<t = sum(f)>> a(_, k, _, f), b(_, k, _, _, _).
        .output j1. .output j2. .output j3. .output j4. .output j5. .output j6. .output semi. .output anti.
        .output same. .output diff. .output band. .output n. .output s."#,
    ),
    (
        "inequality joins",
        r#"iv(x, s, e, d, p) -> int32(x), int64(s), int64(e), date(d), decimal(p).
        jv(y, s, e, d, p) -> int32(y), int64(s), int64(e), date(d), decimal(p).
        .input iv. .input jv.
        overlap(x, y) <- iv(x, s1, e1, _, _), jv(y, s2, e2, _, _), s1 < e2, s2 < e1.
        touch(x, y, d) <- iv(x, s1, e1, d, _), jv(y, s2, e2, _, _), e2 >= s1, s2 <= e1.
        flipped(x, y, d) <- iv(x, s1, e1, _, _), jv(y, s2, e2, d, _), e1 > s2, e2 > s1.
        selfov(x, y) <- iv(x, s1, e1, _, _), iv(y, s2, e2, _, _), s1 < e2, s2 < e1, x < y.
        two(x, y, p) <- iv(x, a1, b1, _, p), jv(y, a2, b2, _, _), a1 < a2, b1 > b2.
        twoeq(x, y, p) <- iv(x, a1, b1, _, _), jv(y, a2, b2, _, p), a1 <= a2, b1 >= b2.
        offs(x, y, d, p) <- iv(x, a1, b1, d, p), jv(y, a2, b2, _, _), a2 > a1 - 2, b2 + 1 < b1.
        dates(x, y) <- iv(x, _, _, d1, p1), jv(y, _, _, d2, p2), d1 < d2, p1 > p2.
        dated(x, y, s) <- iv(x, s, _, d1, p1), jv(y, _, _, d2, p2), d2 <= d1 + 3, p2 >= p1 - 1.00.
        keyed(x, y) <- iv(x, s1, e1, d, _), jv(y, s2, e2, d, _), s1 < e2, s2 < e1.
        keyed2(x, y) <- iv(x, s1, e1, d, p), jv(y, s2, e2, d, p), s1 <= s2, e1 > e2.
        ids(x, y) <- iv(x, s1, _, _, _), jv(y, s2, _, _, _), y > x, s2 < s1.
        mixed(x, y, d, p) <- iv(x, a1, b1, _, _), jv(y, a2, b2, d, p), a1 < a2, b1 > b2, b2 > a1, x != y.
        huge(x, y, d1, d2) <- iv(x, a1, b1, d1, _), jv(y, a2, b2, d2, _), a2 < a1 + 1000000, b2 > b1 - 1000000.
        n[] = c <- agg<<c = count()>> iv(_, s1, e1, _, _), iv(_, s2, e2, _, _), s1 < e2, s2 < e1.
        .output overlap. .output touch. .output flipped. .output selfov. .output two. .output twoeq.
        .output offs. .output dates. .output dated. .output keyed. .output keyed2. .output ids.
        .output mixed. .output huge. .output n."#,
    ),
    (
        "recursion",
        r#"e(a, b) -> int32(a), int32(b).
        .input e.
        path(x, y) <- e(x, y).
        path(x, z) <- path(x, y), e(y, z).
        nl(x, y) <- e(x, y).
        nl(x, z) <- nl(x, y), nl(y, z).
        sg(x, y) <- e(p, x), e(p, y), x != y.
        sg(x, y) <- e(a, x), sg(a, b), e(b, y), x != y.
        even(0).
        even(n) <- e(m, n), odd(m).
        odd(n) <- e(m, n), even(m).
        unreached(x) <- e(x, _), !path(0, x).
        reach[x] = n <- agg<<n = count()>> path(x, _).
        .output path. .output nl. .output sg. .output even. .output odd. .output unreached.
        .output reach order by n desc, x limit 3."#,
    ),
];

#[test]
fn typed_programs_match_the_reference() {
    let mut failures = Vec::new();
    for (what, source) in TYPED {
        failures.extend(check_with_random_data(what, source, 0..6, 6));
    }
    report(failures);
}

/// Every equi-join, semi-join and anti-join forced to each algorithm (`--join`) gives the
/// reference's answers, on the programs with the most joins.
#[test]
fn forced_join_algorithms_match_the_reference() {
    let mut failures = Vec::new();
    for join in fox_phys::JoinChoice::ALL {
        for (what, source) in TYPED {
            if [
                "equi-joins",
                "band joins",
                "recursion",
                "functional, disjunction, negation",
            ]
            .contains(what)
            {
                failures.extend(check_forced(what, source, 0..4, 6, join));
            }
        }
    }
    report(failures);
}

#[test]
fn random_programs_match_the_reference() {
    let seeds: Vec<u64> = match std::env::var("FOX_DIFF_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = std::env::var("FOX_DIFF_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(300u64);
            (0..n).map(|i| 0x5EED_0000 + i).collect()
        }
    };
    let mut failures = Vec::new();
    for seed in seeds {
        let c = case(seed, GenOptions::default());
        if let Err(e) = differential(&c.source, &c.inputs) {
            failures.push(format!(
                "{}\n{e}\nreproduce: FOX_DIFF_SEED={seed} cargo test -p fox-tests --test it differential::random",
                c.describe()
            ));
        }
    }
    report(failures);
}

/// String functions over a dictionary of more than 2^16 strings and more rows than one
/// chunk of the runtime's: the results (and the strings they append) are the reference
/// evaluator's, for short, long, empty and repeated strings.
#[test]
fn string_functions_over_a_large_dictionary_match_the_reference() {
    use fox_sema::core::Value;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let rows: Vec<Vec<Value>> = (0..150_000i32)
        .map(|k| {
            let s = match next() % 10 {
                0 => String::new(),
                1 => "same".to_string(),
                _ => format!("{:x}-{}", next() % 1_000_000_007, k % 97),
            };
            vec![Value::Int32(k), Value::String(s)]
        })
        .collect();
    let mut inputs = fox_tests::Inputs::new();
    inputs.insert("p".to_string(), rows);
    let source = "p(k, s) -> int32(k), string(s).
        .input p.
        q(k, t, u) <- p(k, s), t = substr(s, 2, 3), u = concat(t, s).
        n(t, c) <- agg<<c = count()>> q(_, t, _).
        .output q. .output n.";
    if let Err(e) = differential(source, &inputs) {
        panic!("{e}");
    }
}
