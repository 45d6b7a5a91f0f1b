//! Errors of typed (de)serialization: [`TypeCheckError`] (a Rust type cannot
//! represent a CQL type), [`SerializationError`] and [`DeserializationError`].
//!
//! Each error carries an [`ErrorContext`] naming the column (when the row
//! layer knows it), the Rust type (`std::any::type_name`) and the CQL type, so
//! that "cannot deserialize" is actionable from a log line. The payload is
//! boxed: these errors travel through `Result`s on the hot path, where a small
//! `Err` keeps the `Ok` path cheap.

use std::fmt;
use std::sync::Arc;

use super::column_type::ColumnType;
use crate::error::{DecodeError, EncodeError};

/// Where a typed (de)serialization error happened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorContext {
    /// The column (or bound variable) name, when known.
    pub column: Option<String>,
    /// The Rust type involved (`std::any::type_name`), when known.
    pub rust_type: Option<&'static str>,
    /// The CQL type involved, when known.
    pub cql_type: Option<ColumnType>,
}

impl fmt::Display for ErrorContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(c) = &self.column {
            write!(f, "column `{c}`")?;
            sep = ", ";
        }
        if let Some(r) = self.rust_type {
            write!(f, "{sep}Rust type `{r}`")?;
            sep = ", ";
        }
        if let Some(t) = &self.cql_type {
            write!(f, "{sep}CQL type `{t}`")?;
            sep = ", ";
        }
        if sep.is_empty() {
            f.write_str("value")?;
        }
        Ok(())
    }
}

/// Defines an error type as a boxed (context, kind) pair with the shared
/// constructors and context setters.
macro_rules! define_error {
    ($(#[$meta:meta])* $name:ident, $kind:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name(Box<(ErrorContext, $kind)>);

        impl $name {
            /// An error without context: of `err`'s kind when `err` is a
            #[doc = concat!("[`", stringify!($kind), "`],")]
            /// otherwise of the kind `Other` holding `err` (the official
            /// crate's constructor, for errors of an implementation's own).
            pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> Self {
                let err: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
                let kind = match err.downcast::<$kind>() {
                    Ok(kind) => *kind,
                    Err(other) => $kind::Other(SharedError(Arc::from(other))),
                };
                Self(Box::new((ErrorContext::default(), kind)))
            }

            /// An error of `kind` about Rust type `T` and CQL type `typ`.
            pub fn of<T: ?Sized>(typ: &ColumnType, kind: $kind) -> Self {
                Self::new(kind).with_types::<T>(typ)
            }

            /// What went wrong.
            pub fn kind(&self) -> &$kind {
                &self.0 .1
            }

            /// Where it went wrong.
            pub fn context(&self) -> &ErrorContext {
                &self.0 .0
            }

            /// Names the column, unless a column is already named.
            pub fn with_column(mut self, name: &str) -> Self {
                if self.0 .0.column.is_none() {
                    self.0 .0.column = Some(name.to_owned());
                }
                self
            }

            /// Names the Rust type, unless already named.
            pub fn with_rust_type<T: ?Sized>(mut self) -> Self {
                if self.0 .0.rust_type.is_none() {
                    self.0 .0.rust_type = Some(std::any::type_name::<T>());
                }
                self
            }

            /// Names the Rust and CQL types, unless already named (the
            /// innermost failing type is the most precise one).
            pub fn with_types<T: ?Sized>(mut self, typ: &ColumnType) -> Self {
                let ctx = &mut self.0 .0;
                if ctx.rust_type.is_none() {
                    ctx.rust_type = Some(std::any::type_name::<T>());
                    if ctx.cql_type.is_none() {
                        ctx.cql_type = Some(typ.clone());
                    }
                }
                self
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}: {}", self.0 .0, self.0 .1)
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                std::error::Error::source(&self.0 .1)
            }
        }
    };
}

define_error!(
    /// A Rust type cannot represent (or be represented as) a CQL type.
    TypeCheckError,
    TypeCheckErrorKind
);

define_error!(
    /// A Rust value could not be serialized for a CQL type.
    SerializationError,
    SerializationErrorKind
);

define_error!(
    /// Bytes could not be deserialized into a Rust value.
    DeserializationError,
    DeserializationErrorKind
);

/// An error of a user implementation's own type, shared (so that the
/// errors holding it stay `Clone`); equal only to itself.
#[derive(Debug, Clone)]
pub struct SharedError(pub Arc<dyn std::error::Error + Send + Sync>);

