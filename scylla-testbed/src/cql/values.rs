//! Values: CQL literals turned into their wire form for a column's type,
//! and checks of bound values.
//!
//! Literals go through [`CqlValue`] and the protocol crate's serializers, so
//! a literal and the same value bound by a driver give identical bytes
//! (the store compares keys byte-wise).

use std::net::IpAddr;

use bytes::Bytes;
use scylla_cql::types::serialize::Written;
use scylla_cql::types::{CollectionType, ColumnType, Counter, CqlTimestamp, CqlValue, NativeType};

use super::ast::Literal;

/// A value in a statement, resolved: set, null, or "unset" (leave as is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Set(Bytes),
    Null,
    Unset,
}

impl Value {
    /// The bytes, or `None` for null/unset.
    pub(crate) fn bytes(&self) -> Option<&Bytes> {
        match self {
            Value::Set(b) => Some(b),
            _ => None,
        }
    }
}

fn bad(lit: &Literal, typ: &ColumnType) -> String {
    format!("Invalid literal {lit:?} for a value of type {typ}")
}

/// A literal as a [`CqlValue`] of `typ` (`None` for null).
fn to_cql_value(lit: &Literal, typ: &ColumnType) -> Result<Option<CqlValue>, String> {
    let e = || bad(lit, typ);
    let v = match (lit, typ) {
        (Literal::Null, _) => return Ok(None),
        (Literal::Int(s), ColumnType::Native(NativeType::Int)) => {
            CqlValue::Int(s.parse().map_err(|_| e())?)
        }
        (Literal::Int(s), ColumnType::Native(NativeType::BigInt)) => {
            CqlValue::BigInt(s.parse().map_err(|_| e())?)
        }
        (Literal::Int(s), ColumnType::Native(NativeType::SmallInt)) => {
            CqlValue::SmallInt(s.parse().map_err(|_| e())?)
        }
        (Literal::Int(s), ColumnType::Native(NativeType::TinyInt)) => {
            CqlValue::TinyInt(s.parse().map_err(|_| e())?)
        }
        (Literal::Int(s), ColumnType::Native(NativeType::Counter)) => {
            CqlValue::Counter(Counter(s.parse().map_err(|_| e())?))
        }
        (Literal::Int(s), ColumnType::Native(NativeType::Timestamp)) => {
            CqlValue::Timestamp(CqlTimestamp(s.parse().map_err(|_| e())?))
        }
        (Literal::Int(s) | Literal::Float(s), ColumnType::Native(NativeType::Double)) => {
            CqlValue::Double(s.parse().map_err(|_| e())?)
        }
        (Literal::Int(s) | Literal::Float(s), ColumnType::Native(NativeType::Float)) => {
            CqlValue::Float(s.parse().map_err(|_| e())?)
        }
        (Literal::Str(s), ColumnType::Native(NativeType::Text)) => CqlValue::Text(s.clone()),
        (Literal::Str(s), ColumnType::Native(NativeType::Ascii)) if s.is_ascii() => {
            CqlValue::Ascii(s.clone())
        }
        (Literal::Str(s), ColumnType::Native(NativeType::Inet)) => {
            CqlValue::Inet(s.parse::<IpAddr>().map_err(|_| e())?)
        }
        (Literal::Str(s), ColumnType::Native(NativeType::Uuid)) => {
            CqlValue::Uuid(uuid::Uuid::parse_str(s).map_err(|_| e())?)
        }
        (Literal::Uuid(u), ColumnType::Native(NativeType::Uuid)) => CqlValue::Uuid(*u),
        (Literal::Uuid(u), ColumnType::Native(NativeType::Timeuuid)) => {
            CqlValue::Timeuuid((*u).into())
        }
        (Literal::Blob(b), ColumnType::Native(NativeType::Blob)) => CqlValue::Blob(b.clone()),
        (Literal::Bool(b), ColumnType::Native(NativeType::Boolean)) => CqlValue::Boolean(*b),
        (
            Literal::List(v),
            ColumnType::Collection {
                typ: CollectionType::List(t),
                ..
            },
        ) => CqlValue::List(elements(v, t)?),
        (
            Literal::List(v),
            ColumnType::Vector {
                typ: element,
                dimensions: dimension,
            },
        ) => {
            if v.len() != *dimension as usize {
                return Err(format!(
                    "Invalid vector literal for a value of type {typ}; expected {dimension} \
                     elements, but given {}",
                    v.len()
                ));
            }
            CqlValue::Vector(elements(v, element)?)
        }
        (Literal::Udt(given), ColumnType::UserDefinedType { definition, .. }) => {
            let scylla_cql::types::UserDefinedType {
                keyspace,
                name,
                field_types: fields,
            } = &**definition;
            if let Some((unknown, _)) = given
                .iter()
                .find(|(g, _)| !fields.iter().any(|(f, _)| f == g))
            {
                return Err(format!(
                    "Unknown field '{unknown}' in value of user defined type {name}"
                ));
            }
            let mut values = Vec::with_capacity(fields.len());
            for (f, ft) in fields {
                let v = match given.iter().find(|(g, _)| g == f) {
                    Some((_, l)) => to_cql_value(l, ft)?,
                    None => None,
                };
                values.push((f.clone(), v));
            }
            CqlValue::UserDefinedType {
                keyspace: keyspace.clone(),
                name: name.clone(),
                fields: values,
            }
        }
        (
            Literal::List(v) | Literal::Set(v),
            ColumnType::Collection {
                typ: CollectionType::Set(t),
                ..
            },
        ) => {
            let mut items = elements(v, t)?;
            // Sets are sent sorted and without duplicates, as a server would.
            let mut keyed: Vec<(Vec<u8>, CqlValue)> = Vec::new();
            for i in items.drain(..) {
                let mut b = Vec::new();
                scylla_cql::types::serialize::serialize_bytes(&i, t, &mut b)
                    .map_err(|x| x.to_string())?;
                keyed.push((b, i));
            }
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            keyed.dedup_by(|a, b| a.0 == b.0);
            CqlValue::Set(keyed.into_iter().map(|(_, v)| v).collect())
        }
        (
            Literal::Set(v),
            ColumnType::Collection {
                typ: CollectionType::Map(..),
                ..
            },
        ) if v.is_empty() => CqlValue::Map(Vec::new()),
        (
            Literal::Map(m),
            ColumnType::Collection {
                typ: CollectionType::Map(kt, vt),
                ..
            },
        ) => {
            let mut out = Vec::with_capacity(m.len());
            for (k, v) in m {
                let k = to_cql_value(k, kt)?.ok_or_else(e)?;
                let v = to_cql_value(v, vt)?.ok_or_else(e)?;
                out.push((k, v));
            }
            CqlValue::Map(out)
        }
        _ => return Err(e()),
    };
    Ok(Some(v))
}

