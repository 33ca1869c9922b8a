//! Scope patterns: `*` matches any run of characters, everything else itself.
//!
//! Matching is linear in the pattern and the text: the pattern splits at its stars into
//! literal parts; the first must start the text and the last end it, and each part between
//! is found at its leftmost place after the one before. Taking the leftmost place is never
//! wrong for `*`-only patterns (a later place leaves less text for what follows), so there is
//! no backtracking, and `*a*a*a*a*a*a*b` against 63 `a`s costs what one pass costs.

/// Does `text` match `pattern`?
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let middle: Vec<&str> = parts.collect();
    let Some((last, between)) = middle.split_last() else {
        // No star: the whole text is the pattern.
        return rest.is_empty();
    };
    if rest.len() < last.len() {
        return false;
    }
    // The last part must end the text, so it is taken off before the middle parts are
    // looked for (they may not use its characters).
    let Some(body) = rest.strip_suffix(last) else {
        return false;
    };
    rest = body;
    for part in between {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_match_any_run() {
        assert!(glob_matches("kcp-*", "kcp-abc"));
        assert!(glob_matches("kcp-*", "kcp-"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("**", "x"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(glob_matches("a*b*c", "abc"));
        assert!(glob_matches("*-prod", "eu-prod"));
        assert!(glob_matches("a*a", "aa"));
        assert!(glob_matches("a*a*a", "aaa"));
        assert!(!glob_matches("a*a*a", "aa"));
        assert!(!glob_matches("kcp-*", "kube-system"));
        assert!(!glob_matches("default", "default2"));
        assert!(!glob_matches("default", "defaul"));
        assert!(!glob_matches("a*b", "ba"));
        assert!(!glob_matches("ab*ba", "aba"));
        assert!(glob_matches("ab*ba", "abba"));
        assert!(glob_matches("é*ü", "éxü"));
    }

    /// What backtracking matchers take exponential time on: many stars and a text of the
    /// first literal that fails only at the end.
    #[test]
    fn many_stars_take_one_pass() {
        let text = "a".repeat(63);
        let pattern = format!("{}b", "*a".repeat(13));
        for _ in 0..1000 {
            assert!(!glob_matches(&pattern, &text));
        }
        assert!(glob_matches(&format!("{}*", "*a".repeat(13)), &text));
    }

    /// The matcher agrees with the obvious recursive definition on every short pattern and
    /// text over a two-letter alphabet.
    #[test]
    fn agrees_with_the_definition() {
        fn reference(p: &[u8], t: &[u8]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some((b'*', rest)) => (0..=t.len()).any(|i| reference(rest, &t[i..])),
                Some((c, rest)) => t.first() == Some(c) && reference(rest, &t[1..]),
            }
        }
        fn all(alphabet: &[u8], max: usize) -> Vec<String> {
            let mut out = vec![String::new()];
            let mut frontier = vec![String::new()];
            for _ in 0..max {
                let mut next = Vec::new();
                for s in &frontier {
                    for c in alphabet {
                        let mut grown = s.clone();
                        grown.push(*c as char);
                        next.push(grown);
                    }
                }
                out.extend(next.iter().cloned());
                frontier = next;
            }
            out
        }
        for pattern in all(b"ab*", 5) {
            for text in all(b"ab", 5) {
                assert_eq!(
                    glob_matches(&pattern, &text),
                    reference(pattern.as_bytes(), text.as_bytes()),
                    "{pattern:?} {text:?}"
                );
            }
        }
    }
}
