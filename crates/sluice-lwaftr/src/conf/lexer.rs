//! The tokens of Snabb's YANG text syntax (`lib.yang` data files): braces,
//! semicolons, bare words and quoted strings, with comments and whitespace
//! skipped. Tokens borrow from the text (a quoted string is copied only when
//! it has escapes or `+` joins), and carry a byte offset; the line and column
//! are worked out only when an error is reported ([`line_col`]).

use std::borrow::Cow;

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok<'a> {
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `;`
    Semi,
    /// A bare word (up to whitespace, `;`, `{`, `}`, a quote or a comment).
    Word(&'a str),
    /// A quoted string, or several joined with `+`, unescaped.
    Str(Cow<'a, str>),
    /// The end of the text.
    Eof,
}

/// A lexical error: byte offset and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Where (byte offset).
    pub pos: usize,
    /// What.
    pub message: String,
}

/// The token reader over a text.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Lexer { text, pos: 0 }
    }

    /// A reader at byte offset `pos` of `text` (a token boundary).
    pub fn at(text: &'a str, pos: usize) -> Self {
        Lexer { text, pos: pos.min(text.len()) }
    }

    /// The byte offset of the next unread character.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Skips whitespace and comments.
    fn skip_blank(&mut self) -> Result<(), LexError> {
        let b = self.text.as_bytes();
        loop {
            while self.pos < b.len() && matches!(b[self.pos], b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c') {
                self.pos += 1;
            }
            if self.pos + 1 < b.len() && b[self.pos] == b'/' {
                if b[self.pos + 1] == b'/' {
                    match b[self.pos..].iter().position(|&c| c == b'\n') {
                        Some(n) => self.pos += n + 1,
                        None => self.pos = b.len(),
                    }
                    continue;
                }
                if b[self.pos + 1] == b'*' {
                    let start = self.pos;
                    match find(&b[self.pos + 2..], b"*/") {
                        Some(n) => self.pos += 2 + n + 2,
                        None => {
                            return Err(LexError { pos: start, message: "unterminated comment /* ...".into() });
                        }
                    }
                    continue;
                }
            }
            return Ok(());
        }
    }

    /// The next token and its byte offset.
    pub fn next_token(&mut self) -> Result<(Tok<'a>, usize), LexError> {
        self.skip_blank()?;
        let b = self.text.as_bytes();
        let start = self.pos;
        let Some(&c) = b.get(start) else { return Ok((Tok::Eof, start)) };
        match c {
            b'{' => {
                self.pos += 1;
                Ok((Tok::LBrace, start))
            }
            b'}' => {
                self.pos += 1;
                Ok((Tok::RBrace, start))
            }
            b';' => {
                self.pos += 1;
                Ok((Tok::Semi, start))
            }
            b'"' | b'\'' => {
                let mut s = self.quoted()?;
                // `"a" + "b"`: join quoted strings.
                loop {
                    let save = self.pos;
                    self.skip_blank()?;
                    if b.get(self.pos) != Some(&b'+') {
                        self.pos = save;
                        break;
                    }
                    let plus = self.pos;
                    self.pos += 1;
                    self.skip_blank()?;
                    if !matches!(b.get(self.pos), Some(b'"' | b'\'')) {
                        return Err(LexError { pos: plus, message: "`+` must be followed by a quoted string".into() });
                    }
                    let more = self.quoted()?;
                    s.to_mut().push_str(&more);
                }
                Ok((Tok::Str(s), start))
            }
            _ => {
                let mut end = start;
                while end < b.len() {
                    match b[end] {
                        b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b';' | b'{' | b'}' | b'"' | b'\'' => break,
                        b'/' if matches!(b.get(end + 1), Some(b'/' | b'*')) => break,
                        _ => end += 1,
                    }
                }
                self.pos = end;
                // Every byte that ends a word is ASCII, so `end` is a char boundary.
                Ok((Tok::Word(&self.text[start..end]), start))
            }
        }
    }

    /// A quoted string at `self.pos` (which holds the opening quote).
    fn quoted(&mut self) -> Result<Cow<'a, str>, LexError> {
        let b = self.text.as_bytes();
        let open = self.pos;
        let q = b[open];
        let body = open + 1;
        if q == b'\'' {
            return match b[body..].iter().position(|&c| c == b'\'') {
                Some(n) => {
                    self.pos = body + n + 1;
                    Ok(Cow::Borrowed(&self.text[body..body + n]))
                }
                None => Err(LexError { pos: open, message: "unterminated string '...".into() }),
            };
        }
        let mut i = body;
        let mut owned: Option<String> = None;
        let mut run = body; // start of the not yet copied plain run
        while i < b.len() {
            match b[i] {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(&self.text[body..i]),
                        Some(mut s) => {
                            s.push_str(&self.text[run..i]);
                            Cow::Owned(s)
                        }
                    });
                }
                b'\\' => {
                    let e = match b.get(i + 1) {
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(_) => {
                            return Err(LexError {
                                pos: i,
                                message: "unknown escape in a \"...\" string (known: \\n \\t \\\" \\\\)".into(),
                            })
                        }
                        None => break,
                    };
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&self.text[run..i]);
                    s.push(e);
                    i += 2;
                    run = i;
                }
                _ => i += 1,
            }
        }
        Err(LexError { pos: open, message: "unterminated string \"...".into() })
    }
}

/// The first index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The 1-based line and column (in characters) of byte offset `pos`.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let mut pos = pos.min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &text[..pos];
    let line = before.bytes().filter(|&c| c == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    (line, text[line_start..pos].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Result<Vec<Tok<'_>>, LexError> {
        let mut l = Lexer::new(text);
        let mut v = Vec::new();
        loop {
            let (t, _) = l.next_token()?;
            if t == Tok::Eof {
                return Ok(v);
            }
            v.push(t);
        }
    }

    #[test]
    fn words_strings_comments() {
        let t = toks("a b;/* x */ c{ // y\n d 'e f' \"g\\n\\\"h\" + 'i';}e/f").unwrap();
        assert_eq!(
            t,
            vec![
                Tok::Word("a"),
                Tok::Word("b"),
                Tok::Semi,
                Tok::Word("c"),
                Tok::LBrace,
                Tok::Word("d"),
                Tok::Str(Cow::Borrowed("e f")),
                Tok::Str(Cow::Owned("g\n\"hi".into())),
                Tok::Semi,
                Tok::RBrace,
                Tok::Word("e/f"),
            ]
        );
    }

    #[test]
    fn lexical_errors() {
        assert!(toks("a /* b").is_err());
        assert!(toks("a \"b").is_err());
        assert!(toks("a 'b").is_err());
        assert!(toks("a \"\\q\"").is_err());
        assert!(toks("a \"b\" + c").is_err());
        assert!(toks("a \"\\").is_err());
    }

    #[test]
    fn positions() {
        assert_eq!(line_col("ab\ncdé f", 8), (2, 5));
        assert_eq!(line_col("", 3), (1, 1));
    }
}
