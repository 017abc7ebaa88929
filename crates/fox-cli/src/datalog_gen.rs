//! Look-alike inputs of the program analyses of the recursive Datalog benchmarks (CSPA,
//! CSDA, Andersen's points-to), whose real inputs (Graspan's graphs of httpd, linux and
//! postgresql) cannot be obtained: `gen:SCALE[:SEED]` in `foxbench datalog --graph`.
//!
//! The same scale and seed give the same relations on every machine (SplitMix64 streams,
//! no floating-point sums, no threads). At scale 1 the CSPA input has the published shape
//! of httpd: 1,721,418 nodes, 362,799 `assign` and 1,147,612 `dereference` edges; other
//! scales multiply every count (each at least 1). The relations are sets: a pair drawn
//! twice is kept once, so a relation may hold a few rows less than its target count.
//!
//! Shape, and why (a look-alike reproduces the sizes and the sparsity of the inputs, not
//! the sizes of the outputs, which depend on the program analysed):
//! - Graspan's pointer graphs are very sparse (nodes ≈ edges) and made of many small
//!   neighbourhoods (the functions of the program) joined by a few global variables. So
//!   nodes are numbered in blocks of `LOCAL` (16) consecutive ids, the functions; most
//!   edges join two nodes of one block (a sliding window instead would chain every block
//!   to the next and make the whole graph one neighbourhood, and the points-to sets
//!   grow with the input's size), and a small fraction (`GLOBAL`, 2%) reaches a global:
//!   a node drawn with the skew `id = ⌊n·u²⌋` (u uniform), whose degree falls off as a
//!   power of its id (P(id < t) = √(t/n)), the heavy tail of pointer graphs' degree
//!   distributions.
//! - CSPA: the nodes are `V` variables (ids 0..V) and `D` dereference expressions (ids
//!   V..V+D), D = the `dereference` count. Each expression `*p` has exactly one edge
//!   `dereference(p, e)` (in-degree 1), p a variable of the block at e's position (or a
//!   global);
//!   so a variable's dereference out-degree is about D/V ≈ 2 with a power-law tail.
//!   `assign(a, b)`: b a variable drawn uniformly, a a variable (60%) or an expression
//!   (40%) of b's block, or a global; 30% of the pairs are reversed (stores through
//!   pointers).
//! - CSDA: a dataflow graph of N nodes (scale 1: 1,721,418, the size of the CSPA graph)
//!   mostly made of forward chains (i → i+1, 85%), branches (i → i+2..i+LOCAL, 8%), loop
//!   back edges (3%) and calls to a global (1%): a mean out-degree of 0.97, just below 1,
//!   so that what a node reaches stays finite while its size has a heavy tail.
//!   `nullEdge(x, x+1)` for 1% of the nodes.
//! - Andersen: V variables (scale 1: 1,000,000) and O = the `addressOf` count of objects
//!   (ids V..V+O, each the target of one `addressOf`, an allocation site); `assign`
//!   (1,000,000), `load` and `store` (300,000 each) join variables of one block, or a
//!   variable and a global. These counts are Fox's choice (no shape is published for
//!   the benchmark's input).

use std::collections::BTreeSet;

/// `gen:SCALE[:SEED]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenSpec {
    /// 1 is the published size (httpd for CSPA).
    pub scale: f64,
    pub seed: u64,
}

/// The most a scale may be: every count stays below 2^31 (int32 ids).
pub const MAX_SCALE: f64 = 1000.0;

impl GenSpec {
    /// Parses `gen:SCALE[:SEED]` (seed 1 when not given). `None` when `s` does not start
    /// with `gen:`.
    pub fn parse(s: &str) -> Option<Result<GenSpec, String>> {
        let rest = s.strip_prefix("gen:")?;
        let mut parts = rest.split(':');
        let scale = parts.next().unwrap_or("");
        let scale = match scale.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= MAX_SCALE => x,
            _ => {
                return Some(Err(format!(
                    "`{scale}` is not a scale of `gen:SCALE[:SEED]` (a number above 0, at most {MAX_SCALE})"
                )))
            }
        };
        let seed = match parts.next() {
            None => 1,
            Some(v) => match v.parse::<u64>() {
                Ok(x) => x,
                Err(_) => {
                    return Some(Err(format!(
                        "`{v}` is not a seed of `gen:SCALE[:SEED]` (a whole number)"
                    )))
                }
            },
        };
        if parts.next().is_some() {
            return Some(Err(format!("`{s}` has more parts than `gen:SCALE[:SEED]`")));
        }
        Some(Ok(GenSpec { scale, seed }))
    }

    /// `count` at this scale, at least 1.
    fn count(&self, count: u64) -> u64 {
        ((count as f64 * self.scale).round() as u64).max(1)
    }
}

