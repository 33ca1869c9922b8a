//! The memory budget of a dry-run command (`render`, `test`, `diff`, `explain`).
//!
//! An input of many objects needs memory in proportion; past what the machine (or the
//! container) has, the allocator would fail and the process abort without a word. Instead
//! the process counts the bytes it holds ([`Counting`], the global allocator of the
//! binary) against a budget: `--max-memory SIZE`, else `SWITCHYARD_MAX_MEMORY`, else 80%
//! of the smallest of the cgroup's memory limit, the address-space limit and the physical
//! memory. Commands check the budget between objects ([`check`]); an allocation that would
//! pass the budget between two checks ends the process with the same kind of message
//! (exit code 2) rather than letting it grow further.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The bytes the process holds from the allocator.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The budget in bytes; `usize::MAX` for none (the broker, `check`, `cel`).
static BUDGET: AtomicUsize = AtomicUsize::new(usize::MAX);
/// How many input objects were read, and triggers evaluated, when last checked: for the
/// message of an allocation that passes the budget between checks.
static OBJECTS: AtomicU64 = AtomicU64::new(0);
static TRIGGERS: AtomicU64 = AtomicU64::new(0);
/// Set once the process is ending over its budget: the allocations of the ending pass.
static ENDING: AtomicBool = AtomicBool::new(false);

/// mimalloc, counting the bytes it hands out (relaxed: the count is a bound
/// checked against a budget, not a synchronisation point). mimalloc rather than the system
/// allocator: the engine allocates many small JSON and CEL nodes.
pub struct Counting;

/// mimalloc's `mi_option_purge_delay` (its number in mimalloc 3, which the `mimalloc` crate
/// builds; the crate leaves option numbers to its users).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// For a dry-run command: memory freed is kept for reuse, never returned to the operating
/// system before the process exits. A command runs once and reuses what it frees within
/// milliseconds; returned and faulted in again, it cost `render` of 10,000 triggers half a
/// second of system time in 1.5 s. The broker keeps mimalloc's default, returning memory a
/// while after a burst. Call it first thing in `main` (the setter is not thread-safe).
pub fn keep_freed_memory() {
    // SAFETY: sets one integer option of the allocator, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
    }
}

