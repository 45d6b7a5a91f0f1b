//! `list<T>`, `set<T>` and `map<K, V>`: an `[int]` count followed by `[bytes]`
//! elements (keys and values alternate in maps). Null elements are not
//! allowed. Rust sequences (`Vec<T>`, `[T]`, `[T; N]`) also serialize as
//! `vector<T, N>` (see [`vector`](super::vector)).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::BuildHasher;

use super::writers::{CellWriter, WrittenCellProof};
use super::{mismatch, put_count, put_element, SerializationError, SerializeValue, Written};
use crate::types::column_type::{CollectionType, ColumnType};

/// Writes the items of a `C` as a list or set (and, if `vector_ok`, a vector).
pub(crate) fn put_seq<'a, C: ?Sized, T: SerializeValue + 'a>(
    typ: &ColumnType,
    items: impl ExactSizeIterator<Item = &'a T>,
    out: &mut Vec<u8>,
    vector_ok: bool,
) -> Result<Written, SerializationError> {
    match typ {
        ColumnType::Collection {
            typ: CollectionType::List(elem) | CollectionType::Set(elem),
            ..
        } => {
            put_count::<C>(typ, out, items.len())?;
            for item in items {
                put_element(item, elem, CellWriter::new(out), false)?;
            }
            Ok(Written::Value)
        }
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } if vector_ok => super::vector::put_vector::<C, T>(typ, element, *dimension, items, out),
        _ => Err(mismatch::<C>(typ)),
    }
}

/// Writes the entries of a `C` as a map.
pub(crate) fn put_map<'a, C: ?Sized, K: SerializeValue + 'a, V: SerializeValue + 'a>(
    typ: &ColumnType,
    entries: impl ExactSizeIterator<Item = (&'a K, &'a V)>,
    out: &mut Vec<u8>,
) -> Result<Written, SerializationError> {
    let ColumnType::Collection {
        typ: CollectionType::Map(kt, vt),
        ..
    } = typ
    else {
        return Err(mismatch::<C>(typ));
    };
    put_count::<C>(typ, out, entries.len())?;
    for (k, v) in entries {
        put_element(k, kt, CellWriter::new(out), false)?;
        put_element(v, vt, CellWriter::new(out), false)?;
    }
    Ok(Written::Value)
}

impl<T: SerializeValue, const N: usize> SerializeValue for [T; N] {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_seq::<Self, T>(typ, self.iter(), out, true))
    }
}

impl<T: SerializeValue> SerializeValue for [T] {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_seq::<Self, T>(typ, self.iter(), out, true))
    }
}

impl<T: SerializeValue> SerializeValue for Vec<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_seq::<Self, T>(typ, self.iter(), out, true))
    }
}

impl<T: SerializeValue, S> SerializeValue for HashSet<T, S> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_seq::<Self, T>(typ, self.iter(), out, false))
    }
}

impl<T: SerializeValue> SerializeValue for BTreeSet<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_seq::<Self, T>(typ, self.iter(), out, false))
    }
}

impl<K: SerializeValue, V: SerializeValue, S: BuildHasher> SerializeValue for HashMap<K, V, S> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_map::<Self, K, V>(typ, self.iter(), out))
    }
}

impl<K: SerializeValue, V: SerializeValue> SerializeValue for BTreeMap<K, V> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_map::<Self, K, V>(typ, self.iter(), out))
    }
}
