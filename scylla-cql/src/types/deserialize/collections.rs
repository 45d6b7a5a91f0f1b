//! `list<T>`, `set<T>` and `map<K, V>`: an `[int]` count, then `[bytes]`
//! elements. Counts are checked against the bytes left before anything is
//! allocated. `Vec<T>` also reads `vector<T, N>` values.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

use super::vector::read_vector;
use super::{
    check, error, non_null, DeserializationError, DeserializationErrorKind, DeserializeValue,
    TypeCheckError,
};
use crate::frame::wire::WireReader;
use crate::types::column_type::{CollectionType, ColumnType};

/// The raw elements of a list or set value (`per_item` = 1), or the keys and
/// values of a map alternately (`per_item` = 2): a reader positioned after
/// the count, and the number of `[bytes]` items to read.
pub(crate) fn items<'f, C: ?Sized>(
    typ: &ColumnType,
    v: Option<&'f [u8]>,
    per_item: usize,
) -> Result<(WireReader<'f>, usize), DeserializationError> {
    let mut r = WireReader::new(non_null::<C>(typ, v)?);
    // Every [bytes] item is at least its 4-byte length.
    let n = r
        .read_count("collection size", 4 * per_item)
        .map_err(|e| error::<C>(typ, e.into_kind()))?;
    Ok((r, n))
}

/// Reads one `[bytes]` item.
pub(crate) fn item<'f, C: ?Sized>(
    typ: &ColumnType,
    r: &mut WireReader<'f>,
) -> Result<Option<&'f [u8]>, DeserializationError> {
    r.read_bytes("collection element")
        .map_err(|e| error::<C>(typ, e.into_kind()))
}

/// Fails unless `r` is exhausted.
pub(crate) fn end<C: ?Sized>(
    typ: &ColumnType,
    r: &WireReader<'_>,
) -> Result<(), DeserializationError> {
    match r.remaining() {
        0 => Ok(()),
        n => Err(error::<C>(typ, DeserializationErrorKind::TrailingBytes(n))),
    }
}

trait IntoKind {
    fn into_kind(self) -> DeserializationErrorKind;
}

impl IntoKind for crate::error::DecodeError {
    fn into_kind(self) -> DeserializationErrorKind {
        DeserializationErrorKind::Decode(self)
    }
}

/// A collection being filled by [`read_seq`].
trait Sink<T> {
    /// Room for `n` more elements (already bounded by the input size).
    fn reserve(&mut self, n: usize);
    /// Adds an element.
    fn push(&mut self, e: T);
}

impl<T> Sink<T> for Vec<T> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
    fn push(&mut self, e: T) {
        Vec::push(self, e);
    }
}

impl<T: Eq + Hash, S: BuildHasher> Sink<T> for HashSet<T, S> {
    fn reserve(&mut self, n: usize) {
        HashSet::reserve(self, n);
    }
    fn push(&mut self, e: T) {
        self.insert(e);
    }
}

impl<T: Ord> Sink<T> for BTreeSet<T> {
    fn reserve(&mut self, _: usize) {}
    fn push(&mut self, e: T) {
        self.insert(e);
    }
}

/// Reads a list or set (and, if `vector_ok`, a vector) of `T` into `out`.
fn read_seq<'f, 'm, C: ?Sized, T: DeserializeValue<'f, 'm>>(
    typ: &'m ColumnType,
    v: Option<&'f [u8]>,
    vector_ok: bool,
    out: &mut impl Sink<T>,
) -> Result<(), DeserializationError> {
    match typ {
        ColumnType::Collection {
            typ: CollectionType::List(elem) | CollectionType::Set(elem),
            ..
        } => {
            let (mut r, n) = items::<C>(typ, v, 1)?;
            out.reserve(n);
            for _ in 0..n {
                out.push(T::deserialize(elem, item::<C>(typ, &mut r)?)?);
            }
            end::<C>(typ, &r)
        }
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } if vector_ok => {
            out.reserve((*dimension as usize).min(v.map_or(0, <[u8]>::len)));
            read_vector::<C, T>(typ, element, *dimension, v, |e| out.push(e))
        }
        _ => Err(mismatch::<C>(typ).into()),
    }
}

