//! Built-in graphs: the `edge` relation of an undirected graph, generated in memory.
//!
//! - `rmat:SCALE[:EDGEFACTOR][:SEED]`: an R-MAT graph with the Graph500 parameters
//!   (a = 0.57, b = c = 0.19, d = 0.05) on 2^SCALE vertices with EDGEFACTOR × 2^SCALE
//!   generated edges (default 16), vertex labels scrambled by a seeded permutation;
//! - `gnm:N:M:SEED`: a uniform random graph with N vertices and exactly M edges.
//!
//! Self-loops and duplicate edges are removed, and each undirected edge is stored in both
//! directions (`edge(x, y)` and `edge(y, x)`), sorted, as the clique queries expect. The
//! generation is split into chunks with seeds of their own, so the graph depends on the
//! spec alone, not on the number of cores.

use rayon::prelude::*;

/// A parsed `--graph` spec.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphSpec {
    Rmat { scale: u32, edge_factor: u64, seed: u64 },
    Gnm { n: u64, m: u64, seed: u64 },
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
        }
    }
}

impl GraphSpec {
    /// Parses `rmat:SCALE[:EF][:SEED]` or `gnm:N:M:SEED`.
    pub fn parse(s: &str) -> Result<GraphSpec, String> {
        let parts: Vec<&str> = s.split(':').collect();
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
                "`{s}` is not a graph: use rmat:SCALE[:EDGEFACTOR][:SEED] (e.g. rmat:20) or gnm:N:M:SEED (e.g. gnm:1000:5000:1)"
            )),
        }
    }

    /// The number of edges generated before duplicates and self-loops are removed (for
    /// progress bars).
    pub fn generated_edges(&self) -> u64 {
        match self {
            GraphSpec::Rmat { scale, edge_factor, .. } => edge_factor << scale,
            GraphSpec::Gnm { m, .. } => *m,
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
fn permutation(n: u64, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n as u32).collect();
    let mut r = Rng::new(seed, u64::MAX);
    for i in (1..n as usize).rev() {
        let j = r.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// The undirected edges (x < y) of the graph, as `x << 32 | y`, sorted and distinct.
fn undirected(spec: &GraphSpec, progress: &(dyn Fn(u64) + Sync)) -> Vec<u64> {
    let pack = |x: u64, y: u64| if x < y { (x << 32) | y } else { (y << 32) | x };
    let mut edges: Vec<u64> = match spec {
        GraphSpec::Rmat {
            scale,
            edge_factor,
            seed,
        } => {
            let total = edge_factor << scale;
            let perm = permutation(1u64 << scale, *seed);
            let chunks = total.div_ceil(CHUNK);
            (0..chunks)
                .into_par_iter()
                .flat_map_iter(|k| {
                    let mut r = Rng::new(*seed, k);
                    let count = CHUNK.min(total - k * CHUNK);
                    let perm = &perm;
                    let out: Vec<u64> = (0..count)
                        .filter_map(move |_| {
                            let (x, y) = rmat_edge(&mut r, *scale);
                            let (x, y) = (perm[x as usize] as u64, perm[y as usize] as u64);
                            (x != y).then(|| pack(x, y))
                        })
                        .collect();
                    progress(count);
                    out
                })
                .collect()
        }
        GraphSpec::Gnm { n, m, seed } => {
            // Draw, remove duplicates, and draw again for the missing edges.
            let mut have: Vec<u64> = Vec::new();
            let mut round = 0u64;
            while (have.len() as u64) < *m {
                let want = *m - have.len() as u64;
                let chunks = want.div_ceil(CHUNK);
                let fresh: Vec<u64> = (0..chunks)
                    .into_par_iter()
                    .flat_map_iter(|k| {
                        let mut r = Rng::new(*seed, (round << 32) | k);
                        let count = CHUNK.min(want - k * CHUNK);
                        (0..count).filter_map(move |_| {
                            let (x, y) = (r.below(*n), r.below(*n));
                            (x != y).then(|| pack(x, y))
                        })
                    })
                    .collect();
                have.extend(fresh);
                have.par_sort_unstable();
                have.dedup();
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
    };
    edges.par_sort_unstable();
    edges.dedup();
    edges
}

/// The directed edge relation (both directions of every undirected edge), as the two
/// columns x and y sorted by (x, y).
pub fn generate(spec: &GraphSpec, progress: &(dyn Fn(u64) + Sync)) -> (Vec<i64>, Vec<i64>) {
    let und = undirected(spec, progress);
    let mut both: Vec<u64> = Vec::with_capacity(und.len() * 2);
    both.extend(und.iter().copied());
    both.extend(und.iter().map(|e| e.rotate_right(32)));
    both.par_sort_unstable();
    let x = both.par_iter().map(|e| (e >> 32) as i64).collect();
    let y = both.par_iter().map(|e| (e & 0xffff_ffff) as i64).collect();
    (x, y)
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
            let (x, y) = generate(&g, &|_| {});
            assert_eq!(x.len(), y.len());
            let pairs: Vec<(i64, i64)> = x.iter().copied().zip(y.iter().copied()).collect();
            assert!(pairs.windows(2).all(|w| w[0] < w[1]), "{spec}: sorted, distinct");
            assert!(pairs.iter().all(|(a, b)| a != b), "{spec}: no self-loops");
            let set: std::collections::HashSet<(i64, i64)> = pairs.iter().copied().collect();
            assert!(pairs.iter().all(|(a, b)| set.contains(&(*b, *a))), "{spec}: symmetric");
            assert_eq!(generate(&g, &|_| {}), (x, y), "{spec}: deterministic");
        }
        // G(n, m) has exactly m undirected edges; K5 is gnm:5:10.
        let (x, _) = generate(&GraphSpec::parse("gnm:200:1000:5").unwrap(), &|_| {});
        assert_eq!(x.len(), 2000);
        let (x, _) = generate(&GraphSpec::parse("gnm:5:10:1").unwrap(), &|_| {});
        assert_eq!(x.len(), 20);
    }
}
