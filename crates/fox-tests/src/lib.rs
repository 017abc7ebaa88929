//! Test support for the Fox engine: an independent reference evaluator and generators.
//!
//! - [`reference`]: a deliberately simple tuple-at-a-time evaluator of the typed core
//!   program (naive fixpoint per stratum, nested loops over `BTreeSet` relations). It shares
//!   no code with the planner, the kernels or the runtime, so that the differential tests
//!   compare two independent implementations of the language.
//! - [`data`]: input rows written as the data files the runtime reads, and data files read
//!   back into rows for the reference.
//! - [`gen`]: a seeded generator of well-formed, safe, stratified programs and their data.
//! - [`asp`]: the translation of integer programs into ASP for clingo, which checks the
//!   reference itself.

pub mod asp;
pub mod data;
pub mod gen;
pub mod reference;
mod value;

pub use reference::{compile, evaluate, EvalError, Inputs, RefTable};
pub use value::{civil_from_days, days_from_civil};
