//! (placeholder: replaced by the metadata branch's module file at merge)
pub mod state;
