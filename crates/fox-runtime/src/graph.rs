//! Graphs for `--graph`: the `edge` relation of an undirected graph, generated in memory
//! or read from an edge-list file.
//!
//! - `rmat:SCALE[:EDGEFACTOR][:SEED]`: an R-MAT graph with the Graph500 parameters
//!   (a = 0.57, b = c = 0.19, d = 0.05) on 2^SCALE vertices with EDGEFACTOR × 2^SCALE
//!   generated edges (default 16), vertex labels scrambled by a seeded permutation;
//! - `gnm:N:M:SEED`: a uniform random graph with N vertices and exactly M edges;
//! - `PATH`, any other spec naming an existing file: an edge list (SNAP style; gzip-
//!   compressed when it starts with gzip's magic number, as `.csv.gz` files do), one edge
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

use crate::alloc::{bytes_text, try_filled, try_par_collect, try_reserve, try_reserve_exact, try_with_capacity};
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

/// One step of SplitMix64 (Steele, Lea and Flood): advances `state` and returns the next
/// of its stream's numbers. Every generator of data in Fox (graphs, program-analysis
/// look-alikes) draws from it, so a seed means the same stream everywhere.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
        splitmix64(&mut self.0)
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

/// An edge (x, y). Arrays compare lexicographically, so edges sort by (x, y); a graph's
/// edges are held as pairs from drawing to the end, sorted and deduplicated in place, and
/// split into the columns x and y at the end ([`into_columns`]).
type Pair = [i32; 2];

/// A slot of the drawn edges that holds no edge (a self-loop was drawn): after every
/// edge (x < y) in sorted order.
const NONE: Pair = [i32::MAX, i32::MAX];

/// The sort key of an edge: (x, y) as one unsigned number in the same order.
fn key(p: &Pair) -> u64 {
    (u64::from(p[0] as u32 ^ 0x8000_0000) << 32) | u64::from(p[1] as u32 ^ 0x8000_0000)
}

/// Sorts edges by (x, y) in place on all cores and removes duplicates (the vector keeps
/// its allocation).
fn sort_dedup(v: &mut Vec<Pair>) {
    v.par_sort_unstable_by_key(key);
    v.dedup();
}

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

/// The memory the machine has for a request of the given bytes, less the reserve a load
/// keeps, or `None` when it is not checked ([`crate::alloc::available_for`]).
pub type Available<'a> = &'a dyn Fn(u128) -> Option<u64>;

/// Checks, before a step of building a graph allocates `bytes` more (`what` says for
/// what), that the machine has them: an error naming the graph, the bytes needed and the
/// bytes available, instead of the system killing the process when the pages are touched.
fn check_memory(spec: &GraphSpec, bytes: u128, what: &str, available: Available) -> Result<(), String> {
    match available(bytes) {
        Some(free) if bytes > u128::from(free) => Err(format!(
            "the graph {spec} needs {} of host memory {what}, but the machine has {} available (less the reserve kept free)",
            bytes_text(bytes),
            bytes_text(u128::from(free))
        )),
        _ => Ok(()),
    }
}

