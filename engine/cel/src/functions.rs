//! The engine's own functions, registered in every [`Env`](crate::Env) (see
//! [`crate::stdlib`]): `sha256` and the DNS-1123 helpers.

use sha2::{Digest, Sha256};

/// Longest DNS-1123 label (Kubernetes `DNS1123LabelMaxLength`).
const DNS1123_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (Kubernetes `DNS1123SubdomainMaxLength`).
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// Lowercase hexadecimal SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn is_label_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` without a length limit.
fn is_label_shape(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_label_char(first)
                && is_label_char(last)
                && bytes.iter().all(|&b| is_label_char(b) || b == b'-')
        }
        _ => false,
    }
}

/// Kubernetes' `IsDNS1123Label`: at most 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && is_label_shape(s)
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated parts each
/// matching `[a-z0-9]([-a-z0-9]*[a-z0-9])?`. As in Kubernetes, a part is not limited to 63
/// characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && s.split('.').all(is_label_shape)
}

/// Turns any string into a valid DNS-1123 label, deterministically:
///
/// 1. ASCII letters are lowercased;
/// 2. every run of characters other than `[a-z0-9-]` becomes one `-`;
/// 3. leading and trailing `-` are trimmed;
/// 4. if the result equals the input (the input already was a valid label of at most 63
///    characters), it is returned as is;
/// 5. otherwise the input was changed (or is empty), and a suffix keeps distinct inputs
///    apart: with `h` the first 8 hexadecimal digits of the SHA-256 of the input's UTF-8
///    bytes, the result is `x-h` when step 3 left nothing, else the step-3 result cut to its
///    first 54 characters, with trailing `-` trimmed again, followed by `-h` (at most 63
///    characters).
///
/// `dns1123Label('my-app') == 'my-app'`, `dns1123Label('My_App')` is `my-app-` and 8 hex
/// digits, and so is a 100-character name, cut to fit.
pub fn dns1123_label(input: &str) -> String {
    let mut sanitized = String::with_capacity(input.len());
    let mut in_invalid_run = false;
    for c in input.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            sanitized.push(c);
            in_invalid_run = false;
        } else if !in_invalid_run {
            sanitized.push('-');
            in_invalid_run = true;
        }
    }
    let trimmed = sanitized.trim_matches('-');
    if trimmed == input && is_dns1123_label(trimmed) {
        return trimmed.to_string();
    }
    let hash = &sha256_hex(input.as_bytes())[..8];
    if trimmed.is_empty() {
        return format!("x-{hash}");
    }
    // `trimmed` is ASCII: byte and character counts agree.
    let keep = DNS1123_LABEL_MAX - 1 - hash.len();
    let prefix = trimmed[..trimmed.len().min(keep)].trim_end_matches('-');
    format!("{prefix}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc".as_bytes()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn dns1123_label_validation() {
        for ok in ["a", "0", "a-b", "a--b", "abc123", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "é", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn dns1123_subdomain_validation() {
        let long_part = "a".repeat(100);
        for ok in ["a", "a.b", "a-b.c-d", "example.com", long_part.as_str()] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        let too_long = format!("{}.a", "a".repeat(252));
        for bad in [
            "",
            ".",
            "a.",
            ".a",
            "a..b",
            "A.b",
            "a_b.c",
            "a.-b",
            too_long.as_str(),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
    }

    #[test]
    fn dns1123_label_sanitises() {
        assert_eq!(dns1123_label("my-app"), "my-app");
        assert_eq!(dns1123_label("a--b"), "a--b");
        let h = |s: &str| sha256_hex(s.as_bytes())[..8].to_string();
        assert_eq!(dns1123_label("My_App"), format!("my-app-{}", h("My_App")));
        assert_eq!(dns1123_label("MyApp"), format!("myapp-{}", h("MyApp")));
        assert_eq!(
            dns1123_label("--a..b__c--"),
            format!("a-b-c-{}", h("--a..b__c--"))
        );
        assert_eq!(dns1123_label(""), format!("x-{}", h("")));
        assert_eq!(dns1123_label("___"), format!("x-{}", h("___")));
        assert_eq!(dns1123_label("ééé"), format!("x-{}", h("ééé")));
        let long = "a".repeat(100);
        let out = dns1123_label(&long);
        assert_eq!(out, format!("{}-{}", "a".repeat(54), h(&long)));
        assert_eq!(out.len(), 63);
        // a cut that ends on '-' is trimmed before the suffix
        let dashy = format!("{}-{}", "a".repeat(53), "b".repeat(20));
        assert_eq!(
            dns1123_label(&dashy),
            format!("{}-{}", "a".repeat(53), h(&dashy))
        );
        // distinct inputs stay distinct
        assert_ne!(dns1123_label("My_App"), dns1123_label("my_app"));
        assert_ne!(dns1123_label(&long), dns1123_label(&"a".repeat(101)));
        for input in [
            "",
            "x",
            "A B C",
            &"-".repeat(70),
            &"Zz9".repeat(40),
            "a.b.c",
        ] {
            assert!(is_dns1123_label(&dns1123_label(input)), "{input}");
        }
        // exactly 63 valid characters are kept
        assert_eq!(dns1123_label(&"a".repeat(63)), "a".repeat(63));
    }
}
