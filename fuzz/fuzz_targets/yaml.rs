//! The YAML reader never panics, and what the writer prints reads back as the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_core::yaml;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(documents) = yaml::parse_documents(text) else {
        return;
    };
    for document in documents {
        let value = document.to_json();
        let written = yaml::to_yaml(&value);
        let reread = yaml::parse_documents(&written)
            .unwrap_or_else(|e| panic!("the writer's output does not parse: {e:?}\n{written}"));
        let reread: Vec<serde_json::Value> = reread.iter().map(yaml::Node::to_json).collect();
        assert_eq!(reread.len(), 1, "one value became {} documents:\n{written}", reread.len());
        assert_eq!(reread[0], value, "the writer changed the value:\n{written}");
    }
});
