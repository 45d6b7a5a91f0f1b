//! The statements the test cluster understands, as the parser produces them.
//!
//! Names are already normalised: unquoted identifiers are lower-cased,
//! quoted ones kept as written (CQL's rule). Bind markers are numbered in
//! order of appearance when the statement is prepared (see `prepared`).

/// A literal value as written in the statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    /// An integer, as written (maybe with a leading `-`).
    Int(String),
    /// A float, as written (also `NaN`, `Infinity`).
    Float(String),
    /// A string.
    Str(String),
    /// A blob.
    Blob(Vec<u8>),
    /// `true` / `false`.
    Bool(bool),
    /// A UUID.
    Uuid(uuid::Uuid),
    /// `null`.
    Null,
    /// `[a, b]`.
    List(Vec<Literal>),
    /// `{a, b}` (also the empty `{}`).
    Set(Vec<Literal>),
    /// `{k: v, ...}`.
    Map(Vec<(Literal, Literal)>),
    /// A user-defined type value, `{field: v, ...}` (field names unquoted
    /// or double-quoted, normalised like other names).
    Udt(Vec<(String, Literal)>),
}

/// A value position: a literal or a bind marker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Term {
    /// A literal.
    Lit(Literal),
    /// `?` (`None`) or `:name`.
    Bind(Option<String>),
}

/// `[keyspace.]table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QualifiedName {
    /// The keyspace, if written.
    pub(crate) keyspace: Option<String>,
    /// The table.
    pub(crate) name: String,
}

/// A relation operator in a WHERE clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `!=`
    Ne,
}

/// One WHERE relation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Relation {
    /// `col <op> term`
    Cmp(String, Op, Term),
    /// `col IN (t, ...)`
    In(String, Vec<Term>),
    /// `token(a, b) <op> term`
    Token(Vec<String>, Op, Term),
}

/// What a SELECT returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Selection {
    /// `*`
    Star,
    /// `COUNT(*)` / `COUNT(1)`
    Count,
    /// A list of selectors.
    Columns(Vec<Selector>),
}

/// One selector.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selector {
    /// What is selected.
    pub(crate) kind: SelectorKind,
    /// `AS alias`.
    pub(crate) alias: Option<String>,
}

/// What one selector computes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SelectorKind {
    /// A column.
    Column(String),
    /// `token(a, ...)`.
    Token(Vec<String>),
    /// `writetime(c)` / `ttl(c)` (answered with null).
    Meta(&'static str, String),
}

/// A SELECT.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Select {
    pub(crate) selection: Selection,
    pub(crate) table: QualifiedName,
    pub(crate) relations: Vec<Relation>,
    /// `ORDER BY col ANN OF term`: vector search by similarity to the term.
    pub(crate) ann: Option<(String, Term)>,
    pub(crate) limit: Option<Term>,
}

/// A column definition of CREATE TABLE.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnDef {
    pub(crate) name: String,
    /// The type as written (parsed by `ColumnType::from_cql` later).
    pub(crate) typ: String,
    pub(crate) is_static: bool,
}

/// One statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Statement {
    /// SELECT
    Select(Select),
    /// INSERT INTO t (cols) VALUES (terms) [IF NOT EXISTS]
    Insert {
        table: QualifiedName,
        columns: Vec<String>,
        values: Vec<Term>,
        if_not_exists: bool,
    },
    /// UPDATE t SET c = v, ... WHERE ... [IF EXISTS]
    Update {
        table: QualifiedName,
        assignments: Vec<(String, Term)>,
        relations: Vec<Relation>,
    },
    /// DELETE [cols] FROM t WHERE ...
    Delete {
        table: QualifiedName,
        columns: Vec<String>,
        relations: Vec<Relation>,
    },
    /// USE ks
    Use(String),
    /// CREATE KEYSPACE
    CreateKeyspace {
        name: String,
        if_not_exists: bool,
        replication: Vec<(String, String)>,
        durable_writes: bool,
        /// `AND tablets = {...}`, if given.
        tablets: Option<TabletsOption>,
        /// `AND consistency = '...'` (ScyllaDB's strongly consistent
        /// tables: `'global'`; `'eventual'` is the default), lowercased.
        consistency: Option<String>,
    },
    /// CREATE TABLE
    CreateTable {
        table: QualifiedName,
        if_not_exists: bool,
        columns: Vec<ColumnDef>,
        partition_key: Vec<String>,
        clustering_key: Vec<String>,
    },
    /// DROP KEYSPACE
    DropKeyspace { name: String, if_exists: bool },
    /// DROP TABLE
    DropTable {
        table: QualifiedName,
        if_exists: bool,
    },
    /// TRUNCATE [TABLE] t
    Truncate(QualifiedName),
    /// CREATE TYPE [IF NOT EXISTS] [ks.]name (field type, ...)
    CreateType {
        name: QualifiedName,
        if_not_exists: bool,
        /// Fields in declaration order, types as written.
        fields: Vec<(String, String)>,
    },
    /// DROP TYPE [IF EXISTS] [ks.]name
    DropType {
        name: QualifiedName,
        if_exists: bool,
    },
    /// CREATE CUSTOM INDEX [IF NOT EXISTS] [name] ON t (col) USING 'class'
    /// [WITH OPTIONS = {...}]
    CreateIndex {
        /// The index name, if given (else `<table>_<column>_idx`).
        name: Option<String>,
        if_not_exists: bool,
        table: QualifiedName,
        column: String,
        /// The class after USING, as written.
        class: String,
        /// `WITH OPTIONS = {...}`, keys and values as text.
        options: Vec<(String, String)>,
    },
    /// DROP INDEX [IF EXISTS] [ks.]name
    DropIndex {
        name: QualifiedName,
        if_exists: bool,
    },
}

/// ScyllaDB's keyspace option `tablets = {'enabled': bool, 'initial': n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TabletsOption {
    /// Whether the keyspace uses tablets (`'initial'` alone implies true).
    pub(crate) enabled: bool,
    /// Initial tablets per table (0 or absent: the cluster's default).
    pub(crate) initial: Option<usize>,
}
