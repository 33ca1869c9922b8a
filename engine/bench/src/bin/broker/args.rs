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
    /// Side by side with kro at these numbers of Apps, instead of the broker benchmark.
    pub(crate) versus_kro: Option<Vec<usize>>,
    /// How long each controller is left alone after converging, counting its writes.
    pub(crate) idle: Duration,
    /// Sharding: the world converged by this many broker replicas in turn, instead of the
    /// broker benchmark.
    pub(crate) replicas: Option<Vec<usize>>,
    /// How many shards the replicas split the triggers into.
    pub(crate) shards: u32,
    /// Steps of the broker benchmark left out (`--skip resync,floor`): step 4 and step 6,
    /// to measure the reloads (step 5) alone on top of the convergence they need.
    pub(crate) skip_resync: bool,
    pub(crate) skip_floor: bool,
    /// Internal: run only the broker, with this configuration file (JSON `BrokerConfig`).
    pub(crate) child: Option<PathBuf>,
}

pub(crate) const USAGE: &str = "usage: broker [--triggers N (10000)] [--workers N (16)] \
[--concurrency N (16)] [--timeout-minutes N (15)] [--reload-debounce-ms N (500)]
       [--skip resync,floor]
       broker --versus-kro N[,N...] [--workers N] [--idle-seconds N (30)] [--timeout-minutes N]
       broker --replicas N[,N...] [--shards N (6)] [--triggers N] [--workers N] [--timeout-minutes N]";

impl Args {
    pub(crate) fn parse() -> Res<Args> {
        let mut args = Args {
            triggers: 10_000,
            workers: 16,
            concurrency: 16,
            timeout: Duration::from_secs(15 * 60),
            reload_debounce_ms: 500,
            versus_kro: None,
            replicas: None,
            shards: 6,
            idle: Duration::from_secs(30),
            skip_resync: false,
            skip_floor: false,
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
                "--idle-seconds" => args.idle = Duration::from_secs(number()?),
                "--versus-kro" => {
                    let sizes = value
                        .split(',')
                        .map(|n| n.trim().parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("--versus-kro {value}: {e}"))?;
                    if sizes.is_empty() || sizes.contains(&0) {
                        return Err("--versus-kro needs sizes of at least 1".into());
                    }
                    args.versus_kro = Some(sizes);
                }
                "--shards" => args.shards = u32::try_from(number()?)?.max(1),
                "--replicas" => {
                    let counts = value
                        .split(',')
                        .map(|n| n.trim().parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("--replicas {value}: {e}"))?;
                    if counts.is_empty() || counts.contains(&0) {
                        return Err("--replicas needs counts of at least 1".into());
                    }
                    args.replicas = Some(counts);
                }
                "--skip" => {
                    for step in value.split(',').map(str::trim) {
                        match step {
                            "resync" => args.skip_resync = true,
                            "floor" => args.skip_floor = true,
                            other => {
                                return Err(format!(
                                    "--skip {other}: the steps that can be left out are resync and floor"
                                )
                                .into());
                            }
                        }
                    }
                }
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
