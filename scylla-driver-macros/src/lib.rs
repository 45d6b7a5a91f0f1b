//! Derive macros for `scylla-driver`: [`DeserializeRow`], [`SerializeRow`],
//! [`DeserializeValue`] and [`SerializeValue`].
//!
//! Use them through `scylla_driver` (`use scylla_driver::DeserializeRow;`),
//! which re-exports each macro next to the trait of the same name. The
//! generated code names the traits through `::scylla_driver::_macro_internal`,
//! or under the name the deriving crate's `Cargo.toml` gives the driver
//! (`::scylla::_macro_internal` after `scylla = { package = "scylla-driver",
//! .. }`); a crate that depends on `scylla-driver-cql` only writes
//! `#[scylla(crate = ::scylla_driver_cql)]`.
//!
//! Attributes (all under `#[scylla(...)]`):
//!
//! | where | attribute | meaning |
//! | --- | --- | --- |
//! | struct | `crate = path` | the crate that provides `_macro_internal` (default: the driver, by the name `Cargo.toml` gives it) |
//! | struct | `flavor = "match_by_name"` | (default) columns / bind markers / UDT fields matched by name, in any order |
//! | struct | `flavor = "enforce_order"` | rows only: columns / bind markers in field order, names checked |
//! | struct | `skip_name_checks` | with `enforce_order`: names not checked, position only |
//! | struct | `forbid_excess_udt_fields` | UDTs: a UDT field the struct lacks is an error (by default it is written as null and ignored when read) |
//! | field | `rename = "name"` | the column / marker / UDT field name, if not the field's |
//! | field | `skip` | ignored; deserialization fills it with `Default::default()` |
//! | field | `allow_missing` | UDTs: a UDT without this field is no error: the field is not written, and reads as `Default::default()` |
//! | field | `default_when_null` | deserialization: a null (or a UDT value written before the field existed) reads as `Default::default()`; serialization ignores it |
//! | enum | `crate = path` | as for a struct |
//! | enum | `repr = "text"` | (default) each variant is stored as its name, in a `text` or `ascii` column |
//! | enum | `repr = "int"` | each variant is stored as its discriminant (every variant needs an explicit one, `Low = 1`), in an `int` column |
//! | enum | `rename_all = "..."` | text only: the stored names follow a case convention: `"lowercase"`, `"UPPERCASE"`, `"snake_case"`, `"SCREAMING_SNAKE_CASE"`, `"kebab-case"`, `"SCREAMING-KEBAB-CASE"`, `"camelCase"` or `"PascalCase"` |
//! | variant | `rename = "name"` | text only: the stored name, if not the variant's (wins over `rename_all`) |
//!
//! `SerializeValue` and `DeserializeValue` also derive for enums whose
//! variants have no fields: reading a name or number that no variant has is
//! a `DeserializationErrorKind::UnknownEnumValue` error naming the enum and
//! the value, never a panic.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::spanned::Spanned;
use syn::{parse_macro_input, Data, DeriveInput, Fields, GenericParam, Lifetime, LitStr, Path};

mod derive;
mod enums;

/// The path generated code names the driver by, when no `#[scylla(crate =
/// ..)]` is given: the name the deriving crate's `Cargo.toml` gives
/// `scylla-driver` (`::scylla` after `scylla = { package = "scylla-driver",
/// .. }`), `::scylla_driver` when it is not a dependency by any name (or is
/// the crate itself: its tests and examples link it as `scylla_driver`).
fn default_crate_path() -> Path {
    use proc_macro_crate::{crate_name, FoundCrate};
    match crate_name("scylla-driver") {
        Ok(FoundCrate::Name(name)) => {
            let ident = syn::Ident::new(&name, Span::call_site());
            syn::parse_quote!(::#ident)
        }
        Ok(FoundCrate::Itself) | Err(_) => syn::parse_quote!(::scylla_driver),
    }
}

/// Derives `DeserializeRow`: builds the struct from one row of a result.
///
/// By default columns are matched to fields by name, in any order. A field
/// without a column, or a column without a field, fails the type check
/// (once per result, before any row is read) with an error naming the
/// column. With `#[scylla(flavor = "enforce_order")]` the columns must come
/// in field order (names are still checked). Fields may borrow from the
/// response frame (`&'a str`, `&'a [u8]`): give the struct one lifetime.
///
/// ```ignore
/// use scylla_driver::DeserializeRow;
///
/// #[derive(DeserializeRow)]
/// struct Person<'a> {
///     id: i32,
///     #[scylla(rename = "name")]
///     full_name: &'a str,
///     age: Option<i32>,
///     #[scylla(skip)]
///     cached: u64, // Default::default()
/// }
/// // let people = result.rows::<Person>()?;
/// ```
#[proc_macro_derive(DeserializeRow, attributes(scylla))]
pub fn derive_deserialize_row(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, derive::deserialize_row)
}

