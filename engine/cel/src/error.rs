use thiserror::Error;

/// An expression that does not parse. Positions are 1-based and count characters of the
/// expression source, so callers can map them into the file the expression came from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
    /// 1-based line within the expression.
    pub line: usize,
    /// 1-based column (in characters) within that line.
    pub column: usize,
}

impl CompileError {
    /// The offending line of `source` with a caret under the error position.
    pub fn caret(&self, source: &str) -> String {
        let text = source.lines().nth(self.line.saturating_sub(1)).unwrap_or("");
        format!("{text}\n{}^", " ".repeat(self.column.saturating_sub(1)))
    }
}

/// An evaluation that failed: a missing field, a type without the called overload, a
/// budget exceeded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct EvalError {
    pub message: String,
}

impl EvalError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}
