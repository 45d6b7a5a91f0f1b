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
