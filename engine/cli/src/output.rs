//! Where the command writes: stdout through `out!` and `outln!`, which end the process quietly
//! on a closed pipe, messages on stderr through `errln!`, and logs on stderr.
//!
//! What the commands print quotes tenants' objects (names, status messages, values), so
//! every line goes through [`switchyard_core::text::visible`]: a control character or a
//! bidirectional override in an input is shown as an escape, never obeyed by the terminal.

/// Writes to stdout; a closed pipe (`switchyard render ... | head`) ends the process quietly
/// instead of panicking like `print!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let shown = switchyard_core::text::visible(&text);
        if let Err(e) = std::io::stdout().write_all(shown.as_bytes()) {
            $crate::output::stdout_failed(e);
        }
    }};
}

macro_rules! outln {
    ($($arg:tt)*) => {{
        out!($($arg)*);
        out!("\n");
    }};
}

/// `eprintln!`, with control characters shown as escapes as on stdout.
macro_rules! errln {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        eprintln!("{}", switchyard_core::text::visible(&text));
    }};
}

/// Logs go to stderr, filtered by `SWITCHYARD_LOG` (default: `default_level`).
pub(crate) fn init_logs(json: bool, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colours only for a terminal: logs written to a file or collected from a pod carry
    // no escape codes.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
