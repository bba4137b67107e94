//! Line-level parsing: command dispatch, a small tokenizer for the structured
//! commands (`add`, `setdefault`, `check_counter`) and the packet-data
//! scanners for `packet` / `expect`.

use std::fmt;

use crate::{
    CompareOp, CounterCheck, CounterEntry, CounterKind, ExpectPattern, KeyValue, Number, StfCommand, BMV2_CLI_COMMANDS,
};

/// Parse one non-empty, comment-free, trimmed line.
pub(crate) fn parse_command(content: &str) -> Result<StfCommand, String> {
    let (word, rest) = match content.find(char::is_whitespace) {
        Some(i) => (&content[..i], content[i..].trim_start()),
        None => (content, ""),
    };
    let kw = word.to_ascii_lowercase();
    let result = match kw.as_str() {
        "packet" => parse_packet(rest),
        "expect" => parse_expect(rest),
        "add" => parse_add(rest),
        "setdefault" => parse_setdefault(rest),
        "check_counter" => parse_check_counter(rest),
        "remove" => {
            if rest.eq_ignore_ascii_case("all") {
                Ok(StfCommand::RemoveAll)
            } else {
                Err(format!("only 'remove all' is supported, found 'remove {rest}'"))
            }
        }
        "wait" => no_arguments(rest, StfCommand::Wait),
        "no_packet" => no_arguments(rest, StfCommand::NoPacket),
        _ if BMV2_CLI_COMMANDS.contains(&kw.as_str()) => {
            let command = if rest.is_empty() { kw.clone() } else { format!("{kw} {rest}") };
            return Ok(StfCommand::Passthrough { command });
        }
        _ => return Err(format!("unknown command '{word}'")),
    };
    result.map_err(|e| format!("{kw}: {e}"))
}

fn no_arguments(rest: &str, cmd: StfCommand) -> Result<StfCommand, String> {
    if rest.is_empty() {
        Ok(cmd)
    } else {
        Err(format!("takes no arguments, found '{rest}'"))
    }
}

/// Split the leading decimal port number off `rest`. `$` may directly follow
/// the port on an expect line (`expect 0$`, an empty exact pattern).
fn parse_port(rest: &str, allow_dollar: bool) -> Result<(u32, &str), String> {
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let bad = || {
        let tok = rest.split_whitespace().next().unwrap_or("");
        if tok.is_empty() {
            "missing port number".to_string()
        } else {
            format!("port must be a decimal number, found '{tok}'")
        }
    };
    if end == 0 {
        return Err(bad());
    }
    let after = &rest[end..];
    if let Some(c) = after.chars().next() {
        if !(c.is_whitespace() || (allow_dollar && c == '$')) {
            return Err(bad());
        }
    }
    let port = rest[..end].parse::<u32>().map_err(|_| format!("port number {} is too large", &rest[..end]))?;
    Ok((port, after))
}

fn parse_packet(rest: &str) -> Result<StfCommand, String> {
    let (port, data) = parse_port(rest, false)?;
    let mut nibbles = Vec::with_capacity(data.len());
    for c in data.chars() {
        if c.is_whitespace() {
            continue;
        }
        match c.to_digit(16) {
            Some(d) => nibbles.push(d as u8),
            None => return Err(format!("invalid character '{c}' in packet data (hex digits only)")),
        }
    }
    if nibbles.is_empty() {
        return Err("no packet data".to_string());
    }
    if nibbles.len() & 1 == 1 {
        return Err(format!("odd number of hex digits ({}) in packet data; packets are whole bytes", nibbles.len()));
    }
    let data = nibbles.chunks(2).map(|p| (p[0] << 4) | p[1]).collect();
    Ok(StfCommand::Packet { port, data })
}

fn parse_expect(rest: &str) -> Result<StfCommand, String> {
    let (port, data) = parse_port(rest, true)?;
    let pattern = ExpectPattern::parse(data).map_err(|e| e.to_string())?;
    let pattern = if pattern.nibbles.is_empty() && !pattern.exact_len { None } else { Some(pattern) };
    Ok(StfCommand::Expect { port, pattern })
}

/// Tokens of the structured commands.
#[derive(Debug, Clone, PartialEq)]
enum Tok<'a> {
    /// A run of characters that are not whitespace or punctuation: a name,
    /// a number or a key value (which may contain `*`).
    Word(&'a str),
    /// A double-quoted name (quotes removed).
    Quoted(&'a str),
    Colon,
    LParen,
    RParen,
    Comma,
    Slash,
    Assign,
    Op(CompareOp),
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Quoted(q) => write!(f, "\"{q}\""),
            Tok::Colon => f.write_str("':'"),
            Tok::LParen => f.write_str("'('"),
            Tok::RParen => f.write_str("')'"),
            Tok::Comma => f.write_str("','"),
            Tok::Slash => f.write_str("'/'"),
            Tok::Assign => f.write_str("'='"),
            Tok::Op(op) => write!(f, "'{}'", op.as_str()),
        }
    }
}

