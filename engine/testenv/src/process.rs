//! Child processes: started with their output in a log file, stopped with SIGTERM then
//! SIGKILL, killed on drop, and registered with a watchdog that outlives a killed test binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::error::TestEnvError;

/// How long a stopped process gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Drop only runs when the test binary unwinds or returns; if it is killed (a CI timeout, a
/// SIGKILL), its children would live on holding ports. The watchdog is a shell reading pids on
/// a pipe from this process: when the pipe closes, which the kernel does when this process
/// dies however it dies, it kills every pid still registered.
pub(crate) struct Watchdog {
    stdin: Mutex<Option<std::process::ChildStdin>>,
    child: Mutex<Option<std::process::Child>>,
}

const WATCHDOG_SCRIPT: &str = r#"pids=" "
while read -r op pid; do
  case "$pid" in ''|*[!0-9]*|0|1) continue ;; esac
  case "$op" in
    add) pids="$pids$pid " ;;
    del) pids="${pids/ $pid / }" ;;
  esac
done
for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
"#;

impl Watchdog {
    pub(crate) fn start() -> Result<Arc<Watchdog>, TestEnvError> {
        let mut child = std::process::Command::new("bash")
            .args(["-c", WATCHDOG_SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| TestEnvError::io("starting the watchdog (bash)", err))?;
        Ok(Arc::new(Watchdog {
            stdin: Mutex::new(child.stdin.take()),
            child: Mutex::new(Some(child)),
        }))
    }

    fn send(&self, line: &str) {
        let mut stdin = self.stdin.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pipe) = stdin.as_mut()
            && let Err(err) = writeln!(pipe, "{line}")
        {
            tracing::warn!(%err, "watchdog pipe");
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closing the pipe makes the shell kill what is left and exit; reap it.
        drop(
            self.stdin
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(mut child) = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = child.wait();
        }
    }
}

/// A running etcd or kube-apiserver.
pub(crate) struct Proc {
    name: String,
    child: Child,
    /// Kept apart from `child`, which forgets it once the process is reaped.
    pid: Option<u32>,
    log: PathBuf,
    watchdog: Arc<Watchdog>,
}

impl Proc {
    pub(crate) fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        watchdog: &Arc<Watchdog>,
    ) -> Result<Proc, TestEnvError> {
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|err| TestEnvError::io(format!("opening {}", log.display()), err))
        };
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| TestEnvError::io(format!("starting {}", program.display()), err))?;
        let pid = child.id();
        if let Some(pid) = pid {
            watchdog.send(&format!("add {pid}"));
        }
        tracing::debug!(name, ?pid, log = %log.display(), "started");
        Ok(Proc {
            name: name.to_string(),
            child,
            pid,
            log: log.to_path_buf(),
            watchdog: Arc::clone(watchdog),
        })
    }

    /// The exit status if the process has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(err) => Some(err.to_string()),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL.
    pub(crate) async fn stop(mut self) -> Result<(), TestEnvError> {
        if self.exited().is_some() {
            return Ok(());
        }
        // tokio can only send SIGKILL; `kill` sends SIGTERM without unsafe code.
        let pid = self.pid.map(|pid| pid.to_string()).unwrap_or_default();
        let grace = match Command::new("kill").args(["-TERM", &pid]).status().await {
            Ok(status) if status.success() => STOP_GRACE,
            Ok(status) => {
                tracing::warn!(name = self.name, %status, "sending SIGTERM");
                Duration::ZERO
            }
            Err(err) => {
                tracing::warn!(name = self.name, %err, "sending SIGTERM");
                Duration::ZERO
            }
        };
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(TestEnvError::io(format!("waiting for {}", self.name), err)),
            Err(_) => {
                tracing::warn!(name = self.name, "did not exit after SIGTERM, killing it");
                self.child
                    .kill()
                    .await
                    .map_err(|err| TestEnvError::io(format!("killing {}", self.name), err))
            }
        }
    }

    /// Sends SIGKILL without waiting, so several processes die in parallel before
    /// [`Drop`] reaps each.
    pub(crate) fn start_kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.start_kill();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Kill and reap here rather than leaving it to tokio, so that the process is gone (its
        // port free, its files closed) when the owner is dropped.
        self.start_kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(pid) = self.pid {
            self.watchdog.send(&format!("del {pid}"));
        }
    }
}

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(cannot read the log: {err})"),
    }
}
