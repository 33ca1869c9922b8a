//! The `switchyard` command's library: its error type, and its file handling, which lives in
//! `switchyard-files` (the broker reads packs the same way) and is re-exported as [`files`].
//! The binary (`src/main.rs`) is a thin layer of subcommands over this and `switchyard-core`.

use std::path::Path;

pub use switchyard_files as files;
use switchyard_files::FileError;

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

impl From<FileError> for CliError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Usage(message) => CliError::Usage(message),
            FileError::Io { path, source } => CliError::Io { path, source },
            FileError::Input(message) => CliError::Input(message),
        }
    }
}
