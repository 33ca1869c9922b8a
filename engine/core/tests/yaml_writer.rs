//! The YAML writer against hostile strings: what it writes must read back as the same JSON
//! under YAML 1.2 (the project's reader) and YAML 1.1 (PyYAML, pure and libyaml, when
//! python3 has it: the readers behind `kubectl apply -f` and kustomize share libyaml's rules).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};
use switchyard_core::yaml::{parse_documents, to_yaml, to_yaml_stream};

/// Pieces hostile strings are made of: breaks, controls, non-printables, YAML 1.1 typed
/// scalars, indicators, and ordinary text.
const PIECES: &[&str] = &[
    "\n",
    "\n",
    "\u{2028}",
    "\u{2029}",
    "\u{85}",
    "\r",
    "\r\n",
    "\t",
    "\0",
    "\x07",
    "\x1b",
    "\x7f",
    "\u{80}",
    "\u{9f}",
    "\u{a0}",
    "\u{feff}",
    "\u{fffe}",
    "\u{ffff}",
    "\u{fdd0}",
    "\u{1fffe}",
    "\u{10ffff}",
    "\u{d7ff}",
    "\u{e000}",
    "😀",
    "ü",
    "---",
    "...",
    "--- !x",
    "# c",
    " #",
    ": ",
    ":",
    "- ",
    "? ",
    "|",
    ">",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a",
    "*a",
    "!!str",
    "!",
    "%TAG",
    "@",
    "`",
    "'",
    "\"",
    "\\",
    "\\u2028",
    "  ",
    " ",
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "N",
    "true",
    "False",
    "~",
    "null",
    "Null",
    "012",
    "0o12",
    "0x1f",
    "0xff_ff",
    "0b1",
    "0b1_0",
    "1:20",
    "190:20:30.15",
    ".inf",
    "-.Inf",
    ".NaN",
    "1_000",
    "1e3",
    "1.0e+3",
    "6.8523015e+5",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "=",
    "<<",
    "+1",
    "-1",
    ".5",
    "0x1p-2",
    "+Inf",
    "a",
    "key",
    "kind: Secret",
    "privileged: true",
    "apiVersion: v1",
    "x",
    "name",
    "1Gi",
    "500m",
    "v1.2.3",
    "10.0.0.1",
];

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn string(&mut self) -> String {
        let count = self.below(5);
        let mut s = String::new();
        for _ in 0..count {
            s.push_str(PIECES[self.below(PIECES.len())]);
        }
        match self.below(40) {
            // Past the 1,024-character limit of implicit keys.
            0 => s.push_str(&"k".repeat(1100)),
            1 => s.push_str(&"\u{2028}".repeat(400)),
            _ => {}
        }
        s
    }

    fn value(&mut self, depth: usize) -> Value {
        match self.below(if depth == 0 { 4 } else { 9 }) {
            0 => Value::String(self.string()),
            1 => json!(self.next() as i64),
            2 => [
                json!(0.5),
                json!(1e-7),
                json!(1.5e300),
                json!(-2.0e21),
                json!(100.0),
                json!(u64::MAX),
            ][self.below(6)]
            .clone(),
            3 => [Value::Null, json!(true), json!(false), json!({}), json!([])][self.below(5)]
                .clone(),
            4..=6 => {
                let mut map = Map::new();
                for _ in 0..self.below(4) + 1 {
                    map.insert(self.string(), self.value(depth - 1));
                }
                Value::Object(map)
            }
            _ => Value::Array(
                (0..self.below(4) + 1)
                    .map(|_| self.value(depth - 1))
                    .collect(),
            ),
        }
    }
}

/// Characters no written text may hold raw: everything `needs_escape` covers, and `\r`.
fn forbidden(c: char) -> bool {
    let u = u32::from(c);
    let printable = matches!(u, 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..);
    (c != '\n' && c != '\t' && !printable)
        || matches!(u, 0x2028 | 0x2029 | 0xFEFF | 0xFDD0..=0xFDEF)
        || u & 0xFFFE == 0xFFFE
}

const PYTHON: &str = r#"
import json, sys, yaml

def plain(v):
    # Anything but JSON types (dates, byte strings) or a non-string key is a mismatch.
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else "<non-string key %r>" % (k,)): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    return "<%s %r>" % (type(v).__name__, v)

loaders = [("pure", yaml.SafeLoader)]
if getattr(yaml, "CSafeLoader", None):
    loaders.append(("libyaml", yaml.CSafeLoader))
out = {"version": yaml.__version__, "loaders": [n for n, _ in loaders], "results": []}
for text in json.load(sys.stdin):
    r = {}
    for name, loader in loaders:
        try:
            r[name] = [plain(d) for d in yaml.load_all(text, Loader=loader)]
        except Exception as e:
            r[name] = {"error": str(e)}
    out["results"].append(r)
json.dump(out, sys.stdout)
"#;

