//! A seeded generator of random programs and data.
//!
//! Programs are well-formed, safe and stratified by construction, over a few `int32` input
//! relations: random joins with shared variables (and cyclic triangle bodies), selections
//! with comparisons, constants and in-lists, arithmetic assignments, negation of
//! predicates of earlier groups, linear, non-linear and mutual recursion, aggregates
//! (`count`, `sum`, `min`, `max`) in later groups, and disjunction. Every derived
//! predicate is declared and output. Data are small, may be empty, hold duplicate rows
//! and skewed values.

use crate::reference::Inputs;
use fox_sema::core::{Type, Value};
use std::fmt::Write as _;

/// SplitMix64: a small, fast, seedable generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the generated programs may contain.
#[derive(Clone, Copy, Debug)]
pub struct GenOptions {
    /// `.output … order by … limit …` on some outputs.
    pub limits: bool,
}

impl Default for GenOptions {
    fn default() -> GenOptions {
        GenOptions { limits: true }
    }
}

/// A generated test case: the program's source and its input relations.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub source: String,
    pub inputs: Inputs,
}

impl Case {
    /// The program and its data, readably, for a failure message.
    pub fn describe(&self) -> String {
        let mut s = format!("seed {:#x}\n--- program ---\n{}--- data ---\n", self.seed, self.source);
        for (name, rows) in &self.inputs {
            let _ = writeln!(s, "{name}.csv ({} rows):", rows.len());
            s.push_str(&crate::data::file_text(rows, ","));
        }
        s
    }
}

#[derive(Clone, Debug)]
struct Pred {
    name: String,
    cols: Vec<Type>,
    /// `Some(k)`: functional with `k` key columns.
    functional: Option<usize>,
    /// The generation group that defines it (`None` for inputs).
    group: Option<usize>,
}

#[derive(Clone, Debug)]
struct Var {
    name: String,
    ty: Type,
}

/// A body under construction: its literals and the variables bound so far.
#[derive(Default)]
struct Body {
    lits: Vec<String>,
    bound: Vec<Var>,
    next_var: usize,
}

impl Body {
    fn fresh(&mut self, ty: Type) -> Var {
        let v = Var {
            name: format!("x{}", self.next_var),
            ty,
        };
        self.next_var += 1;
        v
    }

    fn of_type(&self, ty: Type) -> Vec<Var> {
        self.bound.iter().filter(|v| v.ty == ty).cloned().collect()
    }

    fn is_bound(&self, name: &str) -> bool {
        self.bound.iter().any(|v| v.name == name)
    }
}

struct Gen {
    rng: Rng,
    opts: GenOptions,
    preds: Vec<Pred>,
    domain: usize,
    out: String,
}

fn ty_name(t: Type) -> &'static str {
    match t {
        Type::Int64 => "int64",
        _ => "int32",
    }
}

/// Generates the program and data of `seed`.
pub fn case(seed: u64, opts: GenOptions) -> Case {
    let mut g = Gen {
        rng: Rng::new(seed),
        opts,
        preds: Vec::new(),
        domain: 0,
        out: String::new(),
    };
    g.domain = g.rng.range(2, 8);
    let mut inputs = Inputs::new();
    let n_inputs = g.rng.range(2, 3);
    for i in 0..n_inputs {
        let arity = *g.rng.pick(&[1, 2, 2, 2, 3]);
        let name = format!("e{i}");
        let cols: Vec<String> = (0..arity).map(|c| format!("c{c}")).collect();
        let types: Vec<String> = cols.iter().map(|c| format!("int32({c})")).collect();
        let _ = writeln!(
            g.out,
            "{name}({}) -> {}.\n.input {name}.",
            cols.join(", "),
            types.join(", ")
        );
        let rows = g.data(arity);
        inputs.insert(name.clone(), rows);
        g.preds.push(Pred {
            name,
            cols: vec![Type::Int32; arity],
            functional: None,
            group: None,
        });
    }
    let n_groups = g.rng.range(2, 5);
    for group in 0..n_groups {
        match g.rng.below(10) {
            0..=3 => g.plain_group(group),
            4..=6 => g.recursive_group(group),
            _ => g.aggregate_group(group),
        }
    }
    Case {
        seed,
        source: g.out,
        inputs,
    }
}

