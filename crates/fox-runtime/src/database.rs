//! A loaded data set that several runs share: tables in host memory with their strings
//! already in a sorted dictionary, loaded once from files or generated (TPC-H), and the
//! device copies of its columns kept between runs ([`Resident`]), so that a benchmark
//! measures queries on resident data.
//!
//! A table is loaded with the column types of the plans' `.input` declarations, and only
//! the columns those plans read are kept; a run whose plan reads another column of a
//! loaded table, or declares it with another type, is an error that says so.
//!
//! [`Database::with_tables`] adds tables of rows held in memory (the results of earlier
//! runs, which `fox repl` keeps) to a loaded database without copying its tables.

use crate::dict::Dictionary;
use crate::load::{load_input_cols_reporting, Interner, LoadedCol};
use crate::routing::Routing;
use crate::stored::StoredCol;
use crate::strings::StrArena;
use crate::{DevBuf, HostCol, OutputTable, RuntimeError};
use fox_kernel::{Elem, InputRel, Instr, Kernel, KernelPlan};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a data set's tables come from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// `.input` files under a directory (`--data DIR`).
    Files(PathBuf),
    /// The TPC-H tables generated at a scale factor (`--tpch SF`).
    Tpch(f64),
    /// The `edge` relation of a generated graph (`--graph SPEC`).
    Graph(crate::graph::GraphSpec),
}

/// Told how loading goes, for progress bars.
pub trait LoadProgress: Sync {
    /// Loading of `table` starts; about `rows` rows (0 when unknown).
    fn start(&self, table: &str, rows: u64);
    /// `rows` more rows of the current table are done.
    fn advance(&self, rows: u64);
    /// The current table is done.
    fn finish(&self);
    /// A flag that stops the load when set (see [`crate::cancel`]): it is read between
    /// tables, once per chunk of generated rows and per block or chunk of records of a
    /// file being read, and the load then fails with
    /// [`RuntimeError::Cancelled`]. Never set unless the implementation says otherwise.
    fn cancel_flag(&self) -> &std::sync::atomic::AtomicBool {
        crate::cancel::never()
    }
}

/// `progress`, with `cancel` as its cancellation flag.
pub struct CancellableProgress<'a> {
    pub progress: &'a dyn LoadProgress,
    pub cancel: &'a crate::CancelToken,
}

impl LoadProgress for CancellableProgress<'_> {
    fn start(&self, table: &str, rows: u64) {
        self.progress.start(table, rows);
    }
    fn advance(&self, rows: u64) {
        self.progress.advance(rows);
    }
    fn finish(&self) {
        self.progress.finish();
    }
    fn cancel_flag(&self) -> &std::sync::atomic::AtomicBool {
        self.cancel.flag()
    }
}

/// Progress that nobody watches.
pub struct NoProgress;

impl LoadProgress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// One loaded table.
#[derive(Debug)]
pub struct Table {
    pub input: InputRel,
    /// One entry per declared column; `None` for the columns no plan reads.
    /// Each packed ([`StoredCol::pack`]) when loaded from a data source.
    cols: Vec<Option<StoredCol>>,
    /// For each loaded string column, its distinct codes in ascending order.
    distinct: Vec<Option<Arc<Vec<u32>>>>,
    pub rows: usize,
}

/// Part of a table's rows, with its strings numbered by its own interner.
type Part = (Vec<LoadedCol>, Interner);

/// A column of a table: (table, column index).
type ColumnRef = (String, usize);

/// Tables in host memory and the dictionary of their strings.
#[derive(Debug, Default)]
pub struct Database {
    dict: Dictionary,
    /// Shared, so that [`Database::with_tables`] copies no column.
    tables: BTreeMap<String, Arc<Table>>,
    /// The distinct codes of sets of string columns, by the columns (table, column).
    codes_of: Mutex<HashMap<Vec<ColumnRef>, Arc<Vec<u32>>>>,
    /// The dictionary's index tables (ranks, lengths) at every code, made once for every
    /// run and device that reads them ([`Database::dict_table`]).
    dict_tables: Mutex<HashMap<fox_kernel::DictOp, Arc<crate::HostCol>>>,
    /// The routings of tables loaded hashed over devices that later runs reuse
    /// ([`Database::routing`]).
    routings: Mutex<KeptRoutings>,
    /// Time spent reading or generating, parsing, and building the dictionary.
    pub load_time: Duration,
}

/// A table loaded hashed over devices: its name, its key columns and the number of
/// devices.
type RoutingKey = (String, Vec<usize>, usize);

/// The routings a database keeps, least recently used first.
#[derive(Debug, Default)]
struct KeptRoutings {
    kept: Vec<(RoutingKey, Arc<Routing>)>,
}

/// The share of the bytes of a database's columns its kept routings may take: a quarter.
const ROUTING_SHARE: usize = 4;