impl std::fmt::Display for GenSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gen:{}:{}", self.scale, self.seed)
    }
}

/// One generated input relation: its name (the program reads `<name>.csv`) and its
/// pairs, sorted and distinct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relation {
    pub name: &'static str,
    pub pairs: Vec<(i32, i32)>,
}

/// The published shape of CSPA's httpd input.
pub const HTTPD_NODES: u64 = 1_721_418;
pub const HTTPD_ASSIGN: u64 = 362_799;
pub const HTTPD_DEREFERENCE: u64 = 1_147_612;

/// How far (in positions) a local edge reaches.
const LOCAL: u64 = 16;
/// The per-mille of the edges that reach a global node.
const GLOBAL: u64 = 20;

/// SplitMix64, one stream per relation.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    fn next(&mut self) -> u64 {
        fox_runtime::graph::splitmix64(&mut self.0)
    }

    /// Uniform in [0, n), n > 0.
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `per_mille` / 1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A global among n nodes: ⌊n·u²⌋, computed in integers (u = a/2^32).
    fn global(&mut self, n: u64) -> u64 {
        let a = self.next() >> 32;
        ((((a * a) >> 32) as u128 * n as u128) >> 32) as u64
    }

    /// A node of [0, n) in the block of LOCAL positions that holds `at` (the same
    /// function).
    fn near(&mut self, at: u64, n: u64) -> u64 {
        let lo = at / LOCAL * LOCAL;
        let hi = (lo + LOCAL).min(n);
        lo + self.below(hi - lo)
    }

    /// A node of [0, n) near `at`, or a global.
    fn near_or_global(&mut self, at: u64, n: u64) -> u64 {
        if self.chance(GLOBAL) {
            self.global(n)
        } else {
            self.near(at, n)
        }
    }
}

fn relation(name: &'static str, pairs: impl IntoIterator<Item = (u64, u64)>) -> Relation {
    let set: BTreeSet<(i32, i32)> = pairs.into_iter().map(|(a, b)| (a as i32, b as i32)).collect();
    Relation {
        name,
        pairs: set.into_iter().collect(),
    }
}

/// CSPA's inputs: `assign` and `dereference`.
pub fn cspa(spec: &GenSpec) -> Vec<Relation> {
    let d = spec.count(HTTPD_DEREFERENCE);
    let n = spec.count(HTTPD_NODES).max(d + 1);
    let a = spec.count(HTTPD_ASSIGN);
    let v = n - d;
    let mut r = Rng::new(spec.seed, 1);
    // Expression e = v + k sits at the variables' position k·v/d.
    let deref = (0..d).map(|k| {
        let at = (k as u128 * v as u128 / d as u128) as u64;
        (r.near_or_global(at, v), v + k)
    });
    let dereference = relation("dereference", deref.collect::<Vec<_>>());
    let mut r = Rng::new(spec.seed, 2);
    let assign = (0..a).map(|_| {
        let b = r.below(v);
        let other = if r.chance(600) {
            r.near_or_global(b, v)
        } else {
            let at = (b as u128 * d as u128 / v as u128) as u64;
            v + r.near(at, d)
        };
        if r.chance(300) {
            (b, other)
        } else {
            (other, b)
        }
    });
    let assign = relation("assign", assign.collect::<Vec<_>>());
    vec![assign, dereference]
}

