//! The data tree gNMI serves: the OpenConfig interfaces model of a
//! switch's ports, as a list of leaves, and what gNMI does with it
//! (paths matched with their wildcards, values encoded, subtrees built as
//! JSON, Set requests turned into changes).
//!
//! Contract. Reads: a snapshot of the ports ([`PortState`]). Writes:
//! nothing (the service applies the [`Change`]s [`plan_set`] returns).
//! Leaves of interface `N`, all under `interfaces/interface[name=N]`:
//! `name`; `config/{name,type,enabled,id}`; `state/{name,type,enabled,id,
//! ifindex,admin-status,oper-status,last-change}`; `state/counters/*`
//! (octets, packets by kind, discards, errors, both ways);
//! `ethernet/state/mac-address` when the port has one. `id` is the
//! P4Runtime port id (the openconfig-p4rt augmentation), and so is
//! `ifindex`, as Stratum serves it (controllers read the port id from
//! either).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::proto;
use crate::PortState;

/// The interfaces model's top container, as JSON_IETF names it.
const MODULE: &str = "openconfig-interfaces";

/// One element of a concrete path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Elem {
    pub(crate) name: String,
    pub(crate) key: BTreeMap<String, String>,
}

impl Elem {
    fn plain(name: &str) -> Elem {
        Elem { name: name.to_string(), key: BTreeMap::new() }
    }
}

/// A leaf's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scalar {
    Str(String),
    Uint(u64),
    Bool(bool),
}

/// Which of gNMI's data types a leaf belongs to (Get's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Config,
    /// State that mirrors configuration (name, enabled...).
    State,
    /// State that the device derives (status, counters).
    Operational,
}

/// One leaf of the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    pub(crate) path: Vec<Elem>,
    pub(crate) value: Scalar,
    pub(crate) class: Class,
}

impl Leaf {
    /// Whether this is a counter (sampled rather than sent on change
    /// when a subscription leaves the choice to the target).
    pub(crate) fn is_counter(&self) -> bool {
        self.path.iter().any(|e| e.name == "counters")
    }
}

/// The names of the counters, in the order they are listed.
pub(crate) const COUNTERS: [&str; 14] = [
    "in-octets",
    "in-pkts",
    "in-unicast-pkts",
    "in-multicast-pkts",
    "in-broadcast-pkts",
    "in-discards",
    "in-errors",
    "out-octets",
    "out-pkts",
    "out-unicast-pkts",
    "out-multicast-pkts",
    "out-broadcast-pkts",
    "out-discards",
    "out-errors",
];

fn status(up: bool) -> Scalar {
    Scalar::Str(if up { "UP" } else { "DOWN" }.into())
}

const ETHERNET: &str = "iana-if-type:ethernetCsmacd";

/// Every leaf of the ports in `ports`, interface by interface.
pub(crate) fn leaves(ports: &[PortState]) -> Vec<Leaf> {
    let mut out = Vec::with_capacity(ports.len() * 32);
    for p in ports {
        let mut iface = Elem::plain("interface");
        iface.key.insert("name".into(), p.name.clone());
        let base = vec![Elem::plain("interfaces"), iface];
        let mut push = |rel: &[&str], value: Scalar, class: Class| {
            let mut path = base.clone();
            path.extend(rel.iter().map(|n| Elem::plain(n)));
            out.push(Leaf { path, value, class });
        };
        push(&["name"], Scalar::Str(p.name.clone()), Class::Config);
        push(&["config", "name"], Scalar::Str(p.name.clone()), Class::Config);
        push(&["config", "type"], Scalar::Str(ETHERNET.into()), Class::Config);
        push(&["config", "enabled"], Scalar::Bool(p.admin_up), Class::Config);
        push(&["config", "id"], Scalar::Uint(p.id.into()), Class::Config);
        push(&["state", "name"], Scalar::Str(p.name.clone()), Class::State);
        push(&["state", "type"], Scalar::Str(ETHERNET.into()), Class::State);
        push(&["state", "enabled"], Scalar::Bool(p.admin_up), Class::State);
        push(&["state", "id"], Scalar::Uint(p.id.into()), Class::State);
        push(&["state", "ifindex"], Scalar::Uint(p.id.into()), Class::Operational);
        push(&["state", "admin-status"], status(p.admin_up), Class::Operational);
        push(&["state", "oper-status"], status(p.oper_up), Class::Operational);
        push(&["state", "last-change"], Scalar::Uint(p.last_change), Class::Operational);
        for (name, v) in COUNTERS.iter().zip(p.counters.values()) {
            push(&["state", "counters", name], Scalar::Uint(v), Class::Operational);
        }
        if let Some(mac) = p.mac {
            let text = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
            push(&["ethernet", "state", "mac-address"], Scalar::Str(text), Class::Operational);
        }
    }
    out
}