fn elements(v: &[Literal], t: &ColumnType) -> Result<Vec<CqlValue>, String> {
    v.iter()
        .map(|l| to_cql_value(l, t)?.ok_or_else(|| bad(l, t)))
        .collect()
}

/// The wire form of `lit` as a value of `typ`.
pub(crate) fn literal_value(lit: &Literal, typ: &ColumnType) -> Result<Value, String> {
    let Some(v) = to_cql_value(lit, typ)? else {
        return Ok(Value::Null);
    };
    let mut out = Vec::new();
    match scylla_cql::types::serialize::serialize_bytes(&v, typ, &mut out) {
        Ok(Written::Value) => Ok(Value::Set(Bytes::from(out))),
        Ok(Written::Null) => Ok(Value::Null),
        Ok(Written::Unset) => Ok(Value::Unset),
        Err(x) => Err(x.to_string()),
    }
}

/// Checks a bound value's length against its type's fixed width, as a
/// server does before storing it.
pub(crate) fn check_bound(typ: &ColumnType, b: &[u8], name: &str) -> Result<(), String> {
    if let ColumnType::Vector {
        typ: element,
        dimensions: dimension,
    } = typ
    {
        // A vector of fixed-width elements is their bytes, nothing else.
        let width = scylla_cql::types::serialize::vector::element_fixed_len(element);
        if let Some(n) = width.and_then(|w| w.checked_mul(*dimension as usize)) {
            if b.len() != n {
                return Err(format!(
                    "Expected {n} bytes for {name} of type {typ} ({} bytes given)",
                    b.len()
                ));
            }
        }
        return Ok(());
    }
    match fixed_width(typ) {
        // An empty value is legal for most types (CQL's "empty").
        Some(n) if !b.is_empty() && b.len() != n => Err(format!(
            "Expected {n} or 0 byte value for {name} of type {typ} ({} bytes given)",
            b.len()
        )),
        _ => Ok(()),
    }
}