/// The columns of its `LoadInput`s that a plan reads (the others are only freed).
pub fn used_input_columns(plan: &KernelPlan) -> Vec<Vec<bool>> {
    let mut read: HashSet<u32> = HashSet::new();
    for b in &plan.blocks {
        for ins in &b.instrs {
            match ins {
                Instr::Launch { args, .. } => read.extend(args.iter().map(|a| a.0)),
                Instr::Move { src, .. } => {
                    read.insert(src.0);
                }
                Instr::Output { cols, .. } | Instr::Assert { args: cols, .. } | Instr::Observe { bufs: cols, .. } => {
                    read.extend(cols.iter().map(|c| c.0))
                }
                Instr::Free { .. } => {}
            }
        }
    }
    let mut used: Vec<Vec<bool>> = plan.inputs.iter().map(|i| vec![false; i.columns.len()]).collect();
    for b in &plan.blocks {
        for ins in &b.instrs {
            if let Instr::Launch {
                kernel: Kernel::LoadInput { input, hash, .. },
                outs,
                ..
            } = ins
            {
                if let Some(u) = used.get_mut(*input) {
                    for (c, o) in outs.iter().enumerate() {
                        if c < u.len() && read.contains(&o.0) {
                            u[c] = true;
                        }
                    }
                    // The key columns place the rows.
                    for &c in hash {
                        if c < u.len() {
                            u[c] = true;
                        }
                    }
                }
            }
        }
    }
    // The key columns are read by the check of the key.
    for (u, i) in used.iter_mut().zip(&plan.inputs) {
        for &k in &i.key {
            if let Some(x) = u.get_mut(k) {
                *x = true;
            }
        }
    }
    used
}

/// One entry per table of `wanted` (declarations with the columns to keep, of several
/// programs), keeping the union of the columns each program keeps, in the order of the
/// tables' names; an error when two programs declare a table differently.
pub fn merge_wanted(
    wanted: impl IntoIterator<Item = (InputRel, Vec<bool>)>,
) -> Result<Vec<(InputRel, Vec<bool>)>, RuntimeError> {
    let mut merged: BTreeMap<String, (InputRel, Vec<bool>)> = BTreeMap::new();
    for (input, used) in wanted {
        match merged.get_mut(&input.name) {
            None => {
                merged.insert(input.name.clone(), (input, used));
            }
            Some((first, w)) => {
                if first.columns != input.columns || first.header != input.header {
                    return Err(RuntimeError::Data {
                        msg: format!(
                            "two programs declare `{}` with different columns (or one reads a header, the other not); load them separately",
                            input.name
                        ),
                    });
                }
                w.iter_mut().zip(used).for_each(|(a, b)| *a |= b);
            }
        }
    }
    Ok(merged.into_values().collect())
}

impl Database {
    /// Loads, from `source`, every input table of `plans` with the columns they read.
    pub fn load(
        source: &DataSource,
        plans: &[&KernelPlan],
        progress: &dyn LoadProgress,
    ) -> Result<Database, RuntimeError> {
        let wanted = merge_wanted(
            plans
                .iter()
                .flat_map(|plan| plan.inputs.iter().cloned().zip(used_input_columns(plan))),
        )?;
        Database::load_tables(source, wanted, progress)
    }

