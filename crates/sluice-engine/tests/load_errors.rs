//! A malformed or unsupported program is refused at load with an error that
//! names the problem and its JSON path (or the object and field).
//!
//! Programs are `examples/router.json`, edited with serde_json where a test
//! needs a variant.

use std::path::Path;

use serde_json::{json, Value};
use sluice_engine::LoadError;

fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

fn router_json() -> Value {
    serde_json::from_str(&example("router.json")).unwrap()
}

/// Index of the table called `name` in the first pipeline.
fn table_index(v: &Value, name: &str) -> usize {
    v["pipelines"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

/// Index of the first action called `name`.
fn action_index(v: &Value, name: &str) -> usize {
    v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no action {name}"))
}

fn assert_contains(text: &str, want: &str) {
    assert!(text.contains(want), "expected {want:?} in {text:?}");
}

fn load_err(v: &Value) -> LoadError {
    match sluice_engine::load_switch(&v.to_string()) {
        Ok(_) => panic!("the program was accepted"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------- program files

#[test]
fn malformed_json_names_the_problem_and_where() {
    let text = example("router.json");
    let cut = &text[..text.len() / 2];
    let e = sluice_json::load_str(cut).unwrap_err();
    assert!(e.path.is_empty(), "no JSON path exists in text that does not parse: {e:?}");
    assert_contains(&e.message, "not valid JSON");
    assert_contains(&e.message, "EOF while parsing");
    assert_contains(&e.message, "line ");
    // load_switch reports the same error.
    match sluice_engine::load_switch(cut) {
        Err(LoadError::Json(j)) => assert_eq!(j, e),
        other => panic!("expected the JSON error, got {:?}", other.err()),
    }

    let e = sluice_json::load_str("{\"header_types\": [1, 2,]}").unwrap_err();
    assert_contains(&e.message, "not valid JSON");
    assert_contains(&e.message, "trailing comma");
    assert_contains(&e.message, "line 1 column 24");
    let e = sluice_json::load_str("").unwrap_err();
    assert_contains(&e.to_string(), "not valid JSON");
}

#[test]
fn valid_json_of_the_wrong_shape_names_the_path() {
    let e = sluice_json::load_str("[1, 2]").unwrap_err();
    assert!(!e.message.is_empty());
    assert_eq!(e.to_string(), e.message, "a root-level error has no path prefix");

    let mut v = router_json();
    v["header_types"][1]["fields"][0][1] = json!("wide");
    let e = sluice_json::load_str(&v.to_string()).unwrap_err();
    assert_eq!(e.path, "header_types[1].fields[0][1]", "{e}");

    let mut v = router_json();
    v["header_types"][1]["fields"][0][1] = json!(0);
    let e = sluice_json::load_str(&v.to_string()).unwrap_err();
    assert_eq!(e.path, "header_types[1].fields[0][1]", "{e}");
    assert_contains(&e.message, "0");

    let mut v = router_json();
    let t = table_index(&v, "RouterIngress.nexthop");
    v["pipelines"][0]["tables"][t].as_object_mut().unwrap().remove("match_type");
    let e = load_err(&v);
    assert_eq!(e.to_string(), format!("pipelines[0].tables[{t}]: missing field \"match_type\""));

    let mut v = router_json();
    v["counter_arrays"][0]["size"] = json!(-1);
    let e = load_err(&v);
    assert!(e.to_string().starts_with("counter_arrays[0].size"), "{e}");
}

#[test]
fn unsupported_match_type_names_the_key() {
    let mut v = router_json();
    let t = table_index(&v, "RouterIngress.ipv4_lpm");
    v["pipelines"][0]["tables"][t]["key"][0]["match_type"] = json!("fancy");
    let e = load_err(&v);
    let s = e.to_string();
    assert!(s.starts_with(&format!("pipelines[0].tables[{t}].key[0]")), "{s}");
    assert_contains(&s, "fancy");

    // Second key of a two-key table.
    let mut v = router_json();
    let t = table_index(&v, "RouterIngress.nexthop");
    let k0 = v["pipelines"][0]["tables"][t]["key"][0].clone();
    let mut k1 = k0.clone();
    k1["match_type"] = json!("hashed");
    v["pipelines"][0]["tables"][t]["key"] = json!([k0, k1]);
    let s = load_err(&v).to_string();
    assert!(s.starts_with(&format!("pipelines[0].tables[{t}].key[1]")), "{s}");
    assert_contains(&s, "hashed");
}

#[test]
fn unsupported_primitive_names_the_action_and_primitive() {
    let mut v = router_json();
    let a = action_index(&v, "RouterIngress.forward");
    v["actions"][a]["primitives"][2]["op"] = json!("frobnicate");
    let e = load_err(&v);
    let s = e.to_string();
    assert!(s.starts_with(&format!("actions[{a}].primitives[2]")), "{s}");
    assert_contains(&s, "frobnicate");
    assert!(matches!(e, LoadError::Compile(_)), "a well-formed but unsupported program is a compile error: {e:?}");
}

#[test]
fn unknown_names_in_a_program_are_located() {
    let mut v = router_json();
    v["headers"][0]["header_type"] = json!("no_such_type");
    let s = load_err(&v).to_string();
    assert!(s.starts_with("headers[0]"), "{s}");
    assert_contains(&s, "no_such_type");

    let mut v = router_json();
    let a = action_index(&v, "RouterIngress.forward");
    v["actions"][a]["primitives"][0]["parameters"][0]["value"] = json!(["no_such_header", "x"]);
    let s = load_err(&v).to_string();
    assert!(s.starts_with(&format!("actions[{a}].primitives[0]")), "{s}");
    assert_contains(&s, "no_such_header");
}

// ---------------------------------------------------------------- CLI errors