// SAFETY: every call is forwarded to `MiMalloc` with the same arguments; the counter only
// observes the sizes. The only unsafe code of the workspace (see the crate's lints).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: forwarded as is.
        unsafe { MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: forwarded as is.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            grow(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded as is.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Counts `size` more bytes; past the budget, ends the process with the budget's message.
#[inline]
fn grow(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed).saturating_add(size);
    if live > BUDGET.load(Ordering::Relaxed) && !ENDING.swap(true, Ordering::Relaxed) {
        over_budget(live);
    }
}

/// Ends the process from inside the allocator: the message is formatted on the stack and
/// written unbuffered, and nothing on the way allocates more than the exit itself.
#[cold]
fn over_budget(live: usize) -> ! {
    let mut message = StackText::new();
    let _ = writeln!(
        message,
        "error: {}",
        Exceeded {
            budget: BUDGET.load(Ordering::Relaxed),
            live,
            objects: OBJECTS.load(Ordering::Relaxed),
            triggers: TRIGGERS.load(Ordering::Relaxed),
        }
    );
    let _ = std::io::stderr().write_all(message.as_bytes());
    std::process::exit(2);
}

/// A fixed buffer to format into without allocating (a longer text is cut).
struct StackText {
    bytes: [u8; 512],
    len: usize,
}

impl StackText {
    fn new() -> StackText {
        StackText {
            bytes: [0; 512],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The message of a passed budget: what happened and what to do.
struct Exceeded {
    budget: usize,
    live: usize,
    objects: u64,
    triggers: u64,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.objects > 0 {
            write!(f, "input of {} objects", self.objects)?;
        } else {
            write!(f, "the input")?;
        }
        write!(
            f,
            " needs more memory than the {} budget (stopped ",
            Size(self.budget as u64)
        )?;
        if self.triggers > 0 {
            write!(f, "after {} triggers, ", self.triggers)?;
        } else if self.objects > 0 {
            write!(f, "after reading them, ")?;
        } else {
            write!(f, "with ")?;
        }
        write!(
            f,
            "{} in use); render fewer objects at a time or raise --max-memory",
            Size(self.live as u64)
        )
    }
}

/// Bytes, shown in the largest binary unit they fill: `200 MiB`, `3.2 GiB`.
pub struct Size(pub u64);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("TiB", 1 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ];
        for (name, unit) in UNITS {
            if self.0 >= unit {
                // Tenths, rounded: `3.2 GiB`, and `200 MiB` when whole.
                let tenths = (u128::from(self.0) * 10 + u128::from(unit) / 2) / u128::from(unit);
                return if tenths % 10 == 0 {
                    write!(f, "{} {name}", tenths / 10)
                } else {
                    write!(f, "{}.{} {name}", tenths / 10, tenths % 10)
                };
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

/// The bytes the process holds now.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Puts a budget in force (`None`: none).
pub fn set_budget(budget: Option<u64>) {
    let bytes = budget.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX));
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// What a command has done so far, at a safe point: the objects it read, the triggers it
/// evaluated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub objects: u64,
    pub triggers: u64,
}

/// The share of the budget past which a safe point stops the command: the rest is room
/// for what one more object or trigger allocates before the next safe point, so that the
/// command ends with an error there rather than in the allocator.
const SAFE_SHARE: (usize, usize) = (7, 8);

/// A safe point: `Err` with the budget's message when the process holds more than its share
/// of the budget (see [`SAFE_SHARE`]). Also records `progress` for the message of an
/// allocation that passes the budget before the next check.
pub fn check(progress: Progress) -> Result<(), String> {
    OBJECTS.store(progress.objects, Ordering::Relaxed);
    TRIGGERS.store(progress.triggers, Ordering::Relaxed);
    let budget = BUDGET.load(Ordering::Relaxed);
    if budget == usize::MAX {
        return Ok(());
    }
    let live = live();
    if live > budget / SAFE_SHARE.1 * SAFE_SHARE.0 {
        return Err(Exceeded {
            budget,
            live,
            objects: progress.objects,
            triggers: progress.triggers,
        }
        .to_string());
    }
    Ok(())
}

/// Parses a size: bytes, or a number with a decimal (`k`, `M`, `G`, `T`, with or without
/// `B`) or binary (`Ki`, `Mi`, `Gi`, `Ti`, with or without `B`) unit, case-insensitive:
/// `200MiB`, `1.5G`, `500000000`. `unlimited` is no budget.
pub fn parse_size(text: &str) -> Result<Option<u64>, String> {
    let invalid = || {
        format!(
            "`{text}` is not a size: write bytes or a number with a unit (200MiB, 1.5GiB, 2G), or `unlimited`"
        )
    };
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let multiplier: u64 = match unit {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => return Err(invalid()),
    };
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(Some(bytes as u64))
}

/// The environment variable that sets the budget when `--max-memory` does not.
pub const ENV: &str = "SWITCHYARD_MAX_MEMORY";

/// The budget of a command: `--max-memory`, else [`ENV`], else [`default_budget`].
pub fn resolve(flag: Option<&str>) -> Result<Option<u64>, String> {
    if let Some(text) = flag {
        return parse_size(text).map_err(|e| format!("--max-memory: {e}"));
    }
    match std::env::var(ENV) {
        Ok(text) if !text.trim().is_empty() => parse_size(&text).map_err(|e| format!("{ENV}: {e}")),
        _ => Ok(default_budget()),
    }
}

/// 80% of the smallest of the cgroup's memory limit, the address-space limit
/// (`RLIMIT_AS`) and the physical memory; none when none of them is known.
pub fn default_budget() -> Option<u64> {
    [cgroup_limit(), address_space_limit(), physical_memory()]
        .into_iter()
        .flatten()
        .min()
        .map(|m| m / 10 * 8)
}

/// The memory limit of the process's cgroup: v2 `memory.max`, else v1
/// `memory.limit_in_bytes` (a v1 "no limit" is a huge number, which the other bounds
/// undercut).
fn cgroup_limit() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        // v2 alone, v2 of a hybrid hierarchy, v1.
        let files = if controllers.is_empty() {
            vec![
                format!("/sys/fs/cgroup{path}/memory.max"),
                format!("/sys/fs/cgroup/unified{path}/memory.max"),
            ]
        } else if controllers.split(',').any(|c| c == "memory") {
            vec![format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")]
        } else {
            continue;
        };
        for file in files {
            if let Ok(text) = std::fs::read_to_string(&file)
                && let Ok(limit) = text.trim().parse::<u64>()
            {
                return Some(limit);
            }
        }
    }
    None
}

/// The soft `RLIMIT_AS` of the process, from `/proc/self/limits`.
fn address_space_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line.trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `MemTotal` of `/proc/meminfo`.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_option_is_mimalloc_s_purge_delay() {
        // The option's number is mimalloc's, not the crate's: its default (1000 ms in
        // mimalloc 3) says it is the purge delay, and that setting it takes.
        #[allow(unsafe_code)]
        // SAFETY: reads an integer option.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(default, 1000);
    }

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("200MiB"), Ok(Some(200 << 20)));
        assert_eq!(parse_size("200Mi"), Ok(Some(200 << 20)));
        assert_eq!(parse_size("1.5GiB"), Ok(Some(3 << 29)));
        assert_eq!(parse_size("2G"), Ok(Some(2_000_000_000)));
        assert_eq!(parse_size("512kb"), Ok(Some(512_000)));
        assert_eq!(parse_size("1048576"), Ok(Some(1 << 20)));
        assert_eq!(parse_size("unlimited"), Ok(None));
        assert_eq!(
            parse_size("lots"),
            Err("`lots` is not a size: write bytes or a number with a unit (200MiB, 1.5GiB, 2G), or `unlimited`".to_string())
        );
        assert!(parse_size("0").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("1.2.3M").is_err());
    }

    #[test]
    fn sizes_show_in_binary_units() {
        assert_eq!(Size(200 << 20).to_string(), "200 MiB");
        assert_eq!(Size(3_435_973_837).to_string(), "3.2 GiB");
        assert_eq!(Size(1536).to_string(), "1.5 KiB");
        assert_eq!(Size(12).to_string(), "12 bytes");
    }

    #[test]
    fn the_message_says_what_happened_and_what_to_do() {
        let e = Exceeded {
            budget: 200 << 20,
            live: 190 << 20,
            objects: 100_000,
            triggers: 41_234,
        };
        assert_eq!(
            e.to_string(),
            "input of 100000 objects needs more memory than the 200 MiB budget (stopped after 41234 triggers, 190 MiB in use); render fewer objects at a time or raise --max-memory"
        );
        let e = Exceeded {
            budget: 200 << 20,
            live: 201 << 20,
            objects: 0,
            triggers: 0,
        };
        assert_eq!(
            e.to_string(),
            "the input needs more memory than the 200 MiB budget (stopped with 201 MiB in use); render fewer objects at a time or raise --max-memory"
        );
    }

    #[test]
    fn the_default_budget_is_below_the_physical_memory() {
        if let (Some(budget), Some(physical)) = (default_budget(), physical_memory()) {
            assert!(budget <= physical / 10 * 8);
        }
    }
}
