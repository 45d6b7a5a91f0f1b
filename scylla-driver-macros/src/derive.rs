//! The four derives: each turns a parsed [`Struct`] into one trait impl.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;

use crate::{Flavor, Struct};

/// `where` clause of `generics` plus `extra` predicates.
fn where_clause(generics: &syn::Generics, extra: Vec<TokenStream2>) -> TokenStream2 {
    let existing = generics
        .where_clause
        .as_ref()
        .map(|w| w.predicates.iter().map(|p| quote!(#p,)).collect::<Vec<_>>())
        .unwrap_or_default();
    quote!(where #(#existing)* #(#extra,)*)
}

/// Field initialisers for skipped fields.
fn skipped_inits(s: &Struct<'_>) -> Vec<TokenStream2> {
    s.fields
        .iter()
        .filter(|f| f.skip)
        .map(|f| {
            let id = f.ident;
            quote!(#id: ::std::default::Default::default())
        })
        .collect()
}

/// What both deserializing derives start from: the frame lifetime, the
/// metadata lifetime `'__metadata` (the trait's second one; a UDT's field
/// types live in it, while a row's cells are read with the frame's lifetime
/// for both, see [`Meta`]), the impl header (generics with those lifetimes,
/// the type's own generics, a where clause bounding every field by
/// `DeserializeValue`),
/// and the non-skipped fields' idents, column names and types.
struct Deserializing<'s> {
    m: TokenStream2,
    lt: syn::Lifetime,
    meta: syn::Lifetime,
    impl_g: TokenStream2,
    ty_g: TokenStream2,
    wc: TokenStream2,
    name: &'s syn::Ident,
    idents: Vec<&'s syn::Ident>,
    names: Vec<&'s str>,
    tys: Vec<&'s syn::Type>,
    /// Per field: `default_when_null`.
    null_default: Vec<bool>,
    /// Per field: `allow_missing`.
    allow_missing: Vec<bool>,
    skipped: Vec<TokenStream2>,
}

/// Where a deserializing derive's metadata lifetime goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Meta {
    /// In the trait and in the fields' bounds (a UDT's field types).
    OfFields,
    /// In the trait only (a row: its cells are read with the frame's
    /// lifetime for both).
    OfTrait,
}

fn deserializing<'s>(s: &'s Struct<'_>, meta_of: Meta) -> syn::Result<Deserializing<'s>> {
    let m = s.internal();
    let (lt, mut generics) = s.frame_generics()?;
    let meta = syn::Lifetime::new("'__metadata", proc_macro2::Span::call_site());
    // After the frame lifetime, before any type parameter.
    generics.params.insert(
        1,
        syn::GenericParam::Lifetime(syn::LifetimeParam::new(meta.clone())),
    );
    let field_meta = match meta_of {
        Meta::OfFields => meta.clone(),
        Meta::OfTrait => lt.clone(),
    };
    let (impl_g, _, _) = generics.split_for_impl();
    let (_, ty_g, _) = s.input.generics.split_for_impl();
    let bounds = s
        .bound()
        .map(|f| {
            let ty = f.ty;
            quote!(#ty: #m::DeserializeValue<#lt, #field_meta>)
        })
        .collect();
    let wc = where_clause(&generics, bounds);
    Ok(Deserializing {
        impl_g: quote!(#impl_g),
        ty_g: quote!(#ty_g),
        wc,
        name: &s.input.ident,
        idents: s.bound().map(|f| f.ident).collect(),
        names: s.bound().map(|f| f.name.as_str()).collect(),
        tys: s.bound().map(|f| f.ty).collect(),
        null_default: s.bound().map(|f| f.default_when_null).collect(),
        allow_missing: s.bound().map(|f| f.allow_missing.is_some()).collect(),
        skipped: skipped_inits(s),
        m,
        lt,
        meta,
    })
}

pub(crate) fn deserialize_row(s: &Struct<'_>) -> syn::Result<TokenStream2> {
    s.no_udt_attributes("DeserializeRow")?;
    let Deserializing {
        m,
        lt,
        meta,
        impl_g,
        ty_g,
        wc,
        name,
        idents,
        names,
        tys,
        null_default,
        allow_missing: _,
        skipped,
    } = deserializing(s, Meta::OfTrait)?;
    let n = idents.len();
    // Each field's value from its cell `col` (`default_when_null`: a null
    // cell is the type's default).
    let gets: Vec<TokenStream2> = tys
        .iter()
        .zip(&null_default)
        .map(|(ty, &null_default)| {
            if null_default {
                quote! {
                    if col.value.is_none() {
                        ::std::default::Default::default()
                    } else {
                        col.get::<#ty>()?
                    }
                }
            } else {
                quote!(col.get::<#ty>()?)
            }
        })
        .collect();
    let check_names = s.skip_name_checks.is_none();

    let (type_check, deserialize) = match s.flavor {
        Flavor::MatchByName => (
            quote! {
                #(
                    match specs.iter().find(|s| s.name == #names) {
                        ::std::option::Option::Some(s) => {
                            <#tys as #m::DeserializeValue<#lt, #lt>>::type_check(&s.typ)
                                .map_err(|e| e.with_column(&s.name).with_rust_type::<Self>())?
                        }
                        ::std::option::Option::None => {
                            return ::std::result::Result::Err(#m::TypeCheckError::new(
                                #m::TypeCheckErrorKind::MissingColumn(::std::string::String::from(#names)),
                            ).with_rust_type::<Self>());
                        }
                    }
                )*
                for s in specs {
                    if ![#(#names),*].contains(&s.name.as_str()) {
                        return ::std::result::Result::Err(#m::TypeCheckError::new(
                            #m::TypeCheckErrorKind::UnexpectedColumn(s.name.clone()),
                        ).with_rust_type::<Self>());
                    }
                }
                ::std::result::Result::Ok(())
            },
            quote! {
                #(let mut #idents: ::std::option::Option<#tys> = ::std::option::Option::None;)*
                for col in row {
                    let col = col?;
                    match col.spec.name.as_str() {
                        #(#names => #idents = ::std::option::Option::Some(#gets),)*
                        other => {
                            return ::std::result::Result::Err(#m::DeserializationError::new(
                                #m::DeserializationErrorKind::TypeCheck(
                                    #m::TypeCheckErrorKind::UnexpectedColumn(other.to_owned()),
                                ),
                            ));
                        }
                    }
                }
                ::std::result::Result::Ok(#name {
                    #(#idents: #idents.ok_or_else(|| {
                        #m::DeserializationError::new(#m::DeserializationErrorKind::MissingColumns)
                            .with_column(#names)
                    })?,)*
                    #(#skipped,)*
                })
            },
        ),
        Flavor::EnforceOrder => {
            let idx = 0..n;
            (
                quote! {
                    if specs.len() != #n {
                        return ::std::result::Result::Err(#m::TypeCheckError::new(
                            #m::TypeCheckErrorKind::WrongArity { expected: #n, actual: specs.len() },
                        ).with_rust_type::<Self>());
                    }
                    #(
                        let s = &specs[#idx];
                        if #check_names && s.name != #names {
                            return ::std::result::Result::Err(#m::TypeCheckError::new(
                                #m::TypeCheckErrorKind::UnexpectedColumn(s.name.clone()),
                            ).with_column(#names).with_rust_type::<Self>());
                        }
                        <#tys as #m::DeserializeValue<#lt, #lt>>::type_check(&s.typ)
                            .map_err(|e| e.with_column(&s.name).with_rust_type::<Self>())?;
                    )*
                    ::std::result::Result::Ok(())
                },
                quote! {
                    ::std::result::Result::Ok(#name {
                        #(#idents: {
                            let col = row.next_column()?;
                            #gets
                        },)*
                        #(#skipped,)*
                    })
                },
            )
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl #impl_g #m::DeserializeRow<#lt, #meta> for #name #ty_g #wc {
            fn type_check(
                specs: &[#m::ColumnSpec],
            ) -> ::std::result::Result<(), #m::TypeCheckError> {
                #type_check
            }

            fn deserialize(
                row: &mut #m::ColumnIterator<#lt>,
            ) -> ::std::result::Result<Self, #m::DeserializationError> {
                #deserialize
            }
        }
    })
}

