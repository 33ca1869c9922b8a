//! `switchyard`: evaluate rule packs without a cluster.
//!
//! A thin layer over `switchyard-core`: read files, call the core, print.

#[macro_use]
mod output;

mod args;
mod cel_command;
mod commands;
mod memory;
mod run_command;

/// Counts the bytes the process holds, for the memory budget of the dry-run commands.
#[global_allocator]
static ALLOCATOR: memory::Counting = memory::Counting;

use switchyard_cli::CliError;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use args::{DiffFormat, ExplainFormat, RenderFormat, Sources, ValueArgs};
use output::init_logs;

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Rules engine for multi-cluster Kubernetes: evaluate rule packs without a cluster"
)]
struct Cli {
    /// The memory budget of `render`, `test`, `diff` and `explain` (200MiB, 2GiB,
    /// `unlimited`); default `SWITCHYARD_MAX_MEMORY`, else 80% of the smallest of the
    /// cgroup's memory limit, the address-space limit and the physical memory. Past it the
    /// command stops with an error (exit code 2).
    #[arg(long, global = true, value_name = "SIZE")]
    max_memory: Option<String>,
    #[command(subcommand)]
    command: Command,
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
        /// `yaml`: the objects as a multi-document stream, ready for `kubectl apply -f -`;
        /// `json`: the objects with their clusters, status patches and errors.
        #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
        format: RenderFormat,
        /// The evaluation clock (RFC 3339); default the current time.
        #[arg(long)]
        clock: Option<String>,
        /// A YAML list of member clusters (`ROLE/NAME`) besides those the inputs' annotation
        /// `switchyard.dev/cluster` names.
        #[arg(long)]
        clusters: Option<PathBuf>,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
    },
    /// Run the test cases of packs (default: every pack under ./rules).
    Test {
        /// Pack folders; default every pack under ./rules.
        packs: Vec<PathBuf>,
        /// Write a JUnit XML report.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Rewrite golden files with what the pack renders now.
        #[arg(long)]
        update: bool,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
    },
    /// Validate packs: every error with file, line and column.
    Check {
        /// Pack folders.
        #[arg(required = true)]
        packs: Vec<PathBuf>,
        /// Print diagnostics as JSON.
        #[arg(long)]
        json: bool,
        /// Fail (exit 1) on warnings too, as CI should.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        sources: Sources,
    },
    /// Compare what two versions of a pack render for the same inputs.
    Diff {
        /// The pack folder before the change (a checkout of the target branch).
        #[arg(long)]
        base: PathBuf,
        /// The pack folder after the change.
        #[arg(long)]
        head: PathBuf,
        /// Input files or folders of Kubernetes YAML, rendered by both versions.
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// `text` (a unified diff per object), `markdown` (for a pull request comment) or
        /// `json`.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        format: DiffFormat,
        /// The evaluation clock (RFC 3339); default the current time.
        #[arg(long)]
        clock: Option<String>,
        /// A YAML list of member clusters (`ROLE/NAME`) besides those the inputs' annotation
        /// `switchyard.dev/cluster` names.
        #[arg(long)]
        clusters: Option<PathBuf>,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
    },
    /// Trace why each rule did or did not fire for the input objects.
    Explain {
        /// The pack folder.
        #[arg(long)]
        pack: PathBuf,
        /// Input files or folders of Kubernetes YAML (multi-document).
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// `text`: each rule's expressions once, with the result for each trigger below, then
        /// each trigger's status; `json`: every trigger's trace, status and outputs.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        format: ExplainFormat,
        /// The evaluation clock (RFC 3339); default the current time.
        #[arg(long)]
        clock: Option<String>,
        /// A YAML list of member clusters (`ROLE/NAME`) besides those the inputs' annotation
        /// `switchyard.dev/cluster` names.
        #[arg(long)]
        clusters: Option<PathBuf>,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
    },
    /// Step a pack through time without a cluster: evaluate, apply what it desires as the
    /// broker would, move the clock, evaluate again; print what changes at each step.
    Simulate {
        /// The pack folder.
        #[arg(long)]
        pack: PathBuf,
        /// Input files or folders of Kubernetes YAML (multi-document).
        #[arg(long = "input", short = 'i', required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// Steps after the first evaluation.
        #[arg(long, default_value_t = 3)]
        steps: usize,
        /// How far the clock moves at each step (`30s`, `5m`).
        #[arg(long, default_value = "30s")]
        clock_step: String,
        /// Objects of FILE merged into the world (created when absent) before step STEP, as
        /// another controller would write them (a status); repeatable.
        #[arg(long = "merge", value_name = "FILE@STEP")]
        merges: Vec<String>,
        /// The clock of the first evaluation (RFC 3339); default the current time.
        #[arg(long)]
        clock: Option<String>,
        /// A YAML list of member clusters (`ROLE/NAME`) besides those the inputs name.
        #[arg(long)]
        clusters: Option<PathBuf>,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
    },
    /// Evaluate a CEL expression the way rules do (no expression: read one per line).
    Cel {
        /// May start with `-` (`-7 % 3`).
        #[arg(allow_hyphen_values = true)]
        expression: Option<String>,
        /// Evaluate in a rule of this pack (with `--rule` and `--input`): `self` is the first
        /// input object the rule watches, and the rule's lookups, `vars` and `tables` are
        /// bound as evaluation binds them.
        #[arg(long, requires_all = ["rule", "inputs"])]
        pack: Option<PathBuf>,
        /// The rule of `--pack` to evaluate in.
        #[arg(long, requires = "pack")]
        rule: Option<String>,
        /// An input file or folder of Kubernetes YAML (repeatable): the trigger and what its
        /// lookups read.
        #[arg(long = "input", short = 'i', requires = "pack")]
        inputs: Vec<PathBuf>,
        /// The evaluation clock (RFC 3339), with `--pack`; default the current time.
        #[arg(long, requires = "pack")]
        clock: Option<String>,
        #[command(flatten)]
        sources: Sources,
        #[command(flatten)]
        values: ValueArgs,
        /// A YAML or JSON map from variable name to value.
        #[arg(long)]
        bindings: Option<PathBuf>,
        /// Bind one variable: NAME=JSON (repeatable).
        #[arg(long = "var", value_name = "NAME=JSON")]
        vars: Vec<String>,
        /// The Kubernetes version whose CEL environment the expression compiles in, as
        /// `spec.cel.kubernetes` of a pack (default: the newest the engine implements).
        #[arg(long, value_name = "VERSION")]
        kubernetes: Option<switchyard_cel::KubernetesVersion>,
        /// An extension beyond Kubernetes' base environment, as `spec.cel.extensions`:
        /// bindings, encoders, math, strings-v3 (repeatable).
        #[arg(long = "extension", value_name = "NAME")]
        extensions: Vec<switchyard_cel::Extension>,
        /// Compile as the API server compiles a CRD validation rule or an admission
        /// policy: Kubernetes' type checker with every check packs relax (homogeneous
        /// literals, `null`), no quoted field names, no engine functions.
        #[arg(long, conflicts_with = "pack")]
        strict: bool,
    },
    /// Print the JSON Schema of the pack format (`--broker-config`: of the broker's
    /// configuration file).
    Schema {
        /// The schema of the broker's configuration file instead.
        #[arg(long)]
        broker_config: bool,
    },
    /// Print the least-privilege RBAC the broker needs to run packs: per cluster role, a
    /// ClusterRole (and Roles in the namespaces a scope names), with bindings, and the
    /// leader-election Role of the broker's own cluster.
    Rbac {
        /// A pack folder, or a folder of packs (as `run --packs`).
        #[arg(long)]
        packs: PathBuf,
        /// `yaml`: the manifests, one commented stream per role; `json`: the computed rules
        /// per role, with why each is needed (for tools and the Helm chart).
        #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
        format: RenderFormat,
        /// The namespace of the broker's ServiceAccount and leader-election Lease.
        #[arg(long, default_value = "switchyard-system")]
        lease_namespace: String,
        /// The ServiceAccount the bindings name.
        #[arg(long, default_value = "switchyard")]
        service_account: String,
        /// Only this cluster role (repeatable): what one cluster needs, for the roles it
        /// holds. The leader-election Role is printed either way.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// A namespace of the broker's own cluster holding kubeconfig Secrets of members
        /// found at run time (repeatable): reading them is granted there.
        #[arg(long = "member-secrets", value_name = "NAMESPACE")]
        member_secrets: Vec<String>,
        /// The broker's configuration file: the namespaces of its `members[].secrets` are
        /// granted as `--member-secrets` are.
        #[arg(long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        sources: Sources,
    },
    /// Run the broker: watch the clusters, apply what the packs produce, write status,
    /// clean up on delete, reload packs when they change on disk.
    Run(run_command::RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run(_)) {
        init_logs(false, "error");
    }
    // The commands that read inputs run within a memory budget (see `memory.rs`).
    if matches!(
        cli.command,
        Command::Render { .. }
            | Command::Test { .. }
            | Command::Diff { .. }
            | Command::Explain { .. }
    ) {
        memory::keep_freed_memory();
        // A budget below what the process holds already (`--max-memory 1KiB`) fails here.
        let budget = memory::resolve(cli.max_memory.as_deref()).and_then(|budget| {
            memory::set_budget(budget);
            memory::check(memory::Progress::default())
        });
        match budget {
            Ok(()) => {}
            Err(e) => {
                errln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else if cli.max_memory.is_some() {
        eprintln!("error: --max-memory applies to render, test, diff and explain");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Render {
            pack,
            inputs,
            format,
            clock,
            clusters,
            sources,
            values,
        } => {
            let inputs = commands::Inputs::new(inputs, clusters, clock).with_values(values);
            commands::render(&pack, &inputs, format, &sources)
        }
        Command::Test {
            packs,
            junit,
            update,
            sources,
            values,
        } => commands::test(&packs, junit.as_deref(), update, &sources, &values),
        Command::Check {
            packs,
            json,
            strict,
            sources,
        } => commands::check(&packs, json, strict, &sources),
        Command::Diff {
            base,
            head,
            inputs,
            format,
            clock,
            clusters,
            sources,
            values,
        } => {
            let inputs = commands::Inputs::new(inputs, clusters, clock).with_values(values);
            commands::diff(&base, &head, &inputs, format, &sources)
        }
        Command::Explain {
            pack,
            inputs,
            format,
            clock,
            clusters,
            sources,
            values,
        } => {
            let inputs = commands::Inputs::new(inputs, clusters, clock).with_values(values);
            commands::explain(&pack, &inputs, format, &sources)
        }
        Command::Simulate {
            pack,
            inputs,
            steps,
            clock_step,
            merges,
            clock,
            clusters,
            sources,
            values,
        } => {
            let inputs = commands::Inputs::new(inputs, clusters, clock).with_values(values);
            commands::simulate(&pack, &inputs, steps, &clock_step, &merges, &sources)
        }
        Command::Cel {
            expression,
            pack: Some(pack),
            rule: Some(rule),
            inputs,
            clock,
            sources,
            values,
            ..
        } => {
            let inputs = commands::Inputs::new(inputs, None, clock).with_values(values);
            match expression {
                Some(expression) => commands::probe(&pack, &rule, &inputs, &expression, &sources),
                None => Err(CliError::Usage(
                    "`cel --pack` evaluates one expression: give it".to_string(),
                )),
            }
        }
        Command::Cel {
            expression,
            bindings,
            vars,
            kubernetes,
            extensions,
            strict,
            ..
        } => cel_command::run(
            expression.as_deref(),
            bindings.as_deref(),
            &vars,
            switchyard_cel::CelEnvironment::new(kubernetes.unwrap_or_default(), extensions)
                .with_setting_names("--kubernetes", "--extension"),
            strict,
        ),
        Command::Schema { broker_config } => commands::schema(broker_config),
        Command::Rbac {
            packs,
            format,
            lease_namespace,
            service_account,
            roles,
            member_secrets,
            config,
            sources,
        } => commands::rbac(
            &packs,
            format,
            &commands::RbacNames {
                lease_namespace,
                service_account,
                roles,
                member_secrets,
                config,
            },
            &sources,
        ),
        Command::Run(args) => run_command::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