impl Gen {
    fn data(&mut self, arity: usize) -> Vec<Vec<Value>> {
        let n = *self.rng.pick(&[0, 1, 3, 6, 10, 16, 24]);
        let skewed = self.rng.chance(30);
        let mut rows = Vec::new();
        for _ in 0..n {
            let row: Vec<Value> = (0..arity)
                .map(|_| {
                    let v = if skewed && self.rng.chance(50) {
                        0
                    } else {
                        self.rng.below(self.domain)
                    };
                    Value::Int32(v as i32)
                })
                .collect();
            if self.rng.chance(15) {
                rows.push(row.clone());
            }
            rows.push(row);
        }
        rows
    }

    fn constant(&mut self) -> String {
        self.rng.below(self.domain + 1).to_string()
    }

    fn declare(&mut self, p: &Pred) {
        let k = p.functional.unwrap_or(p.cols.len());
        let names: Vec<String> = (0..p.cols.len()).map(|c| format!("c{c}")).collect();
        let types: Vec<String> = p
            .cols
            .iter()
            .zip(&names)
            .map(|(t, n)| format!("{}({n})", ty_name(*t)))
            .collect();
        let head = match p.functional {
            Some(_) => format!("{}[{}] = {}", p.name, names[..k].join(", "), names[k]),
            None => format!("{}({})", p.name, names.join(", ")),
        };
        let _ = writeln!(self.out, "{head} -> {}.", types.join(", "));
    }

    fn output(&mut self, p: &Pred) {
        if self.opts.limits && self.rng.chance(20) {
            let c = self.rng.below(p.cols.len());
            let dir = if self.rng.chance(50) { " desc" } else { "" };
            let limit = self.rng.range(1, 5);
            let _ = writeln!(self.out, ".output {} order by c{c}{dir} limit {limit}.", p.name);
        } else {
            let _ = writeln!(self.out, ".output {}.", p.name);
        }
    }

    /// Predicates defined before `group` (inputs included).
    fn earlier(&self, group: usize) -> Vec<usize> {
        (0..self.preds.len())
            .filter(|&i| self.preds[i].group.is_none_or(|g| g < group))
            .collect()
    }

    fn new_pred(&mut self, group: usize, cols: Vec<Type>, functional: Option<usize>) -> usize {
        let name = format!("p{}", self.preds.len());
        let p = Pred {
            name,
            cols,
            functional,
            group: Some(group),
        };
        self.declare(&p);
        self.preds.push(p);
        self.preds.len() - 1
    }

    /// An argument for a column of type `ty`: a bound variable, a constant, `_` or a fresh
    /// variable (which the atom then binds).
    fn atom_arg(&mut self, b: &mut Body, ty: Type, fresh: &mut Vec<Var>) -> String {
        let candidates: Vec<Var> = b
            .of_type(ty)
            .into_iter()
            .chain(fresh.iter().filter(|v| v.ty == ty).cloned())
            .collect();
        let r = self.rng.below(100);
        if r < 50 && !candidates.is_empty() {
            return self.rng.pick(&candidates).name.clone();
        }
        if r < 58 && ty == Type::Int32 {
            return self.constant();
        }
        if r < 68 {
            return "_".to_string();
        }
        let v = b.fresh(ty);
        fresh.push(v.clone());
        v.name
    }

    fn atom(&mut self, b: &mut Body, pred: usize) {
        let p = self.preds[pred].clone();
        let mut fresh = Vec::new();
        let args: Vec<String> = p.cols.iter().map(|t| self.atom_arg(b, *t, &mut fresh)).collect();
        let lit = match p.functional {
            Some(k) => format!("{}[{}] = {}", p.name, args[..k].join(", "), args[k]),
            None => format!("{}({})", p.name, args.join(", ")),
        };
        b.lits.push(lit);
        for v in fresh {
            if !b.is_bound(&v.name) {
                b.bound.push(v);
            }
        }
    }

    /// A cyclic body `r1(a, b), r2(b, c), r3(a, c)` over binary int32 predicates.
    fn triangle(&mut self, b: &mut Body, binary: &[usize]) {
        let vs: Vec<Var> = (0..3).map(|_| b.fresh(Type::Int32)).collect();
        for (i, j) in [(0, 1), (1, 2), (0, 2)] {
            let p = &self.preds[*self.rng.pick(binary)];
            b.lits.push(format!("{}({}, {})", p.name, vs[i].name, vs[j].name));
        }
        b.bound.extend(vs);
    }

