//! Running the `switchyard` binary from the repository root, as users run it.

#![allow(dead_code)] // each test file uses some of these
#![allow(clippy::expect_used)] // test helpers panic on purpose

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn switchyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("switchyard runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A loopback port free now (released before the caller's process binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Sends SIGTERM to a broker and waits for it to exit, at most 40 s.
pub fn terminate(child: &mut Child) -> ExitStatus {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let stopped = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the broker's status") {
            return status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(40),
            "still running 40s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
