//! The recursive programs of queries/datalog (LogiQL and their Soufflé twins) against a
//! naive evaluation written here, on tiny cyclic and disconnected graphs and on random
//! ones; and `foxbench datalog` on generated inputs, with its failure paths.

use crate::common::{next, repo, temp_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

type Pairs = BTreeSet<(i64, i64)>;
/// An answer: per output relation its tuples.
type Answer = BTreeMap<String, BTreeSet<Vec<i64>>>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write_pairs(dir: &Path, name: &str, pairs: &Pairs) {
    let body: String = pairs.iter().map(|(x, y)| format!("{x},{y}\n")).collect();
    std::fs::write(dir.join(format!("{name}.csv")), body).unwrap();
}

fn read_pairs(dir: &Path, name: &str) -> Pairs {
    let body = std::fs::read_to_string(dir.join(format!("{name}.csv"))).unwrap();
    body.lines()
        .map(|l| {
            let (x, y) = l.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Runs `foxrun` on queries/datalog/`file` with the inputs of `data`; the outputs read
/// back (CSV with a header for LogiQL, tab-separated without one for Soufflé).
fn foxrun(file: &str, data: &Path) -> Answer {
    let out = data.join(format!("out-{file}"));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(repo().join("queries/datalog").join(file))
        .args(["--backend", "cpu", "--data"])
        .arg(data)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{file}: {}", text(&o.stderr));
    let souffle = file.ends_with(".dl");
    let mut answer = Answer::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        let body = std::fs::read_to_string(&p).unwrap();
        let rows = body
            .lines()
            .skip(if souffle { 0 } else { 1 })
            .map(|l| {
                l.split(if souffle { '\t' } else { ',' })
                    .map(|v| v.parse::<i64>().unwrap())
                    .collect()
            })
            .collect();
        answer.insert(name, rows);
    }
    answer
}

fn rel(pairs: &Pairs) -> BTreeSet<Vec<i64>> {
    pairs.iter().map(|&(x, y)| vec![x, y]).collect()
}

/// The pairs (x, z) with x → … → z in one or more steps of `e`, starting from `seed`.
fn closure(seed: &Pairs, e: &Pairs) -> Pairs {
    let mut out = seed.clone();
    loop {
        let new: Vec<_> = out
            .iter()
            .flat_map(|&(x, y)| e.range((y, i64::MIN)..=(y, i64::MAX)).map(move |&(_, z)| (x, z)))
            .filter(|p| !out.contains(p))
            .collect();
        if new.is_empty() {
            return out;
        }
        out.extend(new);
    }
}

/// `{(a, c) | (a, b) ∈ l, (b, c) ∈ r}`.
fn compose(l: &Pairs, r: &Pairs) -> Pairs {
    l.iter()
        .flat_map(|&(a, b)| r.range((b, i64::MIN)..=(b, i64::MAX)).map(move |&(_, c)| (a, c)))
        .collect()
}

fn inverse(p: &Pairs) -> Pairs {
    p.iter().map(|&(x, y)| (y, x)).collect()
}

fn tc(e: &Pairs) -> Answer {
    Answer::from([("path".to_string(), rel(&closure(e, e)))])
}

fn sg(e: &Pairs) -> Answer {
    let et = inverse(e);
    let mut sg: Pairs = compose(&et, e).into_iter().filter(|(x, y)| x != y).collect();
    loop {
        let next: Pairs = compose(&compose(&et, &sg), e);
        let before = sg.len();
        sg.extend(next);
        if sg.len() == before {
            return Answer::from([("sg".to_string(), rel(&sg))]);
        }
    }
}

fn reach(e: &Pairs, source: i64) -> Answer {
    let seen = closure(&Pairs::from([(source, source)]), e);
    Answer::from([("reach".to_string(), seen.iter().map(|&(_, y)| vec![y]).collect())])
}

fn cc(e: &Pairs) -> Answer {
    let link: Pairs = e.union(&inverse(e)).copied().collect();
    let nodes: BTreeSet<i64> = link.iter().map(|p| p.0).collect();
    let conn = closure(&nodes.iter().map(|&x| (x, x)).collect(), &link);
    let mut label = BTreeMap::new();
    for (x, y) in conn {
        let l = label.entry(x).or_insert(y);
        *l = (*l).min(y);
    }
    Answer::from([("cc".to_string(), label.into_iter().map(|(x, c)| vec![x, c]).collect())])
}

fn cspa(assign: &Pairs, deref: &Pairs) -> Answer {
    let mut vf: Pairs = assign.clone();
    let mut ma = Pairs::new();
    for &(x, y) in assign {
        vf.insert((x, x));
        vf.insert((y, y));
        ma.insert((x, x));
        ma.insert((y, y));
    }
    let mut va = Pairs::new();
    let dt = inverse(deref);
    loop {
        let size = (vf.len(), va.len(), ma.len());
        let vf_new: Vec<_> = compose(&vf, &vf).into_iter().chain(compose(assign, &ma)).collect();
        let vft = inverse(&vf);
        let ma_new = compose(&compose(&dt, &va), deref);
        let va_new: Vec<_> = compose(&vft, &vf)
            .into_iter()
            .chain(compose(&compose(&vft, &ma), &vf))
            .collect();
        vf.extend(vf_new);
        ma.extend(ma_new);
        va.extend(va_new);
        if (vf.len(), va.len(), ma.len()) == size {
            return Answer::from([
                ("valueFlow".to_string(), rel(&vf)),
                ("valueAlias".to_string(), rel(&va)),
                ("memoryAlias".to_string(), rel(&ma)),
            ]);
        }
    }
}

fn csda(null: &Pairs, arc: &Pairs) -> Answer {
    Answer::from([("nullNode".to_string(), rel(&closure(null, arc)))])
}

fn andersen(address: &Pairs, assign: &Pairs, load: &Pairs, store: &Pairs) -> Answer {
    let mut pt = address.clone();
    loop {
        let before = pt.len();
        let mut new = compose(assign, &pt);
        new.extend(compose(&compose(load, &pt), &pt));
        // pointsTo(z, w) <- store(y, x), pointsTo(y, z), pointsTo(x, w).
        new.extend(compose(&compose(&inverse(&pt), store), &pt));
        pt.extend(new);
        if pt.len() == before {
            return Answer::from([("pointsTo".to_string(), rel(&pt))]);
        }
    }
}

/// The tiny graphs every graph program runs on: a cycle with a tail, two components
/// with a self-loop, a lone edge, a DAG, and random graphs dense enough for long paths.
fn graphs() -> Vec<(String, Pairs)> {
    let mut v = vec![
        ("cycle".to_string(), Pairs::from([(1, 2), (2, 3), (3, 1), (3, 4)])),
        (
            "disconnected".to_string(),
            Pairs::from([(10, 11), (11, 10), (12, 12), (20, 21), (21, 22), (7, 20)]),
        ),
        ("one-edge".to_string(), Pairs::from([(5, 9)])),
        (
            "dag".to_string(),
            Pairs::from([(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (1, 2)]),
        ),
    ];
    let mut s = 17u64;
    for (n, m) in [(12u64, 14), (30, 40)] {
        let g = (0..m)
            .map(|_| ((next(&mut s) % n) as i64, (next(&mut s) % n) as i64))
            .collect();
        v.push((format!("random-{n}-{m}"), g));
    }
    v
}

/// Checks `program` (.logic and .dl) against `expected` on the inputs of `dir`.
fn check(program: &str, dir: &Path, expected: &Answer, what: &str) {
    for file in [format!("{program}.logic"), format!("{program}.dl")] {
        let got = foxrun(&file, dir);
        assert_eq!(&got, expected, "{file} on {what}");
    }
}

#[test]
fn graph_programs_match_a_naive_evaluation() {
    for (name, g) in graphs() {
        let dir = temp_dir("datalog", &name);
        write_pairs(&dir, "edge", &g);
        let source = g.iter().next().unwrap().0;
        std::fs::write(dir.join("source.csv"), format!("{source}\n")).unwrap();
        check("tc", &dir, &tc(&g), &name);
        check("sg", &dir, &sg(&g), &name);
        // sg_count: the number of sg's pairs (no row when there is none, as an
        // aggregation without groups over no rows).
        let pairs = sg(&g)["sg"].len() as i64;
        let counted = Answer::from([("n".to_string(), (pairs > 0).then(|| vec![pairs]).into_iter().collect())]);
        assert_eq!(foxrun("sg_count.logic", &dir), counted, "sg_count.logic on {name}");
        check("reach", &dir, &reach(&g, source), &name);
        check("cc", &dir, &cc(&g), &name);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn reach_from_a_vertex_without_edges_is_the_vertex() {
    let dir = temp_dir("datalog", "reach-alone");
    let g = Pairs::from([(1, 2)]);
    write_pairs(&dir, "edge", &g);
    std::fs::write(dir.join("source.csv"), "99\n").unwrap();
    check("reach", &dir, &reach(&g, 99), "a lone source");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Random pairs over `n` ids.
fn random_pairs(s: &mut u64, n: u64, m: usize) -> Pairs {
    (0..m).map(|_| ((next(s) % n) as i64, (next(s) % n) as i64)).collect()
}

/// An input where each CSPA rule derives a tuple no other rule does: `*1` has two
/// targets 3 and 4 (so memoryAlias(3, 4)), and valueAlias(3, 6) comes only from the
/// three-way rule through it.
#[test]
fn cspa_derives_through_memory_aliases() {
    let dir = temp_dir("datalog", "cspa-alias");
    let assign = Pairs::from([(1, 2), (3, 5), (4, 6)]);
    let deref = Pairs::from([(1, 3), (1, 4)]);
    write_pairs(&dir, "assign", &assign);
    write_pairs(&dir, "dereference", &deref);
    let expected = cspa(&assign, &deref);
    assert!(expected["valueAlias"].contains(&vec![3, 6]));
    assert!(expected["memoryAlias"].contains(&vec![3, 4]));
    check("cspa", &dir, &expected, "aliases through a dereference");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn program_analyses_match_a_naive_evaluation() {
    let mut s = 5u64;
    for k in 0..3 {
        let dir = temp_dir("datalog", &format!("analyses-{k}"));
        let n = 8 + 6 * k;
        let (assign, deref) = (random_pairs(&mut s, n, 10 + 3 * k as usize), random_pairs(&mut s, n, 8));
        write_pairs(&dir, "assign", &assign);
        write_pairs(&dir, "dereference", &deref);
        check("cspa", &dir, &cspa(&assign, &deref), &format!("random inputs {k}"));
        let (null, arc) = (random_pairs(&mut s, n, 3), random_pairs(&mut s, n, 2 * n as usize));
        write_pairs(&dir, "nullEdge", &null);
        write_pairs(&dir, "arc", &arc);
        check("csda", &dir, &csda(&null, &arc), &format!("random inputs {k}"));
        let address = random_pairs(&mut s, n, 5);
        let (load, store) = (random_pairs(&mut s, n, 4), random_pairs(&mut s, n, 4));
        for (name, p) in [("addressOf", &address), ("load", &load), ("store", &store)] {
            write_pairs(&dir, name, p);
        }
        check(
            "andersen",
            &dir,
            &andersen(&address, &assign, &load, &store),
            &format!("random inputs {k}"),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn foxbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_foxbench"))
        .current_dir(repo())
        .arg("datalog")
        .args(args)
        .output()
        .unwrap()
}

/// The tuples column of the row of `system` (the start of its name) in the table.
fn tuples_of(out: &str, system: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(system))
        .unwrap_or_else(|| panic!("no row {system} in:\n{out}"));
    let rest = line[38..].split_whitespace().next().unwrap();
    rest.parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn foxbench_datalog_on_generated_inputs_matches_a_naive_evaluation() {
    for program in ["cspa", "csda", "andersen"] {
        let keep = temp_dir("datalog", &format!("bench-{program}"));
        let o = foxbench(&[
            "--program",
            program,
            "--graph",
            "gen:0.0002:3",
            "--backend",
            "cpu",
            "--repeat",
            "2",
            "--keep-inputs",
            keep.to_str().unwrap(),
        ]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
        for col in [
            "tuples",
            "iterations",
            "load ms",
            "compute ms",
            "output ms",
            "tuples/s",
            "peak",
        ] {
            assert!(out.lines().next().unwrap().contains(col), "{out}");
        }
        let expected = match program {
            "cspa" => cspa(&read_pairs(&keep, "assign"), &read_pairs(&keep, "dereference")),
            "csda" => csda(&read_pairs(&keep, "nullEdge"), &read_pairs(&keep, "arc")),
            _ => andersen(
                &read_pairs(&keep, "addressOf"),
                &read_pairs(&keep, "assign"),
                &read_pairs(&keep, "load"),
                &read_pairs(&keep, "store"),
            ),
        };
        let n: usize = expected.values().map(BTreeSet::len).sum();
        assert!(n > 0, "{program}");
        assert_eq!(tuples_of(&out, "Fox, cpu backend"), n as u64, "{program}:\n{out}");
        for (name, rows) in &expected {
            assert!(out.contains(&format!("{name} {} (hash", rows.len())), "{name}:\n{out}");
        }
        let _ = std::fs::remove_dir_all(&keep);
    }
}

#[test]
fn foxbench_datalog_on_a_graph_counts_the_closure() {
    let dir = temp_dir("datalog", "bench-file");
    let g = Pairs::from([(1, 2), (2, 3), (3, 1), (3, 4), (8, 9)]);
    write_pairs(&dir, "g", &g);
    let file = dir.join("g.csv");
    let n = closure(&g, &g).len() as u64;
    // A gzip-compressed edge list is read as the plain one.
    let gz = dir.join("g.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, &std::fs::read(&file).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let o = foxbench(&["--program", "tc", "--graph", gz.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(tuples_of(&text(&o.stdout), "Fox, cpu backend"), n);
    for (program, want) in [("tc", n), ("reach", 4), ("cc", 6)] {
        let o = foxbench(&[
            "--program",
            program,
            "--graph",
            file.to_str().unwrap(),
            "--backend",
            "cpu",
        ]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
        assert_eq!(tuples_of(&out, "Fox, cpu backend"), want, "{program}:\n{out}");
    }
    // `--symmetrize` adds the reverse edges: (8, 9) and (9, 8) close into four paths.
    let lone = dir.join("lone.csv");
    std::fs::write(&lone, "8 9\n").unwrap();
    for (flag, want) in [(None, 1), (Some("--symmetrize"), 4)] {
        let mut args = vec!["--program", "tc", "--graph", lone.to_str().unwrap(), "--backend", "cpu"];
        args.extend(flag);
        let o = foxbench(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(tuples_of(&text(&o.stdout), "Fox, cpu backend"), want, "{flag:?}");
    }
    // `--dir` is where the programs are read from.
    let progs = dir.join("programs");
    std::fs::create_dir_all(&progs).unwrap();
    std::fs::write(
        progs.join("tc.logic"),
        "edge(x, y) -> int32(x), int32(y).\n.input edge.\npath(x, y) <- edge(x, y).\n.output path.\n",
    )
    .unwrap();
    let o = foxbench(&[
        "--program",
        "tc",
        "--graph",
        file.to_str().unwrap(),
        "--backend",
        "cpu",
        "--dir",
        progs.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(tuples_of(&text(&o.stdout), "Fox, cpu backend"), g.len() as u64);
    // `--expect-tuples` holds the count to a published one: a wrong one fails the run.
    let n_text = n.to_string();
    let o = foxbench(&[
        "--program",
        "tc",
        "--graph",
        file.to_str().unwrap(),
        "--backend",
        "cpu",
        "--expect-tuples",
        &n_text,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let wrong = (n + 1).to_string();
    let o = foxbench(&[
        "--program",
        "tc",
        "--graph",
        file.to_str().unwrap(),
        "--backend",
        "cpu",
        "--expect-tuples",
        &wrong,
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!("derived {n} tuples, not the {wrong} expected")),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in for Soufflé: a script that writes its arguments to `<path>.args`, and
/// `body` as the output `rel` into the folder after `-D`, after sleeping `sleep` seconds.
fn fake_souffle(dir: &Path, rel: &str, body: &str, sleep: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("souffle-{rel}-{sleep}"));
    let script = format!(
        "#!/bin/sh\necho \"$*\" > \"$0.args\"\nsleep {sleep}\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = -D ]; then out=\"$2\"; fi\n  shift\ndone\nprintf '{body}' > \"$out/{rel}.csv\"\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn foxbench_datalog_fails_when_the_answers_differ() {
    let dir = temp_dir("datalog", "bench-souffle");
    write_pairs(&dir, "g", &Pairs::from([(1, 2), (2, 3)]));
    let file = dir.join("g.csv");
    let run = |souffle: &Path, timeout: &str| {
        let souffle_path = souffle.to_str().unwrap();
        foxbench(&[
            "--program",
            "reach",
            "--graph",
            file.to_str().unwrap(),
            "--backend",
            "cpu",
            "--souffle",
            souffle_path,
            "--souffle-timeout",
            timeout,
            "--souffle-threads",
            "3",
        ])
    };
    // The right answer (reach from 1: 1, 2, 3) agrees.
    let right = fake_souffle(&dir, "reach", "1\\n2\\n3\\n", 0);
    let o = run(&right, "60");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert_eq!(tuples_of(&out, "Soufflé"), 3, "{out}");
    let args = std::fs::read_to_string(right.with_extension("args")).unwrap();
    assert!(args.starts_with("-j3 --no-preprocessor -F "), "{args}");
    assert!(args.trim_end().ends_with("queries/datalog/reach.dl"), "{args}");
    // A wrong tuple with the right count is a different answer.
    let wrong = fake_souffle(&dir, "reach", "1\\n2\\n4\\n", 0);
    let o = run(&wrong, "60");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let e = text(&o.stderr);
    assert!(e.contains("the answers differ: Fox, cpu backend"), "{e}");
    assert!(e.contains("and Soufflé interpreter"), "{e}");
    // A baseline that runs past the time-out is reported, and not compared.
    let slow = fake_souffle(&dir, "reach", "1\\n", 5);
    let o = run(&slow, "1");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(out.contains("timed out after 1 s"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn foxbench_datalog_refuses_bad_inputs() {
    let dir = temp_dir("datalog", "bench-bad");
    let file = dir.join("bad.csv");
    std::fs::write(&file, "1,2\n2,x\n").unwrap();
    let o = foxbench(&["--program", "tc", "--graph", file.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("bad.csv") && e.contains(":2"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    // The same file gzip-compressed: unpacked, and its errors name it.
    let gz = dir.join("bad.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, b"1,2\n2,x\n").unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let o = foxbench(&["--program", "tc", "--graph", gz.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("bad.csv.gz:2"), "{e}");
    // Generated program-analysis inputs are not a graph, and the reverse.
    let o = foxbench(&["--program", "tc", "--graph", "gen:0.001", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("tc reads a graph"), "{}", text(&o.stderr));
    let o = foxbench(&["--program", "cspa", "--graph", "rmat:4", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("give --graph gen:SCALE"),
        "{}",
        text(&o.stderr)
    );
    let o = foxbench(&[
        "--program",
        "tc",
        "--graph",
        "rmat:4",
        "--source",
        "1",
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--source gives the source vertex of reach"),
        "{}",
        text(&o.stderr)
    );
    let o = foxbench(&[
        "--program",
        "tc",
        "--graph",
        "rmat:4",
        "--backend",
        "cpu",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("there is no program"), "{}", text(&o.stderr));
    let o = foxbench(&["--program", "cspa", "--graph", "gen:0", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("is not a scale"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// With FOX_SOUFFLE naming a Soufflé binary, every program's answer on generated inputs
/// is compared with Soufflé's (CI has no Soufflé: the test then checks nothing).
#[test]
fn foxbench_datalog_agrees_with_souffle_when_given() {
    let Ok(souffle) = std::env::var("FOX_SOUFFLE") else {
        return;
    };
    for (program, graph) in [
        ("tc", "gnm:60:90:1"),
        ("sg", "gnm:60:90:2"),
        ("cc", "gnm:60:50:3"),
        ("cspa", "gen:0.001:1"),
        ("csda", "gen:0.001:1"),
        ("andersen", "gen:0.001:1"),
    ] {
        let o = foxbench(&[
            "--program",
            program,
            "--graph",
            graph,
            "--backend",
            "cpu",
            "--souffle",
            &souffle,
            "--souffle-threads",
            "2",
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{program}: {}\n{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
}

/// `foxc compile FILE ARGS…`, which must succeed; its standard output.
fn foxc(file: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_foxc"))
        .arg("compile")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}: {}", file.display(), text(&o.stderr));
    text(&o.stdout)
}

/// Runs the plan file `plan` on `data` into `out`; the output files, by name, as bytes.
fn run_plan(plan: &Path, data: &Path, out: &Path) -> BTreeMap<String, Vec<u8>> {
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(env!("CARGO_BIN_EXE_foxrun"))
        .arg(plan)
        .args(["--backend", "cpu", "--data"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}: {}", plan.display(), text(&o.stderr));
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// The kernels a loop never changes run once before it (`foxc compile` by default) or on
/// every iteration (`--keep-loop-invariants`): the outputs are the same bytes, for every
/// program of queries/datalog and for a mutual recursion that sorts the relations it
/// writes inside its loop.
#[test]
fn plans_with_loop_invariants_hoisted_or_kept_write_the_same_bytes() {
    let dir = temp_dir("datalog", "hoist");
    let mut s = 23u64;
    write_pairs(&dir, "edge", &random_pairs(&mut s, 30, 45));
    std::fs::write(dir.join("source.csv"), "3\n").unwrap();
    write_pairs(&dir, "e", &random_pairs(&mut s, 20, 30));
    for name in ["assign", "dereference", "nullEdge", "addressOf", "load", "store"] {
        write_pairs(&dir, name, &random_pairs(&mut s, 14, 12));
    }
    write_pairs(&dir, "arc", &random_pairs(&mut s, 14, 28));
    let mutual = dir.join("mutual.logic");
    std::fs::write(
        &mutual,
        "e(x, y) -> int32(x), int32(y).\n.input e.\np(x, y) <- e(x, y).\nq(x, y) <- e(y, x).\n\
         p(x, z) <- p(x, y), e(y, z), q(z, y).\nq(x, z) <- q(x, y), p(z, y).\n.output p.\n.output q.\n",
    )
    .unwrap();
    let mut programs: Vec<std::path::PathBuf> = ["tc", "sg", "reach", "cc", "cspa", "csda", "andersen"]
        .iter()
        .map(|p| repo().join(format!("queries/datalog/{p}.logic")))
        .collect();
    programs.push(mutual);
    for file in &programs {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let hoisted = dir.join(format!("{stem}-hoisted.ron"));
        let kept = dir.join(format!("{stem}-kept.ron"));
        foxc(file, &["-o", hoisted.to_str().unwrap()]);
        foxc(file, &["--keep-loop-invariants", "-o", kept.to_str().unwrap()]);
        let a = run_plan(&hoisted, &dir, &dir.join(format!("out-{stem}-hoisted")));
        let b = run_plan(&kept, &dir, &dir.join(format!("out-{stem}-kept")));
        assert!(!a.is_empty(), "{stem}");
        assert_eq!(a, b, "{stem}");
    }
    // The flag keeps TC's sort of `edge` in the loop, whose block comes after the
    // start block; by default it runs in the start block.
    let tc = repo().join("queries/datalog/tc.logic");
    let sort = "sort_perm[asc](edge.x)";
    let in_loop = |plan: &str| {
        let start = plan.find("block b1 ").unwrap();
        plan[start..].contains(sort) && !plan[..start].contains(sort)
    };
    assert!(in_loop(&foxc(&tc, &["--emit", "kernels", "--keep-loop-invariants"])));
    assert!(!in_loop(&foxc(&tc, &["--emit", "kernels"])));
    let _ = std::fs::remove_dir_all(&dir);
}
