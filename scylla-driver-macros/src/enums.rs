//! `SerializeValue` and `DeserializeValue` for fieldless enums: each variant
//! is stored as a name (CQL `text` / `ascii`, the default) or as its
//! explicit discriminant (CQL `int`, with `#[scylla(repr = "int")]`).

use proc_macro2::{Literal, Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{Data, DeriveInput, Expr, Fields, Lit, LitStr, Path, UnOp};

/// How the variants are stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repr {
    /// The variant's name, as `text` (or `ascii`).
    Text,
    /// The variant's explicit discriminant, as `int`.
    Int,
}

/// A `rename_all` case convention, applied to the variants' identifiers
/// (taken as `PascalCase` words).
#[derive(Clone, Copy)]
enum Case {
    Lower,
    Upper,
    Snake,
    ScreamingSnake,
    Kebab,
    ScreamingKebab,
    Camel,
    Pascal,
}

const CASES: &str = "\"lowercase\", \"UPPERCASE\", \"snake_case\", \"SCREAMING_SNAKE_CASE\", \
                     \"kebab-case\", \"SCREAMING-KEBAB-CASE\", \"camelCase\" or \"PascalCase\"";

impl Case {
    fn parse(lit: &LitStr) -> syn::Result<Self> {
        Ok(match lit.value().as_str() {
            "lowercase" => Case::Lower,
            "UPPERCASE" => Case::Upper,
            "snake_case" => Case::Snake,
            "SCREAMING_SNAKE_CASE" => Case::ScreamingSnake,
            "kebab-case" => Case::Kebab,
            "SCREAMING-KEBAB-CASE" => Case::ScreamingKebab,
            "camelCase" => Case::Camel,
            "PascalCase" => Case::Pascal,
            _ => {
                return Err(syn::Error::new_spanned(
                    lit,
                    format!("unknown rename_all convention: expected {CASES}"),
                ))
            }
        })
    }

    fn apply(self, ident: &str) -> String {
        let words = words(ident);
        let capitalised = || {
            words
                .iter()
                .map(|w| {
                    let mut cs = w.chars();
                    cs.next()
                        .map(|c| c.to_uppercase().chain(cs.flat_map(char::to_lowercase)))
                        .into_iter()
                        .flatten()
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        };
        match self {
            Case::Lower => words.concat().to_lowercase(),
            Case::Upper => words.concat().to_uppercase(),
            Case::Snake => words.join("_").to_lowercase(),
            Case::ScreamingSnake => words.join("_").to_uppercase(),
            Case::Kebab => words.join("-").to_lowercase(),
            Case::ScreamingKebab => words.join("-").to_uppercase(),
            Case::Pascal => capitalised().concat(),
            Case::Camel => {
                let mut ws = capitalised();
                if let Some(first) = ws.first_mut() {
                    *first = first.to_lowercase();
                }
                ws.concat()
            }
        }
    }
}

/// Splits a `PascalCase` (or `snake_case`) identifier into words: a word
/// starts at an underscore, at an upper-case letter after a lower-case one
/// or a digit, and at the last upper-case letter of a run followed by a
/// lower-case one (`HTTPServer` is `HTTP`, `Server`).
fn words(ident: &str) -> Vec<String> {
    let chars: Vec<char> = ident.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && match prev {
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(char::is_lowercase),
                _ => false,
            };
        if boundary && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// One variant: its identifier and what stores it.
struct Variant<'a> {
    ident: &'a syn::Ident,
    /// The stored name (text representation).
    name: String,
    /// The stored number (int representation).
    number: i32,
}

/// The parsed enum.
pub(crate) struct Enum<'a> {
    input: &'a DeriveInput,
    krate: Path,
    repr: Repr,
    variants: Vec<Variant<'a>>,
}

/// The value of an integer literal discriminant (`3`, `-3`, `0x10`), or an
/// error pointing at anything else.
fn discriminant(expr: &Expr) -> syn::Result<i32> {
    let (negative, inner) = match expr {
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => (true, &*u.expr),
        other => (false, other),
    };
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(int), ..
    }) = inner
    else {
        return Err(syn::Error::new_spanned(
            expr,
            "with `repr = \"int\"` a discriminant must be an integer literal (it is the stored \
             number)",
        ));
    };
    let magnitude: i64 = int.base10_parse()?;
    let value = if negative { -magnitude } else { magnitude };
    i32::try_from(value).map_err(|_| {
        syn::Error::new_spanned(
            expr,
            "the discriminant does not fit a CQL int (-2147483648..=2147483647)",
        )
    })
}

