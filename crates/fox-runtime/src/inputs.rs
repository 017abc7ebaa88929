//! Input relations read from their files before the kernel plan that reads them exists, so
//! that the statistics of the data can guide the planning ([`LoadedInputs::statistics`])
//! and the plan then runs on them without reading the files again ([`crate::run_loaded`]).
//!
//! The relations are read as a run reads them (the same loader, the same errors), and
//! their strings are coded by one dictionary in string order. When the plan's string
//! constants are known, the run adds those the data lacks to the dictionary in their
//! place ([`merge_constants`]), so that, as in a run that reads its own inputs, code order
//! is string order.

use crate::dict::Dictionary;
use crate::load::{load_input_cols, Interner, LoadedCol};
use crate::strings::StrArena;
use crate::{HostCol, RunEvent, RunObserver, RuntimeError};
use fox_kernel::InputRel;
use fox_sema::core::Type;
use std::path::Path;
use std::time::{Duration, Instant};

/// One input relation read from its file.
#[derive(Debug)]
pub(crate) struct LoadedRel {
    pub(crate) input: InputRel,
    /// One entry per declared column: `None` for the columns not kept. Strings are codes
    /// of the dictionary.
    pub(crate) cols: Vec<Option<HostCol>>,
    pub(crate) rows: usize,
}

/// An input relation's rows given as Arrow record batches (a table held in memory by the
/// caller) instead of read from its file.
#[derive(Clone, Debug)]
pub struct GivenTable {
    /// The input relation the table is for.
    pub relation: String,
    /// How messages name the table.
    pub shown: String,
    pub schema: arrow_schema::SchemaRef,
    pub batches: Vec<arrow_array::RecordBatch>,
}

/// Input relations read from files (or given as tables), with the dictionary of their strings.
#[derive(Debug)]
pub struct LoadedInputs {
    pub(crate) rels: Vec<LoadedRel>,
    pub(crate) dict: Dictionary,
    /// Reading and parsing the files and building the dictionary.
    pub load_time: Duration,
}

impl LoadedInputs {
    /// Reads each relation of `wanted` (a declaration and the columns to keep, `used[c]`)
    /// from its file under `data_dir`, telling `observer` of each file about to be read
    /// and stopping with [`RuntimeError::Cancelled`] when `cancel` is set. Every field is
    /// checked, kept or not, and a declared key is checked, as a run checks its inputs.
    pub fn load(
        data_dir: &Path,
        wanted: &[(InputRel, Vec<bool>)],
        observer: Option<&dyn RunObserver>,
        cancel: Option<&crate::CancelToken>,
    ) -> Result<LoadedInputs, RuntimeError> {
        LoadedInputs::load_given(data_dir, wanted, &[], observer, cancel)
    }

