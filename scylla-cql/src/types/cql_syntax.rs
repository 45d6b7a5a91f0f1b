//! Column types in CQL syntax, as written in DDL: `int`, `list<int>`,
//! `map<text, frozen<list<int>>>`, `vector<float, 3>`, `tuple<int, text>`.
//! [`ColumnType::from_cql`] parses it (for the test cluster's schema) and
//! `Display` prints it (in error messages, and back into DDL).
//!
//! `frozen<...>` is accepted and dropped ([`ColumnType`] does not record
//! frozenness); when printing, collections and UDTs nested in another type
//! are wrapped in `frozen<...>`, as CQL requires. A custom type is written as
//! its quoted class name, `'org.example.MyType'`. A UDT prints as
//! `keyspace.name`; parsing a UDT name needs [`ColumnType::from_cql_with`].

use std::fmt;

use super::column_type::{ColumnType, MAX_TYPE_DEPTH};

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
            "ascii" => ColumnType::Ascii,
            "bigint" => ColumnType::BigInt,
            "blob" => ColumnType::Blob,
            "boolean" => ColumnType::Boolean,
            "counter" => ColumnType::Counter,
            "date" => ColumnType::Date,
            "decimal" => ColumnType::Decimal,
            "double" => ColumnType::Double,
            "duration" => ColumnType::Duration,
            "float" => ColumnType::Float,
            "inet" => ColumnType::Inet,
            "int" => ColumnType::Int,
            "smallint" => ColumnType::SmallInt,
            "text" | "varchar" => ColumnType::Text,
            "time" => ColumnType::Time,
            "timestamp" => ColumnType::Timestamp,
            "timeuuid" => ColumnType::Timeuuid,
            "tinyint" => ColumnType::TinyInt,
            "uuid" => ColumnType::Uuid,
            "varint" => ColumnType::Varint,
            "frozen" => {
                self.eat('<')?;
                let t = self.parse_type(depth + 1)?;
                self.eat('>')?;
                t
            }
            "list" | "set" => {
                self.eat('<')?;
                let e = sub(self)?;
                self.eat('>')?;
                if name == "list" {
                    ColumnType::List(e)
                } else {
                    ColumnType::Set(e)
                }
            }
            "map" => {
                self.eat('<')?;
                let k = sub(self)?;
                self.eat(',')?;
                let v = sub(self)?;
                self.eat('>')?;
                ColumnType::Map(k, v)
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
                    .parse::<u32>()
                    .map_err(|_| self.err("expected a vector dimension"))?;
                self.pos += digits;
                self.eat('>')?;
                ColumnType::Vector { element, dimension }
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
            ColumnType::List(_)
            | ColumnType::Set(_)
            | ColumnType::Map(..)
            | ColumnType::Udt { .. } => {
                write!(f, "frozen<{}>", self.0)
            }
            t => write!(f, "{t}"),
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let simple = match self {
            ColumnType::Custom(class) => return write!(f, "'{class}'"),
            ColumnType::Ascii => "ascii",
            ColumnType::BigInt => "bigint",
            ColumnType::Blob => "blob",
            ColumnType::Boolean => "boolean",
            ColumnType::Counter => "counter",
            ColumnType::Decimal => "decimal",
            ColumnType::Double => "double",
            ColumnType::Float => "float",
            ColumnType::Int => "int",
            ColumnType::Text => "text",
            ColumnType::Timestamp => "timestamp",
            ColumnType::Uuid => "uuid",
            ColumnType::Varint => "varint",
            ColumnType::Timeuuid => "timeuuid",
            ColumnType::Inet => "inet",
            ColumnType::Date => "date",
            ColumnType::Time => "time",
            ColumnType::SmallInt => "smallint",
            ColumnType::TinyInt => "tinyint",
            ColumnType::Duration => "duration",
            ColumnType::List(e) => return write!(f, "list<{}>", Nested(e)),
            ColumnType::Set(e) => return write!(f, "set<{}>", Nested(e)),
            ColumnType::Map(k, v) => return write!(f, "map<{}, {}>", Nested(k), Nested(v)),
            ColumnType::Udt { keyspace, name, .. } => return write!(f, "{keyspace}.{name}"),
            ColumnType::Tuple(elems) => {
                f.write_str("tuple<")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", Nested(e))?;
                }
                return f.write_str(">");
            }
            ColumnType::Vector { element, dimension } => {
                return write!(f, "vector<{}, {dimension}>", Nested(element))
            }
        };
        f.write_str(simple)
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
            ColumnType::Map(
                Box::new(ColumnType::Text),
                Box::new(ColumnType::List(Box::new(ColumnType::Int)))
            )
        );
        assert_eq!(t.to_string(), "map<text, frozen<list<int>>>");
        let v = ColumnType::from_cql(" vector < float , 3 > ").unwrap();
        assert_eq!(v.to_string(), "vector<float, 3>");
        assert_eq!(ColumnType::from_cql("VARCHAR"), Ok(ColumnType::Text));
        let tup = ColumnType::from_cql("tuple<int, text>").unwrap();
        assert_eq!(
            tup,
            ColumnType::Tuple(vec![ColumnType::Int, ColumnType::Text])
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
        let udt = ColumnType::Udt {
            keyspace: "ks".into(),
            name: "addr".into(),
            fields: vec![("street".into(), ColumnType::Text)],
        };
        let t =
            ColumnType::from_cql_with("list<frozen<addr>>", |n| (n == "addr").then(|| udt.clone()));
        assert_eq!(t, Ok(ColumnType::List(Box::new(udt))));
    }
}