/// Every leaf the model has, for one interface of any name: what a path
/// must lead to (or into) to be part of the schema.
fn schema() -> Vec<Leaf> {
    let any = PortState {
        name: "*".into(),
        id: 0,
        mac: Some([0; 6]),
        admin_up: true,
        oper_up: true,
        last_change: 0,
        counters: Default::default(),
    };
    leaves(&[any])
}

/// A request's path element with its wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    elems: Vec<Elem>,
}

/// A path as a request gives it: the prefix's elements, then the path's.
/// Errors (as the message of an INVALID_ARGUMENT) for an origin other
/// than OpenConfig's and for the deprecated string elements.
pub(crate) fn pattern(prefix: Option<&proto::Path>, path: Option<&proto::Path>) -> Result<Pattern, String> {
    let mut elems = Vec::new();
    for p in [prefix, path].into_iter().flatten() {
        match p.origin.as_str() {
            "" | "openconfig" | "openconfig-interfaces" => {}
            o => return Err(format!("origin '{o}' is not supported (this target serves the openconfig origin)")),
        }
        for e in &p.elem {
            if e.name.is_empty() {
                return Err(format!("path {} has an element without a name", render(&p.elem)));
            }
            let mut name = e.name.as_str();
            // A module-qualified name ("openconfig-interfaces:interfaces") is the same node.
            if let Some((_, local)) = name.split_once(':') {
                name = local;
            }
            let key = e.key.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            elems.push(Elem { name: name.to_string(), key });
        }
    }
    Ok(Pattern { elems })
}

impl Pattern {
    /// How many elements of `leaf` the pattern covers (the concrete path of
    /// the node it names), or `None` when it does not lead to `leaf`.
    pub(crate) fn anchor(&self, leaf: &[Elem]) -> Option<usize> {
        fn walk(r: &[Elem], l: &[Elem], li: usize) -> Option<usize> {
            let Some(first) = r.first() else { return Some(li) };
            if first.name == "..." {
                if r.len() == 1 {
                    return Some(li);
                }
                return (li..=l.len()).find_map(|k| walk(&r[1..], l, k));
            }
            let e = l.get(li)?;
            if first.name != "*" && first.name != e.name {
                return None;
            }
            for (k, v) in &first.key {
                let have = e.key.get(k)?;
                if v != "*" && v != have {
                    return None;
                }
            }
            walk(&r[1..], l, li + 1)
        }
        walk(&self.elems, leaf, 0)
    }

    /// Whether the path names a node of the model (for any interface name).
    pub(crate) fn in_schema(&self) -> bool {
        let general = Pattern {
            elems: self
                .elems
                .iter()
                .map(|e| Elem { name: e.name.clone(), key: e.key.keys().map(|k| (k.clone(), "*".into())).collect() })
                .collect(),
        };
        self.elems.is_empty() || schema().iter().any(|l| general.anchor(&l.path).is_some())
    }

    /// Whether the path is concrete (no wildcard anywhere).
    pub(crate) fn is_concrete(&self) -> bool {
        self.elems.iter().all(|e| e.name != "*" && e.name != "..." && e.key.values().all(|v| v != "*"))
    }

    pub(crate) fn elems(&self) -> &[Elem] {
        &self.elems
    }
}

