//! Column types in CQL syntax, as written in DDL: `int`, `list<int>`,
//! `map<text, frozen<list<int>>>`, `vector<float, 3>`, `tuple<int, text>`.
//! [`ColumnType::from_cql`] parses it (for the test cluster's schema) and
//! `Display` prints it (in error messages, and back into DDL).
//!
//! `frozen<...>` around a collection or a UDT sets its `frozen` flag (and
//! only its own: what is nested in it keeps the flags its text gives it);
//! around any other type it changes nothing. When printing, a frozen type
//! is wrapped in `frozen<...>`, and so are collections and UDTs nested in
//! another type whatever their flag, as CQL requires. A custom type is written as
//! its quoted class name, `'org.example.MyType'`. A UDT prints as
//! `keyspace.name`; parsing a UDT name needs [`ColumnType::from_cql_with`].

use std::fmt;

use super::column_type::{CollectionType, ColumnType, NativeType, UserDefinedType, MAX_TYPE_DEPTH};

/// A CQL type string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CQL type `{input}`: {reason} (at byte {offset})")]
pub struct CqlTypeParseError {
    /// The whole input.
    pub input: String,
    /// What was wrong.
    pub reason: &'static str,
    /// Byte offset of the problem.
    pub offset: usize,
}

impl ColumnType {
    /// Parses a type in CQL syntax; user-defined type names are rejected.
    pub fn from_cql(s: &str) -> Result<ColumnType, CqlTypeParseError> {
        Self::from_cql_with(s, |_| None)
    }

    /// Parses a type in CQL syntax, resolving other names (UDTs, possibly
    /// `keyspace.name`) with `resolve_udt`.
    pub fn from_cql_with(
        s: &str,
        resolve_udt: impl Fn(&str) -> Option<ColumnType>,
    ) -> Result<ColumnType, CqlTypeParseError> {
        let mut p = Parser {
            input: s,
            pos: 0,
            resolve: &resolve_udt,
        };
        let t = p.parse_type(0)?;
        p.skip_ws();
        if p.pos != s.len() {
            return Err(p.err("unexpected characters after the type"));
        }
        Ok(t)
    }
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    resolve: &'a dyn Fn(&str) -> Option<ColumnType>,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> CqlTypeParseError {
        CqlTypeParseError {
            input: self.input.to_owned(),
            reason,
            offset: self.pos,
        }
    }

    fn rest(&self) -> &str {
        self.input.get(self.pos..).unwrap_or("")
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> Result<(), CqlTypeParseError> {
        self.skip_ws();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            Ok(())
        } else {
            Err(self.err(match c {
                '<' => "expected `<`",
                '>' => "expected `>`",
                ',' => "expected `,`",
                _ => "unexpected character",
            }))
        }
    }

    fn ident(&mut self) -> Result<&str, CqlTypeParseError> {
        self.skip_ws();
        let rest = self.rest();
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        if n == 0 {
            return Err(self.err("expected a type name"));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.input[start..start + n])
    }

    fn parse_type(&mut self, depth: usize) -> Result<ColumnType, CqlTypeParseError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(self.err("type nested too deeply"));
        }
        self.skip_ws();
        if self.rest().starts_with('\'') {
            let body = &self.rest()[1..];
            let Some(end) = body.find('\'') else {
                return Err(self.err("unterminated quoted class name"));
            };
            let class = body[..end].to_owned();
            self.pos += end + 2;
            return super::custom_class::parse(&class, depth)
                .map_err(|_| self.err("invalid class"));
        }
        let name = self.ident()?.to_ascii_lowercase();
        let sub = |p: &mut Self| p.parse_type(depth + 1).map(Box::new);
        let t = match name.as_str() {
            "ascii" => ColumnType::Native(NativeType::Ascii),
            "bigint" => ColumnType::Native(NativeType::BigInt),
            "blob" => ColumnType::Native(NativeType::Blob),
            "boolean" => ColumnType::Native(NativeType::Boolean),
            "counter" => ColumnType::Native(NativeType::Counter),
            "date" => ColumnType::Native(NativeType::Date),
            "decimal" => ColumnType::Native(NativeType::Decimal),
            "double" => ColumnType::Native(NativeType::Double),
            "duration" => ColumnType::Native(NativeType::Duration),
            "float" => ColumnType::Native(NativeType::Float),
            "inet" => ColumnType::Native(NativeType::Inet),
            "int" => ColumnType::Native(NativeType::Int),
            "smallint" => ColumnType::Native(NativeType::SmallInt),
            "text" | "varchar" => ColumnType::Native(NativeType::Text),
            "time" => ColumnType::Native(NativeType::Time),
            "timestamp" => ColumnType::Native(NativeType::Timestamp),
            "timeuuid" => ColumnType::Native(NativeType::Timeuuid),
            "tinyint" => ColumnType::Native(NativeType::TinyInt),
            "uuid" => ColumnType::Native(NativeType::Uuid),
            "varint" => ColumnType::Native(NativeType::Varint),
            "frozen" => {
                self.eat('<')?;
                let t = self.parse_type(depth + 1)?;
                self.eat('>')?;
                t.into_frozen()
            }
            "list" | "set" => {
                self.eat('<')?;
                let e = sub(self)?;
                self.eat('>')?;
                let typ = if name == "list" {
                    CollectionType::List(e)
                } else {
                    CollectionType::Set(e)
                };
                ColumnType::Collection { frozen: false, typ }
            }
            "map" => {
                self.eat('<')?;
                let k = sub(self)?;
                self.eat(',')?;
                let v = sub(self)?;
                self.eat('>')?;
                ColumnType::Collection {
                    frozen: false,
                    typ: CollectionType::Map(k, v),
                }
            }
            "tuple" => {
                self.eat('<')?;
                let mut elems = vec![self.parse_type(depth + 1)?];
                loop {
                    self.skip_ws();
                    if self.rest().starts_with('>') {
                        break;
                    }
                    self.eat(',')?;
                    elems.push(self.parse_type(depth + 1)?);
                }
                self.eat('>')?;
                ColumnType::Tuple(elems)
            }
            "vector" => {
                self.eat('<')?;
                let element = sub(self)?;
                self.eat(',')?;
                self.skip_ws();
                let digits = self
                    .rest()
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(self.rest().len());
                let dimension = self.rest()[..digits]
                    .parse::<u16>()
                    .map_err(|_| self.err("expected a vector dimension"))?;
                self.pos += digits;
                self.eat('>')?;
                ColumnType::Vector {
                    typ: element,
                    dimensions: dimension,
                }
            }
            _ => {
                // Names keep their case when resolving (quoting is not supported).
                let end = self.pos;
                let start = end - name.len();
                let original = &self.input[start..end];
                (self.resolve)(original).ok_or_else(|| self.err("unknown type name"))?
            }
        };
        Ok(t)
    }
}

