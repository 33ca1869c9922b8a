//! What the checker and the cost estimator share to read a source again: the environment's
//! parser (a [`crate::env::Program`] keeps no AST), the stack it runs on, and a scan of the
//! source outside its string literals.

use std::sync::LazyLock;

/// The parser of [`crate::Env`], with the same macros (`None` only if the environment
/// itself cannot be built, which every compile reports).
pub(super) static PARSER: LazyLock<Option<cel::Env>> = LazyLock::new(|| crate::env::parser().ok());

/// The parser recurses deeply (see `Env::compile`): it runs on a stack of its own.
pub(super) const PARSE_STACK: usize = 256 * 1024 * 1024;

/// The characters of CEL source outside its string literals (each literal's opening quote
/// included), with their byte offsets: the
/// scanners that find where a node's text ends must not count brackets inside strings.
pub(super) fn outside_literals(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    text.char_indices().filter(move |&(_, c)| {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            return false;
        }
        if c == '\'' || c == '"' {
            // The opening quote is yielded: a literal starts outside the others.
            quote = Some(c);
        }
        true
    })
}