impl PartialEq for SharedError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedError {}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Why a type check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypeCheckErrorKind {
    /// The Rust type does not represent this CQL type.
    #[error("the Rust type does not match the CQL type")]
    Mismatch,
    /// A tuple (type or row) has the wrong number of elements.
    #[error("expected {expected} elements, found {actual}")]
    WrongArity {
        /// Elements the Rust type has.
        expected: usize,
        /// Elements the CQL type (or the row) has.
        actual: usize,
    },
    /// A fixed-size Rust array does not match the vector dimension.
    #[error("vector dimension {actual} does not match the Rust array length {expected}")]
    WrongDimension {
        /// Length of the Rust array.
        expected: usize,
        /// Dimension of the CQL vector.
        actual: usize,
    },
    /// A field of the Rust struct has no column of that name.
    #[error("no column named `{0}`")]
    MissingColumn(String),
    /// A column has no field of that name in the Rust struct.
    #[error("unexpected column `{0}`")]
    UnexpectedColumn(String),
    /// A user implementation's own reason.
    #[error("{0}")]
    Custom(String),
    /// A user implementation's own error (made by `new` from an error of
    /// another type).
    #[error(transparent)]
    Other(SharedError),
}

/// Why serialization failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SerializationErrorKind {
    /// The Rust type cannot be serialized as this CQL type.
    #[error("the Rust type does not match the CQL type")]
    Mismatch,
    /// Text for an `ascii` column contains non-ASCII characters.
    #[error("the text is not ASCII")]
    NotAscii,
    /// A row has the wrong number of values for the statement's bind markers.
    #[error("expected {expected} values, got {actual}")]
    WrongValueCount {
        /// Bind markers of the statement.
        expected: usize,
        /// Values supplied.
        actual: usize,
    },
    /// A tuple value has the wrong number of elements for its type.
    #[error("expected {expected} tuple elements, got {actual}")]
    WrongArity {
        /// Elements of the CQL tuple type.
        expected: usize,
        /// Elements of the value.
        actual: usize,
    },
    /// A vector value has the wrong number of elements for its type.
    #[error("expected a vector of {expected} elements, got {actual}")]
    WrongDimension {
        /// Dimension of the CQL vector type.
        expected: usize,
        /// Elements of the value.
        actual: usize,
    },
    /// A null where CQL does not allow one (collection and vector elements).
    #[error("null is not allowed here")]
    NullNotAllowed,
    /// An unset marker anywhere but a top-level bound value.
    #[error("unset is only allowed as a top-level bound value")]
    UnsetNotAllowed,
    /// A UDT value names a field its type does not have.
    #[error("the UDT has no field `{0}`")]
    UnknownUdtField(String),
    /// A field of the UDT has no value in the Rust struct, which forbids
    /// that (derived with `forbid_excess_udt_fields`).
    #[error("no value for the UDT field `{0}`")]
    NoValueForUdtField(String),
    /// A bind marker of the statement has no value of that name in the
    /// Rust struct (derived [`SerializeRow`](crate::types::SerializeRow)).
    #[error("no value for the bind marker `{0}`")]
    MissingValueForMarker(String),
    /// A value of the Rust struct has no bind marker of that name, or (in
    /// order) is bound to a marker of another name.
    #[error("no bind marker for the value `{0}`")]
    NoMarkerForValue(String),
    /// A value outside the range of its CQL type.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// The encoding does not fit a length or count prefix.
    #[error(transparent)]
    Encode(EncodeError),
    /// A user implementation's own reason.
    #[error("{0}")]
    Custom(String),
    /// A user implementation's own error (made by `new` from an error of
    /// another type).
    #[error(transparent)]
    Other(SharedError),
}

