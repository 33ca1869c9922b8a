//! Loading a pack whose rule file is arbitrary never panics; when it loads, evaluating it on a
//! fixed trigger never panics either.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

const TEMPLATE: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: {{self.metadata.name}}
  namespace: default
data:
  note: {{self.spec.note}}
";

fuzz_target!(|data: &[u8]| {
    if let Ok(rule) = std::str::from_utf8(data) {
        let _ = common::evaluate_with(rule, TEMPLATE, &common::trigger());
    }
});