    /// Loads, from `source`, the tables `wanted`: each with its declaration and the
    /// columns to keep (`used[c]`), one entry per table.
    pub fn load_tables(
        source: &DataSource,
        wanted: Vec<(InputRel, Vec<bool>)>,
        progress: &dyn LoadProgress,
    ) -> Result<Database, RuntimeError> {
        let start = Instant::now();
        let _phase = crate::alloc::LoadPhase::enter();
        // Each table comes in parts, each with strings numbered by its own interner; its
        // columns are packed as soon as it is made (`numeric`: those that hold no strings
        // assembled, the string ones as each part's pieces of ids until the dictionary
        // gives them codes), so that only one table is held unpacked at a time.
        let mut loaded: Vec<(InputRel, Vec<bool>, Vec<Part>)> = Vec::new();
        let mut numeric: Vec<Early> = Vec::new();
        let stop = progress.cancel_flag();
        let check_stop = || {
            if crate::cancel::is_set(stop) {
                Err(RuntimeError::Cancelled)
            } else {
                Ok(())
            }
        };
        for (input, used) in wanted {
            check_stop()?;
            let name = input.name.clone();
            let parts = match source {
                DataSource::Files(dir) => {
                    let mut strings = Interner::default();
                    let cols = load_input_cols_reporting(
                        dir,
                        &input,
                        &used,
                        &mut strings,
                        stop,
                        &|rows| progress.start(&name, rows),
                        &|n| progress.advance(n),
                    )?;
                    vec![(cols, strings)]
                }
                DataSource::Tpch(sf) => {
                    progress.start(&name, crate::tpch::approx_rows(&name, *sf));
                    crate::tpch::generate(&input, *sf, &used, &|n| progress.advance(n), stop)?
                }
                DataSource::Graph(spec) => {
                    progress.start(&name, spec.generated_edges());
                    vec![(
                        graph_columns(&input, spec, &|n| progress.advance(n), stop)?,
                        Interner::default(),
                    )]
                }
            };
            progress.finish();
            let mut parts = parts;
            numeric.push(pack_table(&input, &used, &mut parts)?);
            loaded.push((input, used, parts));
        }
        check_stop()?;
        // The parts' hash tables are done with: only their strings are kept until the
        // dictionary is built.
        type Parts = Vec<(Vec<LoadedCol>, StrArena)>;
        let loaded: Vec<(InputRel, Vec<bool>, Parts)> = loaded
            .into_iter()
            .map(|(input, used, parts)| {
                let parts = parts.into_iter().map(|(cols, s)| (cols, s.into_strings())).collect();
                (input, used, parts)
            })
            .collect();
        // The dictionary: every string of every part, named by (part, id) in 8 bytes and
        // sorted on all cores by its text; a pass over the sorted strings numbers the
        // distinct ones and gives each part's numbers their dictionary codes.
        let (sorted, remaps) = {
            use rayon::prelude::*;
            const WHAT: &str = "the string dictionary";
            let data = |msg: String| RuntimeError::Data { msg };
            let arenas: Vec<&StrArena> = loaded.iter().flat_map(|(_, _, p)| p).map(|(_, s)| s).collect();
            let mut remaps: Vec<Vec<u32>> = Vec::new();
            let total: usize = arenas.iter().map(|s| s.len()).sum();
            let mut all: Vec<(u32, u32)> = crate::alloc::try_with_capacity(total, WHAT).map_err(data)?;
            for (part, s) in arenas.iter().enumerate() {
                all.extend((0..s.len() as u32).map(|i| (part as u32, i)));
                remaps.push(crate::alloc::try_filled(s.len(), 0, WHAT).map_err(data)?);
            }
            let text = |&(part, i): &(u32, u32)| arenas[part as usize].get(i as usize);
            all.par_sort_unstable_by(|a, b| text(a).cmp(text(b)));
            let bytes: usize = arenas.iter().map(|s| s.bytes()).sum();
            let mut sorted = StrArena::try_with_capacity(total, bytes, WHAT).map_err(data)?;
            for (k, e) in all.iter().enumerate() {
                let t = text(e);
                if k == 0 || text(&all[k - 1]) != t {
                    sorted.push(t);
                }
                remaps[e.0 as usize][e.1 as usize] = sorted.len() as u32 - 1;
            }
            sorted.shrink_to_fit();
            (sorted, remaps)
        };
        // The parts' interners are done with: their strings are in `sorted`.
        let loaded: Vec<(InputRel, Vec<bool>, Vec<Vec<LoadedCol>>)> = loaded
            .into_iter()
            .map(|(input, used, parts)| (input, used, parts.into_iter().map(|(cols, _)| cols).collect()))
            .collect();
        let dict_len = sorted.len();
        let dict = Dictionary::from_sorted(sorted);
        let mut remaps = remaps.into_iter();
        let mut tables = BTreeMap::new();
        for ((input, _, parts), (mut cols, mut strings)) in loaded.into_iter().zip(numeric) {
            // Each part's string ids to dictionary codes, for this table's string columns,
            // each packed one at a time from its parts' pieces.
            let remaps: Vec<Vec<u32>> = remaps.by_ref().take(parts.len()).collect();
            drop(parts);
            let remaps: Vec<&[u32]> = remaps.iter().map(Vec::as_slice).collect();
            let mut distinct: Vec<Option<Arc<Vec<u32>>>> = vec![None; input.columns.len()];
            for (c, col) in input.columns.iter().enumerate() {
                let Some(pieces) = strings[c].take() else { continue };
                let what = format!("the column `{}` of `{}`", col.name, input.name);
                let (d, packed) = crate::stored::pack_string_pieces(pieces, &remaps, dict_len, &what)
                    .map_err(|msg| RuntimeError::Data { msg })?;
                cols[c] = Some(packed);
                distinct[c] = Some(d);
            }
            if matches!(source, DataSource::Tpch(_)) {
                check_stored_key(&format!("TPC-H {}", input.name), &input, &cols)?;
            }
            let rows = cols.iter().flatten().map(StoredCol::len).max().unwrap_or(0);
            tables.insert(
                input.name.clone(),
                Arc::new(Table {
                    input,
                    cols,
                    distinct,
                    rows,
                }),
            );
        }
        Ok(Database {
            dict,
            tables,
            codes_of: Mutex::new(HashMap::new()),
            dict_tables: Mutex::new(HashMap::new()),
            routings: Mutex::new(KeptRoutings::default()),
            load_time: start.elapsed(),
        })
    }

