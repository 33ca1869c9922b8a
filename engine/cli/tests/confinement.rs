//! `switchyard test --update` and pack loading stay inside the pack: each attack is built in
//! a temporary folder and run through the binary as users run it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn switchyard(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("switchyard runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small pack at `dir`: one rule making a Namespace per App.
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
}

/// A test suite whose cases each render one App against the golden file given.
fn suite(goldens: &[(&str, &str)]) -> String {
    let mut text = String::from(
        "apiVersion: switchyard.dev/v1alpha1\nkind: TestSuite\nmetadata: {name: golden}\nspec:\n  cases:\n",
    );
    for (case, golden) in goldens {
        text.push_str(&format!(
            "    - name: {case}\n      inputs:\n        - {{apiVersion: example.com/v1, kind: App, metadata: {{name: a, namespace: default}}}}\n      expect: {{golden: '{golden}'}}\n"
        ));
    }
    text
}

/// A fresh folder under the system's temporary folder, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!(
            "switchyard-cli-confinement-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Temp(dir.canonicalize().unwrap())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn update_refuses_golden_paths_outside_the_pack_and_runs_the_other_cases() {
    let temp = Temp::new("update");
    let pack = temp.0.join("work/pack");
    mini_pack(&pack);
    let absolute = temp.0.join("abs.golden");
    let absolute = absolute.to_str().unwrap();
    write(
        &pack.join("tests/golden.yaml"),
        &suite(&[
            ("escape", "../../x.golden"),
            ("absolute", absolute),
            ("inside", "tests/golden/a.golden"),
        ]),
    );
    let out = switchyard(&pack, &["test", ".", "--update"]);
    assert_eq!(
        stdout(&out),
        format!(
            "\
FAIL mini golden: escape
    golden file `../../x.golden` of tests/golden.yaml is refused: the path leads outside the pack folder
FAIL mini golden: absolute
    golden file `{absolute}` of tests/golden.yaml is refused: the path is absolute; it must be relative to the pack folder
PASS mini golden: inside
    wrote ./tests/golden/a.golden
1 passed, 2 failed
"
        )
    );
    // A refused path is a failure the update does not fix.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!temp.0.join("x.golden").exists());
    assert!(!Path::new(absolute).exists());
    assert!(
        std::fs::read_to_string(pack.join("tests/golden/a.golden"))
            .unwrap()
            .contains("name: team-a\n")
    );

    // Once written, the inside case passes; the refused ones still fail.
    let out = switchyard(&pack, &["test", "."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("PASS mini golden: inside\n"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).ends_with("1 passed, 2 failed\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn update_of_golden_files_alone_succeeds() {
    let temp = Temp::new("update-ok");
    let pack = temp.0.join("pack");
    mini_pack(&pack);
    write(
        &pack.join("tests/golden.yaml"),
        &suite(&[("inside", "tests/golden/a.golden")]),
    );
    let out = switchyard(&temp.0, &["test", "pack", "--update"]);
    // A golden file `--update` creates is written, not a failure.
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (
            Some(0),
            "PASS mini golden: inside\n    wrote pack/tests/golden/a.golden\n1 passed, 0 failed\n"
        )
    );
    let out = switchyard(&temp.0, &["test", "pack"]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "PASS mini golden: inside\n1 passed, 0 failed\n")
    );
}

#[test]
fn check_refuses_a_link_out_of_the_pack() {
    let temp = Temp::new("check");
    mini_pack(&temp.0.join("rules/x"));
    std::os::unix::fs::symlink("/etc/passwd", temp.0.join("rules/x/templates/leak.hbs")).unwrap();
    let out = switchyard(&temp.0, &["check", "rules/x"]);
    assert_eq!(
        (
            out.status.code(),
            stderr(&out).as_str(),
            stdout(&out).as_str()
        ),
        (
            Some(2),
            "error: rules/x/templates/leak.hbs: symbolic link leads outside the pack (to /etc/passwd)\n",
            ""
        )
    );
}

#[test]
fn check_refuses_a_fifo_in_the_pack_without_hanging() {
    let temp = Temp::new("fifo");
    mini_pack(&temp.0.join("pack"));
    let status = Command::new("mkfifo")
        .arg(temp.0.join("pack/rules/pipe.yaml"))
        .status()
        .unwrap();
    assert!(status.success());
    let out = switchyard(&temp.0, &["check", "pack"]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (
            Some(2),
            "error: pack/rules/pipe.yaml: not a regular file or folder (a FIFO); a pack holds only files and folders\n"
        )
    );
}

#[test]
fn update_through_a_golden_folder_linked_out_of_the_pack_writes_nothing() {
    let temp = Temp::new("linked-golden");
    let pack = temp.0.join("pack");
    mini_pack(&pack);
    write(
        &pack.join("tests/golden.yaml"),
        &suite(&[("linked", "tests/golden/a.golden")]),
    );
    let outside = temp.0.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, pack.join("tests/golden")).unwrap();
    let out = switchyard(&temp.0, &["test", "pack", "--update"]);
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (
            Some(2),
            format!(
                "error: pack/tests/golden: symbolic link leads outside the pack (to {})\n",
                outside.display()
            )
        )
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
