//! The CQL tokenizer: turns statement text into [`Tok`]ens for the parser.
//!
//! Hand-written (no dependency) and total: any input gives tokens or a
//! [`LexError`] with the byte offset, never a panic. Keywords are not
//! special here: the parser matches identifiers case-insensitively, so a
//! column may be called `key` or `type` like in the system tables.

use std::fmt;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// An unquoted identifier or keyword, as written.
    Ident(String),
    /// A double-quoted identifier (case kept, `""` unescaped).
    QuotedIdent(String),
    /// A single-quoted string (`''` unescaped) or a `$$...$$` string.
    Str(String),
    /// An integer literal (digits, maybe a leading `-`), as written.
    Int(String),
    /// A float literal (with `.`, `e`, or `NaN`/`Infinity`), as written.
    Float(String),
    /// A blob literal `0x...` (the hex digits decoded).
    Blob(Vec<u8>),
    /// A UUID literal.
    Uuid(uuid::Uuid),
    /// `?`
    Question,
    /// `:name` (a named bind marker).
    Named(String),
    /// Punctuation and operators: `( ) , ; . * = < > <= >= != { } [ ] : + -`.
    Sym(&'static str),
}

/// Why the input could not be tokenized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub(crate) offset: usize,
    pub(crate) reason: &'static str,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at character {}", self.reason, self.offset)
    }
}

