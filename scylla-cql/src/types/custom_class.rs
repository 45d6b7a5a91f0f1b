//! Custom class strings (`org.apache.cassandra.db.marshal.*`), as sent for
//! custom types in result metadata (Cassandra 5's `vector` travels this way)
//! and found in schema tables.
//!
//! [`parse`] maps the marshal classes this crate understands to their
//! [`ColumnType`]: simple types (`Int32Type`, `UTF8Type`, ...), the
//! parametrised `ListType(..)`, `SetType(..)`, `MapType(k,v)`,
//! `TupleType(..)`, `UserType(ks,hexname,hexfield:type,...)` and
//! `VectorType(elem, N)`; `ReversedType(x)` unwraps to `x` (clustering order
//! does not change the encoding) and `FrozenType(x)` to `x` marked frozen,
//! together with the collections and UDTs nested in it. Anything
//! else, including malformed strings, stays [`ColumnType::Custom`] with the
//! original text. [`to_class_string`] is the inverse.

use std::sync::Arc;

use super::column_type::{CollectionType, ColumnType, NativeType, UserDefinedType, MAX_TYPE_DEPTH};
use crate::error::DecodeError;

/// The package of Cassandra's marshal classes.
const PACKAGE: &str = "org.apache.cassandra.db.marshal.";

/// Simple (parameterless) marshal classes and their types.
const SIMPLE: &[(&str, NativeType)] = &[
    ("AsciiType", NativeType::Ascii),
    ("LongType", NativeType::BigInt),
    ("BytesType", NativeType::Blob),
    ("BooleanType", NativeType::Boolean),
    ("CounterColumnType", NativeType::Counter),
    ("DecimalType", NativeType::Decimal),
    ("DoubleType", NativeType::Double),
    ("FloatType", NativeType::Float),
    ("Int32Type", NativeType::Int),
    ("UTF8Type", NativeType::Text),
    ("TimestampType", NativeType::Timestamp),
    ("UUIDType", NativeType::Uuid),
    ("IntegerType", NativeType::Varint),
    ("TimeUUIDType", NativeType::Timeuuid),
    ("InetAddressType", NativeType::Inet),
    ("SimpleDateType", NativeType::Date),
    ("TimeType", NativeType::Time),
    ("ShortType", NativeType::SmallInt),
    ("ByteType", NativeType::TinyInt),
    ("DurationType", NativeType::Duration),
    // The legacy name of the timestamp type; printed as TimestampType.
    ("DateType", NativeType::Timestamp),
];

/// Parses a custom class string into a column type, `depth` levels below the
/// top of the type being decoded. Never fails for unknown or malformed
/// classes (they stay [`ColumnType::Custom`]); fails only when nesting goes
/// beyond [`MAX_TYPE_DEPTH`].
pub fn parse(class: &str, depth: usize) -> Result<ColumnType, DecodeError> {
    Ok(parse_at(class.trim(), depth, false)?
        .unwrap_or_else(|| ColumnType::Custom(class.to_owned())))
}

