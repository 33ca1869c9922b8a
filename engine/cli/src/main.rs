//! `switchyard`: evaluate rule packs without a cluster.
//!
//! A thin layer over `switchyard-core`: read files, call the core, print.

/// Writes to stdout; a closed pipe (`switchyard render ... | head`) ends the process quietly
/// instead of panicking like `print!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            $crate::stdout_failed(e);
        }
    }};
}

macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::stdout_failed(e);
        }
    }};
}

mod cel_command;
mod commands;
mod files;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Rules engine for multi-cluster Kubernetes: evaluate rule packs without a cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum RenderFormat {
    Yaml,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DiffFormat {
    Text,
    Markdown,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Print the objects a pack produces for input objects.
    Render {
        /// The pack folder.
        #[arg(long)]
        pack: PathBuf,
        /// Input files or folders of Kubernetes YAML (multi-document).
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
        format: RenderFormat,
        /// The evaluation clock (RFC 3339); default the current time.
        #[arg(long)]
        clock: Option<String>,
        /// The shared partials folder; default the nearest `templates/` above the pack.
        #[arg(long)]
        partials: Option<PathBuf>,
    },
    /// Run the test cases of packs (default: every pack under ./rules).
    Test {
        packs: Vec<PathBuf>,
        /// Write a JUnit XML report.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Rewrite golden files with what the pack renders now.
        #[arg(long)]
        update: bool,
        #[arg(long)]
        partials: Option<PathBuf>,
    },
    /// Validate packs: every error with file, line and column.
    Check {
        #[arg(required = true)]
        packs: Vec<PathBuf>,
        /// Print diagnostics as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long)]
        partials: Option<PathBuf>,
    },
    /// Compare what two versions of a pack render for the same inputs.
    Diff {
        #[arg(long)]
        base: PathBuf,
        #[arg(long)]
        head: PathBuf,
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        format: DiffFormat,
        #[arg(long)]
        clock: Option<String>,
        #[arg(long)]
        partials: Option<PathBuf>,
    },
    /// Trace why each rule did or did not fire for the input objects.
    Explain {
        #[arg(long)]
        pack: PathBuf,
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        #[arg(long)]
        clock: Option<String>,
        #[arg(long)]
        partials: Option<PathBuf>,
    },
    /// Evaluate a CEL expression the way rules do (no expression: read one per line).
    Cel {
        expression: Option<String>,
        /// A YAML or JSON map from variable name to value.
        #[arg(long)]
        bindings: Option<PathBuf>,
        /// Bind one variable: NAME=JSON (repeatable).
        #[arg(long = "var", value_name = "NAME=JSON")]
        vars: Vec<String>,
    },
    /// Print the JSON Schema of the pack format.
    Schema,
}

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

/// Stdout is gone: a closed pipe is a normal end, anything else an error.
pub(crate) fn stdout_failed(error: std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("error: writing to stdout: {error}");
    std::process::exit(2);
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("SWITCHYARD_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render {
            pack,
            inputs,
            format,
            clock,
            partials,
        } => commands::render(
            &pack,
            &inputs,
            format,
            clock.as_deref(),
            partials.as_deref(),
        ),
        Command::Test {
            packs,
            junit,
            update,
            partials,
        } => commands::test(&packs, junit.as_deref(), update, partials.as_deref()),
        Command::Check {
            packs,
            json,
            partials,
        } => commands::check(&packs, json, partials.as_deref()),
        Command::Diff {
            base,
            head,
            inputs,
            format,
            clock,
            partials,
        } => commands::diff(
            &base,
            &head,
            &inputs,
            format,
            clock.as_deref(),
            partials.as_deref(),
        ),
        Command::Explain {
            pack,
            inputs,
            clock,
            partials,
        } => commands::explain(&pack, &inputs, clock.as_deref(), partials.as_deref()),
        Command::Cel {
            expression,
            bindings,
            vars,
        } => cel_command::run(expression.as_deref(), bindings.as_deref(), &vars),
        Command::Schema => commands::schema(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
