//! cel-go's encoders extension (`ext.Encoders`, its base64 functions), which Kubernetes'
//! base environment does not have:
//!
//! - `base64.encode(bytes) -> string`: standard base64, padded;
//! - `base64.decode(string) -> bytes`: standard base64, padded or not. As cel-go (Go's
//!   `encoding/base64`, not strict): line breaks (`\r`, `\n`) are ignored, bits left over in
//!   the last character need not be zero, and anything else outside the alphabet fails with
//!   Go's message, `illegal base64 data at input byte <n>` (of the unpadded attempt when the
//!   padded one failed too).
//!
//! Both cost by the size of their argument.

use crate::error::EvalError;
use crate::registry::{Overload, Param, Value, no_such_overload};
use crate::value::base64_encode;

pub(crate) fn overloads() -> Vec<Overload> {
    vec![
        Overload::global("base64.encode", &[Param::Bytes], |a| match &a[0] {
            Value::Bytes(b) => {
                // 4 bytes for every 3: checked before it is built.
                crate::limits::check_bytes("base64.encode", b.len().div_ceil(3) * 4)
                    .map_err(EvalError::new)?;
                Ok(Value::string(base64_encode(b)))
            }
            _ => Err(no_such_overload("base64.encode", a)),
        })
        .linear_cost()
        .builds(),
        Overload::global("base64.decode", &[Param::String], |a| match &a[0] {
            Value::String(s) => base64_decode(s.as_bytes()).map(Value::bytes),
            _ => Err(no_such_overload("base64.decode", a)),
        })
        .linear_cost(),
    ]
}

/// cel-go's `base64.decode`: padded standard base64, else unpadded.
pub(crate) fn base64_decode(src: &[u8]) -> Result<Vec<u8>, EvalError> {
    decode(src, true)
        .or_else(|_| decode(src, false))
        .map_err(|at| EvalError::new(format!("illegal base64 data at input byte {at}")))
}

/// The value of a character of the standard alphabet.
fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

/// Go's `base64.StdEncoding.DecodeString` (`padded`) or `RawStdEncoding`'s: the bytes, or
/// the offset Go's `CorruptInputError` reports. Decodes quantum by quantum as Go's
/// `decodeQuantum` does, so the offsets are Go's.
fn decode(src: &[u8], padded: bool) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3 + 2);
    let mut si = 0;
    while si < src.len() {
        let mut quantum = [0u8; 4];
        let mut len = 4;
        let mut trailing = None;
        let mut j = 0;
        while j < 4 {
            let Some(&c) = src.get(si) else {
                if j == 0 {
                    return Ok(out);
                }
                if j == 1 || padded {
                    return Err(si - j);
                }
                len = j;
                break;
            };
            si += 1;
            if let Some(v) = sextet(c) {
                quantum[j] = v;
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if !padded || c != b'=' {
                return Err(si - 1);
            }
            // Padding: the end of the input, but for line breaks.
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    // `==` is expected: the first `=` is consumed.
                    while src.get(si).copied().is_some_and(is_newline) {
                        si += 1;
                    }
                    match src.get(si) {
                        None => return Err(src.len()),
                        Some(&b'=') => si += 1,
                        Some(_) => return Err(si - 1),
                    }
                }
                _ => {}
            }
            while src.get(si).copied().is_some_and(is_newline) {
                si += 1;
            }
            if si < src.len() {
                trailing = Some(si);
            }
            len = j;
            break;
        }
        let bits = (u32::from(quantum[0]) << 18)
            | (u32::from(quantum[1]) << 12)
            | (u32::from(quantum[2]) << 6)
            | u32::from(quantum[3]);
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..len]);
        if let Some(at) = trailing {
            return Err(at);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