/// Derives `SerializeRow`: binds the struct's fields to a statement's bind
/// markers.
///
/// By default each bind marker takes the field of its name (for `?`
/// markers the server names them after their column; `:name` markers use
/// the name). A marker without a field, or a field without a marker, is a
/// serialization error naming it. With `#[scylla(flavor = "enforce_order")]`
/// fields are bound in order and their names must match the markers'.
///
/// ```ignore
/// use scylla_driver::SerializeRow;
///
/// #[derive(SerializeRow)]
/// struct NewPerson<'a> { id: i32, name: &'a str, age: i32 }
/// // session.execute_unpaged(&insert, NewPerson { id: 1, name: "Ada", age: 36 }).await?;
/// ```
#[proc_macro_derive(SerializeRow, attributes(scylla))]
pub fn derive_serialize_row(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, derive::serialize_row)
}

/// Derives `SerializeValue` for a struct mapped to a user-defined type, or
/// for a fieldless enum stored as `text` or `int`.
///
/// A struct's fields are written in the order the UDT declares them (from
/// the statement's type metadata), matched by name. A UDT field the struct
/// lacks is written as null (so adding a field to the type does not break
/// writers); a struct field the UDT lacks is an error naming it.
///
/// An enum's variant is written as its name (`text` or `ascii` columns; a
/// non-ASCII name for an `ascii` column is an error), or with
/// `#[scylla(repr = "int")]` as its explicit discriminant (`int` columns).
///
/// ```ignore
/// use scylla_driver::{DeserializeValue, SerializeValue};
///
/// #[derive(SerializeValue)]
/// struct Address { street: String, number: i32 }
///
/// #[derive(SerializeValue, DeserializeValue)]
/// #[scylla(rename_all = "snake_case")]
/// enum Status {
///     InProgress,              // "in_progress"
///     #[scylla(rename = "ok")]
///     Done,                    // "ok"
/// }
///
/// #[derive(SerializeValue, DeserializeValue)]
/// #[scylla(repr = "int")]
/// enum Priority { Low = 0, High = 10 }
/// ```
#[proc_macro_derive(SerializeValue, attributes(scylla))]
pub fn derive_serialize_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_value(&input, derive::serialize_value, enums::serialize_value)
}

/// Derives `DeserializeValue` for a struct mapped to a user-defined type,
/// or for a fieldless enum stored as `text` or `int` (the attributes are
/// those of the `SerializeValue` derive, in the crate's table).
///
/// An enum accepts `text` and `ascii` columns (or `int` ones with
/// `#[scylla(repr = "int")]`); a stored name or number that no variant has
/// fails with `DeserializationErrorKind::UnknownEnumValue`, naming the enum
/// and the value (a name cut to 64 characters). Names match exactly.
///
/// A struct's fields are matched by name. A struct field the UDT lacks
/// fails the type check; UDT fields the struct lacks are ignored (so adding
/// a field to the type does not break readers). A value shorter than its
/// type (written before a field was added) reads the missing fields as
/// null, which an `Option` field accepts.
///
/// ```ignore
/// use scylla_driver::DeserializeValue;
///
/// #[derive(DeserializeValue)]
/// struct Address<'a> { street: &'a str, number: Option<i32> }
///
/// #[derive(DeserializeValue)]
/// enum Colour { Red, Green, Blue } // from "Red", "Green", "Blue"
/// ```
#[proc_macro_derive(DeserializeValue, attributes(scylla))]
pub fn derive_deserialize_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_value(&input, derive::deserialize_value, enums::deserialize_value)
}

