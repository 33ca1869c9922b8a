//! Packs are the files under their folder: what is read and written is confined to it, and
//! nothing that is not a regular file or folder is opened. Each attack is built in a
//! temporary folder and its exact error checked.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use switchyard_files::{
    PACK_LIMITS, display, load_pack_dir, read_crds, read_inputs, read_pack, write_pack_file,
};

/// A fresh folder under the system's temporary folder, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!(
            "switchyard-files-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Canonical, so expected messages match what the checks resolve.
        Temp(dir.canonicalize().unwrap())
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn error_of<T: std::fmt::Debug>(result: Result<T, switchyard_files::FileError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn golden_writes_stay_inside_the_pack() {
    let temp = Temp::new("write");
    let pack = temp.path().join("work/pack");
    let outside = temp.path().join("outside");
    std::fs::create_dir_all(pack.join("tests")).unwrap();
    write(&outside.join("target.golden"), "keep\n");
    let shown = display(&pack);

    // The path rule: relative, and `..` never above the pack.
    assert_eq!(
        error_of(write_pack_file(&pack, "../../x.golden", "x")),
        "`../../x.golden`: the path leads outside the pack folder"
    );
    let absolute = temp.path().join("abs.golden");
    let absolute = absolute.to_str().unwrap();
    assert_eq!(
        error_of(write_pack_file(&pack, absolute, "x")),
        format!("`{absolute}`: the path is absolute; it must be relative to the pack folder")
    );
    assert!(!temp.path().join("x.golden").exists());
    assert!(!Path::new(absolute).exists());

    // A folder on the way that links out.
    symlink(&outside, pack.join("tests/golden")).unwrap();
    assert_eq!(
        error_of(write_pack_file(&pack, "tests/golden/a.golden", "x")),
        format!(
            "{shown}/tests/golden: symbolic link leads outside the pack (to {})",
            outside.display()
        )
    );
    assert!(!outside.join("a.golden").exists());

    // The file itself links out, or to nothing (which would create a file outside).
    symlink(
        outside.join("target.golden"),
        pack.join("tests/link.golden"),
    )
    .unwrap();
    assert_eq!(
        error_of(write_pack_file(&pack, "tests/link.golden", "x")),
        format!(
            "{shown}/tests/link.golden: symbolic link leads outside the pack (to {}/target.golden)",
            outside.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("target.golden")).unwrap(),
        "keep\n"
    );
    symlink(outside.join("none"), pack.join("tests/dangling.golden")).unwrap();
    assert_eq!(
        error_of(write_pack_file(&pack, "tests/dangling.golden", "x")),
        format!(
            "{shown}/tests/dangling.golden: symbolic link does not resolve (No such file or directory (os error 2))"
        )
    );
    assert!(!outside.join("none").exists());

    // Not a regular file: never opened (a FIFO would block the writer).
    mkfifo(&pack.join("tests/fifo.golden"));
    assert_eq!(
        error_of(write_pack_file(&pack, "tests/fifo.golden", "x")),
        format!("{shown}/tests/fifo.golden: not a regular file (a FIFO)")
    );
    write(&pack.join("tests/file"), "");
    assert_eq!(
        error_of(write_pack_file(&pack, "tests/file/a.golden", "x")),
        format!("{shown}/tests/file: not a folder (a regular file)")
    );
}

#[test]
fn golden_writes_inside_the_pack_create_folders_and_follow_inside_links() {
    let temp = Temp::new("write-inside");
    let pack = temp.path().join("pack");
    std::fs::create_dir_all(pack.join("tests")).unwrap();

    let written = write_pack_file(&pack, "./tests/new/deep/../a.golden", "a\n").unwrap();
    assert_eq!(written, pack.join("tests/new/a.golden"));
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "a\n");
    assert!(!pack.join("tests/new/deep").exists());
    // Rewriting replaces the contents.
    write_pack_file(&pack, "tests/new/a.golden", "b\n").unwrap();
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "b\n");

    // Links that stay inside the pack (a ConfigMap volume's layout) are followed.
    std::fs::create_dir_all(pack.join("..data/golden")).unwrap();
    write(&pack.join("..data/c.golden"), "old\n");
    symlink("../..data/golden", pack.join("tests/golden")).unwrap();
    symlink("../..data/c.golden", pack.join("tests/c.golden")).unwrap();
    write_pack_file(&pack, "tests/golden/b.golden", "b\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(pack.join("..data/golden/b.golden")).unwrap(),
        "b\n"
    );
    write_pack_file(&pack, "tests/c.golden", "new\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(pack.join("..data/c.golden")).unwrap(),
        "new\n"
    );
    assert!(
        std::fs::symlink_metadata(pack.join("tests/c.golden"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(pack.join("tests/new"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["a.golden"]);
}

/// A small pack at `dir`: one rule making a Namespace per App, with a test suite.
fn mini_pack(dir: &Path) {
    write(
        &dir.join("pack.yaml"),
        "\
apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: mini, version: 0.1.0}
spec:
  engine: \">=0.1.0, <0.2.0\"
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: edge, access: [read, write]}
  scope:
    - cluster: edge
      kinds:
        - {apiVersion: v1, kind: Namespace, clusterScoped: true}
",
    );
    write(
        &dir.join("rules/app.yaml"),
        "\
apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  outputs:
    - {name: namespace, cluster: edge, template: namespace.yaml.hbs}
",
    );
    write(
        &dir.join("templates/namespace.yaml.hbs"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-{{self.metadata.name}}\n",
    );
    write(
        &dir.join("tests/app.yaml"),
        "\
apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {name: app}
spec:
  cases:
    - name: one
      inputFiles: [fixtures/app.yaml]
      expect: {golden: tests/golden/one.golden, outputCount: 1}
",
    );
    write(
        &dir.join("fixtures/app.yaml"),
        "{apiVersion: example.com/v1, kind: App, metadata: {name: a, namespace: default}}\n",
    );
    write(&dir.join("tests/golden/one.golden"), "golden\n");
}

fn read_error(pack: &Path) -> String {
    error_of(read_pack(pack, None))
}

#[test]
fn a_pack_reads_only_the_files_of_its_format() {
    let temp = Temp::new("format");
    let pack = temp.path().join("pack");
    mini_pack(&pack);
    write(&pack.join("README.md"), "# mini\n");
    write(&pack.join("docs/guide.md"), "guide\n");
    write(&pack.join("rules/notes.txt"), "notes\n");
    write(&pack.join("examples/apps.yaml"), "{}\n");
    write(&pack.join("tests/data/extra.yaml"), "{}\n");
    write(&pack.join("tests/golden/unused.golden"), "unused\n");
    write(
        &pack.join("tables/sizes.yaml"),
        "kind: DecisionTable\nspec: {rowsFrom: rows/sizes.csv}\n",
    );
    write(&pack.join("tables/rows/sizes.csv"), "a\n");
    write(&pack.join("tables/other.tsv"), "a\n");
    // A golden file outside `tests/` is read because a suite names it.
    write(
        &pack.join("tests/root.yaml"),
        "kind: TestSuite\nspec: {cases: [{name: r, expect: {golden: out/root.txt}}]}\n",
    );
    write(&pack.join("out/root.txt"), "root\n");
    // Outside the pack's folders, not even looked at.
    mkfifo(&pack.join("docs/pipe"));
    symlink("/usr", pack.join("docs/usr")).unwrap();

    let files = read_pack(&pack, None).unwrap();
    let keys: Vec<&str> = files.files.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "examples/apps.yaml",
            "fixtures/app.yaml",
            "out/root.txt",
            "pack.yaml",
            "rules/app.yaml",
            "tables/rows/sizes.csv",
            "tables/sizes.yaml",
            "templates/namespace.yaml.hbs",
            "tests/app.yaml",
            "tests/data/extra.yaml",
            "tests/golden/one.golden",
            "tests/root.yaml",
        ]
    );
}

#[test]
fn links_out_of_the_pack_are_refused() {
    let temp = Temp::new("links");
    let pack = temp.path().join("rules/x");
    mini_pack(&pack);
    let shown = display(&pack);

    symlink("/etc/passwd", pack.join("templates/leak.hbs")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/templates/leak.hbs: symbolic link leads outside the pack (to /etc/passwd)"
        )
    );
    std::fs::remove_file(pack.join("templates/leak.hbs")).unwrap();

    // The target is resolved, so an error never holds the environment.
    symlink("/proc/self/environ", pack.join("rules/env.yaml")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/rules/env.yaml: symbolic link leads outside the pack (to /proc/{}/environ)",
            std::process::id()
        )
    );
    std::fs::remove_file(pack.join("rules/env.yaml")).unwrap();

    symlink("/usr", pack.join("templates/usr")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!("{shown}/templates/usr: symbolic link leads outside the pack (to /usr)")
    );
    std::fs::remove_file(pack.join("templates/usr")).unwrap();

    // Relative links climbing out, and a whole folder of the pack linked out.
    let outside = temp.path().join("outside");
    write(&outside.join("one.golden"), "outside\n");
    symlink(
        "../../../outside/one.golden",
        pack.join("tests/other.golden"),
    )
    .unwrap();
    write(
        &pack.join("tests/other.yaml"),
        "kind: TestSuite\nspec: {cases: [{name: o, expect: {golden: tests/other.golden}}]}\n",
    );
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/tests/other.golden: symbolic link leads outside the pack (to {}/one.golden)",
            outside.display()
        )
    );
    std::fs::remove_file(pack.join("tests/other.yaml")).unwrap();
    std::fs::remove_dir_all(pack.join("tests/golden")).unwrap();
    symlink(&outside, pack.join("tests/golden")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/tests/golden: symbolic link leads outside the pack (to {})",
            outside.display()
        )
    );
    std::fs::remove_file(pack.join("tests/golden")).unwrap();

    // The pack's own files: `pack.yaml`, and a whole folder.
    std::fs::remove_file(pack.join("pack.yaml")).unwrap();
    symlink("/etc/passwd", pack.join("pack.yaml")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!("{shown}/pack.yaml: symbolic link leads outside the pack (to /etc/passwd)")
    );
    std::fs::remove_file(pack.join("pack.yaml")).unwrap();
    std::fs::rename(pack.join("rules"), temp.path().join("moved")).unwrap();
    symlink(temp.path().join("moved"), pack.join("rules")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/rules: symbolic link leads outside the pack (to {}/moved)",
            temp.path().display()
        )
    );
}