/// Prints a type nested in another one (frozen if it is a collection or UDT).
struct Nested<'a>(&'a ColumnType);

impl fmt::Display for Nested<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            t @ (ColumnType::Collection { .. } | ColumnType::UserDefinedType { .. }) => {
                write!(f, "frozen<{}>", Unfrozen(t))
            }
            t => write!(f, "{t}"),
        }
    }
}

impl NativeType {
    /// The type's name in CQL (`text` for `text`/`varchar`).
    pub const fn cql_name(&self) -> &'static str {
        match self {
            NativeType::Ascii => "ascii",
            NativeType::BigInt => "bigint",
            NativeType::Blob => "blob",
            NativeType::Boolean => "boolean",
            NativeType::Counter => "counter",
            NativeType::Decimal => "decimal",
            NativeType::Double => "double",
            NativeType::Float => "float",
            NativeType::Int => "int",
            NativeType::Text => "text",
            NativeType::Timestamp => "timestamp",
            NativeType::Uuid => "uuid",
            NativeType::Varint => "varint",
            NativeType::Timeuuid => "timeuuid",
            NativeType::Inet => "inet",
            NativeType::Date => "date",
            NativeType::Time => "time",
            NativeType::SmallInt => "smallint",
            NativeType::TinyInt => "tinyint",
            NativeType::Duration => "duration",
        }
    }
}

impl fmt::Display for NativeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cql_name())
    }
}

/// Prints a type without the `frozen<...>` of its own flag.
struct Unfrozen<'a>(&'a ColumnType);