    /// Makes sure `v` is bound, by an atom of an input relation if need be.
    fn bind(&mut self, b: &mut Body, v: &Var) {
        if b.is_bound(&v.name) {
            return;
        }
        let inputs: Vec<usize> = (0..self.preds.len())
            .filter(|&i| self.preds[i].group.is_none())
            .collect();
        let p = self.preds[*self.rng.pick(&inputs)].clone();
        let at = self.rng.below(p.cols.len());
        let args: Vec<String> = (0..p.cols.len())
            .map(|i| if i == at { v.name.clone() } else { "_".to_string() })
            .collect();
        b.lits.push(format!("{}({})", p.name, args.join(", ")));
        b.bound.push(v.clone());
    }

    /// Selections, assignments and negations over the bound variables.
    fn extras(&mut self, b: &mut Body, group: usize, arithmetic: bool) {
        let ints = b.of_type(Type::Int32);
        let all = b.bound.clone();
        if !all.is_empty() && self.rng.chance(40) {
            let x = self.rng.pick(&all).clone();
            let same: Vec<Var> = all
                .iter()
                .filter(|v| v.ty == x.ty && v.name != x.name)
                .cloned()
                .collect();
            let op = *self.rng.pick(&["<", "<=", ">", ">=", "!=", "="]);
            let rhs = if !same.is_empty() && self.rng.chance(50) {
                self.rng.pick(&same).name.clone()
            } else {
                self.constant()
            };
            b.lits.push(format!("{} {op} {rhs}", x.name));
        }
        if !ints.is_empty() && self.rng.chance(10) {
            let x = self.rng.pick(&ints).name.clone();
            let (lo, hi) = (self.rng.below(3), self.rng.range(2, 6));
            b.lits.push(format!("{lo} <= {x} < {hi}"));
        }
        if !ints.is_empty() && self.rng.chance(12) {
            let x = self.rng.pick(&ints).name.clone();
            let n = self.rng.range(1, 3);
            let list: Vec<String> = (0..n).map(|_| self.constant()).collect();
            let neg = if self.rng.chance(30) { "!" } else { "" };
            b.lits.push(format!("{neg}({x} in ({}))", list.join(", ")));
        }
        if arithmetic && !ints.is_empty() && self.rng.chance(30) {
            let x = self.rng.pick(&ints).name.clone();
            let y = self.rng.pick(&ints).name.clone();
            let c = self.constant();
            let e = match self.rng.below(4) {
                0 => format!("{x} + {y}"),
                1 => format!("{x} * 2 - {c}"),
                2 => format!("{x} - {y}"),
                _ => format!("({x} + {c}) * 3"),
            };
            let v = b.fresh(Type::Int32);
            b.lits.push(format!("{} = {e}", v.name));
            b.bound.push(v);
        }
        if self.rng.chance(30) {
            let cands = self.earlier(group);
            let cands: Vec<usize> = cands
                .into_iter()
                .filter(|&i| self.preds[i].functional.is_none())
                .collect();
            let q = self.preds[*self.rng.pick(&cands)].clone();
            let args: Vec<String> = q
                .cols
                .iter()
                .map(|t| {
                    let bound = b.of_type(*t);
                    if !bound.is_empty() && self.rng.chance(75) {
                        self.rng.pick(&bound).name.clone()
                    } else if *t == Type::Int32 && self.rng.chance(50) {
                        self.constant()
                    } else {
                        "_".to_string()
                    }
                })
                .collect();
            let lit = format!("!{}({})", q.name, args.join(", "));
            b.lits.push(lit);
        }
    }

    /// A random body over `avail`, starting with atoms of `first` (for recursion).
    fn body(&mut self, avail: &[usize], first: &[usize], group: usize, arithmetic: bool) -> Body {
        let mut b = Body::default();
        for p in first {
            self.atom(&mut b, *p);
        }
        let binary: Vec<usize> = avail
            .iter()
            .copied()
            .filter(|&i| self.preds[i].cols == [Type::Int32, Type::Int32] && self.preds[i].functional.is_none())
            .collect();
        if first.is_empty() && !binary.is_empty() && self.rng.chance(15) {
            self.triangle(&mut b, &binary);
        } else {
            let n = self.rng.range(usize::from(first.is_empty()), 2);
            for _ in 0..n {
                let p = *self.rng.pick(avail);
                self.atom(&mut b, p);
            }
        }
        self.extras(&mut b, group, arithmetic);
        b
    }

