//! The broker child process: `switchyard_kube::run` and a line protocol on stdin/stdout, and
//! the parent's handle on it (its writes, peak RSS, CPU and idleness).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use switchyard_kube::config::BrokerConfig;
use switchyard_kube::controller::Writes;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::error::Res;
use crate::figures::{process_cpu_ticks, process_memory_kib};

/// The broker is idle when it used at most this many clock ticks (1/100 s) of CPU in each of
/// `QUIET_SECONDS` consecutive seconds and made no write.
pub(crate) const QUIET_TICKS: u64 = 2;
pub(crate) const QUIET_SECONDS: u32 = 3;

/// Runs the broker until stdin says `stop` or closes; answers `writes` with the controller's
/// write counters and `resync` by re-queueing every trigger.
pub(crate) async fn child_main(config: &Path) -> Res<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let config: BrokerConfig = serde_json::from_str(&std::fs::read_to_string(config)?)?;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let broker = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop_rx.await;
        };
        switchyard_kube::run(config, shutdown, move |handle| {
            let _ = started_tx.send(handle);
        })
        .await
        .map_err(|e| e.to_string())
    });
    let Ok(handle) = started_rx.await else {
        let result = broker.await?;
        return Err(format!("the broker did not start: {result:?}").into());
    };
    let mut out = tokio::io::stdout();
    out.write_all(b"started\n").await?;
    out.flush().await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = match line.trim() {
            "writes" => {
                let w = handle.controller.writes();
                format!(
                    "writes {} {} {} {}\n",
                    w.applies, w.status, w.deletes, w.finalizers
                )
            }
            "resync" => {
                handle.controller.resync();
                "ok\n".to_string()
            }
            "stop" => break,
            other => format!("error: unknown command `{other}`\n"),
        };
        out.write_all(reply.as_bytes()).await?;
        out.flush().await?;
    }
    let _ = stop_tx.send(());
    broker.await??;
    Ok(())
}

/// The broker child process, seen from the benchmark.
pub(crate) struct BrokerProcess {
    child: Child,
    pid: u32,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl BrokerProcess {
    pub(crate) async fn start(config: &Path) -> Res<BrokerProcess> {
        // A profiler may run the broker: `SWITCHYARD_BENCH_BROKER_WRAPPER=heaptrack`.
        let wrapper = std::env::var("SWITCHYARD_BENCH_BROKER_WRAPPER").ok();
        let words: Vec<&str> = wrapper.iter().flat_map(|w| w.split_whitespace()).collect();
        let mut command = match words.split_first() {
            Some((program, rest)) => {
                let mut command = tokio::process::Command::new(program);
                command.args(rest).arg(std::env::current_exe()?);
                command
            }
            None => tokio::process::Command::new(std::env::current_exe()?),
        };
        let mut child = command
            .arg("--broker-child")
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("the broker process exited at once")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut process = BrokerProcess {
            child,
            pid,
            stdin,
            stdout,
        };
        let mut first = process.read_line(Duration::from_secs(60)).await?;
        // A wrapper may print its own lines first.
        while wrapper.is_some() && first != "started" {
            first = process.read_line(Duration::from_secs(60)).await?;
        }
        if first != "started" {
            return Err(format!("the broker process said `{first}`").into());
        }
        Ok(process)
    }

    async fn read_line(&mut self, timeout: Duration) -> Res<String> {
        match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("the broker process exited (see its log above)".into()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(format!("the broker process did not answer within {timeout:?}").into()),
        }
    }

    async fn command(&mut self, command: &str) -> Res<String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await?;
        self.stdin.flush().await?;
        self.read_line(Duration::from_secs(30)).await
    }

    pub(crate) async fn writes(&mut self) -> Res<Writes> {
        let line = self.command("writes").await?;
        let numbers: Vec<u64> = line
            .strip_prefix("writes ")
            .ok_or_else(|| format!("unexpected answer `{line}`"))?
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [applies, status, deletes, finalizers] => Ok(Writes {
                applies,
                status,
                deletes,
                finalizers,
            }),
            _ => Err(format!("unexpected answer `{line}`").into()),
        }
    }

    pub(crate) async fn resync(&mut self) -> Res<()> {
        let line = self.command("resync").await?;
        if line == "ok" {
            Ok(())
        } else {
            Err(format!("resync: `{line}`").into())
        }
    }

    /// `VmHWM` of the broker process: its peak resident set, in KiB.
    pub(crate) fn peak_rss_kib(&self) -> Res<u64> {
        self.memory_kib("VmHWM")
    }

    /// A `/proc/PID/status` field of the broker process in kB (`VmHWM`, `VmRSS`).
    pub(crate) fn memory_kib(&self, field: &str) -> Res<u64> {
        process_memory_kib(self.pid, field)
    }

    /// CPU time used by the broker process (user + system), in clock ticks of 1/100 s.
    pub(crate) fn cpu_ticks(&self) -> Res<u64> {
        process_cpu_ticks(self.pid)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the broker is idle (see [`QUIET_TICKS`]); returns how long it was busy
    /// from the call on (the start of the quiet window) and the CPU ticks it used meanwhile.
    pub(crate) async fn wait_quiet(&mut self, deadline: Duration) -> Res<(Duration, u64)> {
        let start = Instant::now();
        let ticks_at_start = self.cpu_ticks()?;
        let mut last_ticks = ticks_at_start;
        let mut last_writes = self.writes().await?;
        let mut quiet = 0;
        let mut busy_until = Duration::ZERO;
        let mut ticks_busy = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let ticks = self.cpu_ticks()?;
            let writes = self.writes().await?;
            if ticks.saturating_sub(last_ticks) <= QUIET_TICKS && writes == last_writes {
                quiet += 1;
                if quiet >= QUIET_SECONDS {
                    return Ok((busy_until, ticks_busy));
                }
            } else {
                quiet = 0;
                busy_until = start.elapsed();
                ticks_busy = ticks - ticks_at_start;
            }
            last_ticks = ticks;
            last_writes = writes;
            if start.elapsed() > deadline {
                return Err(format!("the broker was still busy after {deadline:?}").into());
            }
        }
    }

    /// Asks the broker to stop (SIGTERM's path: finish in-flight work) and waits, killing it
    /// after 40 s.
    pub(crate) async fn stop(mut self) -> Res<()> {
        let _ = self.stdin.write_all(b"stop\n").await;
        let _ = self.stdin.flush().await;
        match tokio::time::timeout(Duration::from_secs(40), self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("the broker process exited with {status}").into())
                }
            }
            Err(_) => {
                self.child.kill().await?;
                Err("the broker process did not stop within 40 s; killed".into())
            }
        }
    }
}
