//! Watching the packs folder (and the shared partials and CRDs) for changes: one message per
//! burst of changes, after the folder has been quiet for the debounce time, and one before it,
//! once the folder has paused for a moment, so that loading can begin while the debounce runs
//! (a load begun at a pause is used only when no change came after it).
//!
//! ConfigMap volumes change by an atomic symlink swap in the mounted folder itself: the
//! kubelet writes a new `..2026_…` folder, points a `..data_tmp` symlink at it and renames it
//! over `..data`. The visible files are symlinks through `..data`, so the files themselves
//! raise no event; the swap does, in the watched folder. Hidden entries therefore count as
//! changes like any other.

use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use notify::event::{EventKind, MetadataKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::watch;

use crate::config::BrokerConfig;

/// Keeps the watch alive; dropping it stops watching and closes the channel.
pub struct WatchGuard {
    _watcher: Arc<Mutex<RecommendedWatcher>>,
}

impl std::fmt::Debug for WatchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchGuard").finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("watching `{path}` for changes: {source}")]
    Watch { path: String, source: notify::Error },
    #[error("starting the reload debounce thread: {0}")]
    Thread(std::io::Error),
}

/// How long the folder must be quiet before a load may begin (the debounce's, when shorter):
/// long enough that one editor's save (truncate, write, rename) is one change, short enough to
/// hide most of a load under the debounce.
const SETTLE: Duration = Duration::from_millis(50);

/// What a watch reports: the number of the last change seen, once the folder has paused
/// (quiet for [`SETTLE`]) and once it is quiet (for the whole debounce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Quiet for a moment after change `n`: a load may begin, to be used if `Quiet(n)`
    /// follows (a later change makes the quiet carry a larger number).
    Paused(u64),
    /// Quiet for the debounce after change `n`: reload.
    Quiet(u64),
}

/// The receiving end of a watch: the latest pause and quiet, so a slow reader skips to the
/// newest rather than queueing stale ones.
#[derive(Debug)]
pub struct Changes {
    rx: watch::Receiver<Progress>,
    seen: Progress,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Progress {
    paused: u64,
    quiet: u64,
}

impl Changes {
    /// The next change to act on, a quiet before a pause; `None` once the watch has ended.
    /// Cancel-safe: nothing is marked seen until it is returned.
    pub async fn next(&mut self) -> Option<Change> {
        loop {
            let now = *self.rx.borrow_and_update();
            if now.quiet > self.seen.quiet {
                self.seen = now;
                return Some(Change::Quiet(now.quiet));
            }
            if now.paused > self.seen.paused {
                self.seen.paused = now.paused;
                return Some(Change::Paused(now.paused));
            }
            self.rx.changed().await.ok()?;
        }
    }

    /// The next quiet, pauses skipped; `None` once the watch has ended.
    pub async fn quiet(&mut self) -> Option<u64> {
        loop {
            if let Change::Quiet(n) = self.next().await? {
                return Some(n);
            }
        }
    }
}

/// Watches `dir` recursively: any creation, change, removal or rename under it is reported
/// once the folder pauses and once `debounce` has passed without another.
pub fn watch(dir: &Path, debounce: Duration) -> Result<(Changes, WatchGuard), ReloadError> {
    watch_paths(&[dir.to_path_buf()], debounce)
}

/// As [`watch`], for several folders and files. A file is watched through its folder (editors
/// and the kubelet replace files by renaming), and only changes to it, or to its folder's
/// hidden entries (a ConfigMap's `..data`), count.
///
/// Each path's parent is watched too, so a folder that is deleted and created again (or
/// created only after the broker started) is noticed: after every burst of changes, every
/// path that exists is watched again, since a deleted folder takes its watch with it.
pub fn watch_paths(
    paths: &[PathBuf],
    debounce: Duration,
) -> Result<(Changes, WatchGuard), ReloadError> {
    let (raw_tx, raw_rx) = std_mpsc::channel::<()>();
    let files: Vec<PathBuf> = paths.iter().filter(|p| p.is_file()).cloned().collect();
    let dirs: Vec<PathBuf> = paths.iter().filter(|p| !p.is_file()).cloned().collect();
    let relevant_path = {
        let files = files.clone();
        let dirs = dirs.clone();
        move |path: &Path| {
            dirs.iter().any(|d| path.starts_with(d))
                || files.iter().any(|f| {
                    path == f
                        || (path.parent() == f.parent()
                            && path
                                .file_name()
                                .is_some_and(|n| n.to_string_lossy().starts_with("..")))
                })
        }
    };
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) => {
                if is_change(&event.kind)
                    && (event.paths.is_empty() || event.paths.iter().any(|p| relevant_path(p)))
                {
                    tracing::trace!(?event, "packs changed");
                    let _ = raw_tx.send(());
                }
            }
            // Events may have been lost: reload rather than miss a change.
            Err(error) => {
                tracing::warn!(%error, "watching the packs folder");
                let _ = raw_tx.send(());
            }
        }
    })
    .map_err(|source| ReloadError::Watch {
        path: paths
            .first()
            .map(|p| switchyard_files::display(p))
            .unwrap_or_default(),
        source,
    })?;
    let watcher = Arc::new(Mutex::new(watcher));
    let targets = Targets { files, dirs };
    targets.arm(&watcher, true)?;
    let (tx, rx) = watch::channel(Progress::default());
    // Weak: dropping the guard drops the watcher, which ends the thread.
    let rearm = Arc::downgrade(&watcher);
    std::thread::Builder::new()
        .name("switchyard-reload".into())
        .spawn(move || {
            debounce_loop(&raw_rx, &tx, debounce, || {
                // A folder deleted and created again lost its watch: watch what exists again.
                if let Some(watcher) = rearm.upgrade()
                    && let Err(error) = targets.arm(&watcher, false)
                {
                    tracing::warn!(%error, "watching the packs folder again");
                }
            })
        })
        .map_err(ReloadError::Thread)?;
    let changes = Changes {
        rx,
        seen: Progress::default(),
    };
    Ok((changes, WatchGuard { _watcher: watcher }))
}