const SYMS: [&str; 18] = [
    "<=", ">=", "!=", "(", ")", ",", ";", ".", "*", "=", "<", ">", "{", "}", "[", "]", ":", "+",
];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `s` at `i` starts a UUID literal (8-4-4-4-12 hex digits).
fn uuid_at(s: &str, i: usize) -> Option<uuid::Uuid> {
    let cand = s.get(i..i + 36)?;
    let shape_ok = cand.char_indices().all(|(k, c)| {
        if [8, 13, 18, 23].contains(&k) {
            c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    });
    let next_ok = s[i + 36..].chars().next().is_none_or(|c| !is_ident_char(c));
    if shape_ok && next_ok {
        uuid::Uuid::parse_str(cand).ok()
    } else {
        None
    }
}

/// Tokenizes a whole statement.
pub(crate) fn tokenize(s: &str) -> Result<Vec<Tok>, LexError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |offset, reason| LexError { offset, reason };
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // Comments: `-- ...`, `// ...` to end of line, `/* ... */`.
        if s[i..].starts_with("--") || s[i..].starts_with("//") {
            i = s[i..].find('\n').map_or(b.len(), |n| i + n + 1);
            continue;
        }
        if s[i..].starts_with("/*") {
            let end = s[i + 2..]
                .find("*/")
                .ok_or(err(i, "unterminated comment"))?;
            i += 2 + end + 2;
            continue;
        }
        if let Some(u) = uuid_at(s, i) {
            out.push(Tok::Uuid(u));
            i += 36;
            continue;
        }
        if c == '\'' {
            let mut v = String::new();
            let mut j = i + 1;
            loop {
                let rest = s.get(j..).ok_or(err(i, "unterminated string"))?;
                let n = rest.find('\'').ok_or(err(i, "unterminated string"))?;
                v.push_str(&rest[..n]);
                j += n + 1;
                if b.get(j) == Some(&b'\'') {
                    v.push('\'');
                    j += 1;
                } else {
                    break;
                }
            }
            out.push(Tok::Str(v));
            i = j;
            continue;
        }
        if s[i..].starts_with("$$") {
            let end = s[i + 2..]
                .find("$$")
                .ok_or(err(i, "unterminated $$ string"))?;
            out.push(Tok::Str(s[i + 2..i + 2 + end].to_owned()));
            i += 2 + end + 2;
            continue;
        }
        if c == '"' {
            let mut v = String::new();
            let mut j = i + 1;
            loop {
                let rest = s.get(j..).ok_or(err(i, "unterminated quoted name"))?;
                let n = rest.find('"').ok_or(err(i, "unterminated quoted name"))?;
                v.push_str(&rest[..n]);
                j += n + 1;
                if b.get(j) == Some(&b'"') {
                    v.push('"');
                    j += 1;
                } else {
                    break;
                }
            }
            out.push(Tok::QuotedIdent(v));
            i = j;
            continue;
        }
        if (c == '0') && matches!(b.get(i + 1), Some(b'x' | b'X')) {
            let start = i + 2;
            let mut j = start;
            while j < b.len() && (b[j] as char).is_ascii_hexdigit() {
                j += 1;
            }
            let hex = &s[start..j];
            if hex.len() % 2 != 0 {
                return Err(err(i, "odd number of hex digits in blob"));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|k| u8::from_str_radix(&hex[k..k + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| err(i, "invalid blob literal"))?;
            out.push(Tok::Blob(bytes));
            i = j;
            continue;
        }
        let neg_number = c == '-' && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if c.is_ascii_digit() || neg_number {
            let start = i;
            let mut j = i + 1;
            let mut float = false;
            while j < b.len() {
                let d = b[j] as char;
                if d.is_ascii_digit() {
                    j += 1;
                } else if d == '.' && !float && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
                    float = true;
                    j += 1;
                } else if (d == 'e' || d == 'E')
                    && (b.get(j + 1).is_some_and(u8::is_ascii_digit)
                        || (matches!(b.get(j + 1), Some(b'-' | b'+'))
                            && b.get(j + 2).is_some_and(u8::is_ascii_digit)))
                {
                    float = true;
                    j += 2;
                } else {
                    break;
                }
            }
            let text = s[start..j].to_owned();
            out.push(if float {
                Tok::Float(text)
            } else {
                Tok::Int(text)
            });
            i = j;
            continue;
        }
        if c == '-' {
            out.push(Tok::Sym("-"));
            i += 1;
            continue;
        }
        if c == '?' {
            out.push(Tok::Question);
            i += 1;
            continue;
        }
        if c == ':' && b.get(i + 1).is_some_and(|&n| is_ident_start(n as char)) {
            let mut j = i + 1;
            while j < b.len() && is_ident_char(b[j] as char) {
                j += 1;
            }
            out.push(Tok::Named(s[i + 1..j].to_ascii_lowercase()));
            i = j;
            continue;
        }
        if is_ident_start(c) {
            let mut j = i + 1;
            while j < b.len() && is_ident_char(b[j] as char) {
                j += 1;
            }
            out.push(Tok::Ident(s[i..j].to_owned()));
            i = j;
            continue;
        }
        match SYMS.iter().find(|sym| s[i..].starts_with(**sym)) {
            Some(sym) => {
                out.push(Tok::Sym(sym));
                i += sym.len();
            }
            None => return Err(err(i, "unexpected character")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let t =
            tokenize("SELECT a, \"B\" FROM ks.t WHERE x = ? AND y = :n -- c\n LIMIT 10;").unwrap();
        assert_eq!(t[0], Tok::Ident("SELECT".into()));
        assert_eq!(t[3], Tok::QuotedIdent("B".into()));
        assert!(t.contains(&Tok::Question));
        assert!(t.contains(&Tok::Named("n".into())));
        assert!(t.contains(&Tok::Int("10".into())));
        assert_eq!(t.last(), Some(&Tok::Sym(";")));
        let t = tokenize("'it''s' 0xCAFE -1.5e3 123e4567-e89b-12d3-a456-426614174000").unwrap();
        assert_eq!(t[0], Tok::Str("it's".into()));
        assert_eq!(t[1], Tok::Blob(vec![0xca, 0xfe]));
        assert_eq!(t[2], Tok::Float("-1.5e3".into()));
        assert!(matches!(t[3], Tok::Uuid(_)));
        assert!(tokenize("'open").is_err());
        assert!(tokenize("a # b").is_err());
        assert!(tokenize("0xABC").is_err());
    }
}