impl<'a> Enum<'a> {
    pub(crate) fn parse(input: &'a DeriveInput) -> syn::Result<Self> {
        let Data::Enum(data) = &input.data else {
            return Err(syn::Error::new_spanned(&input.ident, "expected an enum"));
        };
        if let Some(param) = input.generics.params.first() {
            return Err(syn::Error::new_spanned(
                param,
                "a derived fieldless enum takes no generic parameters",
            ));
        }
        let mut krate: Path = crate::default_crate_path();
        let mut repr = Repr::Text;
        let mut rename_all: Option<(Case, Span)> = None;
        for attr in input.attrs.iter().filter(|a| a.path().is_ident("scylla")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("crate") {
                    krate = meta.value()?.parse()?;
                    Ok(())
                } else if meta.path.is_ident("repr") {
                    let lit: LitStr = meta.value()?.parse()?;
                    repr = match lit.value().as_str() {
                        "text" => Repr::Text,
                        "int" => Repr::Int,
                        _ => {
                            return Err(syn::Error::new_spanned(
                                &lit,
                                "unknown repr: expected \"text\" (variant names) or \"int\" \
                                 (explicit discriminants)",
                            ))
                        }
                    };
                    Ok(())
                } else if meta.path.is_ident("rename_all") {
                    let lit: LitStr = meta.value()?.parse()?;
                    rename_all = Some((Case::parse(&lit)?, lit.span()));
                    Ok(())
                } else {
                    Err(meta.error(
                        "unknown scylla attribute on an enum: expected `crate = path`, \
                         `repr = \"text\"`, `repr = \"int\"` or `rename_all = \"...\"`",
                    ))
                }
            })?;
        }
        if let (Repr::Int, Some((_, span))) = (repr, rename_all) {
            return Err(syn::Error::new(
                span,
                "`rename_all` renames variants stored as text; with `repr = \"int\"` the \
                 discriminants are stored",
            ));
        }
        if data.variants.is_empty() {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "an enum without variants has no value to store",
            ));
        }
        let mut variants: Vec<Variant<'a>> = Vec::new();
        for v in &data.variants {
            if !matches!(v.fields, Fields::Unit) {
                return Err(syn::Error::new_spanned(
                    &v.fields,
                    format!(
                        "scylla derives store only fieldless enums (as CQL text or int): the \
                         variant `{}` has fields",
                        v.ident
                    ),
                ));
            }
            let mut rename: Option<LitStr> = None;
            for attr in v.attrs.iter().filter(|a| a.path().is_ident("scylla")) {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("rename") {
                        rename = Some(meta.value()?.parse()?);
                        Ok(())
                    } else {
                        Err(meta.error(
                            "unknown scylla attribute on an enum variant: expected \
                             `rename = \"...\"`",
                        ))
                    }
                })?;
            }
            let mut ident_name = v.ident.to_string();
            if let Some(raw) = ident_name.strip_prefix("r#") {
                ident_name = raw.to_owned();
            }
            let (name, number) = match repr {
                Repr::Text => {
                    let name = match &rename {
                        Some(lit) if lit.value().is_empty() => {
                            return Err(syn::Error::new_spanned(
                                lit,
                                "a variant's stored name must not be empty",
                            ))
                        }
                        Some(lit) => lit.value(),
                        None => match rename_all {
                            Some((case, _)) => case.apply(&ident_name),
                            None => ident_name,
                        },
                    };
                    (name, 0)
                }
                Repr::Int => {
                    if let Some(lit) = &rename {
                        return Err(syn::Error::new_spanned(
                            lit,
                            "`rename` names a variant stored as text; with `repr = \"int\"` \
                             the discriminant is stored",
                        ));
                    }
                    let Some((_, expr)) = &v.discriminant else {
                        return Err(syn::Error::new_spanned(
                            &v.ident,
                            "with `repr = \"int\"` every variant needs an explicit \
                             discriminant (`Variant = 1`): the stored numbers must not change \
                             when variants are added or reordered",
                        ));
                    };
                    (String::new(), discriminant(expr)?)
                }
            };
            if repr == Repr::Text && variants.iter().any(|w| w.name == name) {
                return Err(syn::Error::new_spanned(
                    &v.ident,
                    format!("two variants are stored as `{name}`"),
                ));
            }
            variants.push(Variant {
                ident: &v.ident,
                name,
                number,
            });
        }
        Ok(Enum {
            input,
            krate,
            repr,
            variants,
        })
    }
}

pub(crate) fn serialize_value(e: &Enum<'_>) -> syn::Result<TokenStream2> {
    let k = &e.krate;
    let m = quote!(#k::_macro_internal);
    let name = &e.input.ident;
    let idents: Vec<_> = e.variants.iter().map(|v| v.ident).collect();
    let body = match e.repr {
        Repr::Text => {
            let names: Vec<_> = e.variants.iter().map(|v| v.name.as_str()).collect();
            quote! {
                let name: &'static str = match self {
                    #(Self::#idents => #names,)*
                };
                match typ {
                    #m::ColumnType::Native(#m::NativeType::Text) => {}
                    #m::ColumnType::Native(#m::NativeType::Ascii) if name.is_ascii() => {}
                    #m::ColumnType::Native(#m::NativeType::Ascii) => {
                        return ::std::result::Result::Err(#m::SerializationError::of::<Self>(
                            typ,
                            #m::SerializationErrorKind::NotAscii,
                        ));
                    }
                    _ => {
                        return ::std::result::Result::Err(#m::SerializationError::of::<Self>(
                            typ,
                            #m::SerializationErrorKind::Mismatch,
                        ));
                    }
                }
                #m::SerializeValue::serialize(name, typ, writer)
            }
        }
        Repr::Int => {
            let numbers: Vec<_> = e
                .variants
                .iter()
                .map(|v| Literal::i32_suffixed(v.number))
                .collect();
            quote! {
                let number: i32 = match self {
                    #(Self::#idents => #numbers,)*
                };
                if !::std::matches!(typ, #m::ColumnType::Native(#m::NativeType::Int)) {
                    return ::std::result::Result::Err(#m::SerializationError::of::<Self>(
                        typ,
                        #m::SerializationErrorKind::Mismatch,
                    ));
                }
                #m::SerializeValue::serialize(&number, typ, writer)
            }
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl #m::SerializeValue for #name {
            fn serialize<'__b>(
                &self,
                typ: &#m::ColumnType<'_>,
                writer: #m::CellWriter<'__b>,
            ) -> ::std::result::Result<#m::WrittenCellProof<'__b>, #m::SerializationError> {
                #body
            }
        }
    })
}

