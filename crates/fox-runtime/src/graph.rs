//! Graphs for `--graph`: the `edge` relation of an undirected graph, generated in memory
//! or read from an edge-list file.
//!
//! - `rmat:SCALE[:EDGEFACTOR][:SEED]`: an R-MAT graph with the Graph500 parameters
//!   (a = 0.57, b = c = 0.19, d = 0.05) on 2^SCALE vertices with EDGEFACTOR × 2^SCALE
//!   generated edges (default 16), vertex labels scrambled by a seeded permutation;
//! - `gnm:N:M:SEED`: a uniform random graph with N vertices and exactly M edges;
//! - `PATH`, any other spec naming an existing file: an edge list (SNAP style), one edge
//!   per line, two integer vertex ids (int32) separated by whitespace, commas or tabs,
//!   further columns (weights) ignored, lines starting with `#` or `%` and blank lines
//!   skipped. Without `--symmetrize` the edges are taken as given (direction and
//!   self-loops kept), only sorted and with duplicates removed (a relation is a set); with
//!   it, the reverse of every edge is added and self-loops are dropped, as the generators
//!   do.
//!
//! Generated graphs have no self-loops or duplicate edges, and each undirected edge is
//! stored in both directions (`edge(x, y)` and `edge(y, x)`), sorted, as the clique queries
//! expect. The generation is split into chunks with seeds of their own, so the graph
//! depends on the spec alone, not on the number of cores.

use crate::alloc::{try_filled, try_par_collect, try_reserve, try_with_capacity};
use crate::cancel::is_set;
use rayon::prelude::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// A parsed `--graph` spec.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphSpec {
    Rmat {
        scale: u32,
        edge_factor: u64,
        seed: u64,
    },
    Gnm {
        n: u64,
        m: u64,
        seed: u64,
    },
    /// An edge-list file; `symmetrize` adds reverse edges and drops self-loops.
    File {
        path: PathBuf,
        symmetrize: bool,
    },
    /// A graph with its vertices renumbered 0, 1, … in ascending order of degree (ties by
    /// label), the same edges otherwise (`--degree-order`).
    DegreeOrdered(Box<GraphSpec>),
}

impl std::fmt::Display for GraphSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphSpec::Rmat {
                scale,
                edge_factor,
                seed,
            } => write!(f, "rmat:{scale}:{edge_factor}:{seed}"),
            GraphSpec::Gnm { n, m, seed } => write!(f, "gnm:{n}:{m}:{seed}"),
            GraphSpec::File { path, symmetrize } => {
                write!(f, "{}", path.display())?;
                if *symmetrize {
                    write!(f, " --symmetrize")?;
                }
                Ok(())
            }
            GraphSpec::DegreeOrdered(g) => write!(f, "{g} --degree-order"),
        }
    }
}