pub(crate) fn serialize_row(s: &Struct<'_>) -> syn::Result<TokenStream2> {
    s.no_udt_attributes("SerializeRow")?;
    let check_names = s.skip_name_checks.is_none();
    let m = s.internal();
    let name = &s.input.ident;
    let (impl_g, ty_g, _) = s.input.generics.split_for_impl();
    let bounds = s
        .bound()
        .map(|f| {
            let ty = f.ty;
            quote!(#ty: #m::SerializeValue)
        })
        .collect();
    let wc = where_clause(&s.input.generics, bounds);
    let fields: Vec<_> = s.bound().collect();
    let idents: Vec<_> = fields.iter().map(|f| f.ident).collect();
    let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
    let n = fields.len();
    let body = match s.flavor {
        Flavor::MatchByName => quote! {
            // A field no marker names would be silently dropped: refuse.
            #(
                if !specs.iter().any(|s| s.name == #names) {
                    return ::std::result::Result::Err(#m::SerializationError::new(
                        #m::SerializationErrorKind::NoMarkerForValue(::std::string::String::from(#names)),
                    ).with_rust_type::<Self>());
                }
            )*
            for spec in specs {
                match spec.name.as_str() {
                    #(#names => #m::serialize_value_to(&self.#idents, spec, out)?,)*
                    other => {
                        return ::std::result::Result::Err(#m::SerializationError::new(
                            #m::SerializationErrorKind::MissingValueForMarker(other.to_owned()),
                        ).with_rust_type::<Self>());
                    }
                }
            }
            ::std::result::Result::Ok(())
        },
        Flavor::EnforceOrder => {
            let idx = 0..n;
            quote! {
                if specs.len() != #n {
                    return ::std::result::Result::Err(#m::SerializationError::new(
                        #m::SerializationErrorKind::WrongValueCount { expected: specs.len(), actual: #n },
                    ).with_rust_type::<Self>());
                }
                #(
                    let spec = &specs[#idx];
                    if #check_names && spec.name != #names {
                        return ::std::result::Result::Err(#m::SerializationError::new(
                            #m::SerializationErrorKind::NoMarkerForValue(::std::string::String::from(#names)),
                        ).with_column(&spec.name).with_rust_type::<Self>());
                    }
                    #m::serialize_value_to(&self.#idents, spec, out)?;
                )*
                ::std::result::Result::Ok(())
            }
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl #impl_g #m::SerializeRow for #name #ty_g #wc {
            fn serialize_row(
                &self,
                specs: &[#m::ColumnSpec],
                out: &mut #m::SerializedValues,
            ) -> ::std::result::Result<(), #m::SerializationError> {
                #body
            }
        }
    })
}