#[test]
fn links_that_loop_or_dangle_are_refused() {
    let temp = Temp::new("loops");
    let pack = temp.path().join("pack");
    mini_pack(&pack);
    let shown = display(&pack);
    symlink("..", pack.join("rules/up")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!("{shown}/rules/up: symbolic link loops back to a folder above it")
    );
    std::fs::remove_file(pack.join("rules/up")).unwrap();
    symlink("missing.yaml", pack.join("rules/dangling.yaml")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/rules/dangling.yaml: symbolic link does not resolve (No such file or directory (os error 2))"
        )
    );
}

#[test]
fn fifos_in_the_pack_are_refused_without_opening_them() {
    let temp = Temp::new("fifo");
    let pack = temp.path().join("pack");
    mini_pack(&pack);
    let shown = display(&pack);
    mkfifo(&pack.join("rules/pipe.yaml"));
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/rules/pipe.yaml: not a regular file or folder (a FIFO); a pack holds only files and folders"
        )
    );
    std::fs::remove_file(pack.join("rules/pipe.yaml")).unwrap();
    // Behind a link that stays inside, too.
    mkfifo(&pack.join("pipe"));
    symlink("../pipe", pack.join("templates/pipe.hbs")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/templates/pipe.hbs: symbolic link to {shown}/pipe, which is a FIFO; a pack holds only files and folders"
        )
    );
}