/// The undirected edges (x < y) of a generated graph, sorted and distinct, in a vector
/// that may have spare capacity (room for the reverse edges); an error when memory runs
/// out. When `stop` is set (read once per chunk) the edges are incomplete: the caller
/// checks it.
fn undirected(
    spec: &GraphSpec,
    progress: &(dyn Fn(u64) + Sync),
    stop: &AtomicBool,
    available: Available,
) -> Result<Vec<Pair>, String> {
    // Vertices are below 2^31 (scale ≤ 30, n < 2^31).
    let order = |x: u64, y: u64| -> Pair {
        if x < y {
            [x as i32, y as i32]
        } else {
            [y as i32, x as i32]
        }
    };
    let mut edges: Vec<Pair> = match spec {
        GraphSpec::Rmat {
            scale,
            edge_factor,
            seed,
        } => {
            let total = edge_factor << scale;
            let n = 1u64 << scale;
            check_memory(
                spec,
                8 * u128::from(total) + 4 * u128::from(n),
                &format!("to draw its {total} edges (8 bytes each) and label its {n} vertices"),
                available,
            )?;
            let perm = permutation(n, *seed)?;
            // Each chunk draws into its own slice; a self-loop leaves the slot `NONE`.
            let mut edges = try_filled(total as usize, NONE, EDGES)?;
            edges.par_chunks_mut(CHUNK as usize).enumerate().for_each(|(k, out)| {
                if is_set(stop) {
                    return;
                }
                let mut r = Rng::chunk(*seed, k as u64);
                for e in out.iter_mut() {
                    let (x, y) = rmat_edge(&mut r, *scale);
                    let (x, y) = (u64::from(perm[x as usize]), u64::from(perm[y as usize]));
                    if x != y {
                        *e = order(x, y);
                    }
                }
                progress(out.len() as u64);
            });
            edges
        }
        GraphSpec::Gnm { n, m, seed } => {
            // Exactly m edges, in both directions at the end: the room for them all.
            check_memory(
                spec,
                16 * u128::from(*m),
                &format!("for its {m} edges in both directions (8 bytes each)"),
                available,
            )?;
            let mut have: Vec<Pair> = try_with_capacity(2 * *m as usize, EDGES)?;
            // Draw, remove duplicates, and draw again for the missing edges.
            let mut round = 0u64;
            while (have.len() as u64) < *m && !is_set(stop) {
                let want = *m - have.len() as u64;
                let base = have.len();
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
                                *e = order(x, y);
                            }
                        }
                    });
                sort_dedup(&mut have);
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
        GraphSpec::File { .. } | GraphSpec::DegreeOrdered(_) => unreachable!("pairs handles files and renumbering"),
    };
    sort_dedup(&mut edges);
    if edges.last() == Some(&NONE) {
        edges.pop();
    }
    Ok(edges)
}

/// Adds the reverse (y, x) of every edge of `edges` in place (growing the vector only
/// where its spare capacity is short) and sorts: then the vector holds exactly its edges.
fn add_reverses(spec: &GraphSpec, edges: &mut Vec<Pair>, available: Available) -> Result<(), String> {
    let n = edges.len();
    let grow = (2 * n).saturating_sub(edges.capacity());
    check_memory(
        spec,
        8 * grow as u128,
        &format!("for the reverses of its {n} edges"),
        available,
    )?;
    try_reserve_exact(edges, n, EDGES)?;
    edges.resize(2 * n, NONE);
    let (given, reversed) = edges.split_at_mut(n);
    reversed
        .par_iter_mut()
        .zip(given.par_iter())
        .for_each(|(r, e)| *r = [e[1], e[0]]);
    edges.par_sort_unstable_by_key(key);
    edges.shrink_to_fit();
    Ok(())
}

/// The columns x and y of `pairs`. The pairs' own memory becomes x (each x moved to the
/// front, the rest given back), so only y is allocated: the peak is 1.5 times the
/// columns.
fn into_columns(pairs: Vec<Pair>) -> Result<(Vec<i32>, Vec<i32>), String> {
    let n = pairs.len();
    let y: Vec<i32> = try_par_collect(pairs.par_iter().map(|p| p[1]), EDGES)?;
    let mut x: Vec<i32> = pairs.into_flattened();
    // x[i] = x[2i] for i in [a, 2a), a = 1, 2, 4, …: each round reads only slots at or
    // beyond 2a, which no earlier round wrote, and writes only below 2a.
    let mut a = 1;
    while a < n {
        let b = (2 * a).min(n);
        let (front, back) = x.split_at_mut(2 * a);
        front[a..b]
            .par_iter_mut()
            .zip(back.par_chunks(2))
            .for_each(|(d, s)| *d = s[0]);
        a = b;
    }
    x.truncate(n);
    x.shrink_to_fit();
    Ok((x, y))
}