/// `Ok(None)` when `class` is not something this module understands;
/// `frozen`: inside a `FrozenType(..)`, whose frozenness extends to the
/// collections and UDTs nested in it.
fn parse_at(class: &str, depth: usize, frozen: bool) -> Result<Option<ColumnType>, DecodeError> {
    if depth > MAX_TYPE_DEPTH {
        return Err(DecodeError::TooDeep {
            limit: MAX_TYPE_DEPTH,
        });
    }
    let (name, params) = match class.find('(') {
        None => (class, None),
        Some(open) => {
            let Some(inner) = class[open + 1..].strip_suffix(')') else {
                return Ok(None);
            };
            let Some(params) = split_params(inner) else {
                return Ok(None);
            };
            (&class[..open], Some(params))
        }
    };
    let name = name.trim();
    let short = match name.strip_prefix(PACKAGE) {
        Some(s) => s,
        // Cassandra also accepts unqualified marshal names.
        None if !name.contains('.') => name,
        None => return Ok(None),
    };
    let Some(params) = params else {
        return Ok(SIMPLE
            .iter()
            .find(|(n, _)| *n == short)
            .map(|(_, t)| ColumnType::Native(*t)));
    };
    // Sub-types are parsed strictly: an unknown inner class stays Custom,
    // a malformed one makes the whole string Custom.
    let sub_in = |s: &str, frozen: bool| -> Result<Option<ColumnType>, DecodeError> {
        Ok(Some(
            parse_at(s, depth + 1, frozen)?.unwrap_or_else(|| ColumnType::Custom(s.to_owned())),
        ))
    };
    let sub = |s: &str| sub_in(s, frozen);
    let one = |params: &[&str]| match params {
        [p] => sub(p),
        _ => Ok(None),
    };
    let collection = |t: Option<ColumnType>, make: fn(Box<ColumnType>) -> CollectionType| {
        t.map(|t| ColumnType::Collection {
            frozen,
            typ: make(Box::new(t)),
        })
    };
    Ok(match short {
        "ReversedType" => one(&params)?,
        "FrozenType" => match params.as_slice() {
            [p] => sub_in(p, true)?,
            _ => None,
        },
        "ListType" => collection(one(&params)?, CollectionType::List),
        "SetType" => collection(one(&params)?, CollectionType::Set),
        "MapType" => match params.as_slice() {
            [k, v] => match (sub(k)?, sub(v)?) {
                (Some(k), Some(v)) => Some(ColumnType::Collection {
                    frozen,
                    typ: CollectionType::Map(Box::new(k), Box::new(v)),
                }),
                _ => None,
            },
            _ => None,
        },
        "TupleType" => {
            let mut elems = Vec::with_capacity(params.len());
            for p in &params {
                match sub(p)? {
                    Some(t) => elems.push(t),
                    None => return Ok(None),
                }
            }
            Some(ColumnType::Tuple(elems))
        }
        "VectorType" => match params.as_slice() {
            [e, n] => match (sub(e)?, n.trim().parse::<u16>()) {
                (Some(e), Ok(dimension)) => Some(ColumnType::Vector {
                    typ: Box::new(e),
                    dimensions: dimension,
                }),
                _ => None,
            },
            _ => None,
        },
        "UserType" => parse_udt(&params, &sub)?.map(|udt| ColumnType::UserDefinedType {
            frozen,
            definition: Arc::new(udt),
        }),
        _ => None,
    })
}

/// `UserType(keyspace, hex(name), hex(field):type, ...)`.
fn parse_udt(
    params: &[&str],
    sub: &dyn Fn(&str) -> Result<Option<ColumnType>, DecodeError>,
) -> Result<Option<UserDefinedType>, DecodeError> {
    let [keyspace, name, fields @ ..] = params else {
        return Ok(None);
    };
    let Some(name) = unhex_utf8(name.trim()) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let Some((fname, ftype)) = f.split_once(':') else {
            return Ok(None);
        };
        let (Some(fname), Some(ftype)) = (unhex_utf8(fname.trim()), sub(ftype)?) else {
            return Ok(None);
        };
        out.push((fname, ftype));
    }
    Ok(Some(UserDefinedType {
        name,
        keyspace: keyspace.trim().to_owned(),
        field_types: out,
    }))
}

/// Splits on commas outside parentheses; `None` if parentheses do not balance.
fn split_params(s: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut level = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => level += 1,
            ')' => level = level.checked_sub(1)?,
            ',' if level == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if level != 0 {
        return None;
    }
    out.push(s[start..].trim());
    Some(out)
}