impl fmt::Display for Unfrozen<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ColumnType::Native(n) => f.write_str(n.cql_name()),
            ColumnType::Custom(class) => write!(f, "'{class}'"),
            ColumnType::Collection { typ, .. } => match typ {
                CollectionType::List(e) => write!(f, "list<{}>", Nested(e)),
                CollectionType::Set(e) => write!(f, "set<{}>", Nested(e)),
                CollectionType::Map(k, v) => write!(f, "map<{}, {}>", Nested(k), Nested(v)),
            },
            ColumnType::UserDefinedType { definition, .. } => {
                let UserDefinedType { keyspace, name, .. } = &**definition;
                write!(f, "{keyspace}.{name}")
            }
            ColumnType::Tuple(elems) => {
                f.write_str("tuple<")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", Nested(e))?;
                }
                f.write_str(">")
            }
            ColumnType::Vector { typ, dimensions } => {
                write!(f, "vector<{}, {dimensions}>", Nested(typ))
            }
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_frozen() {
            write!(f, "frozen<{}>", Unfrozen(self))
        } else {
            fmt::Display::fmt(&Unfrozen(self), f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ddl_types() {
        let t = ColumnType::from_cql("map<text, frozen<list<int>>>").unwrap();
        assert_eq!(
            t,
            ColumnType::map(
                ColumnType::Native(NativeType::Text),
                ColumnType::list(ColumnType::Native(NativeType::Int)).into_frozen()
            )
        );
        assert_eq!(t.to_string(), "map<text, frozen<list<int>>>");
        let v = ColumnType::from_cql(" vector < float , 3 > ").unwrap();
        assert_eq!(v.to_string(), "vector<float, 3>");
        assert_eq!(
            ColumnType::from_cql("VARCHAR"),
            Ok(ColumnType::Native(NativeType::Text))
        );
        let tup = ColumnType::from_cql("tuple<int, text>").unwrap();
        assert_eq!(
            tup,
            ColumnType::Tuple(vec![
                ColumnType::Native(NativeType::Int),
                ColumnType::Native(NativeType::Text)
            ])
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "list<",
            "map<int>",
            "int int",
            "vector<float>",
            "vector<float, x>",
            "foo",
            "'abc",
            "tuple<>",
            "list<int>>",
        ] {
            assert!(ColumnType::from_cql(bad).is_err(), "{bad}");
        }
        let deep = "list<".repeat(100) + "int" + &">".repeat(100);
        assert!(ColumnType::from_cql(&deep).is_err());
    }

    #[test]
    fn resolves_udts() {
        let udt = ColumnType::udt(
            "ks",
            "addr",
            vec![("street".into(), ColumnType::Native(NativeType::Text))],
        );
        let t =
            ColumnType::from_cql_with("list<frozen<addr>>", |n| (n == "addr").then(|| udt.clone()));
        assert_eq!(t, Ok(ColumnType::list(udt.into_frozen())));
    }

    #[test]
    fn frozen_is_recorded_and_printed() {
        let t = ColumnType::from_cql("frozen<list<int>>").unwrap();
        assert!(matches!(
            &t,
            ColumnType::Collection {
                frozen: true,
                typ: CollectionType::List(e),
            } if **e == ColumnType::Native(NativeType::Int)
        ));
        assert!(t.is_frozen());
        assert_eq!(t.to_string(), "frozen<list<int>>");
        let plain = ColumnType::from_cql("list<int>").unwrap();
        assert!(!plain.is_frozen());
        assert_ne!(plain, t);
        // Only the type inside `frozen<...>` is marked; a nested collection
        // prints frozen whatever its flag, as CQL requires.
        let nested = ColumnType::from_cql("frozen<map<int, list<int>>>").unwrap();
        let ColumnType::Collection {
            frozen: true,
            typ: CollectionType::Map(_, v),
        } = &nested
        else {
            panic!("{nested:?}");
        };
        assert!(!v.is_frozen());
        assert_eq!(nested.to_string(), "frozen<map<int, frozen<list<int>>>>");
        // `frozen<>` around a simple type changes nothing.
        assert_eq!(
            ColumnType::from_cql("frozen<int>"),
            Ok(ColumnType::Native(NativeType::Int))
        );
    }
}