const PUNCT: &[char] = &[':', '(', ')', ',', '/', '=', '!', '<', '>', '"'];

fn tokenize(s: &str) -> Result<Vec<Tok<'_>>, String> {
    let mut toks = Vec::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let next = rest[c.len_utf8()..].chars().next();
        let (tok, len) = match (c, next) {
            (':', _) => (Tok::Colon, 1),
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            (',', _) => (Tok::Comma, 1),
            ('/', _) => (Tok::Slash, 1),
            ('=', Some('=')) => (Tok::Op(CompareOp::Eq), 2),
            ('=', _) => (Tok::Assign, 1),
            ('!', Some('=')) => (Tok::Op(CompareOp::Ne), 2),
            ('<', Some('=')) => (Tok::Op(CompareOp::Le), 2),
            ('<', _) => (Tok::Op(CompareOp::Lt), 1),
            ('>', Some('=')) => (Tok::Op(CompareOp::Ge), 2),
            ('>', _) => (Tok::Op(CompareOp::Gt), 1),
            ('!', _) => return Err("unexpected '!'".to_string()),
            ('"', _) => {
                let body = &rest[1..];
                let close = body.find('"').ok_or_else(|| "unterminated quoted name".to_string())?;
                if close == 0 {
                    return Err("empty quoted name".to_string());
                }
                (Tok::Quoted(&body[..close]), close + 2)
            }
            _ => {
                let len = rest.find(|ch: char| ch.is_whitespace() || PUNCT.contains(&ch)).unwrap_or(rest.len());
                (Tok::Word(&rest[..len]), len)
            }
        };
        toks.push(tok);
        rest = &rest[len..];
    }
    Ok(toks)
}

/// Check an unquoted name: identifiers (`[A-Za-z_$][A-Za-z0-9_$]*`, each
/// optionally followed by `[N]`) joined by `.`.
fn check_name(w: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "invalid name '{w}' (expected identifiers of letters, digits, '_' and '$' joined by '.', or a \"quoted name\")"
        )
    };
    for seg in w.split('.') {
        let ident = match seg.find('[') {
            Some(open) => {
                let idx = seg[open + 1..].strip_suffix(']').ok_or_else(bad)?;
                if idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                &seg[..open]
            }
            None => seg,
        };
        let mut chars = ident.chars();
        match chars.next() {
            Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
            _ => return Err(bad()),
        }
        if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            return Err(bad());
        }
    }
    Ok(())
}

fn describe(t: Option<&Tok<'_>>) -> String {
    match t {
        Some(t) => t.to_string(),
        None => "end of line".to_string(),
    }
}

fn starts_numeric(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_digit() || c == '-')
}

struct Cursor<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(toks: Vec<Tok<'a>>) -> Self {
        Cursor { toks, pos: 0 }
    }

    fn peek(&self) -> Option<&Tok<'a>> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok<'a>> {
        let t = self.toks.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// A (possibly quoted) name.
    fn name(&mut self, what: &str) -> Result<String, String> {
        match self.next() {
            Some(Tok::Word(w)) => {
                check_name(w)?;
                Ok(w.to_string())
            }
            Some(Tok::Quoted(q)) => Ok(q.to_string()),
            t => Err(format!("expected {what}, found {}", describe(t.as_ref()))),
        }
    }

    /// An unquoted word (number / key value).
    fn word(&mut self, what: &str) -> Result<&'a str, String> {
        match self.next() {
            Some(Tok::Word(w)) => Ok(w),
            t => Err(format!("expected {what}, found {}", describe(t.as_ref()))),
        }
    }

    fn expect(&mut self, tok: Tok<'_>, what: &str) -> Result<(), String> {
        match self.next() {
            Some(t) if t == tok => Ok(()),
            t => Err(format!("expected {what}, found {}", describe(t.as_ref()))),
        }
    }

    fn end(&mut self) -> Result<(), String> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(format!("unexpected {t} at end of command")),
        }
    }
}

