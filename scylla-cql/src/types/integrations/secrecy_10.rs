//! `secrecy` 0.10 (feature `secrecy-10`): [`SecretBox<T>`] is bound and
//! read as its inner `T`, [`SecretString`] as `text` or `ascii`, and
//! [`SecretSlice<u8>`] as a `blob`.
//!
//! The secret is exposed only to write its bytes. Errors name the Rust and
//! CQL types, never the value; `SecretBox`'s own `Debug` redacts it. Reading
//! builds the secret straight from the response's bytes (which the driver
//! drops with the response; they are not zeroized).

use secrecy_10::zeroize::Zeroize;
use secrecy_10::{ExposeSecret, SecretBox, SecretSlice, SecretString};

use crate::types::column_type::{ColumnType, NativeType};
use crate::types::deserialize::native::text;
use crate::types::deserialize::{check, non_null, DeserializationError, DeserializeValue};
use crate::types::error::TypeCheckError;
use crate::types::serialize::writers::{CellWriter, WrittenCellProof};
use crate::types::serialize::{SerializationError, SerializeValue};

impl<T: SerializeValue + Zeroize + ?Sized> SerializeValue for SecretBox<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        self.expose_secret().serialize(typ, writer)
    }
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata> + Zeroize>
    DeserializeValue<'frame, 'metadata> for SecretBox<T>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        T::type_check(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        T::deserialize(typ, v).map(|v| SecretBox::new(Box::new(v)))
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for SecretString {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(
            typ,
            matches!(
                typ,
                ColumnType::Native(NativeType::Text) | ColumnType::Native(NativeType::Ascii)
            ),
        )
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        text::<Self>(typ, v).map(SecretString::from)
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for SecretSlice<u8> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(
            typ,
            matches!(
                typ,
                ColumnType::Native(NativeType::Blob) | ColumnType::Custom(_)
            ),
        )
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        non_null::<Self>(typ, v).map(|b| SecretSlice::from(b.to_vec()))
    }
}