/// A path as text (`/interfaces/interface[name=eth0]/state`), for messages.
pub(crate) fn render(elems: &[proto::PathElem]) -> String {
    let mut s = String::new();
    for e in elems {
        s.push('/');
        s.push_str(&e.name);
        let mut keys: Vec<_> = e.key.iter().collect();
        keys.sort();
        for (k, v) in keys {
            s.push_str(&format!("[{k}={v}]"));
        }
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

/// Text of a pattern, for messages.
pub(crate) fn render_pattern(p: &Pattern) -> String {
    render(&to_proto(&p.elems))
}

/// Concrete elements as gNMI path elements.
pub(crate) fn to_proto(elems: &[Elem]) -> Vec<proto::PathElem> {
    elems
        .iter()
        .map(|e| proto::PathElem {
            name: e.name.clone(),
            key: e.key.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
        .collect()
}

/// The encodings values are sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Json,
    JsonIetf,
    Proto,
}

impl Encoding {
    /// The request's encoding; UNIMPLEMENTED's message for the others.
    pub(crate) fn from_request(e: i32) -> Result<Encoding, String> {
        match proto::Encoding::try_from(e) {
            Ok(proto::Encoding::Json) => Ok(Encoding::Json),
            Ok(proto::Encoding::JsonIetf) => Ok(Encoding::JsonIetf),
            Ok(proto::Encoding::Proto) => Ok(Encoding::Proto),
            Ok(other) => {
                Err(format!("encoding {} is not supported (JSON, JSON_IETF and PROTO are)", other.as_str_name()))
            }
            Err(_) => Err(format!("unknown encoding {e}")),
        }
    }
}

fn json_scalar(v: &Scalar, enc: Encoding) -> Value {
    match v {
        Scalar::Str(s) => Value::String(s.clone()),
        Scalar::Bool(b) => Value::Bool(*b),
        // RFC 7951: 64-bit integers are strings in JSON_IETF.
        Scalar::Uint(u) if enc == Encoding::JsonIetf => Value::String(u.to_string()),
        Scalar::Uint(u) => Value::from(*u),
    }
}

/// One leaf's value as a typed scalar (what gNMI asks for a leaf,
/// whatever the encoding).
pub(crate) fn typed(v: &Scalar) -> proto::TypedValue {
    use proto::typed_value::Value as V;
    let value = match v {
        Scalar::Str(s) => V::StringVal(s.clone()),
        Scalar::Uint(u) => V::UintVal(*u),
        Scalar::Bool(b) => V::BoolVal(*b),
    };
    proto::TypedValue { value: Some(value) }
}

/// The leaves under one node (relative paths) as that node's JSON.
pub(crate) fn subtree_json(rel: &[(&[Elem], &Scalar)], enc: Encoding, at_root: bool) -> Value {
    let mut top = Map::new();
    for (path, v) in rel {
        insert(&mut top, path, v, enc);
    }
    if at_root && enc == Encoding::JsonIetf {
        // RFC 7951: a top-level member is qualified by its module's name.
        top = top.into_iter().map(|(k, v)| (format!("{MODULE}:{k}"), v)).collect();
    }
    Value::Object(top)
}

fn insert(obj: &mut Map<String, Value>, path: &[Elem], v: &Scalar, enc: Encoding) {
    let Some((e, rest)) = path.split_first() else { return };
    if e.key.is_empty() {
        if rest.is_empty() {
            obj.insert(e.name.clone(), json_scalar(v, enc));
        } else if let Value::Object(child) = obj.entry(e.name.clone()).or_insert_with(|| Value::Object(Map::new())) {
            insert(child, rest, v, enc);
        }
        return;
    }
    let Value::Array(list) = obj.entry(e.name.clone()).or_insert_with(|| Value::Array(Vec::new())) else { return };
    let matches = |o: &Value| e.key.iter().all(|(k, kv)| o.get(k).and_then(Value::as_str) == Some(kv.as_str()));
    let at = match list.iter().position(matches) {
        Some(i) => i,
        None => {
            list.push(Value::Object(e.key.iter().map(|(k, kv)| (k.clone(), Value::String(kv.clone()))).collect()));
            list.len() - 1
        }
    };
    if let Value::Object(child) = &mut list[at] {
        insert(child, rest, v, enc);
    }
}

/// A change a Set asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Enable (admin up) or disable interface `name`.
    Enable { name: String, up: bool },
}

/// One operation of a Set, as the request lists it.
pub(crate) enum SetOp<'a> {
    Delete(&'a proto::Path),
    Replace(&'a proto::Update),
    Update(&'a proto::Update),
}

/// The changes a Set's operations ask for, checked against the ports in
/// `ports` (the whole Set fails on the first bad operation: a gNMI Set is
/// one transaction). Errors are (INVALID_ARGUMENT or NOT_FOUND, message).
pub(crate) fn plan_set(
    prefix: Option<&proto::Path>,
    ops: &[SetOp<'_>],
    ports: &[PortState],
) -> Result<Vec<Change>, (tonic::Code, String)> {
    let invalid = |m: String| (tonic::Code::InvalidArgument, m);
    let mut changes = Vec::new();
    for op in ops {
        let (path, value, replace) = match op {
            SetOp::Delete(p) => (Some(*p), None, false),
            SetOp::Replace(u) => (u.path.as_ref(), Some(u), true),
            SetOp::Update(u) => (u.path.as_ref(), Some(u), false),
        };
        let pat = pattern(prefix, path).map_err(invalid)?;
        if !pat.is_concrete() {
            return Err(invalid(format!("a Set path cannot have wildcards: {}", render_pattern(&pat))));
        }
        let elems = pat.elems();
        // The interface the path is in (every writable leaf is in one).
        let iface = match elems {
            [top, list, ..] if top.name == "interfaces" && list.name == "interface" => {
                list.key.get("name").cloned().ok_or_else(|| invalid("interface without a name key".into()))?
            }
            _ => {
                return Err(invalid(format!(
                    "{} is not writable (only interfaces/interface[name=...]/config is)",
                    render_pattern(&pat)
                )))
            }
        };
        let Some(port) = ports.iter().find(|p| p.name == iface) else {
            return Err((tonic::Code::NotFound, format!("no interface named '{iface}'")));
        };
        // The writable leaves the operation reaches, relative to the interface.
        let mut given: Vec<(Vec<String>, Scalar)> = Vec::new();
        let below: Vec<String> = elems[2..].iter().map(|e| e.name.clone()).collect();
        if let Some(u) = value {
            let v = u
                .val
                .as_ref()
                .and_then(|t| t.value.as_ref())
                .ok_or_else(|| invalid(format!("update of {} without a value", render_pattern(&pat))))?;
            flatten_value(&below, v, &mut given).map_err(invalid)?;
        }
        let mut enabled: Option<bool> = None;
        for (rel, v) in &given {
            let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
            match (rel.as_slice(), v) {
                (["config", "enabled"], Scalar::Bool(b)) => enabled = Some(*b),
                (["name"] | ["config", "name"], Scalar::Str(s)) if *s == port.name => {}
                (["config", "id"], Scalar::Uint(id)) if *id == u64::from(port.id) => {}
                (["config", "type"], Scalar::Str(t)) if t == ETHERNET || t == "ethernetCsmacd" => {}
                (["config", "enabled"], _) => {
                    return Err(invalid(format!("interface {iface}: config/enabled takes a boolean")))
                }
                (["name"] | ["config", "name"], _) => {
                    return Err(invalid(format!("interface {iface}: the name cannot be changed")))
                }
                (["config", "id"], _) => {
                    return Err(invalid(format!("interface {iface}: the port id is {} and cannot be changed", port.id)))
                }
                (["config", "type"], _) => {
                    return Err(invalid(format!("interface {iface}: the type is {ETHERNET} and cannot be changed")))
                }
                _ => {
                    return Err(invalid(format!(
                        "interface {iface}: {} is not writable (config/enabled is)",
                        rel.join("/")
                    )))
                }
            }
        }
        // A delete, or a replace of a node holding `enabled` that leaves it
        // out, puts it back to its default (enabled).
        let covers_enabled = matches!(below.as_slice(), [] | [_]) && below.first().is_none_or(|b| b == "config")
            || below == ["config", "enabled"];
        if enabled.is_none() && covers_enabled && (value.is_none() || replace) {
            enabled = Some(true);
        }
        if value.is_none() && !covers_enabled && !below.is_empty() {
            return Err(invalid(format!("{} cannot be deleted", render_pattern(&pat))));
        }
        if let Some(up) = enabled {
            changes.push(Change::Enable { name: iface, up });
        }
    }
    Ok(changes)
}

/// The leaves a value sets below a node (`at`, relative to the interface).
fn flatten_value(
    at: &[String],
    v: &proto::typed_value::Value,
    out: &mut Vec<(Vec<String>, Scalar)>,
) -> Result<(), String> {
    use proto::typed_value::Value as V;
    let scalar = match v {
        V::BoolVal(b) => Scalar::Bool(*b),
        V::StringVal(s) | V::AsciiVal(s) => Scalar::Str(s.clone()),
        V::UintVal(u) => Scalar::Uint(*u),
        V::IntVal(i) => Scalar::Uint(u64::try_from(*i).map_err(|_| format!("{i} is out of range"))?),
        V::JsonVal(b) | V::JsonIetfVal(b) => {
            let j: Value = serde_json::from_slice(b).map_err(|e| format!("the JSON value does not parse: {e}"))?;
            return flatten_json(at.to_vec(), &j, out);
        }
        _ => return Err("this value type is not supported here (bool, string, uint, JSON and JSON_IETF are)".into()),
    };
    out.push((at.to_vec(), scalar));
    Ok(())
}

fn flatten_json(at: Vec<String>, j: &Value, out: &mut Vec<(Vec<String>, Scalar)>) -> Result<(), String> {
    match j {
        Value::Object(m) => {
            for (k, v) in m {
                let local = k.split_once(':').map_or(k.as_str(), |(_, l)| l);
                let mut p = at.clone();
                p.push(local.to_string());
                flatten_json(p, v, out)?;
            }
        }
        Value::Bool(b) => out.push((at, Scalar::Bool(*b))),
        Value::String(s) => match s.parse::<u64>() {
            // JSON_IETF sends 64-bit integers as strings.
            Ok(u) if at.last().is_some_and(|l| l == "id") => out.push((at, Scalar::Uint(u))),
            _ => out.push((at, Scalar::Str(s.clone()))),
        },
        Value::Number(n) => {
            let u = n.as_u64().ok_or_else(|| format!("{n} is not an unsigned integer"))?;
            out.push((at, Scalar::Uint(u)));
        }
        Value::Array(_) => return Err(format!("a list below {} is not writable", at.join("/"))),
        Value::Null => return Err(format!("null at {} is not a value", at.join("/"))),
    }
    Ok(())
}

/// A path from its text (`/a/b[k=v]/c`, one key per element at most), for tests.
#[cfg(test)]
pub(crate) fn path(text: &str) -> proto::Path {
    let elem = text
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (name, key) = match s.split_once('[') {
                Some((n, k)) => {
                    let (k, v) = k.trim_end_matches(']').split_once('=').unwrap();
                    (n, [(k.to_string(), v.to_string())].into_iter().collect())
                }
                None => (s, Default::default()),
            };
            proto::PathElem { name: name.into(), key }
        })
        .collect();
    proto::Path { elem, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Counters;

    fn port(name: &str, id: u32) -> PortState {
        PortState {
            name: name.into(),
            id,
            mac: None,
            admin_up: true,
            oper_up: true,
            last_change: 5,
            counters: Counters { in_pkts: 7, in_octets: 700, ..Default::default() },
        }
    }

    fn matching(p: &str, ports: &[PortState]) -> Vec<String> {
        let pat = pattern(None, Some(&path(p))).unwrap();
        leaves(ports).iter().filter(|l| pat.anchor(&l.path).is_some()).map(|l| render(&to_proto(&l.path))).collect()
    }

    #[test]
    fn wildcards_keys_and_ellipsis_select_the_leaves_they_name() {
        let ports = [port("eth0", 1), port("eth1", 2)];
        assert_eq!(
            matching("/interfaces/interface[name=*]/state/id", &ports),
            ["/interfaces/interface[name=eth0]/state/id", "/interfaces/interface[name=eth1]/state/id"]
        );
        assert_eq!(matching("/interfaces/interface/state/id", &ports).len(), 2, "an omitted key is a wildcard");
        assert_eq!(matching("/interfaces/interface[name=eth1]/state/counters", &ports).len(), COUNTERS.len());
        assert_eq!(matching("/interfaces/.../oper-status", &ports).len(), 2);
        assert_eq!(matching("/interfaces/*/state/oper-status", &ports).len(), 2);
        assert!(matching("/interfaces/interface[name=eth9]/state/id", &ports).is_empty());
        assert!(matching("/interfaces/interface[name=eth0]/state/nope", &ports).is_empty());
    }

    #[test]
    fn the_schema_tells_a_missing_interface_from_a_path_that_is_not_in_the_model() {
        let ok = pattern(None, Some(&path("/interfaces/interface[name=nope]/state/counters"))).unwrap();
        assert!(ok.in_schema());
        let bad = pattern(None, Some(&path("/interfaces/interface/state/colour"))).unwrap();
        assert!(!bad.in_schema());
        let other = proto::Path { origin: "cli".into(), ..Default::default() };
        assert!(pattern(None, Some(&other)).unwrap_err().contains("origin 'cli'"));
    }

    #[test]
    fn a_subtree_is_json_with_list_keys_and_ietf_integers_as_strings() {
        let ls = leaves(&[port("eth0", 1)]);
        let rel: Vec<(&[Elem], &Scalar)> =
            ls.iter().filter(|l| l.path[2].name == "state").map(|l| (&l.path[..], &l.value)).collect();
        let j = subtree_json(&rel, Encoding::JsonIetf, true);
        let iface = &j["openconfig-interfaces:interfaces"]["interface"][0];
        assert_eq!(iface["name"], "eth0");
        assert_eq!(iface["state"]["id"], "1");
        assert_eq!(iface["state"]["counters"]["in-pkts"], "7");
        assert_eq!(iface["state"]["oper-status"], "UP");
        let j = subtree_json(&rel, Encoding::Json, false);
        assert_eq!(j["interfaces"]["interface"][0]["state"]["counters"]["in-octets"], 700);
    }

    #[test]
    fn set_enables_and_disables_and_refuses_what_is_not_writable() {
        use proto::typed_value::Value as V;
        let ports = [port("eth0", 1)];
        let upd = |p: &str, v: V| proto::Update {
            path: Some(path(p)),
            val: Some(proto::TypedValue { value: Some(v) }),
            ..Default::default()
        };
        let plan = |ops: &[SetOp<'_>]| plan_set(None, ops, &ports);
        let off = upd("/interfaces/interface[name=eth0]/config/enabled", V::BoolVal(false));
        assert_eq!(plan(&[SetOp::Update(&off)]).unwrap(), [Change::Enable { name: "eth0".into(), up: false }]);
        let json = upd("/interfaces/interface[name=eth0]/config", V::JsonIetfVal(br#"{"enabled":false}"#.to_vec()));
        assert_eq!(plan(&[SetOp::Update(&json)]).unwrap(), [Change::Enable { name: "eth0".into(), up: false }]);
        let top = upd(
            "/",
            V::JsonVal(
                br#"{"openconfig-interfaces:interfaces":{"interface":[{"name":"eth0","config":{"enabled":true}}]}}"#
                    .to_vec(),
            ),
        );
        // A list below the target node is not writable; the interface's own path is.
        assert!(plan(&[SetOp::Update(&top)]).is_err());
        let del = path("/interfaces/interface[name=eth0]/config/enabled");
        assert_eq!(plan(&[SetOp::Delete(&del)]).unwrap(), [Change::Enable { name: "eth0".into(), up: true }]);
        let mtu = upd("/interfaces/interface[name=eth0]/config/mtu", V::UintVal(9000));
        assert!(plan(&[SetOp::Update(&mtu)]).unwrap_err().1.contains("not writable"));
        let missing = upd("/interfaces/interface[name=eth9]/config/enabled", V::BoolVal(false));
        assert_eq!(plan(&[SetOp::Update(&missing)]).unwrap_err().0, tonic::Code::NotFound);
        let wild = upd("/interfaces/interface[name=*]/config/enabled", V::BoolVal(false));
        assert!(plan(&[SetOp::Update(&wild)]).unwrap_err().1.contains("wildcards"));
        let id = upd("/interfaces/interface[name=eth0]/config/id", V::UintVal(3));
        assert!(plan(&[SetOp::Update(&id)]).unwrap_err().1.contains("cannot be changed"));
    }
}