    /// The distinct codes of the string columns a plan reads (sorted), so that dictionary
    /// tables need only be computed at those codes. An error when memory runs out.
    pub(crate) fn codes_read_by(&self, plan: &KernelPlan) -> Result<Arc<Vec<u32>>, String> {
        let mut key: Vec<ColumnRef> = Vec::new();
        for (input, used) in plan.inputs.iter().zip(used_input_columns(plan)) {
            for (c, u) in used.into_iter().enumerate() {
                if u && input.columns[c].ty == fox_sema::core::Type::String {
                    key.push((input.name.clone(), c));
                }
            }
        }
        key.sort();
        key.dedup();
        if let Some(hit) = self.codes_of.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(hit);
        }
        let lists: Vec<&Arc<Vec<u32>>> = key
            .iter()
            .filter_map(|(t, c)| {
                self.tables
                    .get(t)
                    .and_then(|t| t.distinct.get(*c))
                    .and_then(Option::as_ref)
            })
            .collect();
        let codes = if lists.len() == 1 {
            lists[0].clone()
        } else {
            let total = lists.iter().map(|l| l.len()).sum();
            let mut all: Vec<u32> = crate::alloc::try_with_capacity(total, "the distinct strings of a column")?;
            lists.iter().for_each(|l| all.extend_from_slice(l));
            distinct_codes(&all)?
        };
        if let Ok(mut m) = self.codes_of.lock() {
            m.insert(key, codes.clone());
        }
        Ok(codes)
    }

    /// The table of `op` over the whole loaded dictionary (an entry at every code), made
    /// once and shared: a table at every code serves any plan, whichever strings it reads.
    /// Devices asking at once wait for the first to make it. An error when memory runs out.
    pub fn dict_table(&self, op: &fox_kernel::DictOp) -> Result<Arc<crate::HostCol>, String> {
        let mut tables = self.dict_tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tables.get(op) {
            return Ok(t.clone());
        }
        let t = Arc::new(self.dict.table(op)?);
        tables.insert(op.clone(), t.clone());
        Ok(t)
    }

    /// The routing of table `table` hashed on the columns `keys` over `devices` devices:
    /// the one kept from an earlier run, else made by `make`, with whether `make` made it.
    /// A routing made is kept for later runs (which may load other columns of the table
    /// hashed the same way) while the kept routings take at most a quarter of the bytes
    /// of the database's columns, the least recently used given up first (a run holding
    /// one keeps it until it ends). `make`'s error is returned as it is.
    pub(crate) fn routing(
        &self,
        table: &str,
        keys: &[usize],
        devices: usize,
        make: impl FnOnce() -> Result<Routing, String>,
    ) -> Result<(Arc<Routing>, bool), String> {
        let key: RoutingKey = (table.to_string(), keys.to_vec(), devices);
        {
            let mut kept = self.routings.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = kept.kept.iter().position(|(k, _)| *k == key) {
                let hit = kept.kept.remove(at);
                let r = hit.1.clone();
                kept.kept.push(hit);
                return Ok((r, false));
            }
        }
        let r = Arc::new(make()?);
        let budget = self.column_bytes() / ROUTING_SHARE;
        if r.bytes() <= budget {
            let mut kept = self.routings.lock().unwrap_or_else(|e| e.into_inner());
            if !kept.kept.iter().any(|(k, _)| *k == key) {
                let mut used: usize = kept.kept.iter().map(|(_, r)| r.bytes()).sum();
                while used + r.bytes() > budget && !kept.kept.is_empty() {
                    used -= kept.kept.remove(0).1.bytes();
                }
                kept.kept.push((key, r.clone()));
            }
        }
        Ok((r, true))
    }

    /// The bytes of the loaded columns of every table, as plans read them (unpacked).
    fn column_bytes(&self) -> usize {
        self.tables
            .values()
            .flat_map(|t| t.cols.iter().flatten())
            .map(|c| c.len() * c.elem().size())
            .sum()
    }

    /// True when every input `plan` reads is loaded with its declared columns and every
    /// column it reads.
    pub fn covers(&self, plan: &KernelPlan) -> bool {
        plan.inputs.iter().zip(used_input_columns(plan)).all(|(input, used)| {
            self.table_for(input).is_ok_and(|t| {
                used.iter()
                    .enumerate()
                    .all(|(c, u)| !u || Database::column(t, c).is_some())
            })
        })
    }

    pub fn dictionary(&self) -> &Dictionary {
        &self.dict
    }

    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values().map(|t| t.as_ref())
    }

    /// A database with the tables of this one (shared, not copied) and `extra` tables of
    /// rows held in memory, such as the results of earlier runs: each `OutputTable` is
    /// read as the input `InputRel` (which hides a table of this database of the same
    /// name). Their strings join the dictionary: those it lacks are appended, as the
    /// strings a run creates are, so that string order then comes from the rank table.
    pub fn with_tables(&self, extra: &[(InputRel, &OutputTable)]) -> Result<Database, RuntimeError> {
        let mut dict = self.dict.clone();
        let mut tables = self.tables.clone();
        for (input, t) in extra {
            let types_match = t.columns.len() == input.columns.len()
                && t.columns.iter().zip(&input.columns).all(|(a, b)| a.ty == b.ty);
            if !types_match || input.columns.is_empty() {
                return Err(RuntimeError::Data {
                    msg: format!(
                        "the rows given for `{}` have columns ({}) but it is declared with ({})",
                        input.name,
                        t.columns
                            .iter()
                            .map(|c| c.ty.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        input
                            .columns
                            .iter()
                            .map(|c| c.ty.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            let data = |msg: String| RuntimeError::Data {
                msg: format!("the rows given for `{}`: {msg}", input.name),
            };
            let cols: Vec<HostCol> = match t.encoded().map_err(data)? {
                Some((cols, strings)) => {
                    let codes = strings
                        .iter()
                        .map(|s| dict.intern(s))
                        .collect::<Result<Vec<u32>, _>>()
                        .map_err(data)?;
                    cols.into_iter()
                        .map(|c| match c {
                            HostCol::U32(mut v) => {
                                v.iter_mut().for_each(|x| *x = codes[*x as usize]);
                                HostCol::U32(v)
                            }
                            other => other,
                        })
                        .collect()
                }
                None => columns_of_values(&input.name, &t.rows(), &input.columns, &mut dict)?,
            };
            let distinct = cols
                .iter()
                .map(|c| match c {
                    HostCol::U32(v) => distinct_codes(v).map(Some),
                    _ => Ok(None),
                })
                .collect::<Result<_, _>>()
                .map_err(data)?;
            tables.insert(
                input.name.clone(),
                Arc::new(Table {
                    input: input.clone(),
                    cols: cols.into_iter().map(|c| Some(StoredCol::Plain(c))).collect(),
                    distinct,
                    rows: t.len(),
                }),
            );
        }
        Ok(Database {
            dict,
            tables,
            codes_of: Mutex::new(HashMap::new()),
            dict_tables: Mutex::new(HashMap::new()),
            routings: Mutex::new(KeptRoutings::default()),
            load_time: Duration::ZERO,
        })
    }

    /// The table a plan's input reads, checked against its declaration.
    pub(crate) fn table_for(&self, input: &InputRel) -> Result<&Arc<Table>, String> {
        let t = self.tables.get(&input.name).ok_or_else(|| {
            format!(
                "the loaded data has no table `{}` (it has {})",
                input.name,
                self.tables
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if t.input.columns != input.columns {
            return Err(format!(
                "`{}` is declared with other columns than when the data was loaded",
                input.name
            ));
        }
        Ok(t)
    }

    /// Column `c` of a table as host memory holds it (widened, it is the column the plan
    /// reads); `None` when it was not loaded.
    pub fn column(t: &Table, c: usize) -> Option<&StoredCol> {
        t.cols.get(c).and_then(Option::as_ref)
    }
}

/// A table's columns as soon as it is made: those that hold no strings assembled and
/// packed, and each string column as its parts' pieces of string ids (each part numbers
/// its strings itself), packed; `None` for the columns not loaded.
type Early = (Vec<Option<StoredCol>>, Vec<Option<Vec<crate::stored::IdPiece>>>);

/// The used columns of a table, taken from its parts (each piece freed once copied):
/// [`Early`].
fn pack_table(input: &InputRel, used: &[bool], parts: &mut [Part]) -> Result<Early, RuntimeError> {
    let data = |msg: String| RuntimeError::Data { msg };
    let mut cols = Vec::with_capacity(input.columns.len());
    let mut strings = Vec::with_capacity(input.columns.len());
    let one = parts.len() == 1;
    for (c, col) in input.columns.iter().enumerate() {
        if !used.get(c).copied().unwrap_or(false) {
            cols.push(None);
            strings.push(None);
            continue;
        }
        let what = format!("the column `{}` of `{}`", col.name, input.name);
        if col.ty == fox_sema::core::Type::String {
            let pieces = parts
                .iter_mut()
                .map(|(p, _)| match take_piece(&mut p[c], col.ty, false) {
                    HostCol::U32(ids) => crate::stored::IdPiece::pack(ids, &what),
                    other => Err(format!("{what}: string ids loaded as {:?}", other.elem())),
                })
                .collect::<Result<Vec<_>, String>>()
                .map_err(data)?;
            cols.push(None);
            strings.push(Some(pieces));
            continue;
        }
        let elem = Elem::of(col.ty);
        let pieces: Vec<HostCol> = parts
            .iter_mut()
            .map(|(p, _)| take_piece(&mut p[c], col.ty, one))
            .collect();
        cols.push(Some(match StoredCol::pack_pieces(elem, pieces, None, &what) {
            Ok(packed) => packed,
            Err(pieces) => StoredCol::Plain(crate::stored::concat_pieces(elem, pieces, &what).map_err(data)?),
        }));
        strings.push(None);
    }
    Ok((cols, strings))
}

/// A part's piece of a column of type `ty`, taken from it (string ids as they are: after
/// the dictionary, its codes); the only piece of a table of one part (a file, a graph)
/// without the spare capacity it grew with.
fn take_piece(piece: &mut LoadedCol, ty: fox_sema::core::Type, only: bool) -> HostCol {
    let mut piece = std::mem::replace(piece, LoadedCol::new(ty));
    if only {
        piece.shrink_to_fit();
    }
    match piece {
        LoadedCol::Str(v) => HostCol::U32(v),
        other => to_host(other, &[]),
    }
}

/// [`crate::load::check_key`] of a table's stored columns: the rows of its declared key are distinct.
fn check_stored_key(file: &str, input: &InputRel, cols: &[Option<StoredCol>]) -> Result<(), RuntimeError> {
    let key: Vec<&StoredCol> = input
        .key
        .iter()
        .filter_map(|&k| cols.get(k).and_then(Option::as_ref))
        .collect();
    crate::load::check_key_by(file, input, key.len(), key.first().map_or(0, |c| c.len()), |a, b| {
        key.iter()
            .map(|c| c.order_at(a).cmp(&c.order_at(b)))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    })
}

/// The distinct dictionary codes among `codes`, in ascending order (sorted on all cores);
/// an error when memory runs out.
fn distinct_codes(codes: &[u32]) -> Result<Arc<Vec<u32>>, String> {
    use rayon::slice::ParallelSliceMut;
    let mut all: Vec<u32> = crate::alloc::try_to_vec(codes, "the distinct strings of a column")?;
    all.par_sort_unstable();
    all.dedup();
    all.shrink_to_fit();
    Ok(Arc::new(all))
}

/// The columns of `.input edge` from a generated graph: two integer columns.
fn graph_columns(
    input: &InputRel,
    spec: &crate::graph::GraphSpec,
    progress: &(dyn Fn(u64) + Sync),
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<LoadedCol>, RuntimeError> {
    use fox_sema::core::Type;
    if input.name != "edge" {
        return Err(RuntimeError::Data {
            msg: format!(
                "`.input {}`: a generated graph (--graph {spec}) has only the relation `edge`",
                input.name
            ),
        });
    }
    let types: Vec<Type> = input.columns.iter().map(|c| c.ty).collect();
    let (x, y) = match types.as_slice() {
        [a, b] if [a, b].iter().all(|t| matches!(t, Type::Int32 | Type::Int64)) => crate::graph::columns(spec, progress, stop, &crate::alloc::available_for).map_err(|msg| {
            if crate::cancel::is_set(stop) {
                RuntimeError::Cancelled
            } else {
                RuntimeError::Data { msg }
            }
        })?,
        _ => {
            return Err(RuntimeError::Data {
                msg: format!(
                    "`edge` is declared with columns ({}), but a generated graph gives two integer columns (int32 or int64)",
                    types.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
                ),
            })
        }
    };
    // The graph's int32 columns are kept as they are; an int64 column is widened, one
    // column at a time.
    [x, y]
        .into_iter()
        .zip(types)
        .map(|(v, t)| match t {
            Type::Int32 => Ok(LoadedCol::I32(v)),
            _ => {
                use rayon::prelude::*;
                crate::alloc::try_par_collect(v.par_iter().map(|&a| i64::from(a)), "the edges of the graph")
                    .map(LoadedCol::I64)
                    .map_err(|msg| RuntimeError::Data { msg })
            }
        })
        .collect()
}

/// The columns of rows of values of the types of `columns`, strings interned in `dict`.
/// `table` names the rows in messages.
fn columns_of_values(
    table: &str,
    rows: &[Vec<fox_sema::core::Value>],
    columns: &[fox_sema::core::Column],
    dict: &mut Dictionary,
) -> Result<Vec<HostCol>, RuntimeError> {
    use fox_sema::core::{Type, Value};
    let mut cols: Vec<HostCol> = columns
        .iter()
        .map(|c| HostCol::empty(fox_kernel::Elem::of(c.ty)))
        .collect();
    for (r, row) in rows.iter().enumerate() {
        let bad = |what: &str| RuntimeError::Data {
            msg: format!("row {} of the rows given for `{table}`: {what}", r + 1),
        };
        if row.len() != columns.len() {
            return Err(bad("wrong number of values"));
        }
        for ((col, v), column) in cols.iter_mut().zip(row).zip(columns) {
            match (col, v, column.ty) {
                (HostCol::I32(c), Value::Int32(x), Type::Int32) | (HostCol::I32(c), Value::Date(x), Type::Date) => {
                    c.push(*x)
                }
                (HostCol::I64(c), Value::Int64(x), Type::Int64) => c.push(*x),
                (HostCol::I64(c), Value::Decimal { unscaled, scale }, Type::Decimal(s)) if *scale == s => {
                    c.push(i64::try_from(*unscaled).map_err(|_| bad("a decimal out of range"))?)
                }
                (HostCol::I128(c), Value::Decimal { unscaled, scale }, Type::WideDecimal(s)) if *scale == s => {
                    c.push(*unscaled)
                }
                (HostCol::F64(c), Value::Float64(x), _) => c.push(*x),
                (HostCol::U8(c), Value::Bool(x), _) => c.push(u8::from(*x)),
                (HostCol::U32(c), Value::String(s), _) => c.push(dict.intern(s).map_err(|e| bad(&e))?),
                _ => return Err(bad(&format!("a value not of the type of column `{}`", column.name))),
            }
        }
    }
    Ok(cols)
}

/// Converts a loaded column to its device representation (strings as dictionary codes).
pub(crate) fn to_host(c: LoadedCol, remap: &[u32]) -> HostCol {
    match c {
        LoadedCol::I32(v) => HostCol::I32(v),
        LoadedCol::I64(v) => HostCol::I64(v),
        LoadedCol::F64(v) => HostCol::F64(v),
        LoadedCol::Bool(v) => HostCol::U8(v),
        LoadedCol::Str(mut v) => {
            v.iter_mut().for_each(|id| *id = remap[*id as usize]);
            HostCol::U32(v)
        }
    }
}

/// Device copies of a database's columns on one device, uploaded by the first run that
/// reads them and shared by the later runs on the same backend. Give them back with
/// [`Resident::release`].
///
/// A buffer is keyed by its table, its column (the index in the table's declaration) and
/// the rows of the column it holds ([`Rows`]): in a run over several devices each device
/// keeps the part of a column the run gave it, and a later run reuses a buffer only where
/// it asks for the same rows of the same column, so a plan that splits a table another
/// way, or a run over another number of devices, uploads its own part.
///
/// The resident bytes are kept within a bound, so that columns kept for later runs never
/// take the memory a run needs:
/// - The bound of a run is the smaller of the explicit limit ([`Resident::with_limit`])
///   and the run's device budget (its memory limit, else the device's capacity on a
///   backend with memory of its own) less the room for a run's own buffers: the largest
///   working set of the runs on this device so far, a run's working set being its device
///   peak (since the driver last reset the backend's peak) less the resident bytes it
///   ended with. Without a limit and a budget there is no bound (the CPU backend without
///   `--memory-limit`).
/// - Before a run reads its first instruction, at each column a run would keep, and
///   after the run, resident buffers are freed while the bytes are over the bound, in
///   this order: first the buffers no buffer of the run holds of a column the run reads
///   with other rows than it asks for (another placement of the same column), then the
///   other buffers the run does not read, then (before the run only) those it reads; each
///   group least recently used first (by the last run that read the buffer), then by
///   table, column and rows. A buffer the run holds is never freed.
/// - A column that does not fit under the bound once those are freed is uploaded for the
///   run alone and freed at its end (the next run uploads it again).
/// - When the device runs short of memory during a run, resident buffers the run does not
///   hold are freed in the same order, before any buffer of the run moves to the host.
///
/// So a run whose columns and working set fit the device with everything kept before it
/// frees nothing and uploads nothing twice, and [`Resident::bytes`] is within
/// [`Resident::bound`] after every run that has a bound, less the packed rows kept of
/// the columns it read.
///
/// Packed rows ([`Rows::Packed`]) are kept only under a memory limit on a backend with
/// memory of their own, for columns a run reads in place (too large for the device
/// beside its buffers): within half the budget ([`Resident::packed_bytes`]), those of
/// columns the run does not read given back first; the run widens its rows from them.
/// They are given back before any buffer of the run moves to the host (after the device
/// copies of database rows, which are only freed), except while room is made for more
/// packed rows, and a launch that runs in pieces does not give them back to try its
/// arguments whole when they could never fit together. A plan whose run gave them back,
/// or moved more than a 64th of the bytes it widened from them to the host, keeps none
/// in its later runs (`without_packed`, by a signature of its columns and blocks)
/// and reads none it finds kept.
#[derive(Debug, Default)]
pub struct Resident {
    pub(crate) bufs: HashMap<ResidentKey, DevBuf>,
    /// The run (counted by `runs`) that last read each buffer of `bufs`.
    pub(crate) used: HashMap<ResidentKey, u64>,
    /// The runs started on this device.
    pub(crate) runs: u64,
    /// The explicit bound on the resident bytes, if any.
    limit: Option<u64>,
    /// The largest working set of a run so far (see [`Resident`]).
    pub(crate) room: u64,
    /// The bound of the last run.
    pub(crate) bound: Option<u64>,
    /// The plans (by the interpreter's signature of the columns they read and their
    /// blocks) that keep no packed rows on the device: a run of theirs that kept
    /// some gave them back or moved its own buffers to the host for want of their room.
    pub(crate) without_packed: std::collections::HashSet<u64>,
}

/// The rows of a column a resident buffer holds: every row, the rows `start..end` (a
/// part that is not the whole column), or those that hashing on the key columns `keys`
/// gives device `rank` of `devices`; or the packed rows `start..end` of a packed column
/// ([`crate::Backend::upload_packed`]), from which runs of those rows are widened on the
/// device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Rows {
    All,
    Part(std::ops::Range<usize>),
    Hashed {
        keys: Vec<usize>,
        rank: usize,
        devices: usize,
    },
    Packed(std::ops::Range<usize>),
}

impl Rows {
    /// The rows `rows` of a column of `len` rows.
    pub(crate) fn of(rows: std::ops::Range<usize>, len: usize) -> Rows {
        if rows == (0..len) {
            Rows::All
        } else {
            Rows::Part(rows)
        }
    }

    /// A total order of rows, for deterministic choices.
    pub(crate) fn order(&self) -> (u8, usize, usize, Vec<usize>) {
        match self {
            Rows::All => (0, 0, 0, Vec::new()),
            Rows::Part(p) => (1, p.start, p.end, Vec::new()),
            Rows::Hashed { keys, rank, devices } => (2, *rank, *devices, keys.clone()),
            Rows::Packed(p) => (3, p.start, p.end, Vec::new()),
        }
    }
}

/// A resident buffer's table, column and rows (see [`Resident`]).
pub(crate) type ResidentKey = (String, usize, Rows);

impl Resident {
    /// No buffer, and a bound of `limit` bytes on what is kept (besides the one the
    /// device budget sets; see [`Resident`]).
    pub fn with_limit(limit: u64) -> Resident {
        Resident {
            limit: Some(limit),
            ..Resident::default()
        }
    }

    /// Sets the explicit bound on the resident bytes (`None`: only the device budget's),
    /// applied from the next run on.
    pub fn set_limit(&mut self, limit: Option<u64>) {
        self.limit = limit;
    }

    /// The explicit bound on the resident bytes.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The bound on the resident bytes of the last run (see [`Resident`]); `None` before
    /// the first run and when the run had none.
    pub fn bound(&self) -> Option<u64> {
        self.bound
    }

    /// The bound of a run whose device budget is `cap` bytes (`None` when unknown): the
    /// explicit limit, and the budget less the room for a run's working set.
    pub(crate) fn bound_under(&self, cap: Option<u64>) -> Option<u64> {
        let budget = cap.map(|c| c.saturating_sub(self.room));
        match (self.limit, budget) {
            (Some(l), Some(b)) => Some(l.min(b)),
            (l, b) => l.or(b),
        }
    }

    /// Whether the buffer `key` is held (not counted as read).
    pub(crate) fn holds(&self, key: &ResidentKey) -> bool {
        self.bufs.contains_key(key)
    }

    /// The buffer `key`, when held, counted as read by the current run.
    pub(crate) fn touch(&mut self, key: &ResidentKey) -> Option<DevBuf> {
        let b = self.bufs.get(key)?;
        self.used.insert(key.clone(), self.runs);
        Some(DevBuf {
            id: b.id,
            elem: b.elem,
            len: b.len,
        })
    }

    /// Keeps `buf` as the buffer `key`, read by the current run.
    pub(crate) fn keep(&mut self, key: ResidentKey, buf: DevBuf) {
        self.used.insert(key.clone(), self.runs);
        self.bufs.insert(key, buf);
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.bufs.values().map(DevBuf::bytes).sum()
    }

    /// Bytes of packed rows held on the device ([`Rows::Packed`]; part of [`Resident::bytes`]).
    pub fn packed_bytes(&self) -> usize {
        self.bufs
            .iter()
            .filter(|(k, _)| matches!(k.2, Rows::Packed(_)))
            .map(|(_, b)| b.bytes())
            .sum()
    }

    /// The number of buffers held on the device.
    pub fn buffers(&self) -> usize {
        self.bufs.len()
    }

    /// The buffers held, sorted: each one's table, column (its index in the table's
    /// declaration; for the dictionary's tables, whose table starts with `$`, the
    /// dictionary's size), rows in words (`all`, `rows A..B`, `hashed on [K] for device R
    /// of N`, `packed rows A..B`) and bytes.
    pub fn held(&self) -> Vec<(String, usize, String, usize)> {
        let mut keys: Vec<(&ResidentKey, usize)> = self.bufs.iter().map(|(k, b)| (k, b.bytes())).collect();
        keys.sort_by(|(x, _), (y, _)| (&x.0, x.1, x.2.order()).cmp(&(&y.0, y.1, y.2.order())));
        keys.into_iter()
            .map(|((t, c, rows), bytes)| {
                let rows = match rows {
                    Rows::All => "all".to_string(),
                    Rows::Part(r) => format!("rows {}..{}", r.start, r.end),
                    Rows::Hashed { keys, rank, devices } => {
                        format!("hashed on {keys:?} for device {rank} of {devices}")
                    }
                    Rows::Packed(r) => format!("packed rows {}..{}", r.start, r.end),
                };
                (t.clone(), *c, rows, bytes)
            })
            .collect()
    }

    /// Frees every buffer on `backend` (the one the runs used).
    pub fn release(self, backend: &mut dyn crate::Backend) {
        for (_, b) in self.bufs {
            backend.free(b);
        }
    }

    /// Frees the buffers of the columns of the tables named `names` on `backend` (every
    /// part of them), so that the next run that reads such a table uploads it again (as
    /// it must when the table is one of [`Database::with_tables`]'s, whose contents
    /// change from run to run).
    pub fn release_tables(&mut self, names: &[&str], backend: &mut dyn crate::Backend) {
        let keys: Vec<ResidentKey> = self
            .bufs
            .keys()
            .filter(|(t, _, _)| names.contains(&t.as_str()))
            .cloned()
            .collect();
        for k in keys {
            self.used.remove(&k);
            if let Some(b) = self.bufs.remove(&k) {
                backend.free(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fox_sema::core::{Column, Type, Value};

    /// A run's resident bound: the explicit limit, the device budget less the room for a
    /// working set, the smaller of both, or none.
    #[test]
    fn the_resident_bound_is_the_limit_and_the_budget_less_the_room() {
        let mut r = Resident::default();
        assert_eq!(r.bound_under(None), None);
        assert_eq!(r.bound_under(Some(1000)), Some(1000));
        r.room = 300;
        assert_eq!(r.bound_under(Some(1000)), Some(700));
        assert_eq!(r.bound_under(Some(200)), Some(0));
        r.set_limit(Some(500));
        assert_eq!(r.limit(), Some(500));
        assert_eq!(r.bound_under(None), Some(500));
        assert_eq!(r.bound_under(Some(1000)), Some(500));
        assert_eq!(r.bound_under(Some(600)), Some(300));
        assert_eq!(Resident::with_limit(42).bound_under(None), Some(42));
    }

    #[test]
    fn tables_in_memory_join_the_dictionary() {
        let base = Database {
            dict: Dictionary::from_strings(["b".to_string(), "d".to_string()]),
            ..Default::default()
        };
        let columns = vec![
            Column {
                name: "k".into(),
                ty: Type::Int32,
            },
            Column {
                name: "s".into(),
                ty: Type::String,
            },
        ];
        let rows = vec![
            vec![Value::Int32(1), Value::String("d".into())],
            vec![Value::Int32(2), Value::String("a".into())],
            vec![Value::Int32(3), Value::String("d".into())],
        ];
        let t = OutputTable::from_rows("p", columns.clone(), rows);
        let input = InputRel {
            name: "p".into(),
            columns,
            file: String::new(),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
        };
        let db = base.with_tables(&[(input.clone(), &t)]).unwrap();
        // A string of the dictionary keeps its code; a new one is appended.
        assert_eq!(db.dictionary().code("d"), Some(1));
        assert_eq!(db.dictionary().code("a"), Some(2));
        assert!(!db.dictionary().is_ordered());
        let table = db.table_for(&input).unwrap();
        assert_eq!(table.rows, 3);
        assert_eq!(
            Database::column(table, 0),
            Some(&StoredCol::Plain(HostCol::I32(vec![1, 2, 3])))
        );
        assert_eq!(
            Database::column(table, 1),
            Some(&StoredCol::Plain(HostCol::U32(vec![1, 2, 1])))
        );
        assert_eq!(table.distinct[1].as_deref(), Some(&vec![1, 2]));
        // The database it came from is unchanged; other types are refused.
        assert_eq!(base.dictionary().code("a"), None);
        let mut wrong = input.clone();
        wrong.columns[1].ty = Type::Int64;
        assert!(base.with_tables(&[(wrong, &t)]).is_err());
    }
}
