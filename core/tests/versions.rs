//! Versions from one place: the workspace's `Cargo.toml` sets the version; every crate inherits it
//! (`version.workspace = true`), the Python wheel takes it from its crate (maturin, `dynamic =
//! ["version"]`), and the npm package, which cannot inherit, must say the same. Read from the
//! repository's own files, so a release that bumps one and not the others fails here.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The value of `key = "…"` in the TOML section `section`, read line by line (the files are ours).
fn toml_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if inside && let Some(rest) = line.strip_prefix(key).map(str::trim_start) {
            let value = rest.strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// Every disagreement with the workspace version `version`, in words.
fn disagreements(
    version: &str,
    manifests: &[(&str, String)],
    package_json: &str,
    platform_packages: &[(String, String)],
    pyproject: &str,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, text) in manifests {
        if toml_value(text, "package", "version.workspace").as_deref() != Some("true") {
            wrong.push(format!("{name} does not inherit the workspace version (version.workspace = true)"));
        }
    }
    let json: serde_json::Value = serde_json::from_str(package_json).unwrap_or_default();
    if json["version"].as_str() != Some(version) {
        wrong.push(format!("bindings-node/package.json says {} where the workspace says {version}", json["version"]));
    }
    for (name, text) in platform_packages {
        let json: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        if json["version"].as_str() != Some(version) {
            wrong.push(format!("{name} says {} where the workspace says {version}", json["version"]));
        }
    }
    if toml_value(pyproject, "project", "dynamic").is_none_or(|d| !d.contains("version"))
        || toml_value(pyproject, "project", "version").is_some()
    {
        wrong.push("bindings-python/pyproject.toml must take its version from the crate (dynamic)".into());
    }
    wrong
}

const MEMBERS: [&str; 6] = [
    "core/Cargo.toml",
    "tests/provider/Cargo.toml",
    "bindings-python/Cargo.toml",
    "bindings-node/Cargo.toml",
    "bindings-swift/Cargo.toml",
    "bench/peers/rust/Cargo.toml",
];

#[test]
fn every_package_carries_the_workspace_version() {
    let version = toml_value(&read("Cargo.toml"), "workspace.package", "version").expect("workspace version");
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let manifests: Vec<(&str, String)> = MEMBERS.iter().map(|m| (*m, read(m))).collect();
    // The npm platform packages (bindings-node/npm/<platform>/package.json), one per napi target.
    let mut platforms: Vec<(String, String)> = std::fs::read_dir(repo().join("bindings-node/npm"))
        .expect("bindings-node/npm")
        .map(|d| format!("bindings-node/npm/{}/package.json", d.expect("entry").file_name().to_string_lossy()))
        .map(|name| {
            let text = read(&name);
            (name, text)
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms.len(), 5, "one npm platform package per napi target: {platforms:#?}");
    let wrong = disagreements(
        &version,
        &manifests,
        &read("bindings-node/package.json"),
        &platforms,
        &read("bindings-python/pyproject.toml"),
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The changelog has an entry for it.
    assert!(read("CHANGELOG.md").contains(&format!("## [{version}]")), "CHANGELOG.md has no entry for {version}");
}

/// The negative control: a drifted npm version, a drifted npm platform package, a crate with its own
/// version and a pyproject with a fixed version are each reported.
#[test]
fn negative_control_drift_is_reported() {
    let own = ("x/Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.2.0\"\n".to_string());
    let good = ("y/Cargo.toml", "[package]\nname = \"y\"\nversion.workspace = true\n".to_string());
    let wrong = disagreements(
        "0.1.0",
        &[own, good],
        r#"{"name": "ambit", "version": "0.1.1"}"#,
        &[
            ("npm/darwin-x64/package.json".into(), r#"{"version": "0.0.9"}"#.into()),
            ("npm/linux-x64-gnu/package.json".into(), r#"{"version": "0.1.0"}"#.into()),
        ],
        "[project]\nname = \"ambit\"\nversion = \"0.1.0\"\n",
    );
    assert_eq!(wrong.len(), 4, "{wrong:#?}");
    assert!(wrong[0].starts_with("x/Cargo.toml") && wrong[1].contains("0.1.1"), "{wrong:#?}");
    assert!(wrong[2].starts_with("npm/darwin-x64/package.json says \"0.0.9\""), "{wrong:#?}");
    let none = disagreements("0.1.0", &[], r#"{"version": "0.1.0"}"#, &[], "[project]\ndynamic = [\"version\"]\n");
    assert!(none.is_empty(), "{none:#?}");
}
