//! The type of a column, as carried in result metadata (`[option]` in the spec:
//! [`ColumnType::decode`], [`ColumnType::encode`]) or named by a custom class
//! string (see [`custom_class`](super::custom_class)).

use std::sync::Arc;

/// Nested types deeper than this are rejected (protects the decoder's stack).
pub const MAX_TYPE_DEPTH: usize = 32;

/// A CQL column type: of a column in schema metadata, of a bind marker of a
/// prepared statement, or of a column of a result.
///
/// The shape is that of the official `scylla` 1.x crate: simple types are
/// [`Native`](ColumnType::Native), lists, sets and maps are
/// [`Collection`](ColumnType::Collection), and user-defined types carry an
/// [`Arc`] of their [`UserDefinedType`] definition.
///
/// **Frozenness.** Only types read from CQL text (schema tables, DDL) and
/// from custom class strings (`FrozenType(..)`) know whether they are
/// frozen; the `[option]` encoding of result and bind-marker metadata does
/// not say, so types decoded from it have `frozen: false` everywhere, even
/// when the column is frozen. `frozen` takes part in `==` and hashing (a
/// frozen and a non-frozen `list<int>` are different schema types); the
/// type checks of (de)serialization ignore it, since it does not change the
/// encoding of a value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// A simple (non-composite) type: `int`, `text`, `uuid`, ...
    Native(NativeType),
    /// `list<T>`, `set<T>` or `map<K, V>`.
    Collection {
        /// Whether the collection is frozen (written and read as a whole).
        /// Always `false` for types decoded from result metadata.
        frozen: bool,
        /// Which collection, with its element types.
        typ: CollectionType,
    },
    /// Cassandra 5's `vector<T, N>`: exactly `dimensions` elements of `typ`
    /// (sent as a custom class string on the wire).
    Vector {
        /// The type of the elements.
        typ: Box<ColumnType>,
        /// The number of elements.
        dimensions: u16,
    },
    /// A user-defined type.
    UserDefinedType {
        /// Whether the UDT is frozen. Always `false` for types decoded from
        /// result metadata.
        frozen: bool,
        /// Its keyspace, name and fields (shared: a UDT is often nested in
        /// many columns' types).
        definition: Arc<UserDefinedType>,
    },
    /// `tuple<T1, T2, ...>`.
    Tuple(Vec<ColumnType>),
    /// A custom type, by Java class name, that this crate does not
    /// interpret; its values can be read and written as raw bytes.
    Custom(String),
}

/// The simple (non-composite) CQL types, [`ColumnType::Native`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NativeType {
    /// `ascii`
    Ascii,
    /// `boolean`
    Boolean,
    /// `blob`
    Blob,
    /// `counter`
    Counter,
    /// `date`
    Date,
    /// `decimal`
    Decimal,
    /// `double`
    Double,
    /// `duration`
    Duration,
    /// `float`
    Float,
    /// `int`
    Int,
    /// `bigint`
    BigInt,
    /// `text` / `varchar`
    Text,
    /// `timestamp`
    Timestamp,
    /// `inet`
    Inet,
    /// `smallint`
    SmallInt,
    /// `tinyint`
    TinyInt,
    /// `time`
    Time,
    /// `timeuuid`
    Timeuuid,
    /// `uuid`
    Uuid,
    /// `varint`
    Varint,
}

/// The collections, [`ColumnType::Collection`]: composite types with any
/// number of elements (tuples and vectors have a fixed number, and are not
/// collections).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CollectionType {
    /// `list<T>`
    List(Box<ColumnType>),
    /// `map<K, V>`
    Map(Box<ColumnType>, Box<ColumnType>),
    /// `set<T>`
    Set(Box<ColumnType>),
}

/// The definition of a user-defined type, [`ColumnType::UserDefinedType`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserDefinedType {
    /// The type's name.
    pub name: String,
    /// The keyspace it is defined in.
    pub keyspace: String,
    /// Its fields, names and types, in declaration order.
    pub field_types: Vec<(String, ColumnType)>,
}

impl NativeType {
    /// The encoded length of every value of this type when it is an element
    /// of a `vector` (Cassandra's `valueLengthIfFixed`), or `None` for the
    /// types whose vector elements carry their own length. `smallint`,
    /// `tinyint`, `date` and `time` are among the latter: Cassandra lets
    /// their values be empty.
    pub const fn type_size_for_vector(&self) -> Option<usize> {
        match self {
            NativeType::Boolean => Some(1),
            NativeType::Int | NativeType::Float => Some(4),
            NativeType::BigInt | NativeType::Double | NativeType::Timestamp => Some(8),
            NativeType::Uuid | NativeType::Timeuuid => Some(16),
            _ => None,
        }
    }
}

