//! The command line: the size of the run, its deadline, and the internal `--broker-child`.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::Res;

pub(crate) struct Args {
    pub(crate) triggers: usize,
    pub(crate) workers: usize,
    pub(crate) concurrency: usize,
    pub(crate) timeout: Duration,
    pub(crate) reload_debounce_ms: u64,
    /// Internal: run only the broker, with this configuration file (JSON `BrokerConfig`).
    pub(crate) child: Option<PathBuf>,
}

pub(crate) const USAGE: &str = "usage: broker [--triggers N (10000)] [--workers N (16)] \
[--concurrency N (16)] [--timeout-minutes N (15)] [--reload-debounce-ms N (500)]";

impl Args {
    pub(crate) fn parse() -> Res<Args> {
        let mut args = Args {
            triggers: 10_000,
            workers: 16,
            concurrency: 16,
            timeout: Duration::from_secs(15 * 60),
            reload_debounce_ms: 500,
            child: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = || -> Res<u64> {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{flag} {value}: {e}").into())
            };
            match flag.as_str() {
                "--triggers" => args.triggers = usize::try_from(number()?)?,
                "--workers" => args.workers = usize::try_from(number()?)?.max(1),
                "--concurrency" => args.concurrency = usize::try_from(number()?)?.max(1),
                "--timeout-minutes" => args.timeout = Duration::from_secs(number()? * 60),
                "--reload-debounce-ms" => args.reload_debounce_ms = number()?,
                "--broker-child" => args.child = Some(PathBuf::from(&value)),
                _ => return Err(format!("unknown flag {flag}\n{USAGE}").into()),
            }
        }
        if args.triggers == 0 {
            return Err("--triggers must be at least 1".into());
        }
        Ok(args)
    }
}