fn pyyaml_available() -> bool {
    Command::new("python3")
        .args(["-c", "import yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Every text read by PyYAML's readers, or `None` without PyYAML.
fn pyyaml_read(texts: &[String]) -> Option<Value> {
    if !pyyaml_available() {
        println!(
            "YAML 1.1 reader: none (python3 has no PyYAML); checked with the YAML 1.2 reader only"
        );
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", PYTHON])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(texts).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "python3 failed");
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    println!(
        "YAML 1.1 reader: PyYAML {} ({})",
        out["version"], out["loaders"]
    );
    Some(out)
}

/// Checks that every text reads back as its documents under every reader.
fn check(texts: &[String], expected: &[Vec<Value>]) {
    for (text, want) in texts.iter().zip(expected) {
        if let Some(c) = text.chars().find(|&c| forbidden(c)) {
            panic!("raw {:?} in {text:?}", c);
        }
        let back: Vec<Value> = parse_documents(text)
            .unwrap_or_else(|e| panic!("{e} at {:?} in {text:?}", e.pos))
            .iter()
            .map(|d| d.to_json())
            .collect();
        assert_eq!(&back, want, "YAML 1.2 reader on {text:?}");
    }
    if let Some(out) = pyyaml_read(texts) {
        let results = out["results"].as_array().unwrap();
        for ((text, want), got) in texts.iter().zip(expected).zip(results) {
            for (loader, docs) in got.as_object().unwrap() {
                assert_eq!(
                    docs,
                    &Value::Array(want.clone()),
                    "PyYAML {loader} on {text:?}"
                );
            }
        }
    }
}

#[test]
fn hostile_strings_read_back_the_same_in_yaml_1_1_and_1_2() {
    let mut rng = Rng(0x5eed_1234_abcd_9876);
    let mut texts = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..400 {
        let value = rng.value(3);
        texts.push(to_yaml(&value));
        expected.push(vec![value]);
    }
    // Every piece on its own, as a key and as a value, in a block and in a sequence.
    for piece in PIECES {
        let value = json!({*piece: [piece, {*piece: piece}], "k": format!("{piece}\nx{piece}")});
        texts.push(to_yaml(&value));
        expected.push(vec![value]);
    }
    // Several documents in one stream, as `render` prints them.
    let docs: Vec<Value> = (0..5).map(|_| rng.value(2)).collect();
    texts.push(to_yaml_stream(&docs));
    expected.push(docs);
    check(&texts, &expected);
}

#[test]
fn line_separators_never_reach_the_output_raw() {
    // The issue's payload: one `\n` and U+2028 smuggling a key and a document.
    let payload = "sleep 1\n\u{2028}privileged: true\u{2029}---\u{2028}kind: ClusterRoleBinding";
    let text = to_yaml(&json!({"args": [payload]}));
    assert_eq!(
        text,
        "args:\n- \"sleep 1\\n\\Lprivileged: true\\P---\\Lkind: ClusterRoleBinding\"\n"
    );
}

#[test]
fn yaml_1_1_typed_scalars_are_quoted() {
    let text = to_yaml(&json!({
        "a": ["yes", "Off", "y", "N", "0x1f", "0xff_ff", "0b1", "1:20", "2001-12-14", "=", "<<",
              "1_000", ".inf", "0x1p-2", "v1", "1Gi", "500m", "plain text"],
    }));
    assert_eq!(
        text,
        "a:\n- \"yes\"\n- \"Off\"\n- \"y\"\n- \"N\"\n- \"0x1f\"\n- \"0xff_ff\"\n- \"0b1\"\n- \"1:20\"\n- \"2001-12-14\"\n- \"=\"\n- \"<<\"\n- \"1_000\"\n- \".inf\"\n- \"0x1p-2\"\n- v1\n- 1Gi\n- 500m\n- plain text\n"
    );
}

#[test]
fn floats_are_written_as_yaml_1_1_floats() {
    assert_eq!(
        to_yaml(&json!({"a": 1e-7, "b": 1.5e300, "c": 0.5})),
        "a: 1.0e-7\nb: 1.5e+300\nc: 0.5\n"
    );
}

#[test]
fn long_keys_use_the_explicit_indicator() {
    let key = "k".repeat(1100);
    let text = to_yaml(&json!({&key: [1], "b": {&key: "v"}}));
    assert_eq!(
        text,
        format!("b:\n  ? \"{key}\"\n  : v\n? \"{key}\"\n:\n  - 1\n")
    );
}

#[test]
fn controls_are_escaped_yaml_style() {
    let text =
        to_yaml(&json!({"a": "\u{0}\u{7}\u{1b}\u{7f}\u{85}\u{9f}\u{feff}\u{fffe}\u{1fffe}\r\t"}));
    assert_eq!(
        text,
        "a: \"\\0\\a\\e\\x7F\\N\\x9F\\uFEFF\\uFFFE\\U0001FFFE\\r\\t\"\n"
    );
}

#[test]
fn shipped_golden_files_read_the_same_in_yaml_1_1_and_1_2() {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rules");
    let mut files = Vec::new();
    for pack in std::fs::read_dir(&rules).unwrap() {
        let golden = pack.unwrap().path().join("tests/golden");
        let Ok(entries) = std::fs::read_dir(&golden) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "golden") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(
        !files.is_empty(),
        "no golden files under {}",
        rules.display()
    );
    let mut texts = Vec::new();
    let mut expected = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let docs: Vec<Value> = parse_documents(&text)
            .unwrap()
            .iter()
            .map(|d| d.to_json())
            .collect();
        // The golden file as written, and the writer's text for the same documents: the
        // writer must not change a golden file.
        assert_eq!(
            to_yaml_stream(&docs),
            text.lines()
                .filter(|l| !l.starts_with("# "))
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
            "{}",
            path.display()
        );
        texts.push(text);
        expected.push(docs);
    }
    println!("{} golden files", files.len());
    check(&texts, &expected);
}
