//! The `switchyard` command's file handling, as a library: reading pack folders, shared
//! partials, CRDs and input objects from disk. The binary (`src/main.rs`) is a thin layer of
//! subcommands over this and `switchyard-core`; benchmarks and tests read packs the same way.

use std::path::Path;

pub mod files;

/// Errors that stop a command. Exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Input(String),
    /// A pack that does not load; its diagnostics were printed already.
    #[error("pack `{0}` has errors")]
    Pack(String),
}

impl CliError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CliError::Io {
            path: files::display(path),
            source,
        }
    }
}