    /// Head arguments for `n` int32 columns: bound variables, or constants when none are.
    fn head_args(&mut self, b: &mut Body, n: usize) -> Vec<String> {
        let ints = b.of_type(Type::Int32);
        (0..n)
            .map(|_| {
                if ints.is_empty() || self.rng.chance(5) {
                    self.constant()
                } else {
                    self.rng.pick(&ints).name.clone()
                }
            })
            .collect()
    }

    fn rule(&mut self, head: usize, b: &mut Body) {
        let p = self.preds[head].clone();
        let args = self.head_args(b, p.cols.len());
        let _ = writeln!(self.out, "{}({}) <- {}.", p.name, args.join(", "), b.lits.join(", "));
    }

    fn facts(&mut self, pred: usize) {
        if self.rng.chance(20) {
            let p = self.preds[pred].clone();
            for _ in 0..self.rng.range(1, 2) {
                let args: Vec<String> = p.cols.iter().map(|_| self.constant()).collect();
                let _ = writeln!(self.out, "{}({}).", p.name, args.join(", "));
            }
        }
    }

    fn plain_group(&mut self, group: usize) {
        let avail = self.earlier(group);
        let arity = self.rng.range(1, 3);
        let p = self.new_pred(group, vec![Type::Int32; arity], None);
        self.facts(p);
        for _ in 0..self.rng.range(1, 2) {
            let mut b = self.body(&avail, &[], group, true);
            if self.rng.chance(20) {
                // A disjunction: a second branch that binds the same head variables.
                let args = self.head_args(&mut b, arity);
                let mut c = self.body(&avail, &[], group, true);
                // The branches become separate rules: keep the second branch's own variables apart.
                c.lits = c.lits.iter().map(|l| rename(l, 100)).collect();
                c.bound = c
                    .bound
                    .iter()
                    .map(|v| Var {
                        name: rename(&v.name, 100),
                        ty: v.ty,
                    })
                    .collect();
                for a in &args {
                    if a.starts_with('x') {
                        self.bind(
                            &mut c,
                            &Var {
                                name: a.clone(),
                                ty: Type::Int32,
                            },
                        );
                    }
                }
                let _ = writeln!(
                    self.out,
                    "{}({}) <- ({}) ; ({}).",
                    self.preds[p].name,
                    args.join(", "),
                    b.lits.join(", "),
                    c.lits.join(", ")
                );
            } else {
                self.rule(p, &mut b);
            }
        }
        let pr = self.preds[p].clone();
        self.output(&pr);
    }

    fn recursive_group(&mut self, group: usize) {
        let avail = self.earlier(group);
        let n = self.rng.range(1, 2);
        let arity = if self.rng.chance(75) { 2 } else { self.rng.range(1, 3) };
        let members: Vec<usize> = (0..n)
            .map(|_| self.new_pred(group, vec![Type::Int32; arity], None))
            .collect();
        let mut all = avail.clone();
        all.extend(&members);
        for &p in &members {
            self.facts(p);
            let mut base = self.body(&avail, &[], group, false);
            self.rule(p, &mut base);
        }
        for (i, &p) in members.iter().enumerate() {
            // Each member reads the next one (the group is one cycle), linearly or not.
            let other = members[(i + 1) % members.len()];
            let first: Vec<usize> = if self.rng.chance(25) {
                vec![other, other]
            } else {
                vec![other]
            };
            let mut b = self.body(&all, &first, group, false);
            self.rule(p, &mut b);
            if self.rng.chance(30) {
                let mut b = self.body(&all, &[p], group, false);
                self.rule(p, &mut b);
            }
        }
        for &p in &members {
            let pr = self.preds[p].clone();
            self.output(&pr);
        }
    }

