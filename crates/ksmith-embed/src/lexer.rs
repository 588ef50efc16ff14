//! A fast, forgiving tokenizer for Python source.
//!
//! It produces the tokens every program feature is built from: names, numbers, strings,
//! operators and the layout tokens `Newline`, `Indent` and `Dedent` (as Python's own tokenizer
//! does). Comments and blank lines produce nothing; line continuations and newlines inside
//! brackets are joined. It never fails: an unterminated string runs to the end of the input and
//! an unknown byte becomes a one-character operator, so a broken file still gets features.

/// The kind of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// An identifier or keyword.
    Name,
    /// A numeric literal.
    Number,
    /// A string literal (any prefix and quoting), including f-strings.
    String,
    /// An operator or delimiter.
    Op,
    /// End of a logical line.
    Newline,
    /// The indentation grew.
    Indent,
    /// The indentation shrank by one level.
    Dedent,
}

/// One token: its kind and its text (a slice of the source; empty for layout tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// What kind of token it is.
    pub kind: TokenKind,
    /// The source text of the token.
    pub text: &'a str,
}

impl<'a> Token<'a> {
    fn new(kind: TokenKind, text: &'a str) -> Self {
        Token { kind, text }
    }

    /// True for `Newline`, `Indent` and `Dedent`.
    pub fn is_layout(&self) -> bool {
        matches!(
            self.kind,
            TokenKind::Newline | TokenKind::Indent | TokenKind::Dedent
        )
    }

    /// True when the token is the operator `op`.
    pub fn is_op(&self, op: &str) -> bool {
        self.kind == TokenKind::Op && self.text == op
    }
}

const THREE_CHAR_OPS: &[&str] = &["**=", "//=", ">>=", "<<=", "...", "!="];
const TWO_CHAR_OPS: &[&str] = &[
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "->", "+=", "-=", "*=", "/=", "%=", "&=", "|=",
    "^=", "@=", ":=",
];

/// Tokenizes Python source. Never fails (see the module documentation).
pub fn tokenize(src: &str) -> Vec<Token<'_>> {
    let bytes = src.as_bytes();
    let mut out: Vec<Token<'_>> = Vec::with_capacity(src.len() / 3);
    let mut indents: Vec<usize> = vec![0];
    let mut depth: usize = 0; // bracket nesting
    let mut i = 0;
    let mut at_line_start = true;
    while i < bytes.len() {
        if at_line_start && depth == 0 {
            // Measure indentation; skip blank and comment-only lines.
            let mut col = 0;
            let mut j = i;
            while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t' || bytes[j] == 0x0c) {
                col += if bytes[j] == b'\t' { 8 - col % 8 } else { 1 };
                j += 1;
            }
            if j >= bytes.len() {
                break;
            }
            match bytes[j] {
                b'\n' | b'\r' => {
                    i = j + 1;
                    continue;
                }
                b'#' => {
                    while j < bytes.len() && bytes[j] != b'\n' {
                        j += 1;
                    }
                    i = j;
                    continue;
                }
                b'\\' if bytes.get(j + 1) == Some(&b'\n') => {
                    i = j + 2;
                    continue;
                }
                _ => {}
            }
            let current = indents.last().copied().unwrap_or(0);
            if col > current {
                indents.push(col);
                out.push(Token::new(TokenKind::Indent, ""));
            } else {
                while col < indents.last().copied().unwrap_or(0) && indents.len() > 1 {
                    indents.pop();
                    out.push(Token::new(TokenKind::Dedent, ""));
                }
            }
            at_line_start = false;
            i = j;
            continue;
        }
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\r' | 0x0c => i += 1,
            b'\n' => {
                if depth == 0 {
                    if out.last().is_some_and(|t| !t.is_layout()) {
                        out.push(Token::new(TokenKind::Newline, ""));
                    }
                    at_line_start = true;
                }
                i += 1;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'\\' => {
                // Line continuation (or a stray backslash, skipped).
                i += 1;
                if bytes.get(i) == Some(&b'\r') {
                    i += 1;
                }
                if bytes.get(i) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                let end = string_end(bytes, i);
                out.push(Token::new(TokenKind::String, slice(src, i, end)));
                i = end;
            }
            b'0'..=b'9' => {
                let end = number_end(bytes, i);
                out.push(Token::new(TokenKind::Number, slice(src, i, end)));
                i = end;
            }
            b'.' if bytes.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let end = number_end(bytes, i);
                out.push(Token::new(TokenKind::Number, slice(src, i, end)));
                i = end;
            }
            _ if is_name_start(b) => {
                let mut end = i + 1;
                while end < bytes.len() && is_name_continue(bytes[end]) {
                    end += 1;
                }
                // String prefixes: r"", b'', f"", rb"", u"" ...
                if end - i <= 2
                    && end < bytes.len()
                    && (bytes[end] == b'"' || bytes[end] == b'\'')
                    && src[i..end]
                        .bytes()
                        .all(|c| matches!(c.to_ascii_lowercase(), b'r' | b'b' | b'f' | b'u'))
                {
                    let send = string_end(bytes, end);
                    out.push(Token::new(TokenKind::String, slice(src, i, send)));
                    i = send;
                } else {
                    out.push(Token::new(TokenKind::Name, slice(src, i, end)));
                    i = end;
                }
            }
            _ => {
                let rest = &src.as_bytes()[i..];
                let len = if THREE_CHAR_OPS
                    .iter()
                    .any(|op| rest.starts_with(op.as_bytes()) && op.len() == 3)
                {
                    3
                } else if TWO_CHAR_OPS
                    .iter()
                    .any(|op| rest.starts_with(op.as_bytes()))
                {
                    2
                } else {
                    // One character (a whole UTF-8 scalar for non-ASCII bytes).
                    utf8_len(b)
                };
                let end = (i + len).min(bytes.len());
                let text = slice(src, i, end);
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push(Token::new(TokenKind::Op, text));
                i = end;
            }
        }
    }
    if out.last().is_some_and(|t| !t.is_layout()) {
        out.push(Token::new(TokenKind::Newline, ""));
    }
    while indents.len() > 1 {
        indents.pop();
        out.push(Token::new(TokenKind::Dedent, ""));
    }
    out
}