#[test]
fn pack_files_are_limited_in_size_and_number() {
    let temp = Temp::new("limits");
    let pack = temp.path().join("pack");
    mini_pack(&pack);
    let shown = display(&pack);
    // Sparse: the size is what counts, and it is checked before reading.
    let big = std::fs::File::create(pack.join("templates/big.hbs")).unwrap();
    big.set_len(PACK_LIMITS.file_bytes + 1).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{shown}/templates/big.hbs: the file has 4194305 bytes, more than the limit of 4 MiB for a pack file"
        )
    );
    std::fs::remove_file(pack.join("templates/big.hbs")).unwrap();

    // Each under the file limit, too much together.
    let files = PACK_LIMITS.total_bytes / PACK_LIMITS.file_bytes + 1;
    std::fs::create_dir_all(pack.join("examples")).unwrap();
    for i in 0..files {
        let file = std::fs::File::create(pack.join(format!("examples/{i}.yaml"))).unwrap();
        file.set_len(PACK_LIMITS.file_bytes).unwrap();
    }
    assert_eq!(
        read_error(&pack),
        format!("{shown}: the files read hold more than 64 MiB, the limit for a pack")
    );
    std::fs::remove_dir_all(pack.join("examples")).unwrap();

    let many = pack.join("tests/many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..PACK_LIMITS.entries {
        std::fs::write(many.join(format!("{i}.txt")), "").unwrap();
    }
    assert_eq!(
        read_error(&pack),
        format!("{shown}: more than 10000 files and folders, the limit for a pack")
    );
}