/// The edges of `spec` as pairs, sorted by (x, y) and distinct, with no spare capacity
/// (see [`generate`]).
fn pairs(
    spec: &GraphSpec,
    progress: &(dyn Fn(u64) + Sync),
    stop: &AtomicBool,
    available: Available,
) -> Result<Vec<Pair>, String> {
    let interrupted = || "interrupted".to_string();
    match spec {
        GraphSpec::DegreeOrdered(g) => {
            let mut edges = pairs(g, progress, stop, available)?;
            if is_set(stop) {
                return Err(interrupted());
            }
            order_by_degree(spec, &mut edges, available)?;
            Ok(edges)
        }
        GraphSpec::File { path, symmetrize } => {
            let mut edges = read_edges(path, progress, stop)?;
            if *symmetrize {
                edges.retain(|e| e[0] != e[1]);
                add_reverses(spec, &mut edges, available)?;
            }
            sort_dedup(&mut edges);
            edges.shrink_to_fit();
            Ok(edges)
        }
        GraphSpec::Rmat { .. } | GraphSpec::Gnm { .. } => {
            let mut edges = undirected(spec, progress, stop, available)?;
            if is_set(stop) {
                return Err(interrupted());
            }
            add_reverses(spec, &mut edges, available)?;
            Ok(edges)
        }
    }
}

/// The edge relation as the two columns x and y, sorted by (x, y) and distinct: both
/// directions of every undirected edge of a generated graph, or a file's edges (see the
/// module's documentation). Errors (a file that cannot be read, a bad line, a graph too
/// large for the machine's memory) are messages naming the file and line or the graph.
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
    let (x, y) = columns(spec, progress, stop, &crate::alloc::available_for)?;
    let wide = |v: Vec<i32>| try_par_collect(v.par_iter().map(|&a| i64::from(a)), EDGES);
    Ok((wide(x)?, wide(y)?))
}

/// [`generate_until`] as int32 columns (every vertex fits), built within a bounded
/// working set: the edges are drawn, sorted and deduplicated in place, and the largest
/// allocation besides the final columns is half of them. Before each step that allocates
/// much, the bytes it needs are checked against `available` (the machine's memory: see
/// [`crate::alloc::available_for`]), an error naming the graph when they exceed it.
pub fn columns(
    spec: &GraphSpec,
    progress: &(dyn Fn(u64) + Sync),
    stop: &AtomicBool,
    available: Available,
) -> Result<(Vec<i32>, Vec<i32>), String> {
    let edges = pairs(spec, progress, stop, available)?;
    let rows = edges.len();
    check_memory(
        spec,
        4 * rows as u128,
        &format!("to split its {rows} rows into columns"),
        available,
    )?;
    into_columns(edges)
}

/// The bytes read from an edge-list file at a time; each block is parsed on all cores.
const BLOCK: usize = 64 << 20;

/// About how many lines `path` has: its size times the line density of its first MiB
/// (none for a gzip-compressed file, whose size says little of its lines).
fn estimate_lines(path: &Path) -> Option<u64> {
    let size = std::fs::metadata(path).ok()?.len();
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut head)
        .ok()?;
    if head.starts_with(&GZIP_MAGIC) {
        return None;
    }
    let lines = head.iter().filter(|&&b| b == b'\n').count().max(1) as u64;
    Some(if head.is_empty() {
        0
    } else {
        size * lines / head.len() as u64
    })
}

/// The first bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The text of an edge-list file, and whether it is decompressed: a file that starts with
/// gzip's magic number (`.csv.gz`, whatever the name) is read through a gzip decoder
/// (concatenated members too). The file is read as a stream, never sought, so a pipe works.
fn open_edge_list(path: &Path) -> Result<(Box<dyn Read + Send>, bool), String> {
    let fail = |e: std::io::Error| format!("cannot read the graph `{}`: {e}", path.display());
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e)),
        }
    }
    let text = std::io::Cursor::new(magic[..got].to_vec()).chain(file);
    Ok(if magic[..got] == GZIP_MAGIC {
        let buffered = std::io::BufReader::with_capacity(1 << 20, text);
        (Box::new(flate2::read::MultiGzDecoder::new(buffered)), true)
    } else {
        (Box::new(text), false)
    })
}