/// CSDA's inputs: `nullEdge` and `arc`.
pub fn csda(spec: &GenSpec) -> Vec<Relation> {
    let n = spec.count(HTTPD_NODES).max(2);
    let mut r = Rng::new(spec.seed, 3);
    let mut arcs = Vec::new();
    for i in 0..n {
        let roll = r.below(1000);
        let to = match roll {
            0..850 => i + 1,
            850..930 => i + 2 + r.below(LOCAL - 1),
            930..960 => i.saturating_sub(1 + r.below(LOCAL)),
            960..970 => r.global(n),
            _ => continue,
        };
        if to < n && to != i {
            arcs.push((i, to));
        }
    }
    let mut r = Rng::new(spec.seed, 4);
    let nulls = (0..n - 1)
        .filter(|_| r.chance(10))
        .map(|i| (i, i + 1))
        .collect::<Vec<_>>();
    // At least one null edge, so that every instance derives something.
    let nulls = if nulls.is_empty() { vec![(0, 1)] } else { nulls };
    vec![relation("nullEdge", nulls), relation("arc", arcs)]
}

/// Andersen's inputs: `addressOf`, `assign`, `load` and `store`.
pub fn andersen(spec: &GenSpec) -> Vec<Relation> {
    let v = spec.count(1_000_000).max(2);
    let o = spec.count(400_000);
    let mut r = Rng::new(spec.seed, 5);
    // Object v + k is allocated at a site of the variables' position k·v/o.
    let address = (0..o)
        .map(|k| {
            let at = (k as u128 * v as u128 / o as u128) as u64;
            (r.near(at, v), v + k)
        })
        .collect::<Vec<_>>();
    let pairs = |stream: u64, count: u64| {
        let mut r = Rng::new(spec.seed, stream);
        (0..count)
            .map(|_| {
                let p = r.below(v);
                (p, r.near_or_global(p, v))
            })
            .collect::<Vec<_>>()
    };
    let assign = pairs(6, spec.count(1_000_000));
    let load = pairs(7, spec.count(300_000));
    let store = pairs(8, spec.count(300_000));
    vec![
        relation("addressOf", address),
        relation("assign", assign),
        relation("load", load),
        relation("store", store),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse() {
        assert_eq!(GenSpec::parse("rmat:3"), None);
        assert_eq!(GenSpec::parse("gen:0.5"), Some(Ok(GenSpec { scale: 0.5, seed: 1 })));
        assert_eq!(GenSpec::parse("gen:2:7"), Some(Ok(GenSpec { scale: 2.0, seed: 7 })));
        for bad in ["gen:", "gen:0", "gen:-1", "gen:x", "gen:1:y", "gen:1:2:3", "gen:1e9"] {
            assert!(matches!(GenSpec::parse(bad), Some(Err(_))), "{bad}");
        }
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let s = GenSpec { scale: 0.002, seed: 3 };
        assert_eq!(cspa(&s), cspa(&s));
        assert_eq!(csda(&s), csda(&s));
        assert_eq!(andersen(&s), andersen(&s));
        assert_ne!(cspa(&s), cspa(&GenSpec { seed: 4, ..s }));
    }

    #[test]
    fn cspa_has_the_shape_of_httpd_scaled() {
        let s = GenSpec { scale: 0.01, seed: 1 };
        let rels = cspa(&s);
        let (assign, deref) = (&rels[0], &rels[1]);
        assert_eq!((assign.name, deref.name), ("assign", "dereference"));
        // Every expression has one dereference edge: the count is exact.
        assert_eq!(deref.pairs.len() as u64, 11_476);
        // A few drawn pairs may repeat.
        let a = assign.pairs.len() as u64;
        assert!((3_500..=3_628).contains(&a), "{a} assign pairs");
        let mut nodes = BTreeSet::new();
        for (x, y) in assign.pairs.iter().chain(&deref.pairs) {
            nodes.insert(*x);
            nodes.insert(*y);
        }
        // Every id lies below the node count; most nodes occur.
        assert!(nodes.iter().all(|&x| (0..17_214).contains(&x)));
        assert!(nodes.len() > 14_000, "{} nodes", nodes.len());
        // Sorted and distinct.
        assert!(assign.pairs.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn tiny_scales_still_give_every_relation() {
        let s = GenSpec { scale: 1e-9, seed: 1 };
        for rels in [cspa(&s), andersen(&s)] {
            assert!(rels.iter().all(|r| !r.pairs.is_empty()), "{rels:?}");
        }
        assert_eq!(csda(&s)[0].pairs, vec![(0, 1)]);
    }
}
