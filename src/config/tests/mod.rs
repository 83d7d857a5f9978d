//! The configuration's unit tests, one file per concern (`defaults.rs`, `values.rs`,
//! `layering.rs`, `errors.rs`, `conf_files.rs`, `printing.rs`), and the helpers they share: an
//! environment, a TOML layer, the one violation of an error, CLI pairs and temporary files.

mod conf_files;
mod defaults;
mod errors;
mod layering;
mod printing;
mod values;

use super::*;
use std::path::{Path, PathBuf};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn toml(text: &str) -> Result<Loaded, ConfigError> {
    load_layers(vec![Layer::from_toml_str("config/broker.toml", text)?])
}

fn only_violation(err: ConfigError) -> Violation {
    let v = err.violations();
    assert_eq!(v.len(), 1, "expected one violation, got: {err}");
    v[0].clone()
}

fn manifest_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn cli(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    env(pairs)
}

/// Writes `text` to `<tempdir>/<name>`; returns the dir guard and the path.
fn temp_file(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}
