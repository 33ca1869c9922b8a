//! Where the command writes: stdout through `out!` and `outln!`, which end the process quietly
//! on a closed pipe, and logs on stderr.

/// Writes to stdout; a closed pipe (`switchyard render ... | head`) ends the process quietly
/// instead of panicking like `print!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            $crate::output::stdout_failed(e);
        }
    }};
}

macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::output::stdout_failed(e);
        }
    }};
}

/// Logs go to stderr, filtered by `SWITCHYARD_LOG` (default: `default_level`).
pub(crate) fn init_logs(json: bool, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
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