    /// [`LoadedInputs::load`], reading each relation that `given` holds a table for from
    /// that table instead of its file (by the rules of Parquet input: columns matched by
    /// position, each type checked and each value converted exactly, the key checked).
    /// A table for a relation not in `wanted` is not read.
    pub fn load_given(
        data_dir: &Path,
        wanted: &[(InputRel, Vec<bool>)],
        given: &[GivenTable],
        observer: Option<&dyn RunObserver>,
        cancel: Option<&crate::CancelToken>,
    ) -> Result<LoadedInputs, RuntimeError> {
        let start = Instant::now();
        let _phase = crate::alloc::LoadPhase::enter();
        let stop = cancel.map_or(crate::cancel::never(), |t| t.flag());
        let mut strings = Interner::default();
        let mut loaded = Vec::with_capacity(wanted.len());
        // Relations without strings share no interner: their files are read and parsed
        // at the same time, each on its own, and the first error in the order of `wanted`
        // is the error (the one a reading in turn would stop at).
        let numeric = |input: &InputRel| input.columns.iter().all(|c| c.ty != Type::String);
        if given.is_empty() && wanted.len() > 1 && wanted.iter().all(|(input, _)| numeric(input)) {
            use rayon::prelude::*;
            let parts: Vec<Result<Vec<LoadedCol>, RuntimeError>> = wanted
                .par_iter()
                .map(|(input, used)| {
                    if crate::cancel::is_set(stop) {
                        return Err(RuntimeError::Cancelled);
                    }
                    if let Some(o) = observer {
                        o.event(&RunEvent::Loading { input: &input.name });
                    }
                    load_input_cols(data_dir, input, used, &mut Interner::default(), stop)
                })
                .collect();
            for part in parts {
                loaded.push(part?);
            }
        }
        for (input, used) in &wanted[loaded.len()..] {
            if crate::cancel::is_set(stop) {
                return Err(RuntimeError::Cancelled);
            }
            if let Some(o) = observer {
                o.event(&RunEvent::Loading { input: &input.name });
            }
            let cols = match given.iter().find(|t| t.relation == input.name) {
                Some(t) => {
                    let cols = crate::parquet_input::load_arrow_cols(
                        &t.shown,
                        input,
                        used,
                        &t.schema,
                        &t.batches,
                        &mut strings,
                        stop,
                    )?;
                    crate::load::check_key(&t.shown, input, &cols, used)?;
                    cols
                }
                None => load_input_cols(data_dir, input, used, &mut strings, stop)?,
            };
            loaded.push(cols);
        }
        let strings = strings.into_strings();
        let dict = Dictionary::try_from_strs(strings.iter()).map_err(|msg| RuntimeError::Data { msg })?;
        let remap: Vec<u32> = crate::alloc::try_collect(
            strings
                .iter()
                .map(|s| dict.code(s).expect("every collected string is in the dictionary")),
            "the string dictionary",
        )
        .map_err(|msg| RuntimeError::Data { msg })?;
        drop(strings);
        let rels = wanted
            .iter()
            .zip(loaded)
            .map(|((input, used), cols)| {
                let rows = cols
                    .iter()
                    .zip(used)
                    .filter(|(_, u)| **u)
                    .map(|(c, _)| c.len())
                    .max()
                    .unwrap_or(0);
                let cols = cols
                    .into_iter()
                    .zip(used)
                    .map(|(c, &u)| u.then(|| crate::database::to_host(c, &remap)))
                    .collect();
                LoadedRel {
                    input: input.clone(),
                    cols,
                    rows,
                }
            })
            .collect();
        Ok(LoadedInputs {
            rels,
            dict,
            load_time: start.elapsed(),
        })
    }

    /// The relations read, in the order they were asked for.
    pub fn inputs(&self) -> impl Iterator<Item = &InputRel> {
        self.rels.iter().map(|r| &r.input)
    }

    /// The statistics of the relations read (see [`crate::stats`]).
    pub fn statistics(&self) -> fox_phys::Statistics {
        crate::stats::of_relations(
            self.rels
                .iter()
                .map(|r| (&r.input, r.cols.iter().map(Option::as_ref).collect(), r.rows)),
            &self.dict,
        )
    }
}

