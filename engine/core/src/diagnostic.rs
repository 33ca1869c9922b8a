//! Diagnostics: what `switchyard check` prints and what loading a pack returns.
//!
//! Every diagnostic has a stable code (`cel::syntax`, `pack::unknown-field`, ...), a
//! lowercase message, and where known the file, line and column, the rule, and for CEL the
//! expression with a caret under the position.

use std::fmt;

use serde::Serialize;

use crate::yaml::Pos;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Worth knowing, nothing to fix (`check --strict` does not fail on it).
    Note,
}

/// A source line with a caret under a column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// The source line (of the expression, or of the file).
    pub text: String,
    /// 1-based column of the caret within `text`.
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<Snippet>,
    /// How to fix it, when the message alone does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            file: None,
            line: None,
            column: None,
            rule: None,
            snippet: None,
            help: None,
        }
    }

    pub fn note(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::error(code, message)
        }
    }

    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    #[must_use]
    pub fn at(mut self, file: &str, pos: Pos) -> Self {
        self.file = Some(file.to_string());
        if pos.line > 0 {
            self.line = Some(pos.line);
            self.column = Some(pos.column.max(1));
        }
        self
    }

    #[must_use]
    pub fn in_file(mut self, file: &str) -> Self {
        self.file = Some(file.to_string());
        self
    }

    #[must_use]
    pub fn in_rule(mut self, rule: &str) -> Self {
        self.rule = Some(rule.to_string());
        self
    }

    #[must_use]
    pub fn with_snippet(mut self, text: &str, column: usize) -> Self {
        self.snippet = Some(Snippet {
            text: text.to_string(),
            column: column.max(1),
        });
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file:line:col` (as much of it as is known).
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{file}:{l}:{c}"),
            (Some(l), None) => format!("{file}:{l}"),
            _ => file.to_string(),
        })
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        if let Some(location) = self.location() {
            write!(f, "{location}: ")?;
        }
        write!(f, "{severity}[{}]: {}", self.code, self.message)?;
        if let Some(rule) = &self.rule {
            write!(f, "\n  in rule `{rule}`")?;
        }
        if let Some(snippet) = &self.snippet {
            write!(
                f,
                "\n  | {}\n  | {}^",
                snippet.text,
                " ".repeat(snippet.column - 1)
            )?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Diagnostics sorted by file, position and code, so output is stable.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (&a.file, a.line, a.column, a.code, &a.message)
            .cmp(&(&b.file, b.line, b.column, b.code, &b.message))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_everything() {
        let d = Diagnostic::error("cel::syntax", "unexpected end of input")
            .at(
                "rules/a.yaml",
                Pos {
                    line: 3,
                    column: 17,
                },
            )
            .in_rule("r1")
            .with_snippet("self.x >", 9);
        assert_eq!(
            d.to_string(),
            "rules/a.yaml:3:17: error[cel::syntax]: unexpected end of input\n  in rule `r1`\n  | self.x >\n  |         ^"
        );
    }
}