pub(crate) fn serialize_value(s: &Struct<'_>) -> syn::Result<TokenStream2> {
    s.no_flavor("SerializeValue")?;
    let m = s.internal();
    let name = &s.input.ident;
    let (impl_g, ty_g, _) = s.input.generics.split_for_impl();
    let bounds = s
        .bound()
        .map(|f| {
            let ty = f.ty;
            quote!(#ty: #m::SerializeValue)
        })
        .collect();
    let wc = where_clause(&s.input.generics, bounds);
    let fields: Vec<_> = s.bound().collect();
    let idents: Vec<_> = fields.iter().map(|f| f.ident).collect();
    let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
    let optional: Vec<_> = fields
        .iter()
        .filter(|f| f.allow_missing.is_some())
        .map(|f| f.name.as_str())
        .collect();
    let forbid_excess = s.forbid_excess_udt_fields.is_some();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_g #m::SerializeValue for #name #ty_g #wc {
            fn serialize<'__b>(
                &self,
                typ: &#m::ColumnType<'_>,
                writer: #m::CellWriter<'__b>,
            ) -> ::std::result::Result<#m::WrittenCellProof<'__b>, #m::SerializationError> {
                #m::serialize_udt_with::<Self, &dyn #m::SerializeValue>(typ, writer, [
                    #((#names, &self.#idents as &dyn #m::SerializeValue),)*
                ], #m::UdtRules {
                    optional: &[#(#optional),*],
                    forbid_excess: #forbid_excess,
                })
            }
        }
    })
}