impl GraphSpec {
    /// Parses `rmat:SCALE[:EF][:SEED]`, `gnm:N:M:SEED`, or the path of an existing file
    /// (read as given: see [`GraphSpec::with_symmetrize`]). A spec starting with `rmat` or
    /// `gnm` and a colon is always a generator (write `./rmat:x` for such a file).
    pub fn parse(s: &str) -> Result<GraphSpec, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if !matches!(parts.as_slice(), ["rmat" | "gnm", _, ..]) && !s.is_empty() {
            let path = Path::new(s);
            if path.is_file() {
                return Ok(GraphSpec::File {
                    path: path.to_path_buf(),
                    symmetrize: false,
                });
            }
            if path.is_dir() {
                return Err(format!("`{s}` is a directory, not an edge-list file"));
            }
        }
        let num = |what: &str, v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("`{v}` is not a number (the {what} of `--graph {s}`)"))
        };
        match parts.as_slice() {
            ["rmat", rest @ ..] if (1..=3).contains(&rest.len()) => {
                let scale = num("scale", rest[0])?;
                if !(1..=30).contains(&scale) {
                    return Err(format!("the R-MAT scale must be 1 to 30 (2^30 vertices), not {scale}"));
                }
                let edge_factor = match rest.get(1) {
                    Some(v) => num("edge factor", v)?,
                    None => 16,
                };
                if !(1..=1024).contains(&edge_factor) {
                    return Err(format!("the R-MAT edge factor must be 1 to 1024, not {edge_factor}"));
                }
                if (edge_factor << scale) > (1u64 << 32) {
                    return Err(format!(
                        "rmat:{scale}:{edge_factor} has {} edges, more than 2^32",
                        edge_factor << scale
                    ));
                }
                let seed = match rest.get(2) {
                    Some(v) => num("seed", v)?,
                    None => 1,
                };
                Ok(GraphSpec::Rmat {
                    scale: scale as u32,
                    edge_factor,
                    seed,
                })
            }
            ["gnm", n, m, seed] => {
                let (n, m, seed) = (num("vertex count", n)?, num("edge count", m)?, num("seed", seed)?);
                if n == 0 || n > i32::MAX as u64 {
                    return Err(format!("a G(n, m) graph needs 1 to 2^31-1 vertices, not {n}"));
                }
                let max = n * (n - 1) / 2;
                if m > max {
                    return Err(format!("a graph with {n} vertices has at most {max} edges, not {m}"));
                }
                if m > 1 << 31 {
                    return Err(format!("{m} edges are more than 2^31"));
                }
                Ok(GraphSpec::Gnm { n, m, seed })
            }
            _ => Err(format!(
                "`{s}` is not a graph: use rmat:SCALE[:EDGEFACTOR][:SEED] (e.g. rmat:20), gnm:N:M:SEED (e.g. gnm:1000:5000:1) or the path of an edge-list file (no file `{s}` exists)"
            )),
        }
    }

    /// The spec with `--symmetrize` applied: a file's edges get their reverses and lose
    /// their self-loops; generated graphs are symmetric already, so they are unchanged.
    pub fn with_symmetrize(self, on: bool) -> GraphSpec {
        match self {
            GraphSpec::File { path, symmetrize } => GraphSpec::File {
                path,
                symmetrize: symmetrize || on,
            },
            GraphSpec::DegreeOrdered(g) => GraphSpec::DegreeOrdered(Box::new(g.with_symmetrize(on))),
            g => g,
        }
    }

    /// The spec with `--degree-order` applied when `on`: vertices renumbered by degree.
    pub fn with_degree_order(self, on: bool) -> GraphSpec {
        match self {
            g @ GraphSpec::DegreeOrdered(_) => g,
            g if on => GraphSpec::DegreeOrdered(Box::new(g)),
            g => g,
        }
    }

    /// The number of vertex labels of a generated graph (`None` for a file).
    pub fn vertex_labels(&self) -> Option<u64> {
        match self {
            GraphSpec::Rmat { scale, .. } => Some(1u64 << scale),
            GraphSpec::Gnm { n, .. } => Some(*n),
            GraphSpec::File { .. } => None,
            GraphSpec::DegreeOrdered(g) => g.vertex_labels(),
        }
    }

    /// The number of edges generated before duplicates and self-loops are removed, or
    /// of lines of a file estimated from its size and its first mebibyte (for progress
    /// bars; 0 when unknown).
    pub fn generated_edges(&self) -> u64 {
        match self {
            GraphSpec::Rmat { scale, edge_factor, .. } => edge_factor << scale,
            GraphSpec::Gnm { m, .. } => *m,
            GraphSpec::File { path, .. } => estimate_lines(path).unwrap_or(0),
            GraphSpec::DegreeOrdered(g) => g.generated_edges(),
        }
    }
}

