//! The options the subcommands share: where a pack's partials and CRDs come from, and the
//! output formats.

use std::path::PathBuf;

use clap::ValueEnum;

/// Where a pack's shared partials and the CRDs its expressions are type-checked against
/// come from.
#[derive(clap::Args, Clone, Default)]
pub struct Sources {
    /// The shared partials folder; default the nearest `templates/` above the pack.
    #[arg(long)]
    pub partials: Option<PathBuf>,
    /// A folder (or file) of CustomResourceDefinitions to type-check expressions against;
    /// repeatable. Default the nearest `config/crds/` above the pack.
    #[arg(long = "crds")]
    pub crds: Vec<PathBuf>,
    /// More CustomResourceDefinitions (folder or file; repeatable) that outputs are
    /// validated against, besides those of `--crds` or the default folder.
    #[arg(long = "validate-against")]
    pub validate_against: Vec<PathBuf>,
}

/// Values of the pack's parameters (`spec.parameters`), as Helm takes them.
#[derive(clap::Args, Clone, Default)]
pub struct ValueArgs {
    /// A YAML map from parameter name to value (repeatable: later files over earlier ones,
    /// maps merged key by key).
    #[arg(long = "values", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One value, over the files: NAME=VALUE or PATH=VALUE (`limits.cpu=2`); VALUE is read
    /// as YAML (`3`, `true`, `[a, b]`, `"3"` for a string). Repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum RenderFormat {
    Yaml,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ExplainFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DiffFormat {
    Text,
    Markdown,
    Json,
}