/// The width of a fixed-width type's values.
fn fixed_width(typ: &ColumnType) -> Option<usize> {
    match typ {
        ColumnType::Native(NativeType::Int)
        | ColumnType::Native(NativeType::Float)
        | ColumnType::Native(NativeType::Date) => Some(4),
        ColumnType::Native(NativeType::BigInt)
        | ColumnType::Native(NativeType::Double)
        | ColumnType::Native(NativeType::Timestamp)
        | ColumnType::Native(NativeType::Counter)
        | ColumnType::Native(NativeType::Time) => Some(8),
        ColumnType::Native(NativeType::SmallInt) => Some(2),
        ColumnType::Native(NativeType::TinyInt) | ColumnType::Native(NativeType::Boolean) => {
            Some(1)
        }
        ColumnType::Native(NativeType::Uuid) | ColumnType::Native(NativeType::Timeuuid) => Some(16),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn int_literals_match_driver_bytes(v in any::<i64>(), w in any::<i32>()) {
            let b = literal_value(&Literal::Int(v.to_string()), &ColumnType::Native(NativeType::BigInt)).unwrap();
            prop_assert_eq!(b, Value::Set(Bytes::copy_from_slice(&v.to_be_bytes())));
            let b = literal_value(&Literal::Int(w.to_string()), &ColumnType::Native(NativeType::Int)).unwrap();
            prop_assert_eq!(b, Value::Set(Bytes::copy_from_slice(&w.to_be_bytes())));
        }

        #[test]
        fn text_literals_match_driver_bytes(s in ".{0,40}") {
            let b = literal_value(&Literal::Str(s.clone()), &ColumnType::Native(NativeType::Text)).unwrap();
            prop_assert_eq!(b, Value::Set(Bytes::from(s.into_bytes())));
        }
    }

    #[test]
    fn collections_and_errors() {
        let t = ColumnType::from_cql("map<text, int>").unwrap();
        let m = Literal::Map(vec![(Literal::Str("a".into()), Literal::Int("1".into()))]);
        let Value::Set(b) = literal_value(&m, &t).unwrap() else {
            panic!("null")
        };
        assert_eq!(&b[..], b"\0\0\0\x01\0\0\0\x01a\0\0\0\x04\0\0\0\x01");
        assert!(literal_value(
            &Literal::Str("x".into()),
            &ColumnType::Native(NativeType::Int)
        )
        .is_err());
        assert!(literal_value(
            &Literal::Int("99999999999".into()),
            &ColumnType::Native(NativeType::Int)
        )
        .is_err());
        assert_eq!(
            literal_value(&Literal::Null, &ColumnType::Native(NativeType::Int)).unwrap(),
            Value::Null
        );
        assert!(check_bound(&ColumnType::Native(NativeType::Int), &[0, 0, 1], "k").is_err());
        assert!(check_bound(&ColumnType::Native(NativeType::Int), &[], "k").is_ok());
    }
}