/// The edges of an edge-list file, in file order (duplicates kept). The file is read in blocks, each split at line ends into pieces parsed in
/// parallel; an error names the first bad line.
fn read_edges(path: &Path, progress: &(dyn Fn(u64) + Sync), stop: &AtomicBool) -> Result<Vec<Pair>, String> {
    let name = path.display();
    let (mut file, gzip) = open_edge_list(path)?;
    let mut edges: Vec<Pair> = Vec::new();
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
                Err(e) if gzip => {
                    return Err(format!(
                        "cannot read the graph `{name}`: the gzip data is damaged ({e})"
                    ))
                }
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

/// The edges of whole lines of an edge list, the number of lines, and the first error
/// with its line number (from 1) in the piece.
type Piece = (Vec<Pair>, u64, Option<(u64, String)>);

/// Parses whole lines of an edge list (see [`Piece`]).
fn parse_piece(text: &[u8]) -> Piece {
    let mut edges = Vec::with_capacity(text.len() / 12);
    let mut n = 0u64;
    for line in text.split_inclusive(|&b| b == b'\n') {
        n += 1;
        match parse_line(line) {
            Ok(Some((x, y))) => edges.push([x, y]),
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

/// Renumbers the vertices of `edges` (sorted by (x, y), distinct) 0, 1, … in ascending
/// order of degree (edges in which a vertex occurs, either side), ties by label, and sorts
/// the edges again, in place. With the vertices so ordered, a clique listed with
/// ascending vertices starts at its vertex of least degree, and the neighbours of a
/// vertex that come after it are at most about the square root of twice the edges: no
/// hub has a long list to search. Besides the edges it needs 4 bytes an edge (the y
/// column, sorted) and 20 a vertex; an error when memory runs out.
fn order_by_degree(spec: &GraphSpec, edges: &mut [Pair], available: Available) -> Result<(), String> {
    const WHAT: &str = "the renumbering of the graph's vertices";
    check_memory(
        spec,
        4 * edges.len() as u128,
        &format!("to renumber the vertices of its {} rows by degree", edges.len()),
        available,
    )?;
    let mut ys: Vec<i32> = try_par_collect(edges.par_iter().map(|e| e[1]), WHAT)?;
    ys.par_sort_unstable();
    // The vertices in ascending order with their degrees: the runs of x (sorted already)
    // merged with the runs of the sorted y.
    let merge = |emit: &mut dyn FnMut(i32, u64)| {
        let mut xs = edges
            .chunk_by(|a, b| a[0] == b[0])
            .map(|r| (r[0][0], r.len() as u64))
            .peekable();
        let mut yr = ys.chunk_by(|a, b| a == b).map(|r| (r[0], r.len() as u64)).peekable();
        loop {
            match (xs.peek().copied(), yr.peek().copied()) {
                (Some((a, m)), Some((b, k))) if a == b => {
                    emit(a, m + k);
                    xs.next();
                    yr.next();
                }
                (Some((a, m)), Some((b, _))) if a < b => {
                    emit(a, m);
                    xs.next();
                }
                (Some((a, m)), None) => {
                    emit(a, m);
                    xs.next();
                }
                (_, Some((b, k))) => {
                    emit(b, k);
                    yr.next();
                }
                (None, None) => break,
            }
        }
    };
    let mut count = 0usize;
    merge(&mut |_, _| count += 1);
    if count > 1 << 31 {
        return Err(format!(
            "the graph {spec} has {count} vertices, more than the 2^31 that int32 can number"
        ));
    }
    let mut verts: Vec<i32> = try_with_capacity(count, WHAT)?;
    let mut degree: Vec<u64> = try_with_capacity(count, WHAT)?;
    merge(&mut |v, d| {
        verts.push(v);
        degree.push(d);
    });
    drop(ys);
    let mut order: Vec<u32> = try_par_collect((0..count as u32).into_par_iter(), WHAT)?;
    order.par_sort_unstable_by_key(|&v| (degree[v as usize], v));
    drop(degree);
    let mut rank = try_filled(count, 0u32, WHAT)?;
    for (k, &v) in order.iter().enumerate() {
        rank[v as usize] = k as u32;
    }
    drop(order);
    // Labels 0..n of a generated graph index directly; others are searched.
    let first = verts.first().copied().unwrap_or(0);
    let dense = verts
        .last()
        .is_some_and(|&l| (i64::from(l) - i64::from(first)) as usize + 1 == count);
    let index = |v: i32| -> usize {
        if dense {
            (i64::from(v) - i64::from(first)) as usize
        } else {
            verts.binary_search(&v).unwrap_or(0)
        }
    };
    edges
        .par_iter_mut()
        .for_each(|e| *e = [rank[index(e[0])] as i32, rank[index(e[1])] as i32]);
    edges.par_sort_unstable_by_key(key);
    Ok(())
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
    fn gzip_edge_lists_read_as_their_text() {
        use std::io::Write;
        let gz = |text: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(text).unwrap();
            e.finish().unwrap()
        };
        // Text the decoder gives in many reads.
        let text: String = (0..200_000).map(|i| format!("{} {}\n", i % 70_001, i % 999)).collect();
        let plain = temp_file("gz-plain.txt", &text);
        // Two members, as concatenated gzip files have: the text of both.
        let (a, b) = text.as_bytes().split_at(text.len() / 3);
        let mut two = gz(a);
        two.extend(gz(b));
        let packed = temp_file("gz-edges.csv.gz", &two);
        assert_eq!(read(&packed, true).unwrap(), read(&plain, true).unwrap());
        assert_eq!(read(&packed, false).unwrap(), read(&plain, false).unwrap());
        // A name without .gz is read by its content; damage is named as such.
        let hidden = temp_file("gz-hidden.txt", gz(b"1 2\n2 3\n"));
        assert_eq!(read(&hidden, false).unwrap(), vec![(1, 2), (2, 3)]);
        let mut cut = gz(text.as_bytes());
        cut.truncate(cut.len() / 2);
        let damaged = temp_file("gz-damaged.csv.gz", &cut);
        let e = read(&damaged, false).unwrap_err();
        assert!(e.contains("the gzip data is damaged"), "{e}");
        for p in [plain, packed, hidden, damaged] {
            std::fs::remove_file(&p).unwrap();
        }
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
    fn a_graph_too_large_for_the_memory_is_refused_before_each_step() {
        let never = crate::cancel::never();
        let run = |spec: &str, free: &dyn Fn(usize) -> Option<u64>| {
            let g = match spec.strip_suffix(" --degree-order") {
                Some(base) => GraphSpec::parse(base).unwrap().with_degree_order(true),
                None => GraphSpec::parse(spec).unwrap(),
            };
            let asked = std::sync::atomic::AtomicUsize::new(0);
            let available = |_: u128| free(asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
            columns(&g, &|_| {}, never, &available).map(|(x, _)| x.len())
        };
        // Drawing: 8 bytes a drawn edge and 4 a vertex label.
        let e = run("rmat:10", &|_| Some(100_000)).unwrap_err();
        assert_eq!(
            e,
            "the graph rmat:10:16:1 needs 132.0 KiB of host memory to draw its 16384 edges (8 bytes each) \
             and label its 1024 vertices, but the machine has 97.7 KiB available (less the reserve kept free)"
        );
        assert!(run("rmat:10", &|_| Some(135_168)).is_ok());
        // A G(n, m) graph takes its m edges in both directions at once.
        let e = run("gnm:100:200:1", &|_| Some(100)).unwrap_err();
        assert!(
            e.starts_with("the graph gnm:100:200:1 needs 3.1 KiB of host memory for its 200 edges in both directions"),
            "{e}"
        );
        // Later steps check what they add: the reverse edges, the renumbering, the split.
        let e = run("rmat:10", &|k| (k > 0).then_some(0)).unwrap_err();
        assert!(
            e.contains("for the reverses of its 10663 edges, but the machine has 0 bytes"),
            "{e}"
        );
        let e = run("gnm:100:200:1", &|k| (k > 0).then_some(0)).unwrap_err();
        assert!(
            e.contains("needs 1.6 KiB of host memory to split its 400 rows into columns"),
            "{e}"
        );
        let e = run("rmat:10 --degree-order", &|k| (k > 1).then_some(0)).unwrap_err();
        assert!(
            e.starts_with("the graph rmat:10:16:1 --degree-order needs 83.3 KiB of host memory to renumber the vertices of its 21326 rows by degree"),
            "{e}"
        );
        // Where the system does not say, nothing is refused.
        assert_eq!(run("gnm:100:200:1", &|_| None), Ok(400));
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