/// `( [name:value {, name:value}] )`, after the `(`.
fn parse_args(c: &mut Cursor<'_>) -> Result<Vec<(String, Number)>, String> {
    let mut params: Vec<(String, Number)> = Vec::new();
    if c.peek() == Some(&Tok::RParen) {
        c.next();
        return Ok(params);
    }
    loop {
        let name = c.name("an action parameter name")?;
        c.expect(Tok::Colon, &format!("':' after parameter name '{name}'"))?;
        let v = c.word(&format!("a value for parameter '{name}'"))?;
        let n = Number::parse(v).map_err(|e| format!("parameter '{name}': {e}"))?;
        if params.iter().any(|(p, _)| *p == name) {
            return Err(format!("parameter '{name}' given twice"));
        }
        params.push((name, n));
        match c.next() {
            Some(Tok::Comma) => {}
            Some(Tok::RParen) => return Ok(params),
            t => return Err(format!("expected ',' or ')' in action arguments, found {}", describe(t.as_ref()))),
        }
    }
}

fn parse_add(rest: &str) -> Result<StfCommand, String> {
    let mut c = Cursor::new(tokenize(rest)?);
    let table = c.name("a table name")?;
    let mut priority = None;
    if let Some(Tok::Word(w)) = c.peek() {
        let w = *w;
        if starts_numeric(w) {
            c.next();
            let p = w.parse::<i64>().map_err(|_| format!("priority must be a decimal integer, found '{w}'"))?;
            priority = Some(p);
        }
    }
    let mut keys: Vec<(String, KeyValue)> = Vec::new();
    let (action, params) = loop {
        let name = c.name("a key name or the action")?;
        match c.next() {
            Some(Tok::Colon) => {
                let v = c.word(&format!("a value for key '{name}'"))?;
                let len = if c.peek() == Some(&Tok::Slash) {
                    c.next();
                    Some(c.word("a prefix length after '/'")?)
                } else {
                    None
                };
                let kv = KeyValue::from_parts(v, len).map_err(|e| format!("key '{name}': {e}"))?;
                if keys.iter().any(|(k, _)| *k == name) {
                    return Err(format!("key '{name}' given twice"));
                }
                keys.push((name, kv));
            }
            Some(Tok::LParen) => break (name, parse_args(&mut c)?),
            t => {
                return Err(format!(
                    "expected ':' after a key name or '(' after the action name, found {} after '{name}'",
                    describe(t.as_ref())
                ))
            }
        }
    };
    let id = if c.peek() == Some(&Tok::Assign) {
        c.next();
        match c.next() {
            Some(Tok::Word(w)) => Some(w.to_string()),
            Some(Tok::Quoted(q)) => Some(q.to_string()),
            t => return Err(format!("expected an entry id after '=', found {}", describe(t.as_ref()))),
        }
    } else {
        None
    };
    c.end()?;
    Ok(StfCommand::Add { table, priority, keys, action, params, id })
}

fn parse_setdefault(rest: &str) -> Result<StfCommand, String> {
    let mut c = Cursor::new(tokenize(rest)?);
    let table = c.name("a table name")?;
    let action = c.name("an action name")?;
    c.expect(Tok::LParen, &format!("'(' after action name '{action}'"))?;
    let params = parse_args(&mut c)?;
    c.end()?;
    Ok(StfCommand::SetDefault { table, action, params })
}

fn parse_check_counter(rest: &str) -> Result<StfCommand, String> {
    let mut c = Cursor::new(tokenize(rest)?);
    let name = c.name("a counter name")?;
    c.expect(Tok::LParen, &format!("'(' after counter name '{name}'"))?;
    let entry = match c.next() {
        Some(Tok::Word(w)) if starts_numeric(w) => CounterEntry::Index(Number::parse(w).map_err(|e| e.to_string())?),
        Some(Tok::Word(w)) => {
            check_name(w)?;
            CounterEntry::Id(w.to_string())
        }
        Some(Tok::Quoted(q)) => CounterEntry::Id(q.to_string()),
        t => return Err(format!("expected an entry id or index, found {}", describe(t.as_ref()))),
    };
    c.expect(Tok::RParen, "')'")?;
    let check = if c.peek().is_some() {
        let kind_word = c.word("'packets' or 'bytes'")?;
        let kind = match kind_word.to_ascii_lowercase().as_str() {
            "packets" => CounterKind::Packets,
            "bytes" => CounterKind::Bytes,
            _ => return Err(format!("expected 'packets' or 'bytes', found '{kind_word}'")),
        };
        let op = match c.next() {
            Some(Tok::Op(op)) => op,
            t => return Err(format!("expected one of == != < <= > >=, found {}", describe(t.as_ref()))),
        };
        let v = c.word("a value to compare with")?;
        let value = Number::parse(v).map_err(|e| e.to_string())?;
        c.end()?;
        Some(CounterCheck { kind, op, value })
    } else {
        None
    };
    Ok(StfCommand::CheckCounter { name, entry, check })
}
