//! A recursive-descent parser for the subset of CQL the test cluster serves.
//!
//! It covers what drivers and tests send (see [`super::ast`]); anything else
//! is a [`ParseError`], which the handler answers with a CQL syntax error
//! (0x2000) rather than silence. Keywords are matched case-insensitively.

use std::fmt;

use super::ast::*;
use super::lexer::{tokenize, Tok};

/// Why a statement could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError(pub(crate) String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type PResult<T> = Result<T, ParseError>;

/// Parses one statement (a trailing `;` is allowed).
pub(crate) fn parse(text: &str) -> PResult<Statement> {
    let toks = tokenize(text).map_err(|e| ParseError(format!("line 1: {e}")))?;
    let mut p = Parser { toks, pos: 0 };
    let st = p.statement()?;
    p.eat_sym(";");
    if p.pos < p.toks.len() {
        return Err(p.err("unexpected input after the statement"));
    }
    Ok(st)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn err(&self, what: &str) -> ParseError {
        let near = match self.peek() {
            Some(t) => format!("{t:?}"),
            None => "end of input".to_owned(),
        };
        ParseError(format!("line 1: {what} (near {near})"))
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn kw(&mut self, kw: &str) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.err(&format!("expected {kw}")))
        }
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        let yes = matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn sym(&mut self, sym: &str) -> PResult<()> {
        if self.eat_sym(sym) {
            Ok(())
        } else {
            Err(self.err(&format!("expected '{sym}'")))
        }
    }

    /// An identifier: unquoted ones are lower-cased.
    fn ident(&mut self) -> PResult<String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.to_ascii_lowercase();
                self.pos += 1;
                Ok(s)
            }
            Some(Tok::QuotedIdent(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.err("expected a name")),
        }
    }

    fn qualified(&mut self) -> PResult<QualifiedName> {
        let first = self.ident()?;
        if self.eat_sym(".") {
            Ok(QualifiedName {
                keyspace: Some(first),
                name: self.ident()?,
            })
        } else {
            Ok(QualifiedName {
                keyspace: None,
                name: first,
            })
        }
    }

    fn if_not_exists(&mut self) -> PResult<bool> {
        if self.eat_kw("IF") {
            self.kw("NOT")?;
            self.kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn if_exists(&mut self) -> PResult<bool> {
        if self.eat_kw("IF") {
            self.kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn statement(&mut self) -> PResult<Statement> {
        if self.eat_kw("SELECT") {
            return self.select().map(Statement::Select);
        }
        if self.eat_kw("INSERT") {
            return self.insert();
        }
        if self.eat_kw("UPDATE") {
            return self.update();
        }
        if self.eat_kw("DELETE") {
            return self.delete();
        }
        if self.eat_kw("USE") {
            return Ok(Statement::Use(self.ident()?));
        }
        if self.eat_kw("CREATE") {
            if self.eat_kw("KEYSPACE") || self.eat_kw("SCHEMA") {
                return self.create_keyspace();
            }
            if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
                return self.create_table();
            }
            if self.eat_kw("TYPE") {
                return self.create_type();
            }
            if self.eat_kw("CUSTOM") {
                self.kw("INDEX")?;
                return self.create_index();
            }
            return Err(
                self.err("only CREATE KEYSPACE, TABLE, TYPE and CUSTOM INDEX are supported")
            );
        }
        if self.eat_kw("DROP") {
            if self.eat_kw("KEYSPACE") || self.eat_kw("SCHEMA") {
                let if_exists = self.if_exists()?;
                let name = self.ident()?;
                return Ok(Statement::DropKeyspace { name, if_exists });
            }
            if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
                let if_exists = self.if_exists()?;
                let table = self.qualified()?;
                return Ok(Statement::DropTable { table, if_exists });
            }
            if self.eat_kw("TYPE") {
                let if_exists = self.if_exists()?;
                let name = self.qualified()?;
                return Ok(Statement::DropType { name, if_exists });
            }
            if self.eat_kw("INDEX") {
                let if_exists = self.if_exists()?;
                let name = self.qualified()?;
                return Ok(Statement::DropIndex { name, if_exists });
            }
            return Err(self.err("only DROP KEYSPACE, TABLE, TYPE and INDEX are supported"));
        }
        if self.eat_kw("TRUNCATE") {
            let _ = self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY");
            return Ok(Statement::Truncate(self.qualified()?));
        }
        Err(self.err("unsupported or invalid statement"))
    }

    fn select(&mut self) -> PResult<Select> {
        let _ = self.eat_kw("JSON");
        let _ = self.eat_kw("DISTINCT");
        let selection = if self.eat_sym("*") {
            Selection::Star
        } else if self.is_kw("COUNT") && matches!(self.toks.get(self.pos + 1), Some(Tok::Sym("(")))
        {
            self.pos += 2;
            if !self.eat_sym("*") && !matches!(self.next(), Some(Tok::Int(_))) {
                return Err(self.err("expected COUNT(*)"));
            }
            self.sym(")")?;
            if self.eat_kw("AS") {
                self.ident()?;
            }
            Selection::Count
        } else {
            let mut v = vec![self.selector()?];
            while self.eat_sym(",") {
                v.push(self.selector()?);
            }
            Selection::Columns(v)
        };
        self.kw("FROM")?;
        let table = self.qualified()?;
        let relations = if self.eat_kw("WHERE") {
            self.relations()?
        } else {
            Vec::new()
        };
        let mut ann = None;
        if self.eat_kw("ORDER") {
            self.kw("BY")?;
            loop {
                let col = self.ident()?;
                if self.eat_kw("ANN") {
                    self.kw("OF")?;
                    ann = Some((col, self.term()?));
                } else {
                    let _ = self.eat_kw("ASC") || self.eat_kw("DESC");
                }
                if !self.eat_sym(",") {
                    break;
                }
                if ann.is_some() {
                    return Err(self.err("ANN ordering does not support any other ordering"));
                }
            }
        }
        let limit = if self.eat_kw("LIMIT") {
            Some(self.term()?)
        } else {
            None
        };
        if self.eat_kw("ALLOW") {
            self.kw("FILTERING")?;
        }
        if self.eat_kw("BYPASS") {
            self.kw("CACHE")?;
        }
        // ScyllaDB's `USING TIMEOUT 2000ms` (accepted and ignored).
        self.using()?;
        Ok(Select {
            selection,
            table,
            relations,
            ann,
            limit,
        })
    }

    fn selector(&mut self) -> PResult<Selector> {
        let name = self.ident()?;
        let kind = if self.eat_sym("(") {
            let mut args = vec![self.ident()?];
            while self.eat_sym(",") {
                args.push(self.ident()?);
            }
            self.sym(")")?;
            match name.as_str() {
                "token" => SelectorKind::Token(args),
                "writetime" | "ttl" if args.len() == 1 => {
                    let f = if name == "ttl" { "ttl" } else { "writetime" };
                    SelectorKind::Meta(f, args.remove(0))
                }
                _ => return Err(self.err("unsupported function in selection")),
            }
        } else {
            SelectorKind::Column(name)
        };
        let alias = if self.eat_kw("AS") {
            Some(self.ident()?)
        } else {
            None
        };
        Ok(Selector { kind, alias })
    }

    fn op(&mut self) -> PResult<Op> {
        let op = match self.peek() {
            Some(Tok::Sym("=")) => Op::Eq,
            Some(Tok::Sym("<")) => Op::Lt,
            Some(Tok::Sym("<=")) => Op::Le,
            Some(Tok::Sym(">")) => Op::Gt,
            Some(Tok::Sym(">=")) => Op::Ge,
            Some(Tok::Sym("!=")) => Op::Ne,
            _ => return Err(self.err("expected a comparison operator")),
        };
        self.pos += 1;
        Ok(op)
    }

    fn relations(&mut self) -> PResult<Vec<Relation>> {
        let mut v = vec![self.relation()?];
        while self.eat_kw("AND") {
            v.push(self.relation()?);
        }
        Ok(v)
    }

    fn relation(&mut self) -> PResult<Relation> {
        if self.is_kw("TOKEN") && matches!(self.toks.get(self.pos + 1), Some(Tok::Sym("("))) {
            self.pos += 2;
            let mut cols = vec![self.ident()?];
            while self.eat_sym(",") {
                cols.push(self.ident()?);
            }
            self.sym(")")?;
            let op = self.op()?;
            return Ok(Relation::Token(cols, op, self.term()?));
        }
        let col = self.ident()?;
        if self.eat_kw("IN") {
            self.sym("(")?;
            let mut terms = Vec::new();
            if !self.eat_sym(")") {
                terms.push(self.term()?);
                while self.eat_sym(",") {
                    terms.push(self.term()?);
                }
                self.sym(")")?;
            }
            return Ok(Relation::In(col, terms));
        }
        let op = self.op()?;
        Ok(Relation::Cmp(col, op, self.term()?))
    }

    fn term(&mut self) -> PResult<Term> {
        match self.peek() {
            Some(Tok::Question) => {
                self.pos += 1;
                Ok(Term::Bind(None))
            }
            Some(Tok::Named(n)) => {
                let n = n.clone();
                self.pos += 1;
                Ok(Term::Bind(Some(n)))
            }
            _ => self.literal().map(Term::Lit),
        }
    }

    fn literal(&mut self) -> PResult<Literal> {
        let lit = match self.next() {
            Some(Tok::Int(s)) => Literal::Int(s),
            Some(Tok::Float(s)) => Literal::Float(s),
            Some(Tok::Str(s)) => Literal::Str(s),
            Some(Tok::Blob(b)) => Literal::Blob(b),
            Some(Tok::Uuid(u)) => Literal::Uuid(u),
            Some(Tok::Ident(s)) if s.eq_ignore_ascii_case("true") => Literal::Bool(true),
            Some(Tok::Ident(s)) if s.eq_ignore_ascii_case("false") => Literal::Bool(false),
            Some(Tok::Ident(s)) if s.eq_ignore_ascii_case("null") => Literal::Null,
            Some(Tok::Ident(s)) if s.eq_ignore_ascii_case("nan") => Literal::Float("NaN".into()),
            Some(Tok::Ident(s)) if s.eq_ignore_ascii_case("infinity") => {
                Literal::Float("Infinity".into())
            }
            Some(Tok::Sym("-")) if self.is_kw("infinity") => {
                self.pos += 1;
                Literal::Float("-Infinity".into())
            }
            Some(Tok::Sym("[")) => {
                let mut v = Vec::new();
                if !self.eat_sym("]") {
                    v.push(self.literal()?);
                    while self.eat_sym(",") {
                        v.push(self.literal()?);
                    }
                    self.sym("]")?;
                }
                Literal::List(v)
            }
            Some(Tok::Sym("{")) => {
                if self.eat_sym("}") {
                    return Ok(Literal::Set(Vec::new()));
                }
                if self.udt_field_ahead() {
                    return self.udt_literal();
                }
                let first = self.literal()?;
                if self.eat_sym(":") {
                    let mut v = vec![(first, self.literal()?)];
                    while self.eat_sym(",") {
                        let k = self.literal()?;
                        self.sym(":")?;
                        v.push((k, self.literal()?));
                    }
                    self.sym("}")?;
                    Literal::Map(v)
                } else {
                    let mut v = vec![first];
                    while self.eat_sym(",") {
                        v.push(self.literal()?);
                    }
                    self.sym("}")?;
                    Literal::Set(v)
                }
            }
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.err("expected a value"));
            }
        };
        Ok(lit)
    }

    /// Whether a `{` is followed by `name:`, which starts a UDT value (a
    /// map's keys are literals: strings, numbers, `true`...).
    fn udt_field_ahead(&self) -> bool {
        let name = match self.peek() {
            Some(Tok::QuotedIdent(_)) => true,
            Some(Tok::Ident(s)) => !["true", "false", "null", "nan", "infinity"]
                .iter()
                .any(|k| s.eq_ignore_ascii_case(k)),
            _ => false,
        };
        name && matches!(self.toks.get(self.pos + 1), Some(Tok::Sym(":")))
    }

    /// The rest of `{field: value, ...}` after the `{`.
    fn udt_literal(&mut self) -> PResult<Literal> {
        let mut fields = Vec::new();
        loop {
            let f = self.ident()?;
            self.sym(":")?;
            if fields.iter().any(|(n, _)| n == &f) {
                return Err(ParseError(format!("duplicate field {f} in a UDT value")));
            }
            fields.push((f, self.literal()?));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.sym("}")?;
        Ok(Literal::Udt(fields))
    }

    fn using(&mut self) -> PResult<()> {
        if self.eat_kw("USING") {
            loop {
                if !(self.eat_kw("TTL") || self.eat_kw("TIMESTAMP") || self.eat_kw("TIMEOUT")) {
                    return Err(self.err("expected TTL or TIMESTAMP"));
                }
                // The value (or a duration like 5s for TIMEOUT) is accepted and ignored.
                self.term()?;
                let _ = self.eat_kw("s") || self.eat_kw("ms");
                if !self.eat_kw("AND") {
                    break;
                }
            }
        }
        Ok(())
    }

    fn insert(&mut self) -> PResult<Statement> {
        self.kw("INTO")?;
        let table = self.qualified()?;
        self.sym("(")?;
        let mut columns = vec![self.ident()?];
        while self.eat_sym(",") {
            columns.push(self.ident()?);
        }
        self.sym(")")?;
        self.kw("VALUES")?;
        self.sym("(")?;
        let mut values = vec![self.term()?];
        while self.eat_sym(",") {
            values.push(self.term()?);
        }
        self.sym(")")?;
        let if_not_exists = self.if_not_exists()?;
        self.using()?;
        if columns.len() != values.len() {
            return Err(ParseError(
                "Unmatched column names/values in INSERT".to_owned(),
            ));
        }
        Ok(Statement::Insert {
            table,
            columns,
            values,
            if_not_exists,
        })
    }

    fn update(&mut self) -> PResult<Statement> {
        let table = self.qualified()?;
        self.using()?;
        self.kw("SET")?;
        let mut assignments = Vec::new();
        loop {
            let c = self.ident()?;
            self.sym("=")?;
            assignments.push((c, self.term()?));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.kw("WHERE")?;
        let relations = self.relations()?;
        let _ = self.if_exists()?;
        Ok(Statement::Update {
            table,
            assignments,
            relations,
        })
    }

    fn delete(&mut self) -> PResult<Statement> {
        let mut columns = Vec::new();
        if !self.is_kw("FROM") {
            columns.push(self.ident()?);
            while self.eat_sym(",") {
                columns.push(self.ident()?);
            }
        }
        self.kw("FROM")?;
        let table = self.qualified()?;
        self.using()?;
        self.kw("WHERE")?;
        let relations = self.relations()?;
        let _ = self.if_exists()?;
        Ok(Statement::Delete {
            table,
            columns,
            relations,
        })
    }

    fn create_keyspace(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.ident()?;
        self.kw("WITH")?;
        let mut replication = None;
        let mut durable_writes = true;
        let mut tablets = None;
        let mut consistency = None;
        loop {
            let opt = self.ident()?;
            self.sym("=")?;
            let v = self.literal()?;
            match (opt.as_str(), v) {
                ("replication", Literal::Map(m)) => {
                    let mut r = Vec::new();
                    for (k, v) in m {
                        r.push((literal_text(&k)?, literal_text(&v)?));
                    }
                    replication = Some(r);
                }
                ("durable_writes", Literal::Bool(b)) => durable_writes = b,
                ("durable_writes", Literal::Str(s)) => durable_writes = s != "false",
                ("tablets", Literal::Map(m)) => tablets = Some(tablets_option(&m)?),
                ("consistency", Literal::Str(s)) => consistency = Some(s.to_ascii_lowercase()),
                _ => return Err(ParseError(format!("unknown keyspace option {opt}"))),
            }
            if !self.eat_kw("AND") {
                break;
            }
        }
        let replication = replication
            .ok_or_else(|| ParseError("CREATE KEYSPACE needs a replication map".into()))?;
        Ok(Statement::CreateKeyspace {
            name,
            if_not_exists,
            replication,
            durable_writes,
            tablets,
            consistency,
        })
    }

    /// A type as written, up to the `,` or `)` that ends the column definition.
    fn type_text(&mut self) -> PResult<String> {
        let mut depth = 0usize;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.err("unterminated type")),
                Some(Tok::Sym("," | ")")) if depth == 0 => break,
                Some(Tok::Ident(s))
                    if depth == 0
                        && (s.eq_ignore_ascii_case("PRIMARY")
                            || s.eq_ignore_ascii_case("STATIC")) =>
                {
                    break
                }
                Some(t) => {
                    match t {
                        Tok::Sym("<") => depth += 1,
                        Tok::Sym(">") => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    match t {
                        Tok::Ident(s) => out.push_str(&s.to_ascii_lowercase()),
                        Tok::QuotedIdent(s) => out.push_str(s),
                        Tok::Int(s) => out.push_str(s),
                        Tok::Str(s) => {
                            out.push('\'');
                            out.push_str(s);
                            out.push('\'');
                        }
                        Tok::Sym(s) => out.push_str(s),
                        _ => return Err(self.err("invalid type")),
                    }
                    if matches!(t, Tok::Sym(",")) {
                        out.push(' ');
                    }
                    self.pos += 1;
                }
            }
        }
        if out.is_empty() {
            return Err(self.err("expected a type"));
        }
        Ok(out)
    }

    fn create_type(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.qualified()?;
        self.sym("(")?;
        let mut fields = Vec::new();
        loop {
            let f = self.ident()?;
            let typ = self.type_text()?;
            fields.push((f, typ));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.sym(")")?;
        Ok(Statement::CreateType {
            name,
            if_not_exists,
            fields,
        })
    }

    /// The rest of CREATE CUSTOM INDEX after `INDEX`.
    fn create_index(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = if self.is_kw("ON") {
            None
        } else {
            Some(self.ident()?)
        };
        self.kw("ON")?;
        let table = self.qualified()?;
        self.sym("(")?;
        let column = self.ident()?;
        self.sym(")")?;
        self.kw("USING")?;
        let class = match self.next() {
            Some(Tok::Str(s)) => s,
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.err("expected the index class as a string"));
            }
        };
        let mut options = Vec::new();
        if self.eat_kw("WITH") {
            self.kw("OPTIONS")?;
            self.sym("=")?;
            match self.literal()? {
                Literal::Map(m) => {
                    for (k, v) in m {
                        options.push((literal_text(&k)?, literal_text(&v)?));
                    }
                }
                Literal::Set(v) if v.is_empty() => {}
                _ => return Err(ParseError("index OPTIONS must be a map".into())),
            }
        }
        Ok(Statement::CreateIndex {
            name,
            if_not_exists,
            table,
            column,
            class,
            options,
        })
    }

    fn create_table(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.qualified()?;
        self.sym("(")?;
        let mut columns = Vec::new();
        let mut partition_key = Vec::new();
        let mut clustering_key = Vec::new();
        loop {
            if self.eat_kw("PRIMARY") {
                self.kw("KEY")?;
                self.sym("(")?;
                if self.eat_sym("(") {
                    partition_key.push(self.ident()?);
                    while self.eat_sym(",") {
                        partition_key.push(self.ident()?);
                    }
                    self.sym(")")?;
                } else {
                    partition_key.push(self.ident()?);
                }
                while self.eat_sym(",") {
                    clustering_key.push(self.ident()?);
                }
                self.sym(")")?;
            } else {
                let name = self.ident()?;
                let typ = self.type_text()?;
                let is_static = self.eat_kw("STATIC");
                if self.eat_kw("PRIMARY") {
                    self.kw("KEY")?;
                    partition_key.push(name.clone());
                }
                columns.push(ColumnDef {
                    name,
                    typ,
                    is_static,
                });
            }
            if !self.eat_sym(",") {
                break;
            }
            if matches!(self.peek(), Some(Tok::Sym(")"))) {
                break;
            }
        }
        self.sym(")")?;
        if self.eat_kw("WITH") {
            // Table options are accepted and ignored (CLUSTERING ORDER too).
            while self.peek().is_some() && !matches!(self.peek(), Some(Tok::Sym(";"))) {
                self.pos += 1;
            }
        }
        if partition_key.is_empty() {
            return Err(ParseError("No PRIMARY KEY specified".into()));
        }
        Ok(Statement::CreateTable {
            table,
            if_not_exists,
            columns,
            partition_key,
            clustering_key,
        })
    }
}

