//! No program makes the front end panic: the repository's programs, mutated token by
//! token (deleted, duplicated, replaced by another token of the same program, swapped),
//! go through parse → check → plan → lower. Syntax is fuzzed on its own in fox-syntax; these
//! mutants are mostly well-formed, so they reach the type checker and the planner.

use fox_cli::{check, Source};
use std::path::{Path, PathBuf};

/// SplitMix64: a small deterministic generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn programs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for d in ["queries", "tests/programs"] {
        for e in std::fs::read_dir(root.join(d)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "logic") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Splits source text into tokens and the whitespace between them (crudely, which is
/// what a fuzzer wants): identifiers/numbers, strings, and single punctuation chars.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_alphanumeric() || c == '_' || c == ':' {
            while i < chars.len() && (chars[i].is_alphanumeric() || "_:.".contains(chars[i])) {
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                i += 1;
            }
            i = (i + 1).min(chars.len());
        } else {
            i += 1;
        }
        out.push(chars[start..i].iter().collect());
    }
    out
}

#[test]
fn mutated_programs_never_panic() {
    let mut rng = Rng(std::env::var("FOX_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_F0C5));
    let mut checked_clean = 0;
    for path in programs() {
        let text = std::fs::read_to_string(&path).unwrap();
        let toks = tokens(&text);
        let words: Vec<&String> = toks.iter().filter(|t| !t.trim().is_empty()).collect();
        let rounds = std::env::var("FOX_MUTATION_ROUNDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        for _ in 0..rounds {
            let mut m = toks.clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(m.len());
                match rng.below(4) {
                    0 => {
                        m.remove(i);
                    }
                    1 => {
                        let t = m[i].clone();
                        m.insert(i, t);
                    }
                    2 => m[i] = words[rng.below(words.len())].clone(),
                    _ => {
                        let j = rng.below(m.len());
                        m.swap(i, j);
                    }
                }
                if m.is_empty() {
                    break;
                }
            }
            let source = Source {
                name: path.display().to_string(),
                text: m.concat(),
            };
            let result = check(&source);
            let _ = source.render(&result.diagnostics, false);
            for d in &result.diagnostics {
                assert!(
                    d.span().end as usize <= source.text.len(),
                    "span out of range in mutant:\n{}",
                    source.text
                );
            }
            if let Some(core) = result.core {
                checked_clean += 1;
                let _ = fox_sema::print_core(&core);
                // Every rejection belongs to `check`: a program it accepts plans and lowers.
                let plan = fox_ra::plan(&core)
                    .unwrap_or_else(|e| panic!("checked clean but does not plan: {e}\n{}", source.text));
                let _ = fox_ra::print_plan(&plan);
                fox_ra::from_ron(&fox_ra::to_ron(&plan)).unwrap();
                let kernels = fox_kernel::lower(&plan)
                    .unwrap_or_else(|e| panic!("checked clean but does not lower: {e}\n{}", source.text));
                let _ = fox_kernel::print_kernels(&kernels);
                fox_kernel::from_ron(&fox_kernel::to_ron(&kernels)).unwrap();
            }
        }
    }
    // The mutants must reach the later stages, or this test would not test them.
    assert!(checked_clean > 100, "only {checked_clean} mutants checked clean");
}