/// SplitMix64: a small, good generator for seeding and for uniform draws.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    /// The generator of chunk `k` of a graph. Chunk 0 starts from the seed itself; the
    /// others from the seed mixed with a hash of k. (With `Rng::new(seed, k)`, whose
    /// states are `seed ^ k·φ` plus `i·φ`, chunk k + 2j repeated chunk k shifted by 2j
    /// draws: at an even R-MAT scale s, chunk k + s drew chunk k's edges again, so
    /// rmat:22 kept only 22.6 M of its 67 M edges.)
    fn chunk(seed: u64, k: u64) -> Rng {
        if k == 0 {
            return Rng::new(seed, 0);
        }
        let mut z = k;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng::new(seed ^ z ^ (z >> 31), 0)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

const CHUNK: u64 = 1 << 20;

/// A slot of the drawn edges that holds no edge (a self-loop was drawn): above every
/// packed edge, whose vertices are below 2^31.
const NONE: u64 = u64::MAX;

/// One R-MAT edge (Graph500 parameters) between vertices below 2^scale.
fn rmat_edge(r: &mut Rng, scale: u32) -> (u64, u64) {
    let (a, b, c) = (0.57, 0.19, 0.19);
    let (mut x, mut y) = (0u64, 0u64);
    for _ in 0..scale {
        let p = r.unit();
        let (bx, by) = if p < a {
            (0, 0)
        } else if p < a + b {
            (0, 1)
        } else if p < a + b + c {
            (1, 0)
        } else {
            (1, 1)
        };
        x = (x << 1) | bx;
        y = (y << 1) | by;
    }
    (x, y)
}

/// A seeded permutation of 0..n (Fisher-Yates), to scramble R-MAT's vertex labels.
fn permutation(n: u64, seed: u64) -> Result<Vec<u32>, String> {
    let mut p: Vec<u32> = try_par_collect((0..n as u32).into_par_iter(), "the vertex labels of the graph")?;
    let mut r = Rng::new(seed, u64::MAX);
    for i in (1..n as usize).rev() {
        let j = r.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    Ok(p)
}

/// What a generated graph's edges are called in out-of-memory messages.
const EDGES: &str = "the edges of the graph";

/// The undirected edges (x < y) of a generated graph, as `x << 32 | y`, sorted and
/// distinct; an error when memory runs out. When `stop` is set (read once per chunk) the
/// edges are incomplete: the caller checks it.
fn undirected(spec: &GraphSpec, progress: &(dyn Fn(u64) + Sync), stop: &AtomicBool) -> Result<Vec<u64>, String> {
    let pack = |x: u64, y: u64| if x < y { (x << 32) | y } else { (y << 32) | x };
    let mut edges: Vec<u64> = match spec {
        GraphSpec::Rmat {
            scale,
            edge_factor,
            seed,
        } => {
            let total = edge_factor << scale;
            let perm = permutation(1u64 << scale, *seed)?;
            // Each chunk draws into its own slice; a self-loop leaves the slot `NONE`.
            let mut edges = try_filled(total as usize, NONE, EDGES)?;
            edges.par_chunks_mut(CHUNK as usize).enumerate().for_each(|(k, out)| {
                if is_set(stop) {
                    return;
                }
                let mut r = Rng::chunk(*seed, k as u64);
                for e in out.iter_mut() {
                    let (x, y) = rmat_edge(&mut r, *scale);
                    let (x, y) = (perm[x as usize] as u64, perm[y as usize] as u64);
                    if x != y {
                        *e = pack(x, y);
                    }
                }
                progress(out.len() as u64);
            });
            edges
        }
        GraphSpec::Gnm { n, m, seed } => {
            // Draw, remove duplicates, and draw again for the missing edges.
            let mut have: Vec<u64> = Vec::new();
            let mut round = 0u64;
            while (have.len() as u64) < *m && !is_set(stop) {
                let want = *m - have.len() as u64;
                let base = have.len();
                try_reserve(&mut have, want as usize, EDGES)?;
                have.resize(base + want as usize, NONE);
                have[base..]
                    .par_chunks_mut(CHUNK as usize)
                    .enumerate()
                    .for_each(|(k, out)| {
                        if is_set(stop) {
                            return;
                        }
                        let mut r = Rng::chunk(*seed, (round << 32) | k as u64);
                        for e in out.iter_mut() {
                            let (x, y) = (r.below(*n), r.below(*n));
                            if x != y {
                                *e = pack(x, y);
                            }
                        }
                    });
                have.par_sort_unstable();
                have.dedup();
                if have.last() == Some(&NONE) {
                    have.pop();
                }
                if have.len() as u64 > *m {
                    // Keep a seeded choice of exactly m edges.
                    let mut r = Rng::new(*seed, u64::MAX - 1);
                    for i in (1..have.len()).rev() {
                        let j = r.below(i as u64 + 1) as usize;
                        have.swap(i, j);
                    }
                    have.truncate(*m as usize);
                }
                round += 1;
            }
            progress(*m);
            have
        }
        GraphSpec::File { .. } | GraphSpec::DegreeOrdered(_) => unreachable!("generate handles files and renumbering"),
    };
    edges.par_sort_unstable();
    edges.dedup();
    if edges.last() == Some(&NONE) {
        edges.pop();
    }
    Ok(edges)
}

/// The edge relation as the two columns x and y, sorted by (x, y) and distinct: both
/// directions of every undirected edge of a generated graph, or a file's edges (see the
/// module's documentation). Errors (a file that cannot be read, a bad line) are messages
/// naming the file and line.
pub fn generate(spec: &GraphSpec, progress: &(dyn Fn(u64) + Sync)) -> Result<(Vec<i64>, Vec<i64>), String> {
    generate_until(spec, progress, crate::cancel::never())
}

/// [`generate`], stopped with the error `interrupted` when `stop` is set (read once per
/// chunk of generated edges or block of the file).
pub fn generate_until(
    spec: &GraphSpec,
    progress: &(dyn Fn(u64) + Sync),
    stop: &AtomicBool,
) -> Result<(Vec<i64>, Vec<i64>), String> {
    let interrupted = || "interrupted".to_string();
    if let GraphSpec::DegreeOrdered(g) = spec {
        let (x, y) = generate_until(g, progress, stop)?;
        if is_set(stop) {
            return Err(interrupted());
        }
        return order_by_degree(&x, &y);
    }
    if let GraphSpec::File { path, symmetrize } = spec {
        let mut edges = read_edges(path, progress, stop)?;
        if *symmetrize {
            let loops = edges.par_iter().filter(|e| (*e >> 32) == (*e & 0xffff_ffff)).count();
            let mut both = try_with_capacity(2 * (edges.len() - loops), EDGES)?;
            both.par_extend(
                edges
                    .par_iter()
                    .filter(|e| (*e >> 32) != (*e & 0xffff_ffff))
                    .flat_map_iter(|&e| [e, e.rotate_right(32)]),
            );
            edges = both;
        }
        edges.par_sort_unstable();
        edges.dedup();
        let x = try_par_collect(edges.par_iter().map(|&e| unbias((e >> 32) as u32) as i64), EDGES)?;
        let y = try_par_collect(edges.par_iter().map(|&e| unbias(e as u32) as i64), EDGES)?;
        return Ok((x, y));
    }
    let und = undirected(spec, progress, stop)?;
    if is_set(stop) {
        return Err(interrupted());
    }
    let mut both: Vec<u64> = try_with_capacity(und.len() * 2, EDGES)?;
    both.extend(und.iter().copied());
    both.extend(und.iter().map(|e| e.rotate_right(32)));
    drop(und);
    both.par_sort_unstable();
    let x = try_par_collect(both.par_iter().map(|e| (e >> 32) as i64), EDGES)?;
    let y = try_par_collect(both.par_iter().map(|e| (e & 0xffff_ffff) as i64), EDGES)?;
    Ok((x, y))
}

/// An int32 as a u32 in the same order (the sign bit flipped), so that packed pairs
/// `bias(x) << 32 | bias(y)` sort as (x, y).
fn bias(v: i32) -> u32 {
    (v as u32) ^ 0x8000_0000
}

fn unbias(v: u32) -> i32 {
    (v ^ 0x8000_0000) as i32
}

/// The bytes read from an edge-list file at a time; each block is parsed on all cores.
const BLOCK: usize = 64 << 20;

/// About how many lines `path` has: its size times the line density of its first MiB.
fn estimate_lines(path: &Path) -> Option<u64> {
    let size = std::fs::metadata(path).ok()?.len();
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut head)
        .ok()?;
    let lines = head.iter().filter(|&&b| b == b'\n').count().max(1) as u64;
    Some(if head.is_empty() {
        0
    } else {
        size * lines / head.len() as u64
    })
}

/// The edges of an edge-list file as packed biased pairs, in file order (duplicates
/// kept). The file is read in blocks, each split at line ends into pieces parsed in
/// parallel; an error names the first bad line.
fn read_edges(path: &Path, progress: &(dyn Fn(u64) + Sync), stop: &AtomicBool) -> Result<Vec<u64>, String> {
    let name = path.display();
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read the graph `{name}`: {e}"))?;
    let mut edges: Vec<u64> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut lines_before = 0u64;
    let pieces = rayon::current_num_threads() * 4;
    loop {
        if is_set(stop) {
            return Err("interrupted".to_string());
        }
        // Fill the block after the partial line carried over.
        let carried = buf.len();
        try_reserve(&mut buf, BLOCK, "a block of the graph file")?;
        buf.resize(carried + BLOCK, 0);
        let mut filled = carried;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(k) => filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("cannot read the graph `{name}`: {e}")),
            }
        }
        buf.truncate(filled);
        let eof = filled < carried + BLOCK;
        // Parse up to the last line end (everything at the end of the file).
        let end = if eof {
            buf.len()
        } else {
            match buf.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None if buf.len() >= BLOCK => {
                    return Err(format!(
                        "{name}:{}: a line longer than {} MiB",
                        lines_before + 1,
                        BLOCK >> 20
                    ))
                }
                None => 0,
            }
        };
        let block = &buf[..end];
        // Pieces of the block, each ending after a line end.
        let mut cuts = vec![0];
        for p in 1..pieces {
            let at = block.len() * p / pieces;
            let from = *cuts.last().unwrap_or(&0);
            if at <= from {
                continue;
            }
            if let Some(i) = block[at..].iter().position(|&b| b == b'\n') {
                cuts.push(at + i + 1);
            }
        }
        cuts.push(block.len());
        cuts.dedup();
        let parsed: Vec<Piece> = cuts.par_windows(2).map(|w| parse_piece(&block[w[0]..w[1]])).collect();
        let mut lines = lines_before;
        for (piece, n, err) in parsed {
            if let Some((at, msg)) = err {
                return Err(format!("{name}:{}: {msg}", lines + at));
            }
            try_reserve(&mut edges, piece.len(), EDGES)?;
            edges.extend_from_slice(&piece);
            lines += n;
        }
        progress(lines - lines_before);
        lines_before = lines;
        buf.drain(..end);
        if eof {
            return Ok(edges);
        }
    }
}

