//! Tests of the encoders extension: decoding alone, and both functions through the environment.

use super::base64_decode;
use crate::test_support::eval_source as eval;
use crate::value::Inspect;

fn decoded(s: &str) -> Result<Vec<u8>, String> {
    base64_decode(s.as_bytes()).map_err(|e| e.message)
}

#[test]
fn encode() {
    for (bytes, text) in [
        ("", ""),
        ("h", "aA=="),
        ("he", "aGU="),
        ("hello", "aGVsbG8="),
        ("Hello World!", "SGVsbG8gV29ybGQh"),
    ] {
        assert_eq!(
            eval(&format!("base64.encode(b'{bytes}')")),
            Ok(Inspect::String(text.into()))
        );
    }
    assert_eq!(
        eval("base64.encode(b'\\xff\\xfe\\xfd')"),
        Ok(Inspect::String("//79".into()))
    );
}

#[test]
fn decode_padded_or_not() {
    for (text, bytes) in [
        ("", ""),
        ("aGVsbG8=", "hello"),
        ("aGVsbG8", "hello"),
        ("aA==", "h"),
        ("aA", "h"),
        ("aGU=", "he"),
        ("aGU", "he"),
        ("SGVsbG8gV29ybGQh", "Hello World!"),
        // line breaks are ignored, anywhere
        ("aGVs\r\nbG8=\n", "hello"),
        ("aA=\n=", "h"),
        // bits left over in the last character need not be zero
        ("aB==", "h"),
    ] {
        assert_eq!(decoded(text), Ok(bytes.as_bytes().to_vec()), "{text:?}");
    }
    assert_eq!(
        eval("base64.decode(base64.encode(b'\\x00\\xff'))"),
        Ok(Inspect::Bytes(vec![0, 255]))
    );
}

#[test]
fn decode_errors_are_go_s() {
    for (text, at) in [
        ("a", 0),
        ("=", 0),
        ("aGVsbG8-", 7),
        ("aGVsbG8=x", 7),
        ("aA=", 2),
        ("aA==aA==", 2),
        ("a===", 1),
        ("aGVsbG8 ", 7),
        ("aGVsb", 4),
    ] {
        assert_eq!(
            decoded(text),
            Err(format!("illegal base64 data at input byte {at}")),
            "{text:?}"
        );
    }
    assert_eq!(
        eval("base64.decode('a')"),
        Err("illegal base64 data at input byte 0".into())
    );
    assert_eq!(
        eval("base64.decode(b'aGVsbG8=')"),
        Err("no matching overload for 'base64.decode' applied to (bytes)".into())
    );
}