/// A slice that never panics: indices are moved to char boundaries.
fn slice(src: &str, start: usize, end: usize) -> &str {
    let mut s = start.min(src.len());
    while !src.is_char_boundary(s) {
        s -= 1;
    }
    let mut e = end.min(src.len()).max(s);
    while !src.is_char_boundary(e) {
        e += 1;
    }
    &src[s..e]
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_name_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn number_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() {
        let c = bytes[i];
        let exp_sign = (c == b'+' || c == b'-')
            && i > start
            && matches!(bytes[i - 1], b'e' | b'E')
            && !(bytes[start] == b'0' && matches!(bytes.get(start + 1), Some(b'x' | b'X')));
        if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || exp_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// End (exclusive) of the string literal whose opening quote is at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let q = bytes[start];
    let triple = bytes.get(start + 1) == Some(&q) && bytes.get(start + 2) == Some(&q);
    let mut i = if triple { start + 3 } else { start + 1 };
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\\' {
            i += 2;
            continue;
        }
        if triple {
            if c == q && bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q) {
                return i + 3;
            }
        } else if c == q {
            return i + 1;
        } else if c == b'\n' {
            // Unterminated single-quoted string: stop at the end of the line.
            return i;
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_and_texts(src: &str) -> Vec<(TokenKind, String)> {
        tokenize(src)
            .into_iter()
            .map(|t| (t.kind, t.text.to_string()))
            .collect()
    }

    #[test]
    fn layout_comments_and_strings() {
        let src =
            "def f(a,\n      b):  # comment\n    '''doc\n    string'''\n    return a**2 + b\n";
        let toks = kinds_and_texts(src);
        let texts: Vec<&str> = toks.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "def",
                "f",
                "(",
                "a",
                ",",
                "b",
                ")",
                ":",
                "",
                "",
                "'''doc\n    string'''",
                "",
                "return",
                "a",
                "**",
                "2",
                "+",
                "b",
                "",
                ""
            ]
        );
        assert_eq!(toks[8].0, TokenKind::Newline);
        assert_eq!(toks[9].0, TokenKind::Indent);
        assert_eq!(toks[10].0, TokenKind::String);
        assert_eq!(toks.last().map(|t| t.0), Some(TokenKind::Dedent));
    }

    #[test]
    fn prefixes_numbers_and_ops() {
        let toks = kinds_and_texts("x = rb'a\\'b' + 1e-3 @ y //= 0x1F\n");
        assert_eq!(toks[2], (TokenKind::String, "rb'a\\'b'".to_string()));
        assert_eq!(toks[4], (TokenKind::Number, "1e-3".to_string()));
        assert_eq!(toks[5], (TokenKind::Op, "@".to_string()));
        assert_eq!(toks[7], (TokenKind::Op, "//=".to_string()));
        assert_eq!(toks[8], (TokenKind::Number, "0x1F".to_string()));
    }

    #[test]
    fn hostile_input_does_not_panic() {
        for src in [
            "\"unterminated",
            "'''never closed",
            "x = (\n",
            "\u{00e9}t\u{00e9} = '\u{1F600}' \\",
            ")))\n\t\t  x\n y",
            "",
            "\\",
        ] {
            let _ = tokenize(src);
        }
    }
}