/// A ConfigMap volume: every visible entry is a link through `..data` to a timestamped
/// folder, all inside the mounted folder. It loads as the same pack as a plain folder.
#[test]
fn a_configmap_volume_layout_loads() {
    let temp = Temp::new("configmap");
    let plain = temp.path().join("plain");
    mini_pack(&plain);
    let mount = temp.path().join("mount");
    let stamp = "..2026_11_23_20_00_00.000000001";
    mini_pack(&mount.join(stamp));
    symlink(stamp, mount.join("..data")).unwrap();
    for entry in ["pack.yaml", "rules", "templates", "tests", "fixtures"] {
        symlink(format!("..data/{entry}"), mount.join(entry)).unwrap();
    }
    let expected = read_pack(&plain, None).unwrap();
    let files = read_pack(&mount, None).unwrap();
    assert_eq!(files.files, expected.files);
    let (_, result) = load_pack_dir(&mount, None, &[]).unwrap();
    assert!(!result.has_errors(), "{:?}", result.diagnostics);
    assert_eq!(result.pack.unwrap().name(), "mini");
}

#[test]
fn partials_and_crd_folders_are_confined_to_themselves() {
    let temp = Temp::new("partials");
    let pack = temp.path().join("rules/pack");
    mini_pack(&pack);
    let partials = temp.path().join("templates");
    write(&partials.join("common/labels.hbs"), "a: b\n");
    let files = read_pack(&pack, None).unwrap();
    assert!(files.shared_partials.contains_key("common/labels"));
    symlink("/etc/passwd", partials.join("common/leak.hbs")).unwrap();
    assert_eq!(
        read_error(&pack),
        format!(
            "{}/common/leak.hbs: symbolic link leads outside the partials folder (to /etc/passwd)",
            partials.display()
        )
    );

    let crds = temp.path().join("config/crds");
    write(&crds.join("app.yaml"), "kind: CustomResourceDefinition\n");
    assert_eq!(read_crds(&pack, &[]).unwrap().len(), 1);
    symlink("/etc/passwd", crds.join("leak.yaml")).unwrap();
    assert_eq!(
        error_of(read_crds(&pack, &[])),
        format!(
            "{}/leak.yaml: symbolic link leads outside the CRD folder (to /etc/passwd)",
            crds.display()
        )
    );
    std::fs::remove_file(crds.join("leak.yaml")).unwrap();
    mkfifo(&crds.join("pipe.yaml"));
    assert_eq!(
        error_of(read_crds(&pack, &[])),
        format!(
            "{}/pipe.yaml: not a regular file or folder (a FIFO); a CRD folder holds only files and folders",
            crds.display()
        )
    );
    // A file named explicitly is the user's choice, but still never a FIFO.
    assert_eq!(
        error_of(read_crds(&pack, &[crds.join("pipe.yaml")])),
        format!("{}/pipe.yaml: not a regular file (a FIFO)", crds.display())
    );
}

#[test]
fn inputs_follow_links_but_refuse_fifos_and_oversize_files() {
    let temp = Temp::new("inputs");
    let inputs = temp.path().join("inputs");
    let outside = temp.path().join("elsewhere/app.yaml");
    write(
        &outside,
        "{apiVersion: example.com/v1, kind: App, metadata: {name: a, namespace: default}}\n",
    );
    std::fs::create_dir_all(&inputs).unwrap();
    symlink(&outside, inputs.join("app.yaml")).unwrap();
    // A loop in a folder the user named ends.
    symlink(".", inputs.join("again")).unwrap();
    let objects = read_inputs(std::slice::from_ref(&inputs), "source").unwrap();
    assert_eq!(objects.len(), 1);

    mkfifo(&inputs.join("pipe.yaml"));
    assert_eq!(
        error_of(read_inputs(std::slice::from_ref(&inputs), "source")),
        format!(
            "{}/pipe.yaml: not a regular file (a FIFO)",
            inputs.display()
        )
    );
    assert_eq!(
        error_of(read_inputs(&[inputs.join("pipe.yaml")], "source")),
        format!(
            "{}/pipe.yaml: not a regular file (a FIFO)",
            inputs.display()
        )
    );
    std::fs::remove_file(inputs.join("pipe.yaml")).unwrap();

    let big = std::fs::File::create(inputs.join("big.yaml")).unwrap();
    big.set_len(switchyard_files::INPUT_FILE_BYTES + 1).unwrap();
    assert_eq!(
        error_of(read_inputs(std::slice::from_ref(&inputs), "source")),
        format!(
            "{}/big.yaml: the file has 67108865 bytes, more than the limit of 64 MiB for an input file",
            inputs.display()
        )
    );
}
