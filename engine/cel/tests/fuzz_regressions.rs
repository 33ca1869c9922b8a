//! Inputs the fuzz targets (fuzz/) found that crashed the engine: each must now give an error.

use switchyard_cel::{CelEnvironment, Env};

/// A token error right after a multi-byte character (the prefix check sliced inside it).
#[test]
fn a_token_error_after_a_multibyte_character_is_an_error() {
    let env = Env::new(CelEnvironment::all());
    for source in [
        "\u{70e}'x",
        "é\"",
        "self.isratreeGThan\u{70e}u-ntity('r1Mi')",
    ] {
        let error = env.compile(source).err();
        assert!(error.is_some(), "`{source}` compiled");
    }
}