/// `{'enabled': true|false, 'initial': n}`, booleans and numbers also
/// accepted as strings (ScyllaDB takes both).
fn tablets_option(m: &[(Literal, Literal)]) -> PResult<TabletsOption> {
    let mut enabled = None;
    let mut initial = None;
    for (k, v) in m {
        let v = literal_text(v)?;
        match literal_text(k)?.as_str() {
            "enabled" => match v.to_ascii_lowercase().as_str() {
                "true" => enabled = Some(true),
                "false" => enabled = Some(false),
                _ => {
                    return Err(ParseError(format!(
                        "tablets 'enabled' must be a boolean, not {v}"
                    )))
                }
            },
            "initial" => {
                let n = v.parse::<usize>().map_err(|_| {
                    ParseError(format!(
                        "tablets 'initial' must be a non-negative integer, not {v}"
                    ))
                })?;
                initial = Some(n);
            }
            other => return Err(ParseError(format!("unknown tablets option {other}"))),
        }
    }
    Ok(TabletsOption {
        enabled: enabled.unwrap_or(true),
        initial,
    })
}

fn literal_text(l: &Literal) -> PResult<String> {
    match l {
        Literal::Str(s) | Literal::Int(s) | Literal::Float(s) => Ok(s.clone()),
        Literal::Bool(b) => Ok(b.to_string()),
        _ => Err(ParseError(
            "options must be strings, numbers or booleans".into(),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "parser_tests.rs"]
mod tests;