/// The edges of whole lines of an edge list: the packed pairs, the number of lines, and
/// the first error with its line number (from 1) in the piece.
type Piece = (Vec<u64>, u64, Option<(u64, String)>);

/// Parses whole lines of an edge list (see [`Piece`]).
fn parse_piece(text: &[u8]) -> Piece {
    let mut edges = Vec::with_capacity(text.len() / 12);
    let mut n = 0u64;
    for line in text.split_inclusive(|&b| b == b'\n') {
        n += 1;
        match parse_line(line) {
            Ok(Some((x, y))) => edges.push(((bias(x) as u64) << 32) | bias(y) as u64),
            Ok(None) => {}
            Err(msg) => return (edges, n, Some((n, msg))),
        }
    }
    (edges, n, None)
}

/// One line of an edge list: `None` for a blank line or a comment.
fn parse_line(line: &[u8]) -> Result<Option<(i32, i32)>, String> {
    let sep = |b: &u8| matches!(b, b' ' | b'\t' | b',' | b'\r' | b'\n');
    let mut fields = line.split(sep).filter(|f| !f.is_empty());
    let Some(first) = fields.next() else {
        return Ok(None);
    };
    if first[0] == b'#' || first[0] == b'%' {
        return Ok(None);
    }
    let shown = || {
        let t = String::from_utf8_lossy(line);
        let t = t.trim_end_matches(['\r', '\n']);
        if t.chars().count() > 80 {
            format!("{}…", t.chars().take(80).collect::<String>())
        } else {
            t.to_string()
        }
    };
    let id = |f: &[u8]| -> Result<i32, String> {
        let text = std::str::from_utf8(f).ok();
        match text.and_then(|t| t.parse::<i64>().ok()) {
            Some(v) => i32::try_from(v).map_err(|_| {
                format!(
                    "the vertex id {v} does not fit in int32 (-2147483648 to 2147483647), in `{}`",
                    shown()
                )
            }),
            None => Err(format!(
                "expected two integer vertex ids separated by whitespace, a comma or a tab, found `{}` (comment lines start with # or %)",
                shown()
            )),
        }
    };
    let x = id(first)?;
    let Some(second) = fields.next() else {
        return Err(format!(
            "expected two integer vertex ids, found only one in `{}`",
            shown()
        ));
    };
    let y = id(second)?;
    Ok(Some((x, y)))
}