impl ColumnType {
    /// A non-frozen `list<element>`.
    ///
    /// ```
    /// use scylla_driver_cql::types::{ColumnType, NativeType};
    /// let t = ColumnType::list(ColumnType::Native(NativeType::Int));
    /// assert_eq!(t.to_string(), "list<int>");
    /// ```
    pub fn list(element: ColumnType) -> ColumnType {
        ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(Box::new(element)),
        }
    }

    /// A non-frozen `set<element>`.
    pub fn set(element: ColumnType) -> ColumnType {
        ColumnType::Collection {
            frozen: false,
            typ: CollectionType::Set(Box::new(element)),
        }
    }

    /// A non-frozen `map<key, value>`.
    pub fn map(key: ColumnType, value: ColumnType) -> ColumnType {
        ColumnType::Collection {
            frozen: false,
            typ: CollectionType::Map(Box::new(key), Box::new(value)),
        }
    }

    /// A non-frozen user-defined type `keyspace.name` with `fields` in
    /// declaration order.
    ///
    /// ```
    /// use scylla_driver_cql::types::{ColumnType, NativeType};
    /// let t = ColumnType::udt("shop", "address", vec![
    ///     ("street".into(), ColumnType::Native(NativeType::Text)),
    /// ]);
    /// assert_eq!(t.to_string(), "shop.address");
    /// ```
    pub fn udt(
        keyspace: impl Into<String>,
        name: impl Into<String>,
        fields: Vec<(String, ColumnType)>,
    ) -> ColumnType {
        ColumnType::UserDefinedType {
            frozen: false,
            definition: Arc::new(UserDefinedType {
                name: name.into(),
                keyspace: keyspace.into(),
                field_types: fields,
            }),
        }
    }

    /// `vector<element, dimensions>`.
    pub fn vector(element: ColumnType, dimensions: u16) -> ColumnType {
        ColumnType::Vector {
            typ: Box::new(element),
            dimensions,
        }
    }

    /// The same type, frozen if it is a collection or a user-defined type
    /// (other types are returned as they are).
    pub fn into_frozen(self) -> ColumnType {
        match self {
            ColumnType::Collection { typ, .. } => ColumnType::Collection { frozen: true, typ },
            ColumnType::UserDefinedType { definition, .. } => ColumnType::UserDefinedType {
                frozen: true,
                definition,
            },
            other => other,
        }
    }

    /// Whether this is a frozen collection or user-defined type (as far as
    /// the source of the type knew: see [`ColumnType`] on frozenness).
    pub fn is_frozen(&self) -> bool {
        matches!(
            self,
            ColumnType::Collection { frozen: true, .. }
                | ColumnType::UserDefinedType { frozen: true, .. }
        )
    }

    /// The type itself: the official crate's column types may borrow from
    /// the frame they were parsed from, and this converts them to owned
    /// ones; this crate's own them already.
    pub fn into_owned(self) -> ColumnType {
        self
    }

    /// The encoded length of every value of this type when it is an element
    /// of a `vector`, or `None` if its elements carry their own length (see
    /// [`NativeType::type_size_for_vector`]); a vector of fixed-length
    /// elements is itself fixed-length.
    pub fn type_size_for_vector(&self) -> Option<usize> {
        match self {
            ColumnType::Native(n) => n.type_size_for_vector(),
            ColumnType::Vector { typ, dimensions } => typ
                .type_size_for_vector()?
                .checked_mul(usize::from(*dimensions)),
            _ => None,
        }
    }

    /// Whether a value of this type may be the empty value (0 bytes, not
    /// null) besides its normal encoding, as ScyllaDB allows for most
    /// simple types: not for `counter`, `duration`, collections and UDTs.
    pub fn supports_special_empty_value(&self) -> bool {
        !matches!(
            self,
            ColumnType::Native(NativeType::Counter | NativeType::Duration)
                | ColumnType::Collection { .. }
                | ColumnType::UserDefinedType { .. }
        )
    }
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
    /// use scylla_driver_cql::types::{ColumnSpec, ColumnType, NativeType};
    /// let spec = ColumnSpec {
    ///     keyspace: "shop".into(),
    ///     table: "orders".into(),
    ///     name: "id".into(),
    ///     typ: ColumnType::Native(NativeType::Int),
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
