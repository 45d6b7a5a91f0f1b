//! Batches: several statements (unprepared or prepared) applied together.

use super::{option_setters, Consistency, PreparedStatement, Statement, StatementOptions};

#[doc(no_inline)]
pub use scylla_cql::frame::request::BatchType;

/// One statement of a batch.
#[derive(Debug, Clone)]
pub enum BatchStatement {
    /// CQL text without values.
    Query(String),
    /// A prepared statement (its values are bound at execution).
    Prepared(PreparedStatement),
}

impl From<&str> for BatchStatement {
    fn from(s: &str) -> Self {
        BatchStatement::Query(s.to_owned())
    }
}

impl From<String> for BatchStatement {
    fn from(s: String) -> Self {
        BatchStatement::Query(s)
    }
}

/// The statement's text; its options are not used in a batch (the batch's
/// own options apply to all of its statements).
impl From<Statement> for BatchStatement {
    fn from(s: Statement) -> Self {
        BatchStatement::Query(s.contents)
    }
}

impl From<&PreparedStatement> for BatchStatement {
    fn from(p: &PreparedStatement) -> Self {
        BatchStatement::Prepared(p.clone())
    }
}

impl From<PreparedStatement> for BatchStatement {
    fn from(p: PreparedStatement) -> Self {
        BatchStatement::Prepared(p)
    }
}

/// A batch of statements.
///
/// ```
/// use scylla_driver::statement::{Batch, BatchType};
/// let mut batch = Batch::new(BatchType::Logged);
/// batch.append("INSERT INTO ks.t (a) VALUES (1)");
/// batch.append("INSERT INTO ks.t (a) VALUES (2)");
/// assert_eq!(batch.statements.len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Batch {
    /// Logged, unlogged or counter.
    pub batch_type: BatchType,
    /// The statements, in order.
    pub statements: Vec<BatchStatement>,
    /// Options of the batch.
    pub options: StatementOptions,
}

impl Batch {
    /// An empty batch.
    pub fn new(batch_type: BatchType) -> Self {
        Self {
            batch_type,
            statements: Vec::new(),
            options: StatementOptions::default(),
        }
    }

    /// Appends a statement.
    pub fn append(&mut self, s: impl Into<BatchStatement>) {
        self.statements.push(s.into());
    }

    /// A batch of `statements`.
    pub fn new_with_statements(batch_type: BatchType, statements: Vec<BatchStatement>) -> Self {
        Self {
            batch_type,
            statements,
            options: StatementOptions::default(),
        }
    }

    /// Appends a statement (the same as [`append`](Self::append)).
    pub fn append_statement(&mut self, s: impl Into<BatchStatement>) {
        self.append(s);
    }

    /// Logged, unlogged or counter.
    pub fn get_type(&self) -> BatchType {
        self.batch_type
    }

    /// The statements, in order.
    pub fn statements(&self) -> &[BatchStatement] {
        &self.statements
    }

    option_setters!();
}

impl Default for Batch {
    /// An empty logged batch.
    fn default() -> Self {
        Batch::new(BatchType::Logged)
    }
}