pub(crate) fn deserialize_value(s: &Struct<'_>) -> syn::Result<TokenStream2> {
    s.no_flavor("DeserializeValue")?;
    let Deserializing {
        m,
        lt,
        meta,
        impl_g,
        ty_g,
        wc,
        name,
        idents,
        names,
        tys,
        null_default,
        allow_missing,
        skipped,
    } = deserializing(s, Meta::OfFields)?;
    // A field the UDT lacks: an error, or none (`allow_missing`).
    let when_missing: Vec<TokenStream2> = names
        .iter()
        .zip(&allow_missing)
        .map(|(name, &allowed)| {
            if allowed {
                quote!({})
            } else {
                quote!({
                    return ::std::result::Result::Err(#m::TypeCheckError::of::<Self>(
                        typ,
                        #m::TypeCheckErrorKind::MissingColumn(::std::string::String::from(#name)),
                    ));
                })
            }
        })
        .collect();
    let excess_check = if s.forbid_excess_udt_fields.is_some() {
        quote! {
            for (n, _) in fields {
                if ![#(#names),*].contains(&n.as_str()) {
                    return ::std::result::Result::Err(#m::TypeCheckError::of::<Self>(
                        typ,
                        #m::TypeCheckErrorKind::UnexpectedColumn(n.clone()),
                    ));
                }
            }
        }
    } else {
        quote!()
    };
    // Each field's value from its UDT field (`default_when_null`: a null is
    // the type's default).
    let reads: Vec<TokenStream2> = tys
        .iter()
        .zip(&null_default)
        .map(|(ty, &null_default)| {
            let read = quote! {
                <#ty as #m::DeserializeValue<#lt, #meta>>::deserialize(ftype, fvalue)
                    .map_err(|e| e.with_column(fname))?
            };
            if null_default {
                quote! {
                    match fvalue {
                        ::std::option::Option::None => ::std::default::Default::default(),
                        ::std::option::Option::Some(_) => #read,
                    }
                }
            } else {
                read
            }
        })
        .collect();
    // Each field at the end: an absent UDT field is its default
    // (`allow_missing`), else an error (only without a type check).
    let finals: Vec<TokenStream2> = idents
        .iter()
        .zip(names.iter().zip(&allow_missing))
        .map(|(ident, (name, &allowed))| {
            if allowed {
                quote!(#ident.unwrap_or_default())
            } else {
                quote! {
                    #ident.ok_or_else(|| {
                        #m::DeserializationError::new(#m::DeserializationErrorKind::TypeCheck(
                            #m::TypeCheckErrorKind::MissingColumn(::std::string::String::from(#name)),
                        ))
                    })?
                }
            }
        })
        .collect();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_g #m::DeserializeValue<#lt, #meta> for #name #ty_g #wc {
            fn type_check(typ: &#m::ColumnType<'_>) -> ::std::result::Result<(), #m::TypeCheckError> {
                let #m::ColumnType::UserDefinedType { definition, .. } = typ else {
                    return ::std::result::Result::Err(#m::TypeCheckError::of::<Self>(
                        typ,
                        #m::TypeCheckErrorKind::Mismatch,
                    ));
                };
                let fields = &definition.field_types;
                #(
                    match fields.iter().find(|(n, _)| n == #names) {
                        ::std::option::Option::Some((n, t)) => {
                            <#tys as #m::DeserializeValue<#lt, #meta>>::type_check(t)
                                .map_err(|e| e.with_column(n))?
                        }
                        ::std::option::Option::None => #when_missing
                    }
                )*
                #excess_check
                ::std::result::Result::Ok(())
            }

            fn deserialize(
                typ: &#meta #m::ColumnType<#meta>,
                v: ::std::option::Option<&#lt [u8]>,
            ) -> ::std::result::Result<Self, #m::DeserializationError> {
                #(let mut #idents: ::std::option::Option<#tys> = ::std::option::Option::None;)*
                for field in #m::UdtIterator::new::<Self>(typ, v)? {
                    let (fname, ftype, fvalue) = field?;
                    match fname {
                        #(#names => {
                            #idents = ::std::option::Option::Some(#reads)
                        })*
                        _ => {}
                    }
                }
                ::std::result::Result::Ok(#name {
                    #(#idents: #finals,)*
                    #(#skipped,)*
                })
            }
        }
    })
}
