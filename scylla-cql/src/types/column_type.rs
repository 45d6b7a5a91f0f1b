//! The type of a column, as carried in result metadata (`[option]` in the spec:
//! [`ColumnType::decode`], [`ColumnType::encode`]) or named by a custom class
//! string (see [`custom_class`](super::custom_class)).

/// Nested types deeper than this are rejected (protects the decoder's stack).
pub const MAX_TYPE_DEPTH: usize = 32;

/// A CQL column type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// A custom type, by Java class name (one this crate does not interpret).
    Custom(String),
    /// `ascii`
    Ascii,
    /// `bigint`
    BigInt,
    /// `blob`
    Blob,
    /// `boolean`
    Boolean,
    /// `counter`
    Counter,
    /// `decimal`
    Decimal,
    /// `double`
    Double,
    /// `float`
    Float,
    /// `int`
    Int,
    /// `text` / `varchar`
    Text,
    /// `timestamp`
    Timestamp,
    /// `uuid`
    Uuid,
    /// `varint`
    Varint,
    /// `timeuuid`
    Timeuuid,
    /// `inet`
    Inet,
    /// `date`
    Date,
    /// `time`
    Time,
    /// `smallint`
    SmallInt,
    /// `tinyint`
    TinyInt,
    /// `duration`
    Duration,
    /// `list<T>`
    List(Box<ColumnType>),
    /// `map<K, V>`
    Map(Box<ColumnType>, Box<ColumnType>),
    /// `set<T>`
    Set(Box<ColumnType>),
    /// A user-defined type.
    Udt {
        /// Keyspace of the type.
        keyspace: String,
        /// Name of the type.
        name: String,
        /// Fields in declaration order.
        fields: Vec<(String, ColumnType)>,
    },
    /// `tuple<...>`
    Tuple(Vec<ColumnType>),
    /// Cassandra 5's `vector<T, N>` (sent as a custom class string on the wire).
    Vector {
        /// Element type.
        element: Box<ColumnType>,
        /// Number of elements.
        dimension: u32,
    },
}

/// Where a column lives and what it holds, as described by result metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// Keyspace of the column's table.
    pub keyspace: String,
    /// The column's table.
    pub table: String,
    /// The column's name.
    pub name: String,
    /// The column's type.
    pub typ: ColumnType,
}

impl ColumnSpec {
    /// The column's name (the official crate's accessor of [`name`](Self::name)).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The column's type.
    pub fn typ(&self) -> &ColumnType {
        &self.typ
    }

    /// The column's keyspace and table.
    ///
    /// ```
    /// use scylla_driver_cql::types::{ColumnSpec, ColumnType};
    /// let spec = ColumnSpec {
    ///     keyspace: "shop".into(),
    ///     table: "orders".into(),
    ///     name: "id".into(),
    ///     typ: ColumnType::Int,
    /// };
    /// assert_eq!(spec.table_spec().ks_name(), "shop");
    /// assert_eq!(spec.table_spec().table_name(), "orders");
    /// ```
    pub fn table_spec(&self) -> TableSpec<'_> {
        TableSpec::borrowed(&self.keyspace, &self.table)
    }
}

/// A table's keyspace and name, as result metadata gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableSpec<'a> {
    ks_name: &'a str,
    table_name: &'a str,
}

impl<'a> TableSpec<'a> {
    /// The table `table` of keyspace `ks`.
    pub const fn borrowed(ks: &'a str, table: &'a str) -> Self {
        Self {
            ks_name: ks,
            table_name: table,
        }
    }

    /// The keyspace.
    pub fn ks_name(&self) -> &'a str {
        self.ks_name
    }

    /// The table.
    pub fn table_name(&self) -> &'a str {
        self.table_name
    }
}

/// Columns (of a result, or the bind markers of a prepared statement),
/// looked up by position or name.
#[derive(Debug, Clone, Copy)]
pub struct ColumnSpecs<'r> {
    specs: &'r [ColumnSpec],
}

impl<'r> ColumnSpecs<'r> {
    /// A view of `specs`.
    pub fn new(specs: &'r [ColumnSpec]) -> Self {
        Self { specs }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are no columns.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The column at `index`.
    pub fn get_by_index(&self, index: usize) -> Option<&'r ColumnSpec> {
        self.specs.get(index)
    }

    /// The first column named `name`, with its position.
    pub fn get_by_name(&self, name: &str) -> Option<(usize, &'r ColumnSpec)> {
        self.specs.iter().enumerate().find(|(_, s)| s.name == name)
    }

    /// The columns in order.
    pub fn iter(&self) -> std::slice::Iter<'r, ColumnSpec> {
        self.specs.iter()
    }

    /// The columns as a slice.
    pub fn as_slice(&self) -> &'r [ColumnSpec] {
        self.specs
    }
}

impl<'r> IntoIterator for ColumnSpecs<'r> {
    type Item = &'r ColumnSpec;
    type IntoIter = std::slice::Iter<'r, ColumnSpec>;

    fn into_iter(self) -> Self::IntoIter {
        self.specs.iter()
    }
}
