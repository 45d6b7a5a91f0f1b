//! The `CLIENT_OPTIONS` STARTUP value: a small JSON object written by hand.
//!
//! ScyllaDB keeps every STARTUP option of a connection in
//! `system.clients.client_options`, and its protocol extensions ask drivers
//! to put their configuration under `CLIENT_OPTIONS`, as JSON. The object is
//! flat (strings, integers, booleans, null), so a writer of a few lines does
//! the job without a JSON dependency; the one thing to get right is string
//! escaping, which [`push_json_string`] does for any text (quotes,
//! backslashes, control characters; other characters pass through as UTF-8,
//! which JSON allows).

use std::fmt::Write as _;

/// Builds one flat JSON object, keys in the order they are added.
#[derive(Debug)]
pub(crate) struct JsonObject {
    out: String,
}

impl JsonObject {
    pub(crate) fn new() -> Self {
        Self {
            out: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.out.len() > 1 {
            self.out.push(',');
        }
        push_json_string(&mut self.out, key);
        self.out.push(':');
    }

    /// `"key":"value"`.
    pub(crate) fn str(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        push_json_string(&mut self.out, value);
        self
    }

    /// `"key":"value"`, or `"key":null` for `None`.
    pub(crate) fn opt_str(mut self, key: &str, value: Option<&str>) -> Self {
        self.key(key);
        match value {
            Some(v) => push_json_string(&mut self.out, v),
            None => self.out.push_str("null"),
        }
        self
    }

    /// `"key":123`.
    pub(crate) fn num(mut self, key: &str, value: u64) -> Self {
        self.key(key);
        // Writing to a String cannot fail.
        let _ = write!(self.out, "{value}");
        self
    }

    /// `"key":123`, or `"key":null` for `None`.
    pub(crate) fn opt_num(self, key: &str, value: Option<u64>) -> Self {
        match value {
            Some(v) => self.num(key, v),
            None => self.opt_str(key, None),
        }
    }

    /// `"key":true`.
    pub(crate) fn bool(mut self, key: &str, value: bool) -> Self {
        self.key(key);
        self.out.push_str(if value { "true" } else { "false" });
        self
    }

    /// The object's text.
    pub(crate) fn finish(mut self) -> String {
        self.out.push('}');
        self.out
    }
}

/// Appends `s` to `out` as a JSON string literal (RFC 8259, section 7):
/// `"` and `\` escaped, control characters (U+0000 to U+001F) as `\n`, `\r`,
/// `\t`, `\b`, `\f` or `\u00XX`, everything else unchanged.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, s);
        out
    }

    #[test]
    fn strings_are_escaped_as_json_requires() {
        assert_eq!(lit(""), r#""""#);
        assert_eq!(lit("plain text"), r#""plain text""#);
        assert_eq!(lit(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(lit(r"C:\dir\"), r#""C:\\dir\\""#);
        assert_eq!(lit("a\nb\rc\td"), r#""a\nb\rc\td""#);
        assert_eq!(lit("\u{8}\u{c}"), r#""\b\f""#);
        assert_eq!(lit("\0\u{1}\u{1f}"), r#""\u0000\u0001\u001f""#);
        // DEL and everything above U+001F, non-ASCII included, pass through.
        assert_eq!(lit("\u{7f} / é ß 東京 🦀"), "\"\u{7f} / é ß 東京 🦀\"");
        assert_eq!(lit("\u{2028}"), "\"\u{2028}\"");
    }

    #[test]
    fn every_control_character_is_escaped() {
        for b in 0u8..0x20 {
            let s = lit(&char::from(b).to_string());
            assert!(
                s.bytes().all(|x| x >= 0x20),
                "{b:#04x} left a raw control byte in {s:?}"
            );
            assert!(s.starts_with("\"\\"), "{b:#04x}: {s}");
        }
    }

    #[test]
    fn objects_are_flat_and_ordered() {
        let json = JsonObject::new()
            .str("name", "a\"b")
            .opt_str("dc", None)
            .opt_str("rack", Some("r1"))
            .num("n", 42)
            .opt_num("m", None)
            .opt_num("k", Some(7))
            .bool("tls", false)
            .finish();
        assert_eq!(
            json,
            r#"{"name":"a\"b","dc":null,"rack":"r1","n":42,"m":null,"k":7,"tls":false}"#
        );
        assert_eq!(JsonObject::new().finish(), "{}");
    }
}