/// Renumbers the vertices of the edges (x, y) 0, 1, … in ascending order of degree (edges
/// in which a vertex occurs, either side), ties by label, and returns the edges sorted by
/// (x, y). With the vertices so ordered, a clique listed with ascending vertices starts
/// at its vertex of least degree, and the neighbours of a vertex that come after it are
/// at most about the square root of twice the edges: no hub has a long list to search.
/// An error when memory runs out.
pub fn order_by_degree(x: &[i64], y: &[i64]) -> Result<(Vec<i64>, Vec<i64>), String> {
    const WHAT: &str = "the renumbering of the graph's vertices";
    let mut verts: Vec<i64> = try_par_collect(x.par_iter().chain(y.par_iter()).copied(), WHAT)?;
    verts.par_sort_unstable();
    verts.dedup();
    let index = |v: &i64| verts.binary_search(v).unwrap_or(0) as u32;
    let xi: Vec<u32> = try_par_collect(x.par_iter().map(index), WHAT)?;
    let yi: Vec<u32> = try_par_collect(y.par_iter().map(index), WHAT)?;
    let mut all: Vec<u32> = try_par_collect(xi.par_iter().chain(yi.par_iter()).copied(), WHAT)?;
    all.par_sort_unstable();
    let mut degree = try_filled(verts.len(), 0u64, WHAT)?;
    for run in all.chunk_by(|a, b| a == b) {
        degree[run[0] as usize] = run.len() as u64;
    }
    drop(all);
    let mut order: Vec<u32> = try_par_collect((0..verts.len() as u32).into_par_iter(), WHAT)?;
    order.par_sort_unstable_by_key(|&v| (degree[v as usize], v));
    let mut rank = try_filled(verts.len(), 0u32, WHAT)?;
    for (k, &v) in order.iter().enumerate() {
        rank[v as usize] = k as u32;
    }
    let mut pairs: Vec<u64> = try_par_collect(
        xi.par_iter()
            .zip(yi.par_iter())
            .map(|(&a, &b)| (u64::from(rank[a as usize]) << 32) | u64::from(rank[b as usize])),
        WHAT,
    )?;
    pairs.par_sort_unstable();
    let x = try_par_collect(pairs.par_iter().map(|e| (e >> 32) as i64), WHAT)?;
    let y = try_par_collect(pairs.par_iter().map(|e| (e & 0xffff_ffff) as i64), WHAT)?;
    Ok((x, y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_reject() {
        assert_eq!(
            GraphSpec::parse("rmat:10").unwrap(),
            GraphSpec::Rmat {
                scale: 10,
                edge_factor: 16,
                seed: 1
            }
        );
        assert_eq!(
            GraphSpec::parse("rmat:12:8:7").unwrap(),
            GraphSpec::Rmat {
                scale: 12,
                edge_factor: 8,
                seed: 7
            }
        );
        assert_eq!(
            GraphSpec::parse("gnm:100:300:2").unwrap(),
            GraphSpec::Gnm {
                n: 100,
                m: 300,
                seed: 2
            }
        );
        for bad in [
            "",
            "rmat",
            "rmat:x",
            "rmat:0",
            "rmat:31",
            "rmat:10:0",
            "gnm:10:46:1",
            "gnm:0:0:1",
            "er:10",
            "gnm:10:5",
        ] {
            assert!(GraphSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn graphs_are_simple_symmetric_and_deterministic() {
        for spec in ["rmat:10:8:3", "gnm:200:1000:5", "gnm:5:10:1"] {
            let g = GraphSpec::parse(spec).unwrap();
            let (x, y) = generate(&g, &|_| {}).unwrap();
            assert_eq!(x.len(), y.len());
            let pairs: Vec<(i64, i64)> = x.iter().copied().zip(y.iter().copied()).collect();
            assert!(pairs.windows(2).all(|w| w[0] < w[1]), "{spec}: sorted, distinct");
            assert!(pairs.iter().all(|(a, b)| a != b), "{spec}: no self-loops");
            let set: std::collections::HashSet<(i64, i64)> = pairs.iter().copied().collect();
            assert!(pairs.iter().all(|(a, b)| set.contains(&(*b, *a))), "{spec}: symmetric");
            assert_eq!(generate(&g, &|_| {}).unwrap(), (x, y), "{spec}: deterministic");
        }
        // G(n, m) has exactly m undirected edges; K5 is gnm:5:10.
        let (x, _) = generate(&GraphSpec::parse("gnm:200:1000:5").unwrap(), &|_| {}).unwrap();
        assert_eq!(x.len(), 2000);
        let (x, _) = generate(&GraphSpec::parse("gnm:5:10:1").unwrap(), &|_| {}).unwrap();
        assert_eq!(x.len(), 20);
    }

    fn temp_file(name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let p = std::env::temp_dir().join(format!("fox-graph-unit-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    fn read(path: &Path, symmetrize: bool) -> Result<Vec<(i64, i64)>, String> {
        let spec = GraphSpec::parse(path.to_str().unwrap())?.with_symmetrize(symmetrize);
        let (x, y) = generate(&spec, &|_| {})?;
        Ok(x.into_iter().zip(y).collect())
    }

    #[test]
    fn edge_list_files() {
        let text = "# SNAP-style header\n% a Matrix Market comment\n\n1\t2\n2 1\n  3,\t1 0.5 extra\r\n\
                    1 2\n4 4\n-7 2147483647\n5 6 # trailing words\n";
        let p = temp_file("ok.txt", text);
        assert_eq!(
            GraphSpec::parse(p.to_str().unwrap()).unwrap(),
            GraphSpec::File {
                path: p.clone(),
                symmetrize: false
            }
        );
        // As given: sorted, duplicates removed, self-loops and direction kept.
        assert_eq!(
            read(&p, false).unwrap(),
            vec![(-7, 2147483647), (1, 2), (2, 1), (3, 1), (4, 4), (5, 6)]
        );
        // Symmetrized: both directions, no self-loops.
        assert_eq!(
            read(&p, true).unwrap(),
            vec![
                (-7, 2147483647),
                (1, 2),
                (1, 3),
                (2, 1),
                (3, 1),
                (5, 6),
                (6, 5),
                (2147483647, -7)
            ]
        );
        assert!(GraphSpec::parse(p.to_str().unwrap())
            .unwrap()
            .to_string()
            .ends_with("ok.txt"));
        assert!(GraphSpec::parse(p.to_str().unwrap())
            .unwrap()
            .with_symmetrize(true)
            .to_string()
            .ends_with("ok.txt --symmetrize"));
        // The estimate for the progress bar: the file's 10 lines.
        assert_eq!(GraphSpec::parse(p.to_str().unwrap()).unwrap().generated_edges(), 10);
        std::fs::remove_file(&p).unwrap();
        let empty = temp_file("empty.txt", "# nothing\n");
        assert_eq!(read(&empty, true).unwrap(), vec![]);
        std::fs::remove_file(&empty).unwrap();
    }

    #[test]
    fn bad_edge_lists_name_the_line() {
        // A bad line deep in a file split into many pieces.
        let mut text: String = (0..5000).map(|i| format!("{i} {}\n", i + 1)).collect();
        text.push_str("12 x13\n");
        text.push_str("1 2\n");
        let p = temp_file("bad.txt", &text);
        let e = read(&p, false).unwrap_err();
        assert!(e.ends_with("bad.txt:5001: expected two integer vertex ids separated by whitespace, a comma or a tab, found `12 x13` (comment lines start with # or %)"), "{e}");
        std::fs::remove_file(&p).unwrap();
        for (text, line, what) in [
            (&b"1 2\n3\n"[..], 2, "found only one in `3`"),
            (
                &b"1 2\n\n3 2147483648\n"[..],
                3,
                "the vertex id 2147483648 does not fit in int32",
            ),
            (
                &b"1 2\n3 -2147483649"[..],
                2,
                "the vertex id -2147483649 does not fit in int32",
            ),
            (&b"source,target\n1,2\n"[..], 1, "found `source,target`"),
            (&b"1 2\n1.5 2\n"[..], 2, "found `1.5 2`"),
            (&b"1 2\n\xff 2\n"[..], 2, "found `\u{fffd} 2`"),
        ] {
            let p = temp_file("bad2.txt", text);
            let e = read(&p, true).unwrap_err();
            assert!(
                e.contains(&format!("bad2.txt:{line}: ")) && e.contains(what),
                "{}: {e}",
                String::from_utf8_lossy(text)
            );
            std::fs::remove_file(&p).unwrap();
        }
        // Not a file: the spec error lists the forms.
        let e = GraphSpec::parse("/no/such/edges.tsv").unwrap_err();
        assert!(e.contains("no file `/no/such/edges.tsv` exists"), "{e}");
        let e = GraphSpec::parse(std::env::temp_dir().to_str().unwrap()).unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
    }

    /// FNV-1a of the edge count and the edges (x, y as little-endian int64), in order.
    fn digest(x: &[i64], y: &[i64]) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut eat = |v: i64| {
            for b in v.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(x.len() as i64);
        for (&a, &b) in x.iter().zip(y) {
            eat(a);
            eat(b);
        }
        h
    }

    #[test]
    fn generated_graphs_are_pinned() {
        // The edges of each spec, whatever the code that makes them: (rows, digest).
        let file = temp_file(
            "pinned.txt",
            (0..3000u64)
                .map(|i| i % 2000)
                .map(|i| format!("{} {}\n", (i * 7919 % 613) as i64 - 300, i * 104_729 % 587))
                .collect::<String>(),
        );
        let f = file.to_str().unwrap().to_string();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for (spec, symmetrize, degree, rows, hash) in [
            ("rmat:17", false, false, 3729078, 0x05586da0543755c9),
            ("rmat:10:8:3", false, false, 11970, 0xd0291a71b94834a1),
            ("rmat:12:2:5", false, true, 15136, 0x06e5cefa64273ba4),
            ("gnm:2000:30000:4", false, false, 60000, 0x6173c52c7eed8ee3),
            ("gnm:300:2000:2", false, true, 4000, 0xf503a981e3d7781c),
            (f.as_str(), false, false, 2000, 0xb719565b981eef19),
            (f.as_str(), false, true, 2000, 0xe3c6a7a412773572),
            (f.as_str(), true, false, 3996, 0xe04ee7bad24dabf0),
            (f.as_str(), true, true, 3996, 0x1214e855fc6dfc44),
        ] {
            let g = GraphSpec::parse(spec)
                .unwrap()
                .with_symmetrize(symmetrize)
                .with_degree_order(degree);
            let (x, y) = generate(&g, &|_| {}).unwrap();
            got.push((g.to_string(), x.len(), digest(&x, &y)));
            want.push((g.to_string(), rows, hash));
        }
        std::fs::remove_file(&file).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn chunks_draw_unrelated_sequences() {
        // No draw of one chunk's first 2000 repeats in another's (the states of
        // `Rng::new(seed, k)` were shifted copies of each other).
        for seed in [1, 2, 12345] {
            let mut seen = std::collections::HashSet::new();
            for k in 0..300 {
                let mut r = Rng::chunk(seed, k);
                for _ in 0..2000 {
                    assert!(seen.insert(r.next()), "seed {seed}, chunk {k}");
                }
            }
        }
        // Chunk 0 is unchanged, so graphs of one chunk (rmat:16 and below) are too.
        assert_eq!(Rng::chunk(7, 0).next(), Rng::new(7, 0).next());
    }
}