    fn aggregate_group(&mut self, group: usize) {
        let avail = self.earlier(group);
        let b = self.body(&avail, &[], group, true);
        let ints = b.of_type(Type::Int32);
        let n_keys = self.rng.below(3).min(ints.len());
        let keys: Vec<String> = (0..n_keys).map(|_| self.rng.pick(&ints).name.clone()).collect();
        let n_aggs = self.rng.range(1, 2);
        let mut specs = Vec::new();
        let mut types = vec![Type::Int32; n_keys];
        let numeric: Vec<Var> = b.bound.clone();
        for i in 0..n_aggs {
            let func = if numeric.is_empty() { 0 } else { self.rng.below(4) };
            let name = format!("n{i}");
            let (spec, ty) = match func {
                0 => (format!("{name} = count()"), Type::Int64),
                f => {
                    let x = self.rng.pick(&numeric).clone();
                    let arg = if self.rng.chance(20) {
                        format!("{} * 2", x.name)
                    } else {
                        x.name.clone()
                    };
                    match f {
                        1 => (format!("{name} = sum({arg})"), Type::Int64),
                        2 => (format!("{name} = min({arg})"), x.ty),
                        _ => (format!("{name} = max({arg})"), x.ty),
                    }
                }
            };
            specs.push((name, spec));
            types.push(ty);
        }
        let functional = n_aggs == 1 && self.rng.chance(50);
        let p = self.new_pred(group, types, functional.then_some(n_keys));
        let name = self.preds[p].name.clone();
        let agg_names: Vec<String> = specs.iter().map(|(n, _)| n.clone()).collect();
        let agg_specs: Vec<String> = specs.into_iter().map(|(_, s)| s).collect();
        let head = if functional {
            format!("{name}[{}] = {}", keys.join(", "), agg_names[0])
        } else {
            let mut all = keys.clone();
            all.extend(agg_names);
            format!("{name}({})", all.join(", "))
        };
        let _ = writeln!(
            self.out,
            "{head} <- agg<<{}>> {}.",
            agg_specs.join(", "),
            b.lits.join(", ")
        );
        let pr = self.preds[p].clone();
        self.output(&pr);
    }
}

/// Strings of the typed data: shared prefixes and suffixes, non-ASCII, LIKE metacharacters.
const STRINGS: &[&str] = &[
    "BRASS",
    "SMALL BRASS",
    "PROMO STEEL",
    "PROMO BRASS",
    "MEDIUM TIN",
    "LARGE POLISHED BRASS",
    "über",
    "x_y%z",
];

/// `n` random rows for `columns` of any types: small integers with some skew, decimals of
/// the column's scale, dates around 1996, floats that are exact in binary, strings from a
/// small pool. About one row in eight is a duplicate.
pub fn typed_rows(rng: &mut Rng, columns: &[fox_sema::core::Column], n: usize, domain: usize) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = Vec::with_capacity(n);
    for _ in 0..n {
        if !rows.is_empty() && rng.chance(12) {
            let r = rows[rng.below(rows.len())].clone();
            rows.push(r);
            continue;
        }
        let row = columns
            .iter()
            .map(|c| {
                let small = if rng.chance(25) {
                    0
                } else {
                    rng.below(domain.max(1)) as i64
                };
                match c.ty {
                    Type::Int32 => Value::Int32(small as i32),
                    Type::Int64 => Value::Int64(small),
                    Type::Decimal(s) | Type::WideDecimal(s) => {
                        let u = rng.below(200_000) as i128 - 50_000;
                        let u = if s < 2 { u / 10i128.pow(u32::from(2 - s)) } else { u };
                        Value::Decimal { unscaled: u, scale: s }
                    }
                    Type::Float64 => Value::Float64((rng.below(4000) as f64 - 1000.0) / 8.0),
                    Type::String => Value::String((*rng.pick(STRINGS)).to_string()),
                    Type::Date => Value::Date(9_496 + rng.below(1_500) as i32),
                    Type::Bool => Value::Bool(rng.chance(50)),
                }
            })
            .collect();
        rows.push(row);
    }
    rows
}

/// Renames the variables `xN` of a literal to `x(N + by)`.
fn rename(lit: &str, by: usize) -> String {
    let mut out = String::new();
    let chars: Vec<char> = lit.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == 'x' && starts_word && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let n: usize = chars[i + 1..j].iter().collect::<String>().parse().unwrap_or(0);
            let _ = write!(out, "x{}", n + by);
            i = j;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic() {
        let a = case(7, GenOptions::default());
        let b = case(7, GenOptions::default());
        assert_eq!(a.source, b.source);
        assert_eq!(a.inputs, b.inputs);
        assert_ne!(case(8, GenOptions::default()).source, a.source);
    }

    #[test]
    fn renaming_touches_variables_only() {
        assert_eq!(
            rename("e0(x1, x12), max(x3) < 4, ex1(2)", 100),
            "e0(x101, x112), max(x103) < 4, ex1(2)"
        );
    }
}