pub(crate) fn deserialize_value(e: &Enum<'_>) -> syn::Result<TokenStream2> {
    let k = &e.krate;
    let m = quote!(#k::_macro_internal);
    let name = &e.input.ident;
    let enum_name = name.to_string();
    let idents: Vec<_> = e.variants.iter().map(|v| v.ident).collect();
    let (accepted, read, arms, unknown) = match e.repr {
        Repr::Text => {
            let names: Vec<_> = e.variants.iter().map(|v| v.name.as_str()).collect();
            (
                quote!(#m::ColumnType::Native(#m::NativeType::Text) | #m::ColumnType::Native(#m::NativeType::Ascii)),
                quote!(<&'__frame str as #m::DeserializeValue<'__frame, '__metadata>>::deserialize(typ, v)),
                quote!(#(#names => ::std::result::Result::Ok(Self::#idents),)*),
                // A name is cut: the error goes to logs, the value may be long.
                quote!(other.chars().take(64).collect::<::std::string::String>()),
            )
        }
        Repr::Int => {
            let numbers: Vec<_> = e
                .variants
                .iter()
                .map(|v| Literal::i32_suffixed(v.number))
                .collect();
            (
                quote!(#m::ColumnType::Native(#m::NativeType::Int)),
                quote!(<i32 as #m::DeserializeValue<'__frame, '__metadata>>::deserialize(typ, v)),
                quote!(#(#numbers => ::std::result::Result::Ok(Self::#idents),)*),
                quote!(::std::string::ToString::to_string(&other)),
            )
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl<'__frame, '__metadata> #m::DeserializeValue<'__frame, '__metadata> for #name {
            fn type_check(typ: &#m::ColumnType<'_>) -> ::std::result::Result<(), #m::TypeCheckError> {
                if ::std::matches!(typ, #accepted) {
                    ::std::result::Result::Ok(())
                } else {
                    ::std::result::Result::Err(#m::TypeCheckError::of::<Self>(
                        typ,
                        #m::TypeCheckErrorKind::Mismatch,
                    ))
                }
            }

            fn deserialize(
                typ: &'__metadata #m::ColumnType<'__metadata>,
                v: ::std::option::Option<&'__frame [u8]>,
            ) -> ::std::result::Result<Self, #m::DeserializationError> {
                // The stored name or number; its errors (null, bad UTF-8,
                // wrong length) are reported against this enum.
                let stored = #read.map_err(|e| {
                    #m::DeserializationError::of::<Self>(typ, ::std::clone::Clone::clone(e.kind()))
                })?;
                match stored {
                    #arms
                    other => ::std::result::Result::Err(#m::DeserializationError::of::<Self>(
                        typ,
                        #m::DeserializationErrorKind::UnknownEnumValue {
                            enum_name: #enum_name,
                            value: #unknown,
                        },
                    )),
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_pascal_case_and_acronyms() {
        assert_eq!(words("InProgress"), ["In", "Progress"]);
        assert_eq!(words("HTTPServer"), ["HTTP", "Server"]);
        assert_eq!(words("Ipv4Addr"), ["Ipv4", "Addr"]);
        assert_eq!(words("A"), ["A"]);
        assert_eq!(words("already_snake"), ["already", "snake"]);
    }

    #[test]
    fn cases() {
        let all = [
            (Case::Lower, "inprogress"),
            (Case::Upper, "INPROGRESS"),
            (Case::Snake, "in_progress"),
            (Case::ScreamingSnake, "IN_PROGRESS"),
            (Case::Kebab, "in-progress"),
            (Case::ScreamingKebab, "IN-PROGRESS"),
            (Case::Camel, "inProgress"),
            (Case::Pascal, "InProgress"),
        ];
        for (case, expected) in all {
            assert_eq!(case.apply("InProgress"), expected);
        }
        assert_eq!(Case::Snake.apply("HTTPServer"), "http_server");
        assert_eq!(Case::Camel.apply("HTTPServer"), "httpServer");
    }
}