fn expand(input: &DeriveInput, f: fn(&Struct<'_>) -> syn::Result<TokenStream2>) -> TokenStream {
    Struct::parse(input)
        .and_then(|s| f(&s))
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A value derive: structs map to UDTs, fieldless enums to `text` or `int`.
fn expand_value(
    input: &DeriveInput,
    for_struct: fn(&Struct<'_>) -> syn::Result<TokenStream2>,
    for_enum: fn(&enums::Enum<'_>) -> syn::Result<TokenStream2>,
) -> TokenStream {
    let out = match &input.data {
        Data::Enum(_) => enums::Enum::parse(input).and_then(|e| for_enum(&e)),
        _ => Struct::parse(input).and_then(|s| for_struct(&s)),
    };
    out.unwrap_or_else(syn::Error::into_compile_error).into()
}

/// How rows / values are matched to fields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    MatchByName,
    EnforceOrder,
}

/// One field of the struct, with its attributes.
struct Field<'a> {
    ident: &'a syn::Ident,
    ty: &'a syn::Type,
    /// The CQL name (column, marker or UDT field).
    name: String,
    skip: bool,
    /// `allow_missing`: a UDT without this field is no error (the field is
    /// not written, and reads as `Default::default()`); value derives only.
    allow_missing: Option<Span>,
    /// `default_when_null`: a null reads as `Default::default()`.
    default_when_null: bool,
}

/// The parsed struct.
struct Struct<'a> {
    input: &'a DeriveInput,
    krate: Path,
    flavor: Flavor,
    flavor_span: Option<Span>,
    /// `skip_name_checks` (with `flavor = "enforce_order"`): columns or
    /// markers are matched by position only.
    skip_name_checks: Option<Span>,
    /// `forbid_excess_udt_fields`: a UDT field the struct lacks is an error
    /// (value derives only).
    forbid_excess_udt_fields: Option<Span>,
    fields: Vec<Field<'a>>,
}

impl<'a> Struct<'a> {
    fn parse(input: &'a DeriveInput) -> syn::Result<Self> {
        let data = match &input.data {
            Data::Struct(s) => s,
            Data::Enum(e) => {
                return Err(syn::Error::new_spanned(
                    e.enum_token,
                    "DeserializeRow and SerializeRow support only structs with named fields; \
                     a fieldless enum derives SerializeValue and DeserializeValue",
                ))
            }
            Data::Union(u) => {
                return Err(syn::Error::new_spanned(
                    u.union_token,
                    "scylla derives support only structs with named fields, not unions",
                ))
            }
        };
        let named = match &data.fields {
            Fields::Named(n) => n,
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "scylla derives need named fields (the names match columns, bind markers \
                     or UDT fields); tuple and unit structs are not supported",
                ))
            }
        };
        let mut krate: Path = default_crate_path();
        let mut flavor = Flavor::MatchByName;
        let mut flavor_span = None;
        let mut skip_name_checks = None;
        let mut forbid_excess_udt_fields = None;
        for attr in input.attrs.iter().filter(|a| a.path().is_ident("scylla")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("crate") {
                    krate = meta.value()?.parse()?;
                    Ok(())
                } else if meta.path.is_ident("flavor") {
                    let lit: LitStr = meta.value()?.parse()?;
                    flavor =
                        match lit.value().as_str() {
                            "match_by_name" => Flavor::MatchByName,
                            "enforce_order" => Flavor::EnforceOrder,
                            _ => return Err(syn::Error::new_spanned(
                                &lit,
                                "unknown flavor: expected \"match_by_name\" or \"enforce_order\"",
                            )),
                        };
                    flavor_span = Some(lit.span());
                    Ok(())
                } else if meta.path.is_ident("skip_name_checks") {
                    skip_name_checks = Some(meta.path.span());
                    Ok(())
                } else if meta.path.is_ident("forbid_excess_udt_fields") {
                    forbid_excess_udt_fields = Some(meta.path.span());
                    Ok(())
                } else {
                    Err(meta.error(
                        "unknown scylla attribute on a struct: expected `crate = path`, \
                         `flavor = \"...\"`, `skip_name_checks` or `forbid_excess_udt_fields`",
                    ))
                }
            })?;
        }
        let mut fields = Vec::new();
        for f in &named.named {
            // Proven by `Fields::Named`: every field has an ident.
            let Some(ident) = f.ident.as_ref() else {
                return Err(syn::Error::new_spanned(f, "a named field has no name"));
            };
            let mut name = ident.to_string();
            if let Some(raw) = name.strip_prefix("r#") {
                name = raw.to_owned();
            }
            let mut skip = false;
            let mut allow_missing = None;
            let mut default_when_null = false;
            for attr in f.attrs.iter().filter(|a| a.path().is_ident("scylla")) {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("rename") {
                        let lit: LitStr = meta.value()?.parse()?;
                        name = lit.value();
                        Ok(())
                    } else if meta.path.is_ident("skip") {
                        skip = true;
                        Ok(())
                    } else if meta.path.is_ident("allow_missing") {
                        allow_missing = Some(meta.path.span());
                        Ok(())
                    } else if meta.path.is_ident("default_when_null") {
                        default_when_null = true;
                        Ok(())
                    } else {
                        Err(meta.error(
                            "unknown scylla attribute on a field: expected `rename = \"...\"`, \
                             `skip`, `allow_missing` or `default_when_null`",
                        ))
                    }
                })?;
            }
            fields.push(Field {
                ident,
                ty: &f.ty,
                name,
                skip,
                allow_missing,
                default_when_null,
            });
        }
        // Two fields of one name could never both be matched.
        for (i, f) in fields.iter().enumerate() {
            if !f.skip && fields[..i].iter().any(|g| !g.skip && g.name == f.name) {
                return Err(syn::Error::new_spanned(
                    f.ident,
                    format!("two fields map to the name `{}`", f.name),
                ));
            }
        }
        if let (Some(span), Flavor::MatchByName) = (skip_name_checks, flavor) {
            return Err(syn::Error::new(
                span,
                "`skip_name_checks` needs `flavor = \"enforce_order\"` (fields are then matched \
                 by position)",
            ));
        }
        Ok(Struct {
            input,
            krate,
            flavor,
            flavor_span,
            skip_name_checks,
            forbid_excess_udt_fields,
            fields,
        })
    }

    /// Fails when a UDT-only attribute (`allow_missing`,
    /// `forbid_excess_udt_fields`) was given to a row derive.
    fn no_udt_attributes(&self, derive: &str) -> syn::Result<()> {
        let field = self.fields.iter().find_map(|f| f.allow_missing);
        for (span, attr) in [
            (field, "allow_missing"),
            (self.forbid_excess_udt_fields, "forbid_excess_udt_fields"),
        ] {
            if let Some(span) = span {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "`{attr}` is for UDTs (SerializeValue, DeserializeValue), not {derive}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The path of the generated code's imports.
    fn internal(&self) -> TokenStream2 {
        let k = &self.krate;
        quote!(#k::_macro_internal)
    }

    /// Fails when `flavor` was given to a derive that does not support it.
    fn no_flavor(&self, derive: &str) -> syn::Result<()> {
        match (self.flavor, self.flavor_span) {
            (Flavor::EnforceOrder, Some(span)) => Err(syn::Error::new(
                span,
                format!("`flavor = \"enforce_order\"` is not supported by {derive}: UDT fields are matched by name"),
            )),
            _ => Ok(()),
        }
    }

    /// The non-skipped fields.
    fn bound(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields.iter().filter(|f| !f.skip)
    }

    /// The frame lifetime of a deserializing impl and the generics of the
    /// impl: the struct's own lifetime when it has one (its borrowed fields
    /// live as long as the frame), a fresh `'__frame` otherwise.
    fn frame_generics(&self) -> syn::Result<(Lifetime, syn::Generics)> {
        let lifetimes: Vec<_> = self.input.generics.lifetimes().collect();
        match lifetimes.as_slice() {
            [] => {
                let lt = Lifetime::new("'__frame", Span::call_site());
                let mut g = self.input.generics.clone();
                g.params.insert(
                    0,
                    GenericParam::Lifetime(syn::LifetimeParam::new(lt.clone())),
                );
                Ok((lt, g))
            }
            [one] => Ok((one.lifetime.clone(), self.input.generics.clone())),
            [_, second, ..] => Err(syn::Error::new_spanned(
                second,
                "a deserialized struct may have at most one lifetime (the frame it borrows from)",
            )),
        }
    }
}