/// Why deserialization failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeserializationErrorKind {
    /// The Rust type cannot represent this CQL type (type check failed).
    #[error(transparent)]
    TypeCheck(TypeCheckErrorKind),
    /// A null where the Rust type has no null (use `Option<T>`).
    #[error("unexpected null (use Option<T> for nullable values)")]
    UnexpectedNull,
    /// A zero-length value of a type whose values are never empty
    /// (use `CqlValue` or `MaybeEmpty<T>` to accept "empty" values).
    #[error("unexpected empty value")]
    UnexpectedEmpty,
    /// A fixed-size value of the wrong length.
    #[error("expected {expected} bytes, found {actual}")]
    WrongLength {
        /// Bytes the type needs.
        expected: usize,
        /// Bytes found.
        actual: usize,
    },
    /// Malformed bytes inside the value (counts, lengths, truncation).
    #[error(transparent)]
    Decode(DecodeError),
    /// Text is not valid UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// `ascii` text contains non-ASCII bytes.
    #[error("the text is not ASCII")]
    NotAscii,
    /// A well-formed encoding of a value outside the Rust or CQL type's range.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// A well-formed value that names no variant of a Rust enum (derived
    /// `DeserializeValue` of a fieldless enum): a name or number written by
    /// another client, or by a newer version of this one.
    #[error(
        "`{value}` is not a value of the enum `{enum_name}` (a variant is missing, or the column \
         holds another kind of data)"
    )]
    UnknownEnumValue {
        /// The enum's name.
        enum_name: &'static str,
        /// The stored name or number (a name is cut to its first 64
        /// characters).
        value: String,
    },
    /// Bytes left over after the value.
    #[error("{0} trailing bytes after the value")]
    TrailingBytes(usize),
    /// A row ended before all its columns were read.
    #[error("the row has too few columns")]
    MissingColumns,
    /// A user implementation's own reason.
    #[error("{0}")]
    Custom(String),
    /// A user implementation's own error (made by `new` from an error of
    /// another type).
    #[error(transparent)]
    Other(SharedError),
}

/// A Rust value cannot be serialized as a column's CQL type, in the shape
/// of the official crate's built-in serializers' error: for hand-written
/// [`SerializeValue`](crate::types::SerializeValue) implementations that
/// report a mismatch as programs written for it do
/// (`SerializationError::new(BuiltinTypeCheckError { .. })`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the Rust type `{rust_name}` cannot be serialized as the CQL type `{got}`: {kind}")]
pub struct BuiltinTypeCheckError {
    /// The Rust type (`std::any::type_name`).
    pub rust_name: &'static str,
    /// The column's CQL type.
    pub got: ColumnType,
    /// Why.
    pub kind: BuiltinTypeCheckErrorKind,
}

/// Why a [`BuiltinTypeCheckError`] happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinTypeCheckErrorKind {
    /// The Rust type serializes only as the listed CQL types.
    #[error("it serializes only as {}", ExpectedTypes(expected))]
    MismatchedType {
        /// The CQL types the Rust type serializes as.
        expected: &'static [ColumnType],
    },
    /// The CQL type has no empty value, and the value was empty.
    #[error("the CQL type has no empty value")]
    NotEmptyable,
}

/// `a, b or c` for a list of CQL types.
struct ExpectedTypes<'a>(&'a [ColumnType]);

impl fmt::Display for ExpectedTypes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.0.iter().enumerate() {
            match i {
                0 => {}
                _ if i + 1 == self.0.len() => f.write_str(" or ")?,
                _ => f.write_str(", ")?,
            }
            write!(f, "`{t}`")?;
        }
        Ok(())
    }
}

impl From<EncodeError> for SerializationError {
    fn from(e: EncodeError) -> Self {
        Self::new(SerializationErrorKind::Encode(e))
    }
}

impl From<DecodeError> for DeserializationError {
    fn from(e: DecodeError) -> Self {
        Self::new(DeserializationErrorKind::Decode(e))
    }
}

impl From<TypeCheckError> for DeserializationError {
    fn from(e: TypeCheckError) -> Self {
        let (ctx, kind) = *e.0;
        Self(Box::new((ctx, DeserializationErrorKind::TypeCheck(kind))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::column_type::NativeType;

    #[test]
    fn messages_name_column_rust_type_and_cql_type() {
        let e = SerializationError::of::<i32>(
            &ColumnType::Native(NativeType::Text),
            SerializationErrorKind::Mismatch,
        )
        .with_column("name");
        let msg = e.to_string();
        assert!(msg.contains("`name`"), "{msg}");
        assert!(msg.contains("i32"), "{msg}");
        assert!(msg.contains("text"), "{msg}");
    }

    #[test]
    fn innermost_types_win() {
        let e = TypeCheckError::of::<i32>(
            &ColumnType::Native(NativeType::Text),
            TypeCheckErrorKind::Mismatch,
        )
        .with_types::<Vec<i32>>(&ColumnType::list(ColumnType::Native(NativeType::Text)));
        assert_eq!(e.context().rust_type, Some("i32"));
        assert_eq!(
            e.context().cql_type,
            Some(ColumnType::Native(NativeType::Text))
        );
    }
}