fn mismatch<C: ?Sized>(typ: &ColumnType) -> TypeCheckError {
    TypeCheckError::of::<C>(typ, super::TypeCheckErrorKind::Mismatch)
}

fn seq_type_check<'f, 'm, C: ?Sized, T: DeserializeValue<'f, 'm>>(
    typ: &ColumnType,
    vector_ok: bool,
) -> Result<(), TypeCheckError> {
    match typ {
        ColumnType::Collection {
            typ: CollectionType::List(e) | CollectionType::Set(e),
            ..
        } => T::type_check(e),
        ColumnType::Vector { typ: element, .. } if vector_ok => T::type_check(element),
        _ => check::<C>(typ, false),
    }
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata>> DeserializeValue<'frame, 'metadata>
    for Vec<T>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        seq_type_check::<Self, T>(typ, true)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let mut out = Vec::new();
        read_seq::<Self, T>(typ, v, true, &mut out)?;
        Ok(out)
    }
}

impl<
        'frame,
        'metadata,
        T: DeserializeValue<'frame, 'metadata> + Eq + Hash,
        S: BuildHasher + Default,
    > DeserializeValue<'frame, 'metadata> for HashSet<T, S>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        seq_type_check::<Self, T>(typ, false)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let mut out = HashSet::default();
        read_seq::<Self, T>(typ, v, false, &mut out)?;
        Ok(out)
    }
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata> + Ord>
    DeserializeValue<'frame, 'metadata> for BTreeSet<T>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        seq_type_check::<Self, T>(typ, false)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let mut out = BTreeSet::new();
        read_seq::<Self, T>(typ, v, false, &mut out)?;
        Ok(out)
    }
}

fn map_type_check<'f, 'm, C: ?Sized, K: DeserializeValue<'f, 'm>, V: DeserializeValue<'f, 'm>>(
    typ: &ColumnType,
) -> Result<(), TypeCheckError> {
    match typ {
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => {
            K::type_check(k)?;
            V::type_check(v)
        }
        _ => check::<C>(typ, false),
    }
}

/// Reads the entries of a map into `push`.
pub(crate) fn read_map<
    'f,
    'm,
    C: ?Sized,
    K: DeserializeValue<'f, 'm>,
    V: DeserializeValue<'f, 'm>,
>(
    typ: &'m ColumnType,
    v: Option<&'f [u8]>,
    mut push: impl FnMut(K, V),
) -> Result<(), DeserializationError> {
    let ColumnType::Collection {
        typ: CollectionType::Map(kt, vt),
        ..
    } = typ
    else {
        return Err(mismatch::<C>(typ).into());
    };
    let (mut r, n) = items::<C>(typ, v, 2)?;
    for _ in 0..n {
        let k = K::deserialize(kt, item::<C>(typ, &mut r)?)?;
        let v = V::deserialize(vt, item::<C>(typ, &mut r)?)?;
        push(k, v);
    }
    end::<C>(typ, &r)
}

impl<'frame, 'metadata, K, V, S> DeserializeValue<'frame, 'metadata> for HashMap<K, V, S>
where
    K: DeserializeValue<'frame, 'metadata> + Eq + Hash,
    V: DeserializeValue<'frame, 'metadata>,
    S: BuildHasher + Default,
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        map_type_check::<Self, K, V>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let mut out = HashMap::default();
        read_map::<Self, K, V>(typ, v, |k, v| {
            out.insert(k, v);
        })?;
        Ok(out)
    }
}

impl<
        'frame,
        'metadata,
        K: DeserializeValue<'frame, 'metadata> + Ord,
        V: DeserializeValue<'frame, 'metadata>,
    > DeserializeValue<'frame, 'metadata> for BTreeMap<K, V>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        map_type_check::<Self, K, V>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let mut out = BTreeMap::new();
        read_map::<Self, K, V>(typ, v, |k, v| {
            out.insert(k, v);
        })?;
        Ok(out)
    }
}