fn unhex_utf8(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The class string of a type (the inverse of [`parse`]); a custom type is
/// its own class string.
pub fn to_class_string(t: &ColumnType) -> String {
    let mut out = String::new();
    write_class(t, &mut out);
    out
}

fn write_class(t: &ColumnType, out: &mut String) {
    if t.is_frozen() {
        out.push_str(PACKAGE);
        out.push_str("FrozenType(");
        write_unfrozen_class(t, out);
        out.push(')');
    } else {
        write_unfrozen_class(t, out);
    }
}

/// The class string of `t` without its own `FrozenType(..)` wrapper.
fn write_unfrozen_class(t: &ColumnType, out: &mut String) {
    let param_list = |out: &mut String, name: &str, params: &[&ColumnType]| {
        out.push_str(PACKAGE);
        out.push_str(name);
        out.push('(');
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_class(p, out);
        }
        out.push(')');
    };
    match t {
        ColumnType::Custom(c) => out.push_str(c),
        ColumnType::Collection {
            typ: CollectionType::List(e),
            ..
        } => param_list(out, "ListType", &[e]),
        ColumnType::Collection {
            typ: CollectionType::Set(e),
            ..
        } => param_list(out, "SetType", &[e]),
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => param_list(out, "MapType", &[k, v]),
        ColumnType::Tuple(elems) => param_list(out, "TupleType", &elems.iter().collect::<Vec<_>>()),
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } => {
            out.push_str(PACKAGE);
            out.push_str("VectorType(");
            write_class(element, out);
            out.push_str(", ");
            out.push_str(&dimension.to_string());
            out.push(')');
        }
        ColumnType::UserDefinedType { definition, .. } => {
            let UserDefinedType {
                name,
                keyspace,
                field_types: fields,
            } = &**definition;
            out.push_str(PACKAGE);
            out.push_str("UserType(");
            out.push_str(keyspace);
            out.push(',');
            out.push_str(&hex(name));
            for (fname, ftype) in fields {
                out.push(',');
                out.push_str(&hex(fname));
                out.push(':');
                write_class(ftype, out);
            }
            out.push(')');
        }
        ColumnType::Native(native) => {
            // Every native type is in SIMPLE (first match wins, so the
            // legacy DateType alias is never printed).
            if let Some((n, _)) = SIMPLE.iter().find(|(_, st)| st == native) {
                out.push_str(PACKAGE);
                out.push_str(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ColumnType {
        parse(s, 0).unwrap()
    }

    #[test]
    fn parses_known_classes() {
        assert_eq!(
            p("org.apache.cassandra.db.marshal.Int32Type"),
            ColumnType::Native(NativeType::Int)
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)"),
            ColumnType::Vector { typ: Box::new(ColumnType::Native(NativeType::Float)), dimensions: 3 }
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.ReversedType(org.apache.cassandra.db.marshal.MapType(UTF8Type,org.apache.cassandra.db.marshal.FrozenType(ListType(LongType))))"),
            ColumnType::map(
                ColumnType::Native(NativeType::Text),
                ColumnType::list(ColumnType::Native(NativeType::BigInt)).into_frozen()
            )
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.UserType(ks,61646472,737472656574:org.apache.cassandra.db.marshal.UTF8Type,6e6f:Int32Type)"),
            ColumnType::udt("ks", "addr", vec![("street".into(), ColumnType::Native(NativeType::Text)), ("no".into(), ColumnType::Native(NativeType::Int))])
        );
    }

    #[test]
    fn unknown_and_malformed_stay_custom() {
        for s in [
            "org.apache.cassandra.db.marshal.EmptyType",
            "com.example.Foo",
            "ListType(",
            "ListType(Int32Type",
            "ListType(Int32Type))",
            "MapType(Int32Type)",
            "VectorType(FloatType, x)",
            "UserType(ks,zz)",
            ")(",
            "",
        ] {
            assert_eq!(p(s), ColumnType::Custom(s.to_owned()), "{s}");
        }
        assert_eq!(
            p("ListType(com.example.Foo)"),
            ColumnType::list(ColumnType::Custom("com.example.Foo".into()))
        );
    }

    #[test]
    fn depth_is_limited() {
        let deep = "ListType(".repeat(100) + "Int32Type" + &")".repeat(100);
        assert!(parse(&deep, 0).is_err());
    }

    #[test]
    fn prints_vector_metadata() {
        let v = ColumnType::Vector {
            typ: Box::new(ColumnType::Native(NativeType::Float)),
            dimensions: 3,
        };
        assert_eq!(
            to_class_string(&v),
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)"
        );
        assert_eq!(p(&to_class_string(&v)), v);
    }

    #[test]
    fn frozen_travels_as_frozen_type() {
        let frozen_list = ColumnType::list(ColumnType::Native(NativeType::Int)).into_frozen();
        let v = ColumnType::vector(frozen_list.clone(), 2);
        let class = to_class_string(&v);
        assert_eq!(
            class,
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FrozenType(\
             org.apache.cassandra.db.marshal.ListType(org.apache.cassandra.db.marshal.Int32Type)), 2)"
        );
        assert_eq!(p(&class), v);
        // Frozenness extends to what is nested in a frozen type.
        assert_eq!(
            p("FrozenType(ListType(SetType(Int32Type)))"),
            ColumnType::list(ColumnType::set(ColumnType::Native(NativeType::Int)).into_frozen())
                .into_frozen()
        );
        assert_eq!(
            p("ListType(Int32Type)"),
            ColumnType::list(ColumnType::Native(NativeType::Int))
        );
    }
}
