//! Small ports of Go standard-library behaviour that Kubernetes' messages depend on:
//! `strconv.Quote` (the `%q` verb) and `strconv.ParseUint`'s errors.

use std::fmt::Write as _;

/// Go's `strconv.Quote` of a string: `"` delimited, `\"` and `\\` escaped, printable runes
/// kept, `\a \b \f \n \r \t \v` for those controls, `\xHH` for other bytes below 0x20 and
/// 0x7f, `\uHHHH` / `\UHHHHHHHH` for other non-printable runes.
///
/// Go decides "printable" with Unicode tables (`unicode.IsPrint`); this port treats as
/// non-printable the controls, the spaces other than U+0020, the format characters listed
/// in [`is_format`], private-use code points and noncharacters. Unassigned code points
/// (which Go also escapes) are kept as they are.
pub(crate) fn quote(s: &str) -> String {
    quote_bytes(s.as_bytes())
}

/// [`quote`] of bytes that may not be UTF-8: an invalid byte is written `\xHH`, as Go does.
pub(crate) fn quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                push_escaped(&mut out, valid);
                rest = &[];
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                // `valid_up_to` is a char boundary: the prefix is UTF-8.
                push_escaped(&mut out, &String::from_utf8_lossy(valid));
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                for b in after.iter().take(bad) {
                    let _ = write!(out, "\\x{b:02x}");
                }
                rest = after.get(bad..).unwrap_or(&[]);
            }
        }
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
}

fn is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let u = c as u32;
    !(c.is_control()
        || c.is_whitespace()
        || is_format(u)
        || (0xE000..=0xF8FF).contains(&u)
        || u >= 0xF0000
        || (u & 0xFFFE) == 0xFFFE
        || (0xFDD0..=0xFDEF).contains(&u))
}

/// The Unicode format characters (category Cf) most likely to appear in text.
fn is_format(u: u32) -> bool {
    matches!(u,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
        | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its error text
/// (`strconv.ParseUint: parsing "x": invalid syntax` / `value out of range`).
pub(crate) fn parse_uint(s: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            quote(s)
        ));
    }
    s.parse::<u64>().map_err(|_| {
        format!(
            "strconv.ParseUint: parsing {}: value out of range",
            quote(s)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        assert_eq!(quote("abc"), r#""abc""#);
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("a\nb\tc\u{0}"), r#""a\nb\tc\x00""#);
        assert_eq!(quote("é✓"), "\"é✓\"");
        assert_eq!(quote("\u{200b}"), r#""\u200b""#);
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
        assert_eq!(quote_bytes(b"%\xc3"), r#""%\xc3""#);
    }

    #[test]
    fn parse_uint_errors() {
        assert_eq!(parse_uint("42"), Ok(42));
        assert_eq!(
            parse_uint(""),
            Err(r#"strconv.ParseUint: parsing "": invalid syntax"#.to_string())
        );
        assert_eq!(
            parse_uint("99999999999999999999"),
            Err(
                r#"strconv.ParseUint: parsing "99999999999999999999": value out of range"#
                    .to_string()
            )
        );
    }
}
