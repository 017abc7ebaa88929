use fox_syntax::diag::Diagnostic;

/// Why a program could not be planned, or a plan could not be read back.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A problem in the program, reported at its place in the source.
    #[error("{}", .0.message)]
    Program(Box<Diagnostic>),
    /// A plan written by a build of Fox with another plan format.
    #[error(
        "this plan has format version {found}, but this build of Fox reads version {expected}; \
         compile the query again with this `foxc`"
    )]
    Version { found: u32, expected: u32 },
    /// The text is not a plan in RON form.
    #[error("the plan is not valid RON: {0}")]
    Syntax(String),
    /// A plan that parses but does not hang together (a dangling reference, an arity or
    /// type mismatch).
    #[error("the plan is inconsistent: {0}")]
    Invalid(String),
    /// A planner option that does not fit the program (`--var-order` naming a variable
    /// no multi-way join binds).
    #[error("{0}")]
    Options(String),
    /// The core program broke one of the invariants `fox-sema` promises.
    #[error("internal error while planning: {0}")]
    Internal(String),
}

impl PlanError {
    /// The diagnostic to show for a program error, if this is one.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            PlanError::Program(d) => Some(d),
            _ => None,
        }
    }
}