/// What is watched: folders (recursively) and files (through their folder), each with its
/// parent so that its creation is seen.
struct Targets {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Targets {
    /// Watches every path that exists and the parent of each; `first`: an error is returned
    /// (at start-up), else only logged.
    fn arm(&self, watcher: &Mutex<RecommendedWatcher>, first: bool) -> Result<(), ReloadError> {
        let mut watcher = watcher.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = |path: &Path| match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut wanted: Vec<(PathBuf, RecursiveMode)> = Vec::new();
        for dir in &self.dirs {
            if dir.is_dir() {
                wanted.push((dir.clone(), RecursiveMode::Recursive));
            }
            wanted.push((parent(dir), RecursiveMode::NonRecursive));
        }
        for file in &self.files {
            wanted.push((parent(file), RecursiveMode::NonRecursive));
        }
        for (path, mode) in wanted {
            if !path.exists() {
                continue;
            }
            if let Err(source) = watcher.watch(&path, mode) {
                let error = ReloadError::Watch {
                    path: switchyard_files::display(&path),
                    source,
                };
                if first {
                    return Err(error);
                }
                tracing::debug!(%error, "watching again");
            }
        }
        Ok(())
    }
}

/// Reports each burst of raw events: a pause once it has been quiet for [`SETTLE`] (again
/// after each later event), the quiet once for `debounce`, after `after_burst` (which re-arms
/// the watches). Ends when the watcher is dropped (the raw sender goes with it) or the
/// receiver is.
fn debounce_loop(
    raw: &std_mpsc::Receiver<()>,
    tx: &watch::Sender<Progress>,
    debounce: Duration,
    after_burst: impl Fn(),
) {
    let settle = SETTLE.min(debounce);
    // False once the receiver is gone: the loop ends.
    let report = |update: &dyn Fn(&mut Progress)| {
        if tx.is_closed() {
            return false;
        }
        tx.send_modify(update);
        true
    };
    let mut count: u64 = 0;
    while raw.recv().is_ok() {
        count += 1;
        let mut last = Instant::now();
        let mut paused = false;
        loop {
            let wait = if paused { debounce } else { settle };
            match raw.recv_timeout(wait.saturating_sub(last.elapsed())) {
                Ok(()) => {
                    count += 1;
                    last = Instant::now();
                    paused = false;
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) if !paused => {
                    paused = true;
                    if !report(&|p| p.paused = count) {
                        return;
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => break,
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        after_burst();
        if !report(&|p| {
            p.paused = count;
            p.quiet = count;
        }) {
            return;
        }
    }
}

/// Whether an event changes what a reload would read. Reads (the reload itself opens every
/// file) and access-time updates do not.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        EventKind::Any
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Other => true,
    }
}

/// What the broker watches for `config`: the packs folder, the shared partials folder and
/// the CRD folders or files, configured or found as the loader finds them (the nearest
/// `templates/` and `config/crds/` above each pack). Paths that do not exist are left out,
/// but for the packs folder, whose creation is watched for.
pub fn watched_paths(config: &BrokerConfig, pack_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = config.packs.iter().cloned().collect();
    match &config.partials {
        Some(p) => paths.push(p.clone()),
        None => paths.extend(
            pack_dirs
                .iter()
                .filter_map(|d| switchyard_files::find_shared_templates(d)),
        ),
    }
    if config.crds.is_empty() {
        paths.extend(
            pack_dirs
                .iter()
                .filter_map(|d| switchyard_files::find_crds(d)),
        );
    } else {
        paths.extend(config.crds.iter().cloned());
    }
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths {
        let path = path.canonicalize().unwrap_or(path);
        // The packs folder counts even when missing: its creation is watched for.
        let counts = path.exists() || config.packs.as_ref() == Some(&path);
        if counts && !kept.iter().any(|k| path.starts_with(k)) {
            kept.retain(|k| !k.starts_with(&path));
            kept.push(path);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::time::Instant;

    const DEBOUNCE: Duration = Duration::from_millis(300);

    /// Waits for one quiet; `None` after `within`.
    async fn next(rx: &mut Changes, within: Duration) -> Option<u64> {
        tokio::time::timeout(within, rx.quiet())
            .await
            .ok()
            .flatten()
    }

    fn pack_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        std::fs::write(dir.path().join("pack.yaml"), "a: 1\n").unwrap();
        std::fs::write(dir.path().join("rules/r.yaml"), "b: 1\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn an_edit_sends_one_message() {
        let dir = pack_dir();
        let (mut rx, _guard) = watch(dir.path(), DEBOUNCE).unwrap();
        std::fs::write(dir.path().join("rules/r.yaml"), "b: 2\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    #[tokio::test]
    async fn a_burst_of_edits_sends_one_message() {
        let dir = pack_dir();
        let (mut rx, _guard) = watch(dir.path(), DEBOUNCE).unwrap();
        let started = Instant::now();
        for i in 0..10 {
            std::fs::write(dir.path().join("rules/r.yaml"), format!("b: {i}\n")).unwrap();
            std::fs::write(dir.path().join(format!("rules/new-{i}.yaml")), "c: 1\n").unwrap();
        }
        std::fs::remove_file(dir.path().join("rules/new-3.yaml")).unwrap();
        std::fs::rename(
            dir.path().join("rules/new-4.yaml"),
            dir.path().join("rules/renamed.yaml"),
        )
        .unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        assert!(
            started.elapsed() >= DEBOUNCE,
            "sent before the folder was quiet"
        );
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    /// A load may begin at the pause: the quiet that follows carries the pause's number when
    /// nothing changed in between, so the load begun then is the one to install.
    #[tokio::test]
    async fn a_pause_comes_before_the_quiet_with_its_number() {
        let dir = pack_dir();
        let (mut rx, _guard) = watch(dir.path(), DEBOUNCE).unwrap();
        let written = Instant::now();
        std::fs::write(dir.path().join("rules/r.yaml"), "b: 2\n").unwrap();
        let within = Duration::from_secs(10);
        let Some(Change::Paused(paused)) = tokio::time::timeout(within, rx.next()).await.unwrap()
        else {
            panic!("the first report is not a pause");
        };
        assert!(written.elapsed() >= SETTLE, "paused before the settle time");
        let quiet = next(&mut rx, within).await;
        assert!(written.elapsed() >= DEBOUNCE, "quiet before the debounce");
        assert_eq!(quiet, Some(paused));
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    /// A change after the pause: the quiet carries a larger number, and the load begun at the
    /// pause (which may have read the files before it) is not the one to install.
    #[tokio::test]
    async fn a_change_after_the_pause_makes_the_quiet_newer() {
        let dir = pack_dir();
        let (mut rx, _guard) = watch(dir.path(), DEBOUNCE).unwrap();
        std::fs::write(dir.path().join("rules/r.yaml"), "b: 2\n").unwrap();
        let within = Duration::from_secs(10);
        let Some(Change::Paused(paused)) = tokio::time::timeout(within, rx.next()).await.unwrap()
        else {
            panic!("the first report is not a pause");
        };
        std::fs::write(dir.path().join("rules/r.yaml"), "b: 3\n").unwrap();
        let Some(Change::Paused(again)) = tokio::time::timeout(within, rx.next()).await.unwrap()
        else {
            panic!("the second change paused without a report");
        };
        assert!(again > paused);
        assert_eq!(next(&mut rx, within).await, Some(again));
    }

    #[tokio::test]
    async fn reading_sends_nothing() {
        let dir = pack_dir();
        let (mut rx, _guard) = watch(dir.path(), DEBOUNCE).unwrap();
        switchyard_files::walk(dir.path())
            .unwrap()
            .iter()
            .for_each(|p| drop(std::fs::read_to_string(p).unwrap()));
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    /// The kubelet's atomic writer: a new timestamped folder, a `..data_tmp` symlink to it
    /// renamed over `..data`, the old folder removed. Visible files link through `..data`.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_configmap_symlink_swap_sends_a_message() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let old = root.join("..2026_01_01_00_00_00.000000001");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("pack.yaml"), "a: 1\n").unwrap();
        symlink("..2026_01_01_00_00_00.000000001", root.join("..data")).unwrap();
        symlink("..data/pack.yaml", root.join("pack.yaml")).unwrap();
        let (mut rx, _guard) = watch(root, DEBOUNCE).unwrap();

        let new = root.join("..2026_01_01_00_01_00.000000002");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("pack.yaml"), "a: 2\n").unwrap();
        symlink("..2026_01_01_00_01_00.000000002", root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
        std::fs::remove_dir_all(&old).unwrap();

        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        assert_eq!(
            std::fs::read_to_string(root.join("pack.yaml")).unwrap(),
            "a: 2\n"
        );
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    #[tokio::test]
    async fn a_watched_file_counts_and_its_siblings_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let crd = dir.path().join("crd.yaml");
        std::fs::write(&crd, "kind: CustomResourceDefinition\n").unwrap();
        let (mut rx, _guard) = watch_paths(std::slice::from_ref(&crd), DEBOUNCE).unwrap();
        std::fs::write(dir.path().join("other.txt"), "x").unwrap();
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
        std::fs::write(&crd, "kind: CustomResourceDefinition\n# changed\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
    }

    /// `rm -r packs; cp -r new packs`: the watch of the deleted folder is gone with it, and
    /// the new folder is watched again, for every later change.
    #[tokio::test]
    async fn a_packs_folder_deleted_and_created_again_stays_watched() {
        let root = tempfile::tempdir().unwrap();
        let packs = root.path().canonicalize().unwrap().join("packs");
        std::fs::create_dir_all(packs.join("rules")).unwrap();
        std::fs::write(packs.join("pack.yaml"), "a: 1\n").unwrap();
        let (mut rx, _guard) = watch(&packs, DEBOUNCE).unwrap();
        std::fs::remove_dir_all(&packs).unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        std::fs::create_dir_all(packs.join("rules")).unwrap();
        std::fs::write(packs.join("pack.yaml"), "a: 2\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        // Edits inside the new folder are seen too, and siblings of the folder are not.
        std::fs::write(packs.join("rules/r.yaml"), "b: 1\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        std::fs::write(root.path().join("sibling.txt"), "x").unwrap();
        assert!(next(&mut rx, DEBOUNCE * 3).await.is_none());
    }

    /// A packs folder that does not exist yet is watched for.
    #[tokio::test]
    async fn a_packs_folder_created_after_the_start_is_seen() {
        let root = tempfile::tempdir().unwrap();
        let packs = root.path().canonicalize().unwrap().join("packs");
        let (mut rx, _guard) = watch(&packs, DEBOUNCE).unwrap();
        std::fs::create_dir_all(&packs).unwrap();
        std::fs::write(packs.join("pack.yaml"), "a: 1\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
        std::fs::write(packs.join("pack.yaml"), "a: 2\n").unwrap();
        assert!(next(&mut rx, Duration::from_secs(10)).await.is_some());
    }

    #[tokio::test]
    async fn dropping_the_guard_closes_the_channel() {
        let dir = pack_dir();
        let (mut rx, guard) = watch(dir.path(), DEBOUNCE).unwrap();
        drop(guard);
        let closed = tokio::time::timeout(Duration::from_secs(10), rx.next()).await;
        assert_eq!(closed, Ok(None));
    }

    #[test]
    fn watched_paths_of_a_configuration() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path().canonicalize().unwrap();
        for d in ["rules/a", "templates/common", "config/crds"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let config = BrokerConfig {
            packs: Some(root.join("rules")),
            ..BrokerConfig::default()
        };
        let paths = watched_paths(&config, &[root.join("rules/a")]);
        assert_eq!(
            paths,
            [
                root.join("rules"),
                root.join("templates"),
                root.join("config/crds")
            ]
        );
        let config = BrokerConfig {
            packs: Some(root.clone()),
            partials: Some(root.join("templates")),
            ..BrokerConfig::default()
        };
        assert_eq!(watched_paths(&config, &[root.join("rules/a")]), [root]);
    }
}
