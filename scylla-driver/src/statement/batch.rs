//! Batches: several statements (unprepared or prepared) applied together.

use super::{option_setters, BatchType, Consistency, PreparedStatement, StatementOptions};

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

    option_setters!();
}
