//! User-defined types in schema statements: resolving the type names a
//! column or field declares, and the type text `system_schema` shows.
//!
//! A UDT is resolved when a table (or another type) is created: the
//! column's [`ColumnType::UserDefinedType`] carries the keyspace, name and fields, which
//! is what result and prepared metadata send. As on Cassandra, a type can
//! only be used in the keyspace it is defined in.
//!
//! Simplifications: a UDT or collection nested in another type is frozen
//! whether or not it is written `frozen<...>` (Cassandra requires the word
//! and says so); a non-frozen UDT column is written and read whole (there is
//! no `SET col.field = ...`), and there is no ALTER TYPE.

use scylla_cql::types::{CollectionType, ColumnType};

use super::error::{invalid, CqlError};
use super::store::Keyspace;

/// Parses a type as written in `ks`, resolving UDT names (`name` or
/// `ks.name`) among `keyspace`'s types. Also returns whether the type was
/// declared `frozen<...>`.
pub(crate) fn resolve(
    text: &str,
    ks: &str,
    keyspace: Option<&Keyspace>,
) -> Result<(ColumnType, bool), CqlError> {
    let foreign = std::cell::RefCell::new(None);
    let resolved = ColumnType::from_cql_with(text, |name| {
        let (owner, bare) = match name.split_once('.') {
            Some((o, b)) => (o, b),
            None => (ks, name),
        };
        if owner != ks {
            *foreign.borrow_mut() = Some(owner.to_owned());
            return None;
        }
        let t = keyspace?.types.get(bare)?;
        Some(ColumnType::udt(ks, t.name.clone(), t.fields.clone()))
    });
    match (resolved, foreign.into_inner()) {
        (Ok(t), _) => Ok((t, text.trim_start().starts_with("frozen<"))),
        (Err(_), Some(other)) => invalid(format!(
            "Statement on keyspace {ks} cannot refer to a user type in keyspace {other}; \
             user types can only be used in the keyspace they are defined in"
        )),
        (Err(e), None) => invalid(format!("Unknown type or invalid type {text}: {}", e.reason)),
    }
}

/// Whether `typ` is or contains the UDT `ks.name`.
pub(crate) fn uses_udt(typ: &ColumnType, ks: &str, name: &str) -> bool {
    match typ {
        ColumnType::UserDefinedType { definition, .. } => {
            (definition.keyspace == ks && definition.name == name)
                || definition
                    .field_types
                    .iter()
                    .any(|(_, t)| uses_udt(t, ks, name))
        }
        ColumnType::Collection {
            typ: CollectionType::List(e) | CollectionType::Set(e),
            ..
        } => uses_udt(e, ks, name),
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => uses_udt(k, ks, name) || uses_udt(v, ks, name),
        ColumnType::Tuple(es) => es.iter().any(|t| uses_udt(t, ks, name)),
        ColumnType::Vector { typ: element, .. } => uses_udt(element, ks, name),
        _ => false,
    }
}

/// The type as `system_schema.columns` and `system_schema.types` show it:
/// UDTs by their bare name, collections and UDTs nested in another type
/// frozen, and the whole type frozen if it was declared so (or is a tuple).
pub(crate) fn schema_text(typ: &ColumnType, frozen: bool) -> String {
    let inner = text(typ);
    if (frozen && is_multi_cell_capable(typ)) || matches!(typ, ColumnType::Tuple(_)) {
        format!("frozen<{inner}>")
    } else {
        inner
    }
}

fn is_multi_cell_capable(typ: &ColumnType) -> bool {
    matches!(
        typ,
        ColumnType::Collection { .. } | ColumnType::UserDefinedType { .. }
    )
}

fn nested(typ: &ColumnType) -> String {
    schema_text(typ, true)
}

fn text(typ: &ColumnType) -> String {
    match typ {
        ColumnType::UserDefinedType { definition, .. } => definition.name.clone(),
        ColumnType::Collection {
            typ: CollectionType::List(e),
            ..
        } => format!("list<{}>", nested(e)),
        ColumnType::Collection {
            typ: CollectionType::Set(e),
            ..
        } => format!("set<{}>", nested(e)),
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => format!("map<{}, {}>", nested(k), nested(v)),
        ColumnType::Tuple(es) => {
            let es: Vec<String> = es.iter().map(nested).collect();
            format!("tuple<{}>", es.join(", "))
        }
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } => {
            format!("vector<{}, {dimension}>", nested(element))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::store::UserType;
    use super::*;
    use scylla_cql::types::NativeType;

    fn keyspace() -> Keyspace {
        let mut types = BTreeMap::new();
        types.insert(
            "address".to_owned(),
            UserType {
                name: "address".into(),
                fields: vec![("street".into(), ColumnType::Native(NativeType::Text))],
            },
        );
        Keyspace {
            name: "ks".into(),
            replication: BTreeMap::new(),
            durable_writes: true,
            tablets: None,
            strongly_consistent: false,
            tables: BTreeMap::new(),
            types,
        }
    }

    #[test]
    fn udt_names_resolve_in_their_keyspace_only() {
        let k = keyspace();
        let (t, frozen) = resolve("frozen<address>", "ks", Some(&k)).unwrap();
        assert!(frozen);
        assert!(
            matches!(&t, ColumnType::UserDefinedType { frozen: true, definition }
            if definition.keyspace == "ks" && definition.name == "address"
                && definition.field_types.len() == 1)
        );
        let (t2, frozen) = resolve("ks.address", "ks", Some(&k)).unwrap();
        assert!(!frozen);
        assert_eq!(t, t2.into_frozen());
        let (l, _) = resolve("list<frozen<address>>", "ks", Some(&k)).unwrap();
        assert!(uses_udt(&l, "ks", "address"));
        assert!(!uses_udt(&l, "ks", "other"));
        let e = resolve("other.address", "ks", Some(&k)).unwrap_err();
        assert!(
            format!("{e:?}").contains("keyspace they are defined in"),
            "{e:?}"
        );
        assert!(resolve("nosuch", "ks", Some(&k)).is_err());
        assert!(resolve("address", "ks", None).is_err());
    }

    #[test]
    fn schema_text_is_what_cassandra_shows() {
        let k = keyspace();
        for (written, shown) in [
            ("frozen<address>", "frozen<address>"),
            ("address", "address"),
            ("list<frozen<address>>", "list<frozen<address>>"),
            ("map<text, frozen<address>>", "map<text, frozen<address>>"),
            ("frozen<list<int>>", "frozen<list<int>>"),
            ("set<text>", "set<text>"),
            ("vector<float, 3>", "vector<float, 3>"),
            ("int", "int"),
        ] {
            let (t, frozen) = resolve(written, "ks", Some(&k)).unwrap();
            assert_eq!(schema_text(&t, frozen), shown, "{written}");
        }
    }
}