/// `dict` (in string order) with the strings of `constants` it lacks added in their place:
/// the new dictionary, and the new code of each old code when any string was added.
pub(crate) fn merge_constants(
    dict: Dictionary,
    constants: &[String],
) -> Result<(Dictionary, Option<Vec<u32>>), String> {
    const WHAT: &str = "the string dictionary";
    let mut new: Vec<&str> = constants
        .iter()
        .map(String::as_str)
        .filter(|s| dict.code(s).is_none())
        .collect();
    if new.is_empty() {
        return Ok((dict, None));
    }
    new.sort_unstable();
    new.dedup();
    let old = dict.len();
    let bytes = (0..old as u32).filter_map(|c| dict.get(c)).map(str::len).sum::<usize>()
        + new.iter().map(|s| s.len()).sum::<usize>();
    let mut merged = StrArena::try_with_capacity(old + new.len(), bytes, WHAT)?;
    let mut remap: Vec<u32> = crate::alloc::try_with_capacity(old, WHAT)?;
    let mut next = new.iter().peekable();
    for c in 0..old as u32 {
        let s = dict.get(c).unwrap_or_default();
        while let Some(n) = next.next_if(|n| **n < s) {
            merged.try_push(n, WHAT)?;
        }
        remap.push(merged.len() as u32);
        merged.try_push(s, WHAT)?;
    }
    for n in next {
        merged.try_push(n, WHAT)?;
    }
    if merged.len() >= u32::MAX as usize {
        return Err("the string dictionary is full (2^32 strings)".into());
    }
    Ok((Dictionary::from_sorted(merged), Some(remap)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_input(name: &str, types: &[Type]) -> InputRel {
        InputRel {
            name: name.into(),
            columns: types
                .iter()
                .enumerate()
                .map(|(c, &ty)| fox_sema::core::Column {
                    name: format!("c{c}"),
                    ty,
                })
                .collect(),
            file: format!("{name}.csv"),
            sep: ",".into(),
            key: Vec::new(),
            header: false,
        }
    }

    #[test]
    fn numeric_relations_read_together_as_one_by_one() {
        let dir = std::env::temp_dir().join(format!("fox-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big: String = (0..200_000).map(|i| format!("{},{}\n", i * 7 % 1000, -i)).collect();
        std::fs::write(dir.join("a.csv"), &big).unwrap();
        std::fs::write(dir.join("b.csv"), "1,2.5\n3,4\n").unwrap();
        std::fs::write(dir.join("c.csv"), "").unwrap();
        std::fs::write(dir.join("bad1.csv"), "1,2\n3,x\n").unwrap();
        std::fs::write(dir.join("bad2.csv"), "1\n").unwrap();
        let wanted = vec![
            (int_input("a", &[Type::Int32, Type::Int64]), vec![true, true]),
            (int_input("b", &[Type::Int64, Type::Float64]), vec![false, true]),
            (int_input("c", &[Type::Int32]), vec![true]),
        ];
        let together = LoadedInputs::load(&dir, &wanted, None, None).unwrap();
        assert_eq!(together.rels.len(), 3);
        for (k, w) in wanted.iter().enumerate() {
            let alone = LoadedInputs::load(&dir, std::slice::from_ref(w), None, None).unwrap();
            let (t, a) = (&together.rels[k], &alone.rels[0]);
            assert_eq!((&t.input, &t.cols, t.rows), (&a.input, &a.cols, a.rows), "{}", w.0.name);
        }
        assert_eq!(together.rels[0].rows, 200_000);
        // The first error in the order asked for is the error.
        let err = |names: &[&str]| {
            let wanted: Vec<_> = names
                .iter()
                .map(|n| (int_input(n, &[Type::Int32, Type::Int32]), vec![true, true]))
                .collect();
            LoadedInputs::load(&dir, &wanted, None, None).unwrap_err().to_string()
        };
        let first = err(&["bad1"]);
        assert!(first.contains("bad1.csv:2"), "{first}");
        assert_eq!(err(&["a", "bad1", "bad2", "missing"]), first);
        assert_eq!(err(&["bad2", "bad1"]), err(&["bad2"]));
        assert!(err(&["a", "missing", "bad1"]).contains("missing.csv"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn constants_join_the_dictionary_in_order() {
        let dict = Dictionary::from_strings(["b", "d", "f"].map(String::from));
        let (same, remap) = merge_constants(dict.clone(), &["d".into(), "b".into()]).unwrap();
        assert_eq!((same.len(), remap), (3, None));
        let constants = ["g", "a", "d", "c", "a", "e"].map(String::from);
        let (merged, remap) = merge_constants(dict, &constants).unwrap();
        let all: Vec<&str> = (0..merged.len() as u32).map(|c| merged.get(c).unwrap()).collect();
        assert_eq!(all, ["a", "b", "c", "d", "e", "f", "g"]);
        assert!(merged.is_ordered());
        // b, d, f keep their strings under their new codes.
        assert_eq!(remap, Some(vec![1, 3, 5]));
        let (empty, remap) = merge_constants(Dictionary::default(), &["x".into()]).unwrap();
        assert_eq!((empty.len(), remap), (1, Some(vec![])));
    }
}
