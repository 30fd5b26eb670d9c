//! Answers real models wrote, recorded as fixtures (tests/llama/fixtures/, by scripts/test-local-model.sh
//! or transcribed), read by the text tool-call reader: every entry that carries `expect_calls` must read
//! as exactly those calls; every other entry is read too (within bounds, no panic).

use std::path::Path;

use ambit::model::text_calls;
use serde_json::Value;

#[test]
fn recorded_answers_read_as_their_expected_calls() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/llama/fixtures");
    let mut checked = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for e in fixture["entries"].as_array().unwrap() {
            let offered: Vec<&str> = e["offered"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            let content = e["message"]["content"].as_str().unwrap_or_default();
            let read = text_calls::read(content, &offered, 1024, false);
            let Some(want) = e.get("expect_calls").and_then(Value::as_array) else { continue };
            let got: Vec<Value> = read
                .map(|r| r.calls)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, args)| serde_json::json!({"name": name, "arguments": serde_json::from_str::<Value>(&args).unwrap()}))
                .collect();
            assert_eq!(&got, want, "{}: {content:?}", path.display());
            checked += 1;
        }
    }
    assert!(checked > 0, "no fixture entry with expect_calls in {}", dir.display());
}
