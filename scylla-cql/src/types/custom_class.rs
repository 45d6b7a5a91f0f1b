//! Custom class strings (`org.apache.cassandra.db.marshal.*`), as sent for
//! custom types in result metadata (Cassandra 5's `vector` travels this way)
//! and found in schema tables.
//!
//! [`parse`] maps the marshal classes this crate understands to their
//! [`ColumnType`]: simple types (`Int32Type`, `UTF8Type`, ...), the
//! parametrised `ListType(..)`, `SetType(..)`, `MapType(k,v)`,
//! `TupleType(..)`, `UserType(ks,hexname,hexfield:type,...)` and
//! `VectorType(elem, N)`; `ReversedType(x)` and `FrozenType(x)` unwrap to `x`
//! (clustering order and frozenness do not change the encoding). Anything
//! else, including malformed strings, stays [`ColumnType::Custom`] with the
//! original text. [`to_class_string`] is the inverse.

use super::column_type::{ColumnType, MAX_TYPE_DEPTH};
use crate::error::DecodeError;

/// The package of Cassandra's marshal classes.
const PACKAGE: &str = "org.apache.cassandra.db.marshal.";

/// Simple (parameterless) marshal classes and their types.
const SIMPLE: &[(&str, ColumnType)] = &[
    ("AsciiType", ColumnType::Ascii),
    ("LongType", ColumnType::BigInt),
    ("BytesType", ColumnType::Blob),
    ("BooleanType", ColumnType::Boolean),
    ("CounterColumnType", ColumnType::Counter),
    ("DecimalType", ColumnType::Decimal),
    ("DoubleType", ColumnType::Double),
    ("FloatType", ColumnType::Float),
    ("Int32Type", ColumnType::Int),
    ("UTF8Type", ColumnType::Text),
    ("TimestampType", ColumnType::Timestamp),
    ("UUIDType", ColumnType::Uuid),
    ("IntegerType", ColumnType::Varint),
    ("TimeUUIDType", ColumnType::Timeuuid),
    ("InetAddressType", ColumnType::Inet),
    ("SimpleDateType", ColumnType::Date),
    ("TimeType", ColumnType::Time),
    ("ShortType", ColumnType::SmallInt),
    ("ByteType", ColumnType::TinyInt),
    ("DurationType", ColumnType::Duration),
    // The legacy name of the timestamp type; printed as TimestampType.
    ("DateType", ColumnType::Timestamp),
];

/// Parses a custom class string into a column type, `depth` levels below the
/// top of the type being decoded. Never fails for unknown or malformed
/// classes (they stay [`ColumnType::Custom`]); fails only when nesting goes
/// beyond [`MAX_TYPE_DEPTH`].
pub fn parse(class: &str, depth: usize) -> Result<ColumnType, DecodeError> {
    Ok(parse_at(class.trim(), depth)?.unwrap_or_else(|| ColumnType::Custom(class.to_owned())))
}

/// `Ok(None)` when `class` is not something this module understands.
fn parse_at(class: &str, depth: usize) -> Result<Option<ColumnType>, DecodeError> {
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
            .map(|(_, t)| t.clone()));
    };
    // Sub-types are parsed strictly: an unknown inner class stays Custom,
    // a malformed one makes the whole string Custom.
    let sub = |s: &str| -> Result<Option<ColumnType>, DecodeError> {
        Ok(Some(
            parse_at(s, depth + 1)?.unwrap_or_else(|| ColumnType::Custom(s.to_owned())),
        ))
    };
    let one = |params: &[&str]| match params {
        [p] => sub(p),
        _ => Ok(None),
    };
    let boxed = |t: Option<ColumnType>| t.map(Box::new);
    Ok(match short {
        "ReversedType" | "FrozenType" => one(&params)?,
        "ListType" => boxed(one(&params)?).map(ColumnType::List),
        "SetType" => boxed(one(&params)?).map(ColumnType::Set),
        "MapType" => match params.as_slice() {
            [k, v] => match (sub(k)?, sub(v)?) {
                (Some(k), Some(v)) => Some(ColumnType::Map(Box::new(k), Box::new(v))),
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
            [e, n] => match (sub(e)?, n.trim().parse::<u32>()) {
                (Some(e), Ok(dimension)) => Some(ColumnType::Vector {
                    element: Box::new(e),
                    dimension,
                }),
                _ => None,
            },
            _ => None,
        },
        "UserType" => parse_udt(&params, &sub)?,
        _ => None,
    })
}

/// `UserType(keyspace, hex(name), hex(field):type, ...)`.
fn parse_udt(
    params: &[&str],
    sub: &dyn Fn(&str) -> Result<Option<ColumnType>, DecodeError>,
) -> Result<Option<ColumnType>, DecodeError> {
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
    Ok(Some(ColumnType::Udt {
        keyspace: keyspace.trim().to_owned(),
        name,
        fields: out,
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
        ColumnType::List(e) => param_list(out, "ListType", &[e]),
        ColumnType::Set(e) => param_list(out, "SetType", &[e]),
        ColumnType::Map(k, v) => param_list(out, "MapType", &[k, v]),
        ColumnType::Tuple(elems) => param_list(out, "TupleType", &elems.iter().collect::<Vec<_>>()),
        ColumnType::Vector { element, dimension } => {
            out.push_str(PACKAGE);
            out.push_str("VectorType(");
            write_class(element, out);
            out.push_str(", ");
            out.push_str(&dimension.to_string());
            out.push(')');
        }
        ColumnType::Udt {
            keyspace,
            name,
            fields,
        } => {
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
        simple => {
            // Every remaining variant is in SIMPLE (first match wins, so the
            // legacy DateType alias is never printed).
            if let Some((n, _)) = SIMPLE.iter().find(|(_, st)| st == simple) {
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
            ColumnType::Int
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)"),
            ColumnType::Vector { element: Box::new(ColumnType::Float), dimension: 3 }
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.ReversedType(org.apache.cassandra.db.marshal.MapType(UTF8Type,org.apache.cassandra.db.marshal.FrozenType(ListType(LongType))))"),
            ColumnType::Map(
                Box::new(ColumnType::Text),
                Box::new(ColumnType::List(Box::new(ColumnType::BigInt)))
            )
        );
        assert_eq!(
            p("org.apache.cassandra.db.marshal.UserType(ks,61646472,737472656574:org.apache.cassandra.db.marshal.UTF8Type,6e6f:Int32Type)"),
            ColumnType::Udt {
                keyspace: "ks".into(),
                name: "addr".into(),
                fields: vec![("street".into(), ColumnType::Text), ("no".into(), ColumnType::Int)],
            }
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
            ColumnType::List(Box::new(ColumnType::Custom("com.example.Foo".into())))
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
            element: Box::new(ColumnType::Float),
            dimension: 3,
        };
        assert_eq!(
            to_class_string(&v),
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)"
        );
        assert_eq!(p(&to_class_string(&v)), v);
    }
}
