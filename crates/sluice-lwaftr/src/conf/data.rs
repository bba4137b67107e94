//! Snabb's `snabb config` verbs (`get`, `set`, `add`, `remove`, `get-state`)
//! over one lwAFTR's typed configuration, for the schema `snabb-softwire-v3`.
//!
//! Contract.
//!
//! - Reads: a path in Snabb's XPath subset (`/a/b[k=v][k2=v2]/c`, keys in
//!   any order, repeated or trailing `/` ignored, `/` the whole tree), the
//!   value text of `set`/`add` in Snabb's syntax for the subtree the path
//!   names (a leaf: one bare or quoted value; a container: its members
//!   without braces; a list entry: its members but its keys; a list: one or
//!   more `{ ... }` entries with their keys), the [`Config`], and for
//!   `get-state` the counters given. Every path and value is untrusted text:
//!   nothing here panics on any of them.
//! - Writes: [`Config::set`], [`Config::add`] and [`Config::remove`] change
//!   the [`Config`] in place and say what changed ([`Change`]); on any error
//!   the [`Config`] is left as it was. [`Config::get`] and [`get_state`]
//!   return the text Snabb's `snabb config get`/`get-state` print (before
//!   the CLI's own final newline).
//! - Errors are strings. A bad path gets Snabb's wording (`Invalid path:
//!   'X' is not in schema.`, `Invalid query: missing required key 'K'`,
//!   `List has no such entry`, `Can not add already-existing list entry
//!   #N`, ...). A bad value gets the configuration reader's message with its
//!   path in the tree, located in the value text when the fault lies there:
//!   `value:LINE:COL: /softwire-config/...: message`; otherwise
//!   `/softwire-config/...: message`.
//!
//! How. One static table (`CONFIG`, `STATE`) describes the schema:
//! containers, lists with their keys, leaves with their YANG defaults. It
//! drives path checks and both printers. The [`Config`] stays the only
//! source of truth: an edit prints the configuration *without its binding
//! table's softwires* with [`Config::to_text`], reads that text into a
//! generic tree, splices the value text into it verbatim (after checking
//! that it cannot escape its braces), and reads the result back with
//! [`Config::parse`], so the existing reader validates every edit; the
//! softwires are then moved back untouched. Paths under
//! `/softwire-config/binding-table/softwire` never take that route: they
//! work on the typed `Vec<Softwire>` directly (a pass or two over the
//! table at most, the value read by [`Config::parse_softwires`]) and return
//! [`Change::Softwires`], so that a table of a million softwires is edited
//! without being printed.
//!
//! Where this differs from Snabb, on purpose: a container with nothing to
//! print is left out (as [`Config::to_text`] does, so that `get /` is the
//! file's text); xpath lines start with the normalized path (keys in schema
//! order, canonical values), not the path as typed; setting a list entry's
//! key leaf is refused (remove and add the entry instead); setting one case
//! of a choice (`next-hop`'s `ip` or `mac`) removes the other, as YANG
//! says; removing an absent entry says `List 'X' has no entry matching the
//! query` (Snabb's intended message); errors carry neither Lua's
//! `file:line:` prefix nor the CLI's second `Invalid path:`.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::ops::Range;

use super::lexer::{line_col, Lexer, Tok};
use super::parser::ConfError;
use super::schema::{BindingTable, Config, Softwire};

/// How `get` and `get-state` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Snabb's YANG text: `keyword value;` lines and `keyword { ... }` blocks,
    /// two spaces a level.
    #[default]
    Yang,
    /// One `/full/path[key=value]/leaf value` line a leaf.
    Xpath,
}

/// The options of `get` and `get-state`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrintOptions {
    /// `--format`.
    pub format: Format,
    /// `--print-default`: also print leaves that equal their YANG default.
    pub print_default: bool,
}

/// What a successful edit changed, so the caller knows how to apply it to a running data plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Only the binding table's softwires: these keys were removed, then these softwires added
    /// (an updated softwire appears in both). Applied in place by the caller.
    Softwires {
        /// (`ipv4`, `psid`) of the softwires removed (or replaced).
        removed: Vec<(Ipv4Addr, u16)>,
        /// The softwires added (or replacing).
        added: Vec<Softwire>,
    },
    /// Anything else (interfaces, instances, name, the binding table's version, or a whole-list/whole-tree replacement):
    /// the caller compares what it runs with and rebuilds if needed.
    Other,
}

// ----- the schema -----

/// A leaf's YANG type (what a list key's value must be; the reader checks
/// every other leaf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Str,
    Bool,
    U8,
    U16,
    U32,
    U64,
    Ipv4,
    Ipv6,
    Mac,
    DateTime,
}

/// One schema node.
#[derive(Debug)]
struct Node {
    name: &'static str,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A leaf, with its YANG default, and the choice it is a case of.
    Leaf { ty: Ty, default: Option<&'static str>, choice: Option<&'static str> },
    /// A container and its members.
    Container(&'static [Node]),
    /// A list: its keys (sorted) and members (keys included). `typed`: its
    /// entries live in the typed binding table, not in the generic tree.
    List { keys: &'static [&'static str], members: &'static [Node], typed: bool },
}

const fn leaf(name: &'static str, ty: Ty) -> Node {
    Node { name, kind: Kind::Leaf { ty, default: None, choice: None } }
}

const fn leaf_or(name: &'static str, ty: Ty, default: &'static str) -> Node {
    Node { name, kind: Kind::Leaf { ty, default: Some(default), choice: None } }
}

const fn case(name: &'static str, ty: Ty, choice: &'static str) -> Node {
    Node { name, kind: Kind::Leaf { ty, default: None, choice: Some(choice) } }
}

const fn container(name: &'static str, members: &'static [Node]) -> Node {
    Node { name, kind: Kind::Container(members) }
}

const fn list(name: &'static str, keys: &'static [&'static str], members: &'static [Node], typed: bool) -> Node {
    Node { name, kind: Kind::List { keys, members, typed } }
}

const fn counter(name: &'static str) -> Node {
    leaf(name, Ty::U64)
}

// Every member table is sorted by name (byte-wise), the order Snabb prints.

const RATE_LIMIT: &[Node] = &[leaf_or("packets", Ty::U32, "200"), leaf_or("period", Ty::U32, "2")];

const REASSEMBLY: &[Node] =
    &[leaf_or("max-fragments-per-packet", Ty::U32, "20"), leaf_or("max-packets", Ty::U32, "20000")];

const EXTERNAL_INTERFACE: &[Node] = &[
    leaf_or("allow-incoming-icmp", Ty::Bool, "true"),
    leaf("egress-filter", Ty::Str),
    container("error-rate-limiting", RATE_LIMIT),
    leaf_or("generate-icmp-errors", Ty::Bool, "true"),
    leaf("ingress-filter", Ty::Str),
    leaf_or("mru", Ty::U16, "1460"),
    leaf_or("mtu", Ty::U16, "1460"),
    container("reassembly", REASSEMBLY),
];

const INTERNAL_INTERFACE: &[Node] = &[
    leaf_or("allow-incoming-icmp", Ty::Bool, "true"),
    leaf("egress-filter", Ty::Str),
    container("error-rate-limiting", RATE_LIMIT),
    leaf_or("flow-label", Ty::U32, "0"),
    leaf_or("generate-icmp-errors", Ty::Bool, "true"),
    leaf_or("hairpinning", Ty::Bool, "true"),
    leaf("ingress-filter", Ty::Str),
    leaf_or("mru", Ty::U16, "1460"),
    leaf_or("mtu", Ty::U16, "1500"),
    container("reassembly", REASSEMBLY),
    leaf("vlan-tag", Ty::U16),
];

const PORT_SET: &[Node] = &[leaf("psid-length", Ty::U8), leaf_or("reserved-ports-bit-count", Ty::U8, "0")];

const SOFTWIRE: &[Node] = &[
    leaf("b4-ipv6", Ty::Ipv6),
    leaf("br-address", Ty::Ipv6),
    leaf("ipv4", Ty::Ipv4),
    leaf_or("padding", Ty::U16, "0"),
    container("port-set", PORT_SET),
    leaf("psid", Ty::U16),
];

const VERSION: &[Node] = &[leaf("date", Ty::DateTime), leaf("number", Ty::U64)];

/// `binding-table`'s members (also the root of the typed softwire edits).
const BINDING_TABLE: &[Node] = &[list("softwire", &["ipv4", "psid"], SOFTWIRE, true), container("version", VERSION)];

const NEXT_HOP4: &[Node] = &[case("ip", Ty::Ipv4, "address"), case("mac", Ty::Mac, "address")];

const NEXT_HOP6: &[Node] = &[case("ip", Ty::Ipv6, "address"), case("mac", Ty::Mac, "address")];

const QUEUE_EXTERNAL: &[Node] =
    &[leaf("ip", Ty::Ipv4), leaf("mac", Ty::Mac), container("next-hop", NEXT_HOP4), leaf("vlan-tag", Ty::U16)];

const QUEUE_INTERNAL: &[Node] =
    &[leaf("ip", Ty::Ipv6), leaf("mac", Ty::Mac), container("next-hop", NEXT_HOP6), leaf("vlan-tag", Ty::U16)];

const QUEUE: &[Node] = &[
    container("external-interface", QUEUE_EXTERNAL),
    leaf("id", Ty::U8),
    container("internal-interface", QUEUE_INTERNAL),
];

const INSTANCE: &[Node] =
    &[leaf("device", Ty::Str), leaf("external-device", Ty::Str), list("queue", &["id"], QUEUE, false)];

const SOFTWIRE_CONFIG: &[Node] = &[
    container("binding-table", BINDING_TABLE),
    container("external-interface", EXTERNAL_INTERFACE),
    list("instance", &["device"], INSTANCE, false),
    container("internal-interface", INTERNAL_INTERFACE),
    leaf("name", Ty::Str),
];

/// The configuration tree of `snabb-softwire-v3` (config true).
const CONFIG: &[Node] = &[container("softwire-config", SOFTWIRE_CONFIG)];

/// The leaves of `softwire-state` (`discontinuity-time` and the counters).
const COUNTERS: &[Node] = &[
    leaf("discontinuity-time", Ty::DateTime),
    counter("drop-all-ipv4-iface-bytes"),
    counter("drop-all-ipv4-iface-packets"),
    counter("drop-all-ipv6-iface-bytes"),
    counter("drop-all-ipv6-iface-packets"),
    counter("drop-bad-checksum-icmpv4-bytes"),
    counter("drop-bad-checksum-icmpv4-packets"),
    counter("drop-in-by-policy-icmpv4-bytes"),
    counter("drop-in-by-policy-icmpv4-packets"),
    counter("drop-in-by-policy-icmpv6-bytes"),
    counter("drop-in-by-policy-icmpv6-packets"),
    counter("drop-in-by-rfc7596-icmpv4-bytes"),
    counter("drop-in-by-rfc7596-icmpv4-packets"),
    counter("drop-ipv4-frag-disabled"),
    counter("drop-ipv4-frag-invalid-reassembly"),
    counter("drop-ipv4-frag-random-evicted"),
    counter("drop-ipv6-frag-disabled"),
    counter("drop-ipv6-frag-invalid-reassembly"),
    counter("drop-ipv6-frag-random-evicted"),
    counter("drop-misplaced-not-ipv4-bytes"),
    counter("drop-misplaced-not-ipv4-packets"),
    counter("drop-misplaced-not-ipv6-bytes"),
    counter("drop-misplaced-not-ipv6-packets"),
    counter("drop-no-dest-softwire-ipv4-bytes"),
    counter("drop-no-dest-softwire-ipv4-packets"),
    counter("drop-no-source-softwire-ipv6-bytes"),
    counter("drop-no-source-softwire-ipv6-packets"),
    counter("drop-out-by-policy-icmpv4-packets"),
    counter("drop-out-by-policy-icmpv6-packets"),
    counter("drop-over-mtu-but-dont-fragment-ipv4-bytes"),
    counter("drop-over-mtu-but-dont-fragment-ipv4-packets"),
    counter("drop-over-rate-limit-icmpv6-bytes"),
    counter("drop-over-rate-limit-icmpv6-packets"),
    counter("drop-over-time-but-not-hop-limit-icmpv6-bytes"),
    counter("drop-over-time-but-not-hop-limit-icmpv6-packets"),
    counter("drop-too-big-type-but-not-code-icmpv6-bytes"),
    counter("drop-too-big-type-but-not-code-icmpv6-packets"),
    counter("drop-ttl-zero-ipv4-bytes"),
    counter("drop-ttl-zero-ipv4-packets"),
    counter("drop-unknown-protocol-icmpv6-bytes"),
    counter("drop-unknown-protocol-icmpv6-packets"),
    counter("drop-unknown-protocol-ipv6-bytes"),
    counter("drop-unknown-protocol-ipv6-packets"),
    counter("hairpin-ipv4-bytes"),
    counter("hairpin-ipv4-packets"),
    counter("in-arp-reply-bytes"),
    counter("in-arp-reply-packets"),
    counter("in-arp-request-bytes"),
    counter("in-arp-request-packets"),
    counter("in-icmpv4-echo-bytes"),
    counter("in-icmpv4-echo-packets"),
    counter("in-icmpv6-echo-bytes"),
    counter("in-icmpv6-echo-packets"),
    counter("in-ipv4-bytes"),
    counter("in-ipv4-frag-needs-reassembly"),
    counter("in-ipv4-frag-reassembled"),
    counter("in-ipv4-frag-reassembly-unneeded"),
    counter("in-ipv4-packets"),
    counter("in-ipv6-bytes"),
    counter("in-ipv6-frag-needs-reassembly"),
    counter("in-ipv6-frag-reassembled"),
    counter("in-ipv6-frag-reassembly-unneeded"),
    counter("in-ipv6-packets"),
    counter("in-ndp-na-bytes"),
    counter("in-ndp-na-packets"),
    counter("in-ndp-ns-bytes"),
    counter("in-ndp-ns-packets"),
    counter("ingress-packet-drops"),
    counter("memuse-ipv4-frag-reassembly-buffer"),
    counter("memuse-ipv6-frag-reassembly-buffer"),
    counter("out-arp-reply-bytes"),
    counter("out-arp-reply-packets"),
    counter("out-arp-request-bytes"),
    counter("out-arp-request-packets"),
    counter("out-icmpv4-echo-bytes"),
    counter("out-icmpv4-echo-packets"),
    counter("out-icmpv4-error-bytes"),
    counter("out-icmpv4-error-packets"),
    counter("out-icmpv6-echo-bytes"),
    counter("out-icmpv6-echo-packets"),
    counter("out-icmpv6-error-bytes"),
    counter("out-icmpv6-error-packets"),
    counter("out-ipv4-bytes"),
    counter("out-ipv4-frag"),
    counter("out-ipv4-frag-not"),
    counter("out-ipv4-packets"),
    counter("out-ipv6-bytes"),
    counter("out-ipv6-frag"),
    counter("out-ipv6-frag-not"),
    counter("out-ipv6-packets"),
    counter("out-ndp-na-bytes"),
    counter("out-ndp-na-packets"),
    counter("out-ndp-ns-bytes"),
    counter("out-ndp-ns-packets"),
];

const STATE_INSTANCE: &[Node] = &[leaf("device", Ty::Str), container("softwire-state", COUNTERS)];

/// The state tree (config false) as the lwAFTR fills it: each instance's
/// counters, and their sum with `discontinuity-time`.
const STATE: &[Node] = &[
    container("softwire-config", &[list("instance", &["device"], STATE_INSTANCE, false)]),
    container("softwire-state", COUNTERS),
];

/// The members of a container or list entry.
fn members_of(node: &Node) -> &'static [Node] {
    match &node.kind {
        Kind::Container(m) => m,
        Kind::List { members, .. } => members,
        Kind::Leaf { .. } => &[],
    }
}

// ----- paths -----

/// One resolved step of a path: the schema node and, for a list entry,
/// its key values (canonical text, in the list's key order).
#[derive(Debug)]
struct Step {
    node: &'static Node,
    key: Option<Vec<String>>,
}

/// The syntax error of Snabb's path reader.
fn syntax_error(fragment: &str, pos: usize) -> String {
    let pad = fragment.get(..pos).map_or(0, |s| s.chars().count());
    format!("Invalid path: Syntax error in:\n{fragment}\n{}^", " ".repeat(pad))
}

/// One `/`-separated piece of a path: its name and its `[key=value]` pairs.
type Fragment<'a> = (&'a str, Vec<(&'a str, &'a str)>);

/// `name[k=v][k2=v2]` → (name, [(k, v), ...]).
fn fragment(frag: &str) -> Result<Fragment<'_>, String> {
    let b = frag.as_bytes();
    let name_end = frag.find('[').unwrap_or(frag.len());
    if name_end == 0 {
        return Err(syntax_error(frag, 0));
    }
    let mut query = Vec::new();
    let mut pos = name_end;
    // A token: one or more bytes up to `=` or `]`.
    let token = |pos: usize| -> Result<(usize, usize), String> {
        let end = b[pos..].iter().position(|&c| c == b'=' || c == b']').map_or(b.len(), |n| pos + n);
        if end == pos {
            Err(syntax_error(frag, pos))
        } else {
            Ok((pos, end))
        }
    };
    while pos < b.len() {
        if b[pos] != b'[' {
            return Err(syntax_error(frag, pos));
        }
        let (ks, ke) = token(pos + 1)?;
        if b.get(ke) != Some(&b'=') {
            return Err(syntax_error(frag, ke));
        }
        let (vs, ve) = token(ke + 1)?;
        if b.get(ve) != Some(&b']') {
            return Err(syntax_error(frag, ve));
        }
        query.push((&frag[ks..ke], &frag[vs..ve]));
        pos = ve + 1;
    }
    Ok((&frag[..name_end], query))
}

/// Splits a path on the `/` outside brackets; empty fragments (repeated,
/// leading or trailing `/`) are dropped.
fn split_path(path: &str) -> Result<Vec<Fragment<'_>>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in path.bytes().enumerate() {
        match c {
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b'/' if depth == 0 => {
                if i > start {
                    parts.push(fragment(&path[start..i])?);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if path.len() > start {
        parts.push(fragment(&path[start..])?);
    }
    Ok(parts)
}

/// A key's value as the tree holds it, if it is one of type `ty`.
fn canonical(ty: Ty, v: &str) -> Option<String> {
    let digits = !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit());
    match ty {
        Ty::Ipv4 => v.parse::<Ipv4Addr>().ok().map(|a| a.to_string()),
        Ty::U8 if digits => v.parse::<u8>().ok().map(|n| n.to_string()),
        Ty::U16 if digits => v.parse::<u16>().ok().map(|n| n.to_string()),
        Ty::Str => Some(v.to_string()),
        _ => None,
    }
}

/// The type of leaf `name` among `members`.
fn leaf_ty(members: &[Node], name: &str) -> Ty {
    match members.iter().find(|n| n.name == name).map(|n| &n.kind) {
        Some(Kind::Leaf { ty, .. }) => *ty,
        _ => Ty::Str,
    }
}

/// The key of a query on `node`, checked as Snabb's path reader does.
fn query_key(node: &Node, query: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let Kind::List { keys, members, .. } = &node.kind else {
        return Err("Invalid query: can only query list or leaf-list.".into());
    };
    if let Some((k, _)) = query.iter().find(|(k, _)| !keys.contains(k)) {
        return Err(format!("Invalid query:'{k}' is not a list key."));
    }
    keys.iter()
        .map(|k| {
            let v = query
                .iter()
                .rev()
                .find(|(q, _)| q == k)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("Invalid query: missing required key '{k}'"))?;
            canonical(leaf_ty(members, k), v)
                .ok_or_else(|| format!("Invalid query: '{v}' is not a valid value of key '{k}'"))
        })
        .collect()
}

/// Resolves `path` against the schema `root`.
fn resolve(root: &'static [Node], path: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut members = root;
    for (name, query) in split_path(path)? {
        if let Some(Step { node: Node { kind: Kind::Leaf { .. }, .. }, .. }) = steps.last() {
            return Err(format!("Invalid path: trying to access '{name}' in scalar."));
        }
        let node = members
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| format!("Invalid path: '{name}' is not in schema."))?;
        let key = if query.is_empty() { None } else { Some(query_key(node, &query)?) };
        members = members_of(node);
        steps.push(Step { node, key });
    }
    // Only a container or a list entry has members to step into.
    for w in steps.windows(2) {
        if matches!(w[0].node.kind, Kind::List { .. }) && w[0].key.is_none() {
            return Err(format!("Invalid path: '{}' is not a container", w[1].node.name));
        }
    }
    Ok(steps)
}

/// The normalized text of a resolved path (empty for `/`): the prefix of
/// xpath lines.
fn path_text(steps: &[Step]) -> String {
    let mut p = String::new();
    for s in steps {
        p.push('/');
        p.push_str(s.node.name);
        if let (Kind::List { keys, .. }, Some(vals)) = (&s.node.kind, &s.key) {
            for (k, v) in keys.iter().zip(vals) {
                p.push('[');
                p.push_str(k);
                p.push('=');
                yang_string(&mut p, v);
                p.push(']');
            }
        }
    }
    p
}

/// Whether the path goes to the binding table's softwires (`steps[2]` is
/// the `softwire` list).
fn is_softwire_path(steps: &[Step]) -> bool {
    steps.len() >= 3 && matches!(steps[2].node.kind, Kind::List { typed: true, .. })
}

// ----- the generic tree -----

/// A statement of the generic tree.
#[derive(Debug, Clone)]
struct Item {
    kw: String,
    val: Val,
}

#[derive(Debug, Clone)]
enum Val {
    /// `kw value;`
    Leaf(String),
    /// `kw { ... }`
    Block(Vec<Item>),
    /// `kw VALUE;` with VALUE this range of the value text.
    LeafHole(Range<usize>),
    /// Statements: this range of the value text, verbatim (`kw` unused).
    StmtsHole(Range<usize>),
    /// `kw { ... }` with `{ ... }` this range of the value text.
    EntryHole(Range<usize>),
}

impl Item {
    fn leaf(kw: &str, v: String) -> Item {
        Item { kw: kw.to_string(), val: Val::Leaf(v) }
    }

    fn block(kw: &str, items: Vec<Item>) -> Item {
        Item { kw: kw.to_string(), val: Val::Block(items) }
    }
}

/// Reads text in Snabb's syntax into a generic tree (no recursion; used on
/// the configuration's own text). Errors: byte offset and message.
fn parse_items(text: &str) -> Result<Vec<Item>, (usize, String)> {
    let mut lex = Lexer::new(text);
    let mut stack: Vec<(String, Vec<Item>)> = Vec::new();
    let mut cur: Vec<Item> = Vec::new();
    loop {
        let (t, pos) = lex.next_token().map_err(|e| (e.pos, e.message))?;
        match t {
            Tok::Eof if stack.is_empty() => return Ok(cur),
            Tok::Eof => return Err((pos, "`}` missing".into())),
            Tok::RBrace => match stack.pop() {
                Some((kw, parent)) => {
                    let children = std::mem::replace(&mut cur, parent);
                    cur.push(Item { kw, val: Val::Block(children) });
                }
                None => return Err((pos, "unexpected `}`".into())),
            },
            Tok::Word(kw) => {
                let (t, vpos) = lex.next_token().map_err(|e| (e.pos, e.message))?;
                match t {
                    Tok::LBrace => stack.push((kw.to_string(), std::mem::take(&mut cur))),
                    Tok::Word(v) => cur.push(Item::leaf(kw, v.to_string())),
                    Tok::Str(v) => cur.push(Item::leaf(kw, v.into_owned())),
                    _ => return Err((vpos, "expected a value and `;`, or `{`".into())),
                }
                if matches!(cur.last(), Some(Item { val: Val::Leaf(_), .. })) {
                    let (t, spos) = lex.next_token().map_err(|e| (e.pos, e.message))?;
                    if t != Tok::Semi {
                        return Err((spos, "expected `;`".into()));
                    }
                }
            }
            _ => return Err((pos, "expected a keyword".into())),
        }
    }
}

/// The value of leaf `name` among `items`.
fn leaf_value<'a>(items: &'a [Item], name: &str) -> Option<&'a str> {
    items.iter().find_map(|i| match &i.val {
        Val::Leaf(v) if i.kw == name => Some(v.as_str()),
        _ => None,
    })
}

/// The members of container `name` among `items`.
fn block<'a>(items: &'a [Item], name: &str) -> Option<&'a [Item]> {
    items.iter().find_map(|i| match &i.val {
        Val::Block(c) if i.kw == name => Some(c.as_slice()),
        _ => None,
    })
}

/// The index of the entry of list `name` with key values `vals`.
fn entry_index(items: &[Item], name: &str, keys: &[&str], vals: &[String]) -> Option<usize> {
    items.iter().position(|i| match &i.val {
        Val::Block(c) if i.kw == name => keys.iter().zip(vals).all(|(k, v)| leaf_value(c, k) == Some(v.as_str())),
        _ => false,
    })
}

/// A softwire as generic statements (every member, defaults included).
fn softwire_items(s: &Softwire) -> Vec<Item> {
    vec![
        Item::leaf("ipv4", s.ipv4.to_string()),
        Item::leaf("psid", s.psid.to_string()),
        Item::leaf("b4-ipv6", s.b4_ipv6.to_string()),
        Item::leaf("br-address", s.br_address.to_string()),
        Item::leaf("padding", s.padding.to_string()),
        Item::block(
            "port-set",
            vec![
                Item::leaf("psid-length", s.port_set.psid_length.to_string()),
                Item::leaf("reserved-ports-bit-count", s.port_set.reserved_ports_bit_count.to_string()),
            ],
        ),
    ]
}

#[cfg(test)]
thread_local! {
    /// How many times this thread printed a configuration for a generic edit.
    static SKELETONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Config {
    /// The configuration without its softwires, as a generic tree (the only
    /// place this module prints a configuration: never with its softwires).
    fn skeleton(&self) -> Result<Vec<Item>, String> {
        #[cfg(test)]
        SKELETONS.with(|c| c.set(c.get() + 1));
        let bare = Config {
            name: self.name.clone(),
            instances: self.instances.clone(),
            external: self.external.clone(),
            internal: self.internal.clone(),
            binding_table: BindingTable { softwires: Vec::new(), version: self.binding_table.version.clone() },
        };
        parse_items(&bare.to_text())
            .map_err(|(pos, m)| format!("internal error: the configuration's text reads back badly at byte {pos}: {m}"))
    }
}

// ----- printing -----

/// Appends `s` as Snabb prints a value: bare unless empty (`''`) or holding
/// whitespace, `;`, `{`, `}`, a quote or `/`; then double-quoted with `\n`,
/// `\t`, `\"` and `\\` escaped. (The configuration reader reads both back.)
fn yang_string(out: &mut String, s: &str) {
    if s.is_empty() {
        out.push_str("''");
        return;
    }
    let plain = !s.bytes().any(|c| {
        matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b';' | b'{' | b'}' | b'"' | b'\'' | b'/')
    });
    if plain {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The schema-driven printer of `get` and `get-state`.
struct Printer<'a> {
    out: String,
    xpath: bool,
    defaults: bool,
    /// The entries of the typed `softwire` list.
    softwires: &'a [Softwire],
}

impl Printer<'_> {
    fn new(opts: PrintOptions, softwires: &[Softwire]) -> Printer<'_> {
        Printer { out: String::new(), xpath: opts.format == Format::Xpath, defaults: opts.print_default, softwires }
    }

    fn pad(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn leaf(&mut self, depth: usize, prefix: &str, name: &str, value: &str) {
        if self.xpath {
            self.out.push_str(prefix);
            self.out.push('/');
            self.out.push_str(name);
            self.out.push(' ');
            yang_string(&mut self.out, value);
            self.out.push('\n');
        } else {
            self.pad(depth);
            self.out.push_str(name);
            self.out.push(' ');
            yang_string(&mut self.out, value);
            self.out.push_str(";\n");
        }
    }

    /// `members` in order, but those named in `skip` (a list entry's keys).
    fn members(&mut self, depth: usize, prefix: &str, members: &'static [Node], skip: &[&str], data: Option<&[Item]>) {
        for node in members {
            if !skip.contains(&node.name) {
                self.member(depth, prefix, node, data);
            }
        }
    }

    fn member(&mut self, depth: usize, prefix: &str, node: &'static Node, data: Option<&[Item]>) {
        match &node.kind {
            Kind::Leaf { default, .. } => {
                let value = data.and_then(|d| leaf_value(d, node.name));
                let shown = match (value, default) {
                    (Some(v), Some(d)) if v == *d && !self.defaults => None,
                    (Some(v), _) => Some(v),
                    (None, Some(d)) if self.defaults => Some(*d),
                    (None, _) => None,
                };
                if let Some(v) = shown {
                    self.leaf(depth, prefix, node.name, v);
                }
            }
            Kind::Container(m) => self.container(depth, prefix, node.name, m, data.and_then(|d| block(d, node.name))),
            Kind::List { keys, members, typed } => {
                if *typed {
                    let softwires = self.softwires;
                    for s in softwires {
                        self.entry(depth, prefix, Some(node.name), keys, members, &softwire_items(s));
                    }
                }
                for item in data.unwrap_or(&[]) {
                    if let Val::Block(c) = &item.val {
                        if item.kw == node.name {
                            self.entry(depth, prefix, Some(node.name), keys, members, c);
                        }
                    }
                }
            }
        }
    }

    /// A container; left out when it has nothing to print (as
    /// `Config::to_text` does), but for the top `softwire-config`.
    fn container(&mut self, depth: usize, prefix: &str, name: &str, members: &'static [Node], data: Option<&[Item]>) {
        if self.xpath {
            let p = format!("{prefix}/{name}");
            self.members(depth, &p, members, &[], data);
            return;
        }
        let mark = self.out.len();
        self.pad(depth);
        self.out.push_str(name);
        self.out.push_str(" {\n");
        let inner = self.out.len();
        self.members(depth + 1, prefix, members, &[], data);
        if self.out.len() == inner && !(depth == 0 && name == "softwire-config") {
            self.out.truncate(mark);
        } else {
            self.pad(depth);
            self.out.push_str("}\n");
        }
    }

    /// A list entry: keys first, then the other members; `kw` is `None` for
    /// the entries of a list printed on its own.
    fn entry(
        &mut self,
        depth: usize,
        prefix: &str,
        kw: Option<&str>,
        keys: &[&str],
        members: &'static [Node],
        items: &[Item],
    ) {
        if self.xpath {
            let mut p = String::from(prefix);
            if let Some(k) = kw {
                p.push('/');
                p.push_str(k);
            }
            for key in keys {
                p.push('[');
                p.push_str(key);
                p.push('=');
                yang_string(&mut p, leaf_value(items, key).unwrap_or(""));
                p.push(']');
            }
            self.members(depth, &p, members, keys, Some(items));
            return;
        }
        self.pad(depth);
        if let Some(k) = kw {
            self.out.push_str(k);
            self.out.push(' ');
        }
        self.out.push_str("{\n");
        for key in keys {
            if let Some(n) = members.iter().find(|n| n.name == *key) {
                self.member(depth + 1, prefix, n, Some(items));
            }
        }
        self.members(depth + 1, prefix, members, keys, Some(items));
        self.pad(depth);
        self.out.push_str("}\n");
    }
}

/// Prints what `steps` names in the tree `items` (of schema `root`, with
/// `skip` the members not printed at the top), Snabb's way: a leaf's bare
/// value, a container's or entry's members, a list's entries in braces.
/// `prefix` is the path's text (for xpath lines).
fn print_at(
    root: &'static [Node],
    items: &[Item],
    steps: &[Step],
    skip: &'static [&'static str],
    opts: PrintOptions,
    softwires: &[Softwire],
    prefix: &str,
) -> Result<String, String> {
    let mut p = Printer::new(opts, softwires);
    let mut members = root;
    let mut skip = skip;
    let mut data: Option<&[Item]> = Some(items);
    for step in steps {
        let name = step.node.name;
        match (&step.node.kind, &step.key) {
            (Kind::Leaf { default, .. }, _) => {
                // `resolve` made sure a leaf is the last step.
                let v = data
                    .and_then(|d| leaf_value(d, name))
                    .or(*default)
                    .ok_or_else(|| format!("Container has no member '{name}'"))?;
                if !p.xpath {
                    yang_string(&mut p.out, v);
                    p.out.push('\n');
                } else if p.defaults || Some(v) != *default {
                    p.out.push_str(prefix);
                    p.out.push(' ');
                    yang_string(&mut p.out, v);
                    p.out.push('\n');
                }
                return Ok(p.out);
            }
            (Kind::Container(m), _) => {
                data = data.and_then(|d| block(d, name));
                members = *m;
                skip = &[];
            }
            (Kind::List { keys, members: m, .. }, Some(vals)) => {
                let d = data.unwrap_or(&[]);
                let i = entry_index(d, name, keys, vals).ok_or("List has no such entry")?;
                data = match &d[i].val {
                    Val::Block(c) => Some(c.as_slice()),
                    _ => None,
                };
                members = *m;
                skip = *keys;
            }
            (Kind::List { keys, members: m, typed }, None) => {
                // `resolve` made sure a list without a key is the last step.
                if *typed {
                    for s in softwires {
                        p.entry(0, prefix, None, keys, m, &softwire_items(s));
                    }
                }
                for item in data.unwrap_or(&[]) {
                    if let Val::Block(c) = &item.val {
                        if item.kw == name {
                            p.entry(0, prefix, None, keys, m, c);
                        }
                    }
                }
                return Ok(p.out);
            }
        }
    }
    p.members(0, prefix, members, skip, data);
    Ok(p.out)
}

// ----- values and the text read back -----

/// An error located in the value text.
fn value_error(text: &str, pos: usize, msg: &str) -> String {
    let (l, c) = line_col(text, pos);
    format!("value:{l}:{c}: {msg}")
}

/// A leaf's value: one word or quoted string, nothing else.
fn leaf_range(text: &str) -> Result<Range<usize>, String> {
    let mut lex = Lexer::new(text);
    let lexerr = |e: super::lexer::LexError| value_error(text, e.pos, &e.message);
    let (t, pos) = lex.next_token().map_err(lexerr)?;
    match t {
        Tok::Word(_) | Tok::Str(_) => {}
        Tok::Eof => return Err(value_error(text, pos, "a value is missing")),
        _ => return Err(value_error(text, pos, "expected a value (a word or a quoted string)")),
    }
    let end = lex.pos();
    let (t, more) = lex.next_token().map_err(lexerr)?;
    if t != Tok::Eof {
        return Err(value_error(text, more, "Not end of file: a leaf's value is one word or quoted string"));
    }
    Ok(pos..end)
}

/// Statements whose braces balance (so that, spliced into a block, they
/// stay inside it): the whole text.
fn stmts_range(text: &str) -> Result<Range<usize>, String> {
    let mut lex = Lexer::new(text);
    let mut open: Vec<usize> = Vec::new();
    loop {
        let (t, pos) = lex.next_token().map_err(|e| value_error(text, e.pos, &e.message))?;
        match t {
            Tok::Eof => break,
            Tok::LBrace => open.push(pos),
            Tok::RBrace if open.pop().is_none() => return Err(value_error(text, pos, "unexpected `}`")),
            _ => {}
        }
    }
    match open.last() {
        Some(&p) => Err(value_error(text, p, "this `{` is not closed")),
        None => Ok(0..text.len()),
    }
}

/// List entries `{ ... } { ... }`: the range of each, braces included.
fn entry_ranges(text: &str) -> Result<Vec<Range<usize>>, String> {
    let mut lex = Lexer::new(text);
    let mut v = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    loop {
        let (t, pos) = lex.next_token().map_err(|e| value_error(text, e.pos, &e.message))?;
        match t {
            Tok::Eof if depth > 0 => return Err(value_error(text, start, "this `{` is not closed")),
            Tok::Eof => return Ok(v),
            Tok::LBrace => {
                if depth == 0 {
                    start = pos;
                }
                depth += 1;
            }
            Tok::RBrace if depth == 0 => return Err(value_error(text, pos, "unexpected `}`")),
            Tok::RBrace => {
                depth -= 1;
                if depth == 0 {
                    v.push(start..pos + 1);
                }
            }
            _ if depth == 0 => {
                return Err(value_error(text, pos, "expected `{`: a list entry is written `{ ... }`, keys included"))
            }
            _ => {}
        }
    }
}

/// The `name value;` statements at the top level of `text` (the keys of a
/// list entry being added); what does not read is left to the reader.
fn top_leaves(text: &str) -> Vec<(String, String)> {
    let mut lex = Lexer::new(text);
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut kw: Option<String> = None;
    let mut pending: Option<(String, String)> = None;
    while let Ok((t, _)) = lex.next_token() {
        match t {
            Tok::Eof => break,
            Tok::LBrace => {
                depth += 1;
                kw = None;
            }
            Tok::RBrace => {
                depth = depth.saturating_sub(1);
                kw = None;
            }
            Tok::Semi => {
                if let Some(p) = pending.take() {
                    found.push(p);
                }
                kw = None;
            }
            Tok::Word(_) | Tok::Str(_) if depth > 0 => {}
            Tok::Word(w) if kw.is_none() => {
                pending = None;
                kw = Some(w.to_string());
            }
            Tok::Word(_) | Tok::Str(_) => match kw.take() {
                Some(k) => {
                    let v = match t {
                        Tok::Word(w) => w.to_string(),
                        Tok::Str(s) => s.into_owned(),
                        _ => String::new(),
                    };
                    pending = Some((k, v));
                }
                None => pending = None,
            },
        }
    }
    found
}

/// Where a piece of the value text went in the text read back.
#[derive(Debug)]
struct Hole {
    /// Its first line there (1-based); it spans `lines` lines.
    first: usize,
    lines: usize,
    /// Where it starts in the value text.
    value_line: usize,
    value_col: usize,
    /// The line of the keyword written before it, if any.
    kw_line: Option<usize>,
}

/// The text read back after an edit: the generic tree, with the value's
/// pieces copied in on lines of their own, at their own columns, so that the
/// reader's errors in them map back to the value text.
struct Rebuild<'v> {
    out: String,
    value: &'v str,
    holes: Vec<Hole>,
    /// `out[..counted]` has `lines` newlines.
    counted: usize,
    lines: usize,
}

impl<'v> Rebuild<'v> {
    fn new(value: &'v str) -> Self {
        Rebuild { out: String::new(), value, holes: Vec::new(), counted: 0, lines: 0 }
    }

    /// The 1-based line the text ends on.
    fn line(&mut self) -> usize {
        self.lines += self.out.as_bytes()[self.counted..].iter().filter(|&&c| c == b'\n').count();
        self.counted = self.out.len();
        self.lines + 1
    }

    fn items(&mut self, items: &[Item]) {
        for it in items {
            match &it.val {
                Val::Leaf(v) => {
                    self.out.push_str(&it.kw);
                    self.out.push(' ');
                    yang_string(&mut self.out, v);
                    self.out.push_str(";\n");
                }
                Val::Block(c) => {
                    self.out.push_str(&it.kw);
                    self.out.push_str(" {\n");
                    self.items(c);
                    self.out.push_str("}\n");
                }
                Val::LeafHole(r) => {
                    self.out.push_str(&it.kw);
                    self.hole(r.clone(), false);
                    self.out.push_str(";\n");
                }
                Val::StmtsHole(r) => self.hole(r.clone(), false),
                Val::EntryHole(r) => {
                    self.out.push_str(&it.kw);
                    self.hole(r.clone(), true);
                }
            }
        }
    }

    /// Copies `r` of the value on a line of its own, at its own column.
    fn hole(&mut self, r: Range<usize>, after_kw: bool) {
        let kw_line = after_kw.then(|| self.line());
        self.out.push('\n');
        let first = self.line();
        let (value_line, value_col) = line_col(self.value, r.start);
        for _ in 1..value_col {
            self.out.push(' ');
        }
        let piece = self.value.get(r).unwrap_or("");
        self.out.push_str(piece);
        self.holes.push(Hole { first, lines: piece.matches('\n').count() + 1, value_line, value_col, kw_line });
        self.out.push('\n');
    }

    /// Where line `line`, column `col` of the text read back is in the value.
    fn locate(&self, line: usize, col: usize) -> Option<(usize, usize)> {
        self.holes.iter().find_map(|h| {
            if line >= h.first && line < h.first + h.lines {
                Some((line - h.first + h.value_line, col))
            } else if h.kw_line == Some(line) {
                Some((h.value_line, h.value_col))
            } else {
                None
            }
        })
    }

    /// The reader's error, located in the value text when it lies there
    /// (and a line it names, `at line N`, too).
    fn error(&self, e: ConfError) -> String {
        let mut message = e.message;
        if let Some(i) = message.find("at line ") {
            let from = i + "at line ".len();
            let digits = message[from..].bytes().take_while(u8::is_ascii_digit).count();
            if let Some((l, _)) = message[from..from + digits].parse().ok().and_then(|n| self.locate(n, 1)) {
                message.replace_range(from..from + digits, &l.to_string());
            }
        }
        match self.locate(e.line, e.col) {
            Some((l, c)) => format!("value:{l}:{c}: {}: {message}", e.path),
            None => format!("{}: {message}", e.path),
        }
    }
}

/// Reads the `softwire` entries at `ranges` of `value`.
fn parse_softwire_entries(value: &str, ranges: &[Range<usize>]) -> Result<Vec<Softwire>, String> {
    let mut r = Rebuild::new(value);
    for range in ranges {
        r.out.push_str("softwire");
        r.hole(range.clone(), true);
    }
    Config::parse_softwires(&r.out, "value").map_err(|e| r.error(e))
}

// ----- edits of the generic tree -----

/// What an edit does at the end of its path.
enum Op {
    /// Sets a leaf.
    Leaf(Range<usize>),
    /// Replaces a container's members, or upserts a list entry.
    Stmts(Range<usize>),
    /// Replaces a whole list.
    List(Vec<Range<usize>>),
    /// Adds entries to a list.
    Add(Vec<Range<usize>>),
    /// Removes a list entry.
    Remove,
}

/// The operation of `set` at `last` with `value`.
fn set_op(last: &Step, value: &str) -> Result<Op, String> {
    Ok(match (&last.node.kind, &last.key) {
        (Kind::Leaf { .. }, _) => Op::Leaf(leaf_range(value)?),
        (Kind::List { .. }, None) => Op::List(entry_ranges(value)?),
        _ => Op::Stmts(stmts_range(value)?),
    })
}

/// Applies `op` at `steps` in the generic tree `items` of schema `root`.
fn edit(items: &mut Vec<Item>, root: &'static [Node], steps: &[Step], value: &str, op: Op) -> Result<(), String> {
    let Some((last, parents)) = steps.split_last() else {
        return Err("Invalid path: missing query".into());
    };
    let name = last.node.name;
    let create = !matches!(op, Op::Remove);
    let mut cur = items;
    for step in parents {
        let i = match (&step.node.kind, &step.key) {
            (Kind::Container(_), _) => {
                match cur.iter().position(|it| it.kw == step.node.name && matches!(it.val, Val::Block(_))) {
                    Some(i) => i,
                    None if create => {
                        cur.push(Item::block(step.node.name, Vec::new()));
                        cur.len() - 1
                    }
                    None => return Err(format!("List '{name}' has no entry matching the query")),
                }
            }
            (Kind::List { keys, .. }, Some(vals)) => {
                entry_index(cur, step.node.name, keys, vals).ok_or("List has no such entry")?
            }
            _ => return Err(format!("Invalid path: '{}' is not a container", step.node.name)),
        };
        cur = match &mut cur[i].val {
            Val::Block(c) => c,
            _ => return Err(format!("Invalid path: '{}' is not a container", step.node.name)),
        };
    }
    match (op, &last.node.kind, &last.key) {
        (Op::Leaf(r), Kind::Leaf { choice, .. }, _) => {
            let parent = parents.last().map(|p| p.node);
            if let Some(Node { kind: Kind::List { keys, .. }, .. }) = parent {
                if keys.contains(&name) {
                    return Err(format!(
                        "Invalid path: '{name}' is a key of its list entry; remove the entry and add it anew"
                    ));
                }
            }
            // Setting one case of a choice deletes the other cases (RFC 7950 7.9).
            let siblings = parent.map_or(root, members_of);
            let other_case = |kw: &str| {
                choice.is_some()
                    && siblings
                        .iter()
                        .any(|n| n.name == kw && matches!(n.kind, Kind::Leaf { choice: c, .. } if c == *choice))
            };
            cur.retain(|it| it.kw != name && !other_case(&it.kw));
            cur.push(Item { kw: name.to_string(), val: Val::LeafHole(r) });
        }
        (Op::Stmts(r), Kind::Container(_), _) => {
            cur.retain(|it| it.kw != name);
            cur.push(Item::block(name, vec![Item { kw: String::new(), val: Val::StmtsHole(r) }]));
        }
        (Op::Stmts(r), Kind::List { keys, .. }, Some(vals)) => {
            let mut content: Vec<Item> = keys.iter().zip(vals).map(|(k, v)| Item::leaf(k, v.clone())).collect();
            content.push(Item { kw: String::new(), val: Val::StmtsHole(r) });
            match entry_index(cur, name, keys, vals) {
                Some(i) => cur[i].val = Val::Block(content),
                None => cur.push(Item::block(name, content)),
            }
        }
        (Op::List(ranges), Kind::List { .. }, None) => {
            cur.retain(|it| it.kw != name);
            cur.extend(ranges.into_iter().map(|r| Item { kw: name.to_string(), val: Val::EntryHole(r) }));
        }
        (Op::Add(ranges), Kind::List { keys, members, .. }, None) => {
            for (n, r) in ranges.iter().enumerate() {
                let found = top_leaves(value.get(r.start + 1..r.end - 1).unwrap_or(""));
                let vals: Option<Vec<String>> = keys
                    .iter()
                    .map(|k| found.iter().find(|(f, _)| f == k).and_then(|(_, v)| canonical(leaf_ty(members, k), v)))
                    .collect();
                if vals.is_some_and(|vals| entry_index(cur, name, keys, &vals).is_some()) {
                    return Err(format!("Can not add already-existing list entry #{}", n + 1));
                }
            }
            cur.extend(ranges.into_iter().map(|r| Item { kw: name.to_string(), val: Val::EntryHole(r) }));
        }
        (Op::Remove, Kind::List { keys, .. }, Some(vals)) => {
            let i = entry_index(cur, name, keys, vals)
                .ok_or_else(|| format!("List '{name}' has no entry matching the query"))?;
            cur.remove(i);
        }
        _ => return Err(format!("Invalid path: '{name}' does not fit this operation")),
    }
    Ok(())
}

// ----- the binding table, typed -----

/// The (`ipv4`, `psid`) of a resolved `softwire` key.
fn softwire_key(vals: &[String]) -> Result<(Ipv4Addr, u16), String> {
    match (vals.first().map(|v| v.parse()), vals.get(1).map(|v| v.parse())) {
        (Some(Ok(a)), Some(Ok(p))) => Ok((a, p)),
        _ => Err("Invalid query: missing required key 'psid'".into()),
    }
}

/// Checks softwires `new` (already consistent among themselves) against
/// `table` without its entry `skip`, in one pass: with `adding`, no key may
/// exist already (Snabb's wording); and softwires sharing an IPv4 address
/// must have the same port set (the reader's rule for a whole table).
fn check_against(table: &[Softwire], new: &[Softwire], skip: Option<usize>, adding: bool) -> Result<(), String> {
    let keys: HashMap<(Ipv4Addr, u16), usize> = new.iter().enumerate().map(|(i, s)| ((s.ipv4, s.psid), i)).collect();
    let mut addresses: HashMap<Ipv4Addr, usize> = HashMap::new();
    for (i, s) in new.iter().enumerate() {
        addresses.entry(s.ipv4).or_insert(i);
    }
    let mut duplicate: Option<usize> = None;
    let mut clash: Option<(usize, usize)> = None;
    for (j, t) in table.iter().enumerate() {
        if Some(j) == skip {
            continue;
        }
        if adding {
            if let Some(&i) = keys.get(&(t.ipv4, t.psid)) {
                duplicate = Some(duplicate.map_or(i, |d| d.min(i)));
            }
        }
        if clash.is_none() {
            if let Some(&i) = addresses.get(&t.ipv4) {
                if new[i].port_set != t.port_set {
                    clash = Some((i, j));
                }
            }
        }
    }
    if let Some(i) = duplicate {
        return Err(format!("Can not add already-existing list entry #{}", i + 1));
    }
    if let Some((i, j)) = clash {
        let (s, t) = (&new[i], &table[j]);
        return Err(format!(
            "/softwire-config/binding-table/softwire[ipv4={}][psid={}]: port-set (psid-length {}, \
             reserved-ports-bit-count {}) differs from that of softwire[ipv4={}][psid={}] with the same ipv4 \
             (psid-length {}, reserved-ports-bit-count {})",
            s.ipv4,
            s.psid,
            s.port_set.psid_length,
            s.port_set.reserved_ports_bit_count,
            t.ipv4,
            t.psid,
            t.port_set.psid_length,
            t.port_set.reserved_ports_bit_count
        ));
    }
    Ok(())
}

impl Config {
    /// `snabb config get`: the text for the subtree at `path` ("/" = the whole tree) as Snabb prints it
    /// (leaf: bare value + "\n"; container: its members without its own braces; list entry: its non-key members;
    /// list without key: `{ ... }` blocks with keys; yang or xpath format; defaults omitted unless print_default).
    pub fn get(&self, path: &str, opts: PrintOptions) -> Result<String, String> {
        let steps = resolve(CONFIG, path)?;
        let prefix = path_text(&steps);
        let table = &self.binding_table.softwires;
        if is_softwire_path(&steps) {
            // Straight from the typed table.
            let sw = &steps[2..];
            return match &sw[0].key {
                None => print_at(BINDING_TABLE, &[], sw, &[], opts, table, &prefix),
                Some(vals) => {
                    let key = softwire_key(vals)?;
                    let s = table.iter().find(|s| (s.ipv4, s.psid) == key).ok_or("List has no such entry")?;
                    let items = [Item::block("softwire", softwire_items(s))];
                    print_at(BINDING_TABLE, &items, sw, &[], opts, &[], &prefix)
                }
            };
        }
        print_at(CONFIG, &self.skeleton()?, &steps, &[], opts, table, &prefix)
    }

    /// `snabb config set`: replaces the subtree at `path` with `value` (value syntax of the subtree, as in the notes);
    /// a list-entry path upserts. On error `self` is unchanged.
    pub fn set(&mut self, path: &str, value: &str) -> Result<Change, String> {
        let steps = resolve(CONFIG, path)?;
        let Some(last) = steps.last() else {
            *self = Config::parse(value, "value").map_err(|e| e.to_string())?;
            return Ok(Change::Other);
        };
        if is_softwire_path(&steps) {
            return self.set_softwire(&steps, value);
        }
        // A set of `softwire-config` or `binding-table` replaces the
        // softwires too; any other keeps them.
        let keep = !(steps.len() == 1 || (steps.len() == 2 && steps[1].node.name == "binding-table"));
        let op = set_op(last, value)?;
        self.edit_generic(&steps, value, op, keep)
    }

    /// `snabb config add`: adds the `{ ... }` entries in `value` to the list at `path`; all or nothing;
    /// an existing key is refused with Snabb's wording.
    pub fn add(&mut self, path: &str, value: &str) -> Result<Change, String> {
        let steps = resolve(CONFIG, path)?;
        let is_list = matches!(steps.last(), Some(Step { node: Node { kind: Kind::List { .. }, .. }, key: None }));
        if !is_list {
            let name = steps.last().map_or("/", |s| s.node.name);
            return Err(format!("Invalid path: '{name}' is not a list or a leaf-list"));
        }
        let ranges = entry_ranges(value)?;
        if !is_softwire_path(&steps) {
            return self.edit_generic(&steps, value, Op::Add(ranges), true);
        }
        let new = parse_softwire_entries(value, &ranges)?;
        let table = &mut self.binding_table.softwires;
        check_against(table, &new, None, true)?;
        table.extend_from_slice(&new);
        Ok(Change::Softwires { removed: Vec::new(), added: new })
    }

    /// `snabb config remove`: removes the list entry at `path` (a path ending in its keys).
    pub fn remove(&mut self, path: &str) -> Result<Change, String> {
        let steps = resolve(CONFIG, path)?;
        let Some(last) = steps.last() else {
            return Err("Invalid path: missing query".into());
        };
        let Some(vals) = &last.key else {
            return Err("Invalid path: missing query".into());
        };
        if !is_softwire_path(&steps) {
            return self.edit_generic(&steps, "", Op::Remove, true);
        }
        let key = softwire_key(vals)?;
        let table = &mut self.binding_table.softwires;
        let i = table
            .iter()
            .position(|s| (s.ipv4, s.psid) == key)
            .ok_or("List 'softwire' has no entry matching the query")?;
        table.remove(i);
        Ok(Change::Softwires { removed: vec![key], added: Vec::new() })
    }

    /// `set` under `/softwire-config/binding-table/softwire`, on the typed
    /// table: one pass to find the entry, one to check it against the rest.
    fn set_softwire(&mut self, steps: &[Step], value: &str) -> Result<Change, String> {
        let sw = &steps[2..];
        let Some(vals) = &sw[0].key else {
            // The whole list.
            let new = parse_softwire_entries(value, &entry_ranges(value)?)?;
            self.binding_table.softwires = new;
            return Ok(Change::Other);
        };
        let key = softwire_key(vals)?;
        let table = &mut self.binding_table.softwires;
        let pos = table.iter().position(|s| (s.ipv4, s.psid) == key);
        let mut items = match pos {
            Some(i) => vec![Item::block("softwire", softwire_items(&table[i]))],
            None => Vec::new(),
        };
        let op = set_op(&sw[sw.len() - 1], value)?;
        edit(&mut items, BINDING_TABLE, sw, value, op)?;
        let mut r = Rebuild::new(value);
        r.items(&items);
        let mut new = Config::parse_softwires(&r.out, "value").map_err(|e| r.error(e))?;
        let s = match (new.pop(), new.is_empty()) {
            (Some(s), true) if (s.ipv4, s.psid) == key => s,
            _ => return Err("internal error: the edited softwire did not read back as one entry with its key".into()),
        };
        check_against(table, &[s], pos, false)?;
        match pos {
            Some(i) => {
                table[i] = s;
                Ok(Change::Softwires { removed: vec![key], added: vec![s] })
            }
            None => {
                table.push(s);
                Ok(Change::Softwires { removed: Vec::new(), added: vec![s] })
            }
        }
    }

    /// An edit anywhere but under the binding table's softwires: on the
    /// generic tree of the configuration without its softwires, read back
    /// whole by [`Config::parse`]; the softwires are moved back when `keep`.
    fn edit_generic(&mut self, steps: &[Step], value: &str, op: Op, keep: bool) -> Result<Change, String> {
        let mut tree = self.skeleton()?;
        edit(&mut tree, CONFIG, steps, value, op)?;
        let mut r = Rebuild::new(value);
        r.items(&tree);
        let mut new = Config::parse(&r.out, "value").map_err(|e| r.error(e))?;
        if keep {
            new.binding_table.softwires = std::mem::take(&mut self.binding_table.softwires);
        }
        *self = new;
        Ok(Change::Other)
    }
}

/// `snabb config get-state` for one running instance: `counters` are Snabb's counter names with values
/// (as `sluice_lwaftr::counters::Counters::snabb.iter()` yields them), `device` the instance's device,
/// `discontinuity` the already formatted date-and-time. Paths: `/`, `/softwire-state`, `/softwire-state/<counter>`,
/// `/softwire-config/instance[device=D]/softwire-state[/<counter>]` (D must be `device`). Every counter is printed,
/// zero or not; /softwire-state also has discontinuity-time.
pub fn get_state(
    path: &str,
    counters: &[(&str, u64)],
    device: &str,
    discontinuity: &str,
    opts: PrintOptions,
) -> Result<String, String> {
    let steps = resolve(STATE, path)?;
    let values = || counters.iter().map(|(n, v)| Item::leaf(n, v.to_string()));
    let mut summed = vec![Item::leaf("discontinuity-time", discontinuity.to_string())];
    summed.extend(values());
    let tree = [
        Item::block(
            "softwire-config",
            vec![Item::block(
                "instance",
                vec![Item::leaf("device", device.to_string()), Item::block("softwire-state", values().collect())],
            )],
        ),
        Item::block("softwire-state", summed),
    ];
    print_at(STATE, &tree, &steps, &[], opts, &[], &path_text(&steps))
}

/// `date-and-time` of a Unix time in seconds, `YYYY-MM-DDTHH:MM:SSZ` (UTC), without any date crate.
pub fn date_and_time(unix_seconds: u64) -> String {
    let (days, secs) = (unix_seconds / 86_400, unix_seconds % 86_400);
    // Days to the civil calendar, counted from 0000-03-01 in eras of 400
    // years (146 097 days), so that a leap day ends its year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::generate_configuration;

    const TEXT: &str = "softwire-config {
  binding-table {
    softwire {
      ipv4 178.79.150.233;
      psid 7850;
      b4-ipv6 127:11:12:13:14:15:16:128;
      br-address 8:9:a:b:c:d:e:f;
      port-set {
        psid-length 16;
      }
    }
    softwire {
      ipv4 178.79.150.15;
      psid 1;
      b4-ipv6 127:22:33:44:55:66:77:128;
      br-address 8:9:a:b:c:d:e:f;
      port-set {
        psid-length 4;
      }
    }
    version {
      number 3;
    }
  }
  external-interface {
    allow-incoming-icmp false;
    error-rate-limiting {
      packets 600000;
    }
    reassembly {
      max-fragments-per-packet 40;
    }
  }
  instance {
    device test;
    queue {
      id 0;
      external-interface {
        ip 10.10.10.10;
        mac 12:12:12:12:12:12;
        next-hop {
          mac 68:68:68:68:68:68;
        }
      }
      internal-interface {
        ip 8:9:a:b:c:d:e:f;
        mac 22:22:22:22:22:22;
        next-hop {
          mac 44:44:44:44:44:44;
        }
      }
    }
  }
  internal-interface {
    flow-label 7;
  }
  name lw1;
}
";

    const SW_7850: &str = "/softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=7850]";

    fn conf() -> Config {
        Config::parse(TEXT, "test.conf").unwrap()
    }

    fn yang() -> PrintOptions {
        PrintOptions::default()
    }

    fn xpath() -> PrintOptions {
        PrintOptions { format: Format::Xpath, print_default: false }
    }

    fn with_defaults(format: Format) -> PrintOptions {
        PrintOptions { format, print_default: true }
    }

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn skeletons() -> usize {
        SKELETONS.with(|c| c.get())
    }

    #[test]
    fn schema_tables_are_sorted_and_keys_are_members() {
        fn walk(members: &'static [Node], at: &str) {
            for w in members.windows(2) {
                assert!(w[0].name < w[1].name, "{at}: {} before {}", w[0].name, w[1].name);
            }
            for n in members {
                if let Kind::List { keys, members: m, .. } = &n.kind {
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{at}/{}", n.name);
                    for k in *keys {
                        assert!(matches!(m.iter().find(|x| x.name == *k).map(|x| &x.kind), Some(Kind::Leaf { .. })));
                    }
                }
                walk(members_of(n), &format!("{at}/{}", n.name));
            }
        }
        walk(CONFIG, "");
        walk(STATE, "");
        // Sluice's Snabb counters are all in the state schema.
        for n in crate::counters::Snabb::NAMES {
            assert!(COUNTERS.iter().any(|c| c.name == *n), "{n}");
        }
    }

    #[test]
    fn get_leaf_yang_and_xpath() {
        let c = conf();
        let ip = "/softwire-config/instance[device=test]/queue[id=0]/external-interface/ip";
        assert_eq!(c.get(ip, yang()).unwrap(), "10.10.10.10\n");
        assert_eq!(c.get(ip, xpath()).unwrap(), format!("{ip} 10.10.10.10\n"));
        assert_eq!(c.get(&format!("{SW_7850}/b4-ipv6"), yang()).unwrap(), "127:11:12:13:14:15:16:128\n");
        assert_eq!(c.get(&format!("{SW_7850}/port-set/psid-length"), yang()).unwrap(), "16\n");
        assert_eq!(c.get("/softwire-config/name", yang()).unwrap(), "lw1\n");
        // A leaf at its default: printed bare in yang, left out in xpath unless asked.
        let mtu = "/softwire-config/external-interface/mtu";
        assert_eq!(c.get(mtu, yang()).unwrap(), "1460\n");
        assert_eq!(c.get(mtu, xpath()).unwrap(), "");
        assert_eq!(c.get(mtu, with_defaults(Format::Xpath)).unwrap(), format!("{mtu} 1460\n"));
        assert_eq!(c.get("/softwire-config/instance[device=test]/device", yang()).unwrap(), "test\n");
    }

    #[test]
    fn get_container() {
        let c = conf();
        let ext = "/softwire-config/external-interface";
        assert_eq!(
            c.get(ext, yang()).unwrap(),
            "allow-incoming-icmp false;\nerror-rate-limiting {\n  packets 600000;\n}\nreassembly {\n  \
             max-fragments-per-packet 40;\n}\n"
        );
        assert_eq!(
            c.get(ext, with_defaults(Format::Yang)).unwrap(),
            "allow-incoming-icmp false;\nerror-rate-limiting {\n  packets 600000;\n  period 2;\n}\n\
             generate-icmp-errors true;\nmru 1460;\nmtu 1460;\nreassembly {\n  max-fragments-per-packet 40;\n  \
             max-packets 20000;\n}\n"
        );
        assert_eq!(
            c.get(ext, xpath()).unwrap(),
            format!(
                "{ext}/allow-incoming-icmp false\n{ext}/error-rate-limiting/packets 600000\n\
                 {ext}/reassembly/max-fragments-per-packet 40\n"
            )
        );
        // All at their defaults: nothing, or everything with print_default.
        let int = "/softwire-config/internal-interface/error-rate-limiting";
        assert_eq!(c.get(int, yang()).unwrap(), "");
        assert_eq!(c.get(int, with_defaults(Format::Yang)).unwrap(), "packets 200;\nperiod 2;\n");
        assert_eq!(c.get("/softwire-config/binding-table/version", yang()).unwrap(), "number 3;\n");
    }

    #[test]
    fn get_list_entry_and_lists() {
        let c = conf();
        assert_eq!(
            c.get(SW_7850, yang()).unwrap(),
            "b4-ipv6 127:11:12:13:14:15:16:128;\nbr-address 8:9:a:b:c:d:e:f;\nport-set {\n  psid-length 16;\n}\n"
        );
        assert_eq!(
            c.get(SW_7850, with_defaults(Format::Yang)).unwrap(),
            "b4-ipv6 127:11:12:13:14:15:16:128;\nbr-address 8:9:a:b:c:d:e:f;\npadding 0;\nport-set {\n  \
             psid-length 16;\n  reserved-ports-bit-count 0;\n}\n"
        );
        assert_eq!(
            c.get(SW_7850, xpath()).unwrap(),
            format!(
                "{SW_7850}/b4-ipv6 127:11:12:13:14:15:16:128\n{SW_7850}/br-address 8:9:a:b:c:d:e:f\n\
                 {SW_7850}/port-set/psid-length 16\n"
            )
        );
        // Keys in any order, repeated and trailing slashes.
        let odd = "//softwire-config//binding-table/softwire[psid=7850][ipv4=178.79.150.233]/";
        assert_eq!(c.get(odd, yang()).unwrap(), c.get(SW_7850, yang()).unwrap());
        assert_eq!(c.get(odd, xpath()).unwrap(), c.get(SW_7850, xpath()).unwrap());
        // A list: its entries in braces, keys first.
        let list = c.get("/softwire-config/binding-table/softwire", yang()).unwrap();
        assert!(list.starts_with(
            "{\n  ipv4 178.79.150.233;\n  psid 7850;\n  b4-ipv6 127:11:12:13:14:15:16:128;\n  \
             br-address 8:9:a:b:c:d:e:f;\n  port-set {\n    psid-length 16;\n  }\n}\n{\n  ipv4 178.79.150.15;\n"
        ));
        assert_eq!(list.matches("{\n  ipv4").count(), 2);
        let instances = c.get("/softwire-config/instance", yang()).unwrap();
        assert!(instances.starts_with("{\n  device test;\n  queue {\n    id 0;\n    external-interface {\n"));
        assert!(c.get("/softwire-config/instance", xpath()).unwrap().contains(
            "/softwire-config/instance[device=test]/queue[id=0]/internal-interface/next-hop/mac 44:44:44:44:44:44\n"
        ));
        let entry = c.get("/softwire-config/instance[device=test]/queue[id=0]", yang()).unwrap();
        assert!(entry.starts_with("external-interface {\n  ip 10.10.10.10;\n"), "{entry}");
    }

    #[test]
    fn get_root_is_the_written_text() {
        let c = conf();
        assert_eq!(c.get("/", yang()).unwrap(), c.to_text());
        assert_eq!(c.get("/softwire-config", yang()).unwrap().lines().next(), Some("binding-table {"));
        let all = c.get("/", xpath()).unwrap();
        assert!(all.contains(&format!("{SW_7850}/b4-ipv6 127:11:12:13:14:15:16:128\n")));
        assert!(all.contains("/softwire-config/internal-interface/flow-label 7\n"));
        assert!(all.ends_with("/softwire-config/name lw1\n"));
        // Every xpath line reads back through get.
        for line in all.lines() {
            let (path, value) = line.split_once(' ').unwrap();
            assert_eq!(c.get(path, yang()).unwrap(), format!("{value}\n"), "{path}");
        }
        let full = c.get("/", with_defaults(Format::Yang)).unwrap();
        assert!(full.contains("      padding 0;\n"));
        assert!(full.contains("    hairpinning true;\n"));
        assert_eq!(Config::parse(&full, "full"), Ok(c));
    }

    #[test]
    fn path_errors() {
        let c = conf();
        let err = |p: &str| c.get(p, yang()).unwrap_err();
        assert_eq!(err("/softwire-config/foo"), "Invalid path: 'foo' is not in schema.");
        assert_eq!(err("/softwire-state"), "Invalid path: 'softwire-state' is not in schema.");
        assert_eq!(
            err("/softwire-config/instance[device=test]/softwire-state"),
            "Invalid path: 'softwire-state' is not in schema."
        );
        assert_eq!(
            err("/softwire-config/binding-table/softwire[ipv4=178.79.150.233]"),
            "Invalid query: missing required key 'psid'"
        );
        assert_eq!(
            err("/softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=1][x=2]"),
            "Invalid query:'x' is not a list key."
        );
        assert_eq!(err("/softwire-config[a=b]"), "Invalid query: can only query list or leaf-list.");
        assert_eq!(
            err("/softwire-config/binding-table/softwire[ipv4=1.2.3][psid=1]"),
            "Invalid query: '1.2.3' is not a valid value of key 'ipv4'"
        );
        assert_eq!(err("/softwire-config/instance/device"), "Invalid path: 'device' is not a container");
        assert_eq!(err("/softwire-config/name/x"), "Invalid path: trying to access 'x' in scalar.");
        assert_eq!(err("/softwire-config/instance[device=nope]"), "List has no such entry");
        assert_eq!(
            err("/softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=1]/b4-ipv6"),
            "List has no such entry"
        );
        assert_eq!(
            err("/softwire-config/instance[device=test]/queue[id=0]/external-interface/vlan-tag"),
            "Container has no member 'vlan-tag'"
        );
        assert_eq!(
            err("/softwire-config/instance[device=test"),
            format!("Invalid path: Syntax error in:\ninstance[device=test\n{}^", " ".repeat(20))
        );
        assert!(err("/softwire-config/instance[=x]").starts_with("Invalid path: Syntax error in:"));
        let mut d = c.clone();
        assert_eq!(d.remove("/softwire-config/name").unwrap_err(), "Invalid path: missing query");
        assert_eq!(d.remove("/softwire-config/binding-table/softwire").unwrap_err(), "Invalid path: missing query");
        assert_eq!(d.remove("/").unwrap_err(), "Invalid path: missing query");
        assert_eq!(
            d.add("/softwire-config/external-interface", "{ }").unwrap_err(),
            "Invalid path: 'external-interface' is not a list or a leaf-list"
        );
        assert_eq!(d.add(SW_7850, "{ }").unwrap_err(), "Invalid path: 'softwire' is not a list or a leaf-list");
        assert_eq!(d, c);
    }

    #[test]
    fn set_leaf_and_container() {
        let mut c = conf();
        assert_eq!(c.set("/softwire-config/external-interface/mtu", "1500"), Ok(Change::Other));
        assert_eq!(c.external.common.mtu, 1500);
        assert_eq!(c.binding_table.softwires.len(), 2);
        assert_eq!(c.set("/softwire-config/name", "\"my lwaftr\""), Ok(Change::Other));
        assert_eq!(c.name.as_deref(), Some("my lwaftr"));
        assert_eq!(c.get("/softwire-config/name", yang()).unwrap(), "\"my lwaftr\"\n");
        // A container is replaced whole: what the value leaves out goes back to its default.
        assert_eq!(
            c.set("/softwire-config/external-interface", "mtu 1400; allow-incoming-icmp true;"),
            Ok(Change::Other)
        );
        assert_eq!(c.external.common.mtu, 1400);
        assert!(c.external.common.allow_incoming_icmp);
        assert_eq!(c.external.common.error_rate_limiting.packets, 200);
        assert_eq!(c.get("/softwire-config/external-interface", yang()).unwrap(), "mtu 1400;\n");
        // Setting one case of the next-hop choice drops the other.
        let nh = "/softwire-config/instance[device=test]/queue[id=0]/external-interface/next-hop";
        assert_eq!(c.set(&format!("{nh}/ip"), "10.10.10.1"), Ok(Change::Other));
        assert_eq!(c.get(nh, yang()).unwrap(), "ip 10.10.10.1;\n");
        // The version of the table; the softwires stay.
        assert_eq!(c.set("/softwire-config/binding-table/version/number", "4"), Ok(Change::Other));
        assert_eq!(c.binding_table.version, Some((Some(4), None)));
        assert_eq!(c.binding_table.softwires, conf().binding_table.softwires);
        // Setting the binding table replaces its softwires too.
        assert_eq!(c.set("/softwire-config/binding-table", "version { number 5; }"), Ok(Change::Other));
        assert!(c.binding_table.softwires.is_empty());
        // A whole configuration.
        assert_eq!(c.set("/", TEXT), Ok(Change::Other));
        assert_eq!(c, conf());
    }

    #[test]
    fn set_softwire_entry_update_and_insert() {
        let mut c = conf();
        let before = skeletons();
        let ch = c.set(SW_7850, "b4-ipv6 ::1; br-address 2001:db8::; port-set { psid-length 16; }").unwrap();
        let updated = c.binding_table.softwires[0];
        assert_eq!(
            (updated.ipv4, updated.psid, updated.b4_ipv6.to_string()),
            (v4("178.79.150.233"), 7850, "::1".into())
        );
        assert_eq!(ch, Change::Softwires { removed: vec![(v4("178.79.150.233"), 7850)], added: vec![updated] });
        let new = "/softwire-config/binding-table/softwire[ipv4=8.8.8.8][psid=0]";
        let ch = c.set(new, "b4-ipv6 ::2; br-address 2001:db8::; port-set { psid-length 0; }").unwrap();
        assert_eq!(c.binding_table.softwires.len(), 3);
        let inserted = c.binding_table.softwires[2];
        assert_eq!((inserted.ipv4, inserted.psid), (v4("8.8.8.8"), 0));
        assert_eq!(ch, Change::Softwires { removed: vec![], added: vec![inserted] });
        assert_eq!(c.get(&format!("{new}/b4-ipv6"), yang()).unwrap(), "::2\n");
        // A leaf of a softwire.
        let ch = c.set(&format!("{SW_7850}/b4-ipv6"), "::3").unwrap();
        let s = c.binding_table.softwires[0];
        assert_eq!(s.b4_ipv6.to_string(), "::3");
        assert_eq!(ch, Change::Softwires { removed: vec![(s.ipv4, s.psid)], added: vec![s] });
        assert_eq!(c.set(&format!("{SW_7850}/padding"), "5").map(|_| c.binding_table.softwires[0].padding), Ok(5));
        assert_eq!(skeletons(), before, "a softwire edit printed the configuration");
        // Its keys cannot be set; a port set must agree with the address's other softwires.
        let before = c.clone();
        assert!(c.set(&format!("{SW_7850}/psid"), "1").unwrap_err().contains("is a key of its list entry"));
        let e = c
            .set(
                "/softwire-config/binding-table/softwire[ipv4=178.79.150.15][psid=2]",
                "b4-ipv6 ::9; br-address ::8; port-set { psid-length 6; }",
            )
            .unwrap_err();
        assert!(e.contains("port-set (psid-length 6, reserved-ports-bit-count 0) differs from that of softwire[ipv4=178.79.150.15][psid=1]"), "{e}");
        // psid must fit psid-length (the reader's check), located in the value.
        assert_eq!(
            c.set(&format!("{SW_7850}/port-set"), "psid-length 8;").unwrap_err(),
            format!("{SW_7850}/psid: psid 7850 does not fit psid-length 8 (must be below 256)")
        );
        assert_eq!(c, before);
    }

    #[test]
    fn add_softwires_all_or_nothing() {
        let mut c = conf();
        let before = skeletons();
        let list = "/softwire-config/binding-table/softwire";
        let ch = c
            .add(
                list,
                "{ ipv4 8.8.8.8; psid 7; b4-ipv6 ::2; br-address 2001:db8::;port-set { psid-length 16; }}\n\
                 { ipv4 8.8.8.8; psid 8; b4-ipv6 ::3; br-address 2001:db8::;port-set { psid-length 16; }}",
            )
            .unwrap();
        let Change::Softwires { removed, added } = ch else { panic!("{ch:?}") };
        assert!(removed.is_empty());
        assert_eq!(added.iter().map(|s| s.psid).collect::<Vec<_>>(), [7, 8]);
        assert_eq!(c.binding_table.softwires[2..], added[..]);
        assert_eq!(
            c.get("/softwire-config/binding-table/softwire[ipv4=8.8.8.8][psid=7]/b4-ipv6", yang()).unwrap(),
            "::2\n"
        );
        let table = c.binding_table.softwires.clone();
        // An existing key refuses the whole value.
        assert_eq!(
            c.add(
                list,
                "{ ipv4 9.9.9.9; psid 0; b4-ipv6 ::4; br-address ::1; port-set { psid-length 0; } }\n\
                         { ipv4 8.8.8.8; psid 8; b4-ipv6 ::5; br-address ::1; port-set { psid-length 16; } }"
            ),
            Err("Can not add already-existing list entry #2".into())
        );
        // So does a port set that differs from the address's, or one among the new ones.
        let e = c
            .add(list, "{ ipv4 8.8.8.8; psid 9; b4-ipv6 ::4; br-address ::1; port-set { psid-length 8; } }")
            .unwrap_err();
        assert!(e.contains("differs from that of softwire[ipv4=8.8.8.8][psid=7]"), "{e}");
        let e = c
            .add(
                list,
                "{ ipv4 9.9.9.9; psid 1; b4-ipv6 ::4; br-address ::1; port-set { psid-length 2; } }\n\
                        { ipv4 9.9.9.9; psid 2; b4-ipv6 ::4; br-address ::1; port-set { psid-length 4; } }",
            )
            .unwrap_err();
        assert!(
            e.starts_with("value:2:1: /softwire-config/binding-table/softwire[ipv4=9.9.9.9][psid=2]: port-set"),
            "{e}"
        );
        assert!(e.ends_with("differs from that of the softwire at line 1 with the same ipv4 (psid-length 2, reserved-ports-bit-count 0)"), "{e}");
        assert_eq!(c.binding_table.softwires, table);
        assert_eq!(skeletons(), before);
    }

    #[test]
    fn remove_softwires() {
        let mut c = conf();
        let before = skeletons();
        assert_eq!(
            c.remove(SW_7850),
            Ok(Change::Softwires { removed: vec![(v4("178.79.150.233"), 7850)], added: vec![] })
        );
        assert_eq!(c.binding_table.softwires.len(), 1);
        assert_eq!(c.get(SW_7850, yang()).unwrap_err(), "List has no such entry");
        assert_eq!(c.remove(SW_7850).unwrap_err(), "List 'softwire' has no entry matching the query");
        assert_eq!(c.binding_table.softwires.len(), 1);
        assert_eq!(skeletons(), before);
    }

    #[test]
    fn instances_added_set_and_removed() {
        let mut c = conf();
        let value = "{ device addtest1; queue { id 0; external-interface { ip 72.72.72.72; mac 14:14:14:14:14:14; \
                     next-hop { mac 66:66:66:66:66:66; } } internal-interface { ip 8:8:8:8:8:8:8:8; \
                     mac 16:16:16:16:16:16; next-hop { mac 88:88:88:88:88:88; } } }}";
        assert_eq!(c.add("/softwire-config/instance", value), Ok(Change::Other));
        assert_eq!(c.instances.len(), 2);
        assert_eq!(c.instances[1].device, "addtest1");
        assert_eq!(c.binding_table.softwires.len(), 2);
        assert_eq!(
            c.get("/softwire-config/instance[device=addtest1]/queue[id=0]/external-interface/ip", yang()).unwrap(),
            "72.72.72.72\n"
        );
        let two = c.clone();
        assert_eq!(
            c.add("/softwire-config/instance", value).unwrap_err(),
            "Can not add already-existing list entry #1"
        );
        assert_eq!(c, two);
        // Upsert an entry, then a queue of it.
        assert_eq!(c.set("/softwire-config/instance[device=addtest1]", "external-device eth1;"), Ok(Change::Other));
        assert_eq!((c.instances[1].external_device.as_deref(), c.instances[1].queues.len()), (Some("eth1"), 0));
        let q = "{ id 1; external-interface { ip 1.1.1.1; mac 1:1:1:1:1:1; next-hop { ip 1.1.1.2; } } \
                 internal-interface { ip ::1; mac 1:1:1:1:1:2; next-hop { ip ::2; } } }";
        assert_eq!(c.add("/softwire-config/instance[device=addtest1]/queue", q), Ok(Change::Other));
        assert_eq!(c.instances[1].queues[0].id, 1);
        assert_eq!(c.remove("/softwire-config/instance[device=addtest1]/queue[id=1]"), Ok(Change::Other));
        assert!(c.instances[1].queues.is_empty());
        assert_eq!(
            c.remove("/softwire-config/instance[device=nope]/queue[id=1]").unwrap_err(),
            "List has no such entry"
        );
        assert_eq!(c.remove("/softwire-config/instance[device=addtest1]"), Ok(Change::Other));
        assert_eq!(c, conf());
        assert_eq!(
            c.remove("/softwire-config/instance[device=addtest1]").unwrap_err(),
            "List 'instance' has no entry matching the query"
        );
    }

    #[test]
    fn bad_values_get_the_readers_located_message() {
        let mut c = conf();
        let before = c.clone();
        assert_eq!(
            c.set("/softwire-config/external-interface", "mtu 1500;\n  mru abc;"),
            Err("value:2:7: /softwire-config/external-interface/mru: \"abc\" is not an unsigned decimal number".into())
        );
        assert_eq!(
            c.set("/softwire-config/external-interface/mtu", "  99999"),
            Err("value:1:3: /softwire-config/external-interface/mtu: 99999 is out of range 68..65535".into())
        );
        assert_eq!(
            c.set("/softwire-config/internal-interface", "mtu 1500; colour blue;"),
            Err("value:1:11: /softwire-config/internal-interface: unknown keyword \"colour\" (expected one of: mtu, \
                 mru, flow-label, ingress-filter, egress-filter, allow-incoming-icmp, generate-icmp-errors, \
                 error-rate-limiting, reassembly, vlan-tag, hairpinning)"
                .into())
        );
        assert_eq!(
            c.add(
                "/softwire-config/binding-table/softwire",
                "{ ipv4 8.8.8.8; psid 7; b4-ipv6 ::2; br-address 2001:db8::;port-set { psid-length 16; }}\n  \
                 { ipv4 8.8.8.9; psid 7; b4-ipv6 ::g; }"
            ),
            Err("value:2:35: /softwire-config/binding-table/softwire[ipv4=8.8.8.9][psid=7]/b4-ipv6: \"::g\" is not \
                 an IPv6 address"
                .into())
        );
        // A mandatory member missing: located at the entry.
        assert_eq!(
            c.add("/softwire-config/binding-table/softwire", "\n  { ipv4 8.8.8.8; psid 7; b4-ipv6 ::2; }"),
            Err("value:2:3: /softwire-config/binding-table/softwire[ipv4=8.8.8.8][psid=7]/br-address: mandatory, \
                 missing"
                .into())
        );
        // Values that would leave their braces, or are not one value.
        assert_eq!(
            c.set("/softwire-config/external-interface", "mtu 1500; } name x; external-interface {"),
            Err("value:1:11: unexpected `}`".into())
        );
        assert_eq!(
            c.set("/softwire-config/name", "a b"),
            Err("value:1:3: Not end of file: a leaf's value is one word or quoted string".into())
        );
        assert_eq!(c.set("/softwire-config/name", ""), Err("value:1:1: a value is missing".into()));
        assert_eq!(
            c.add("/softwire-config/instance", "device x;").unwrap_err(),
            "value:1:1: expected `{`: a list entry is written `{ ... }`, keys included"
        );
        let e = c.set("/", "softwire-config { name; }").unwrap_err();
        assert_eq!(e, "value:1:19: /softwire-config/name: value missing: write `name VALUE;`");
        assert_eq!(c, before);
    }

    #[test]
    fn untrusted_paths_and_values_never_panic() {
        let c = conf();
        let paths = [
            "",
            "/",
            "//",
            "[",
            "]",
            "/[",
            "/softwire-config/[x=y]",
            "/softwire-config/instance[",
            "/softwire-config/instance]",
            "/softwire-config/instance[device=]",
            "/softwire-config/instance[device=a]]",
            "/softwire-config/instance[device=a][",
            "/softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=99999]",
            "/softwire-config/binding-table/softwire[psid=1]",
            "/softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=1]/port-set/x",
            "/é/ü",
            "/softwire-config/instance[device=é]",
            "/softwire-config/binding-table/softwire/ipv4",
            "/softwire-config/binding-table/version",
            "/softwire-config/binding-table/softwire",
            SW_7850,
            "/softwire-config/instance[device=test]/queue[id=0]",
            "/softwire-config/instance[device=test]/queue[id=256]",
            "/softwire-config/instance[device=test]/queue",
            "/softwire-config/instance[device=test]/queue[id=0]/internal-interface/next-hop/mac",
        ];
        let values = [
            "",
            "{",
            "}",
            "{}",
            "{ }{",
            "x",
            "\"",
            "'",
            "/*",
            "//",
            "a;",
            "a {",
            "{ ipv4 1.2.3.4; psid 1; }",
            "\"a\" + ",
            "ipv4 1.2.3.4;",
            "{ device test; }",
            "{ id 0; }",
            "é",
            "{{{{{{{{{{}}}}}}}}}}",
            "mtu 1; } x {",
            ";;;",
            "{ ; }",
            "{ ipv4 1.2.3.4; psid 1; b4-ipv6 ::1; br-address ::1; port-set { psid-length 1; } }",
        ];
        for p in paths {
            for f in [yang(), xpath(), with_defaults(Format::Yang)] {
                let _ = c.get(p, f);
                let _ = get_state(p, &[("in-ipv4-packets", 1)], "test", "1970-01-01T00:00:00Z", f);
            }
            for v in values {
                for op in 0..3 {
                    let mut d = c.clone();
                    let r = match op {
                        0 => d.set(p, v),
                        1 => d.add(p, v),
                        _ => d.remove(p),
                    };
                    if r.is_err() {
                        assert_eq!(d, c, "{op} {p:?} {v:?} changed the configuration and failed");
                    }
                }
            }
        }
    }

    #[test]
    fn get_state_paths() {
        let counters = [("in-ipv4-packets", 5), ("drop-all-ipv4-iface-bytes", 0), ("out-ipv4-packets", 2)];
        let state = |p: &str, o| get_state(p, &counters, "test", "2024-08-30T12:00:00Z", o);
        let body = "drop-all-ipv4-iface-bytes 0;\nin-ipv4-packets 5;\nout-ipv4-packets 2;\n";
        assert_eq!(
            state("/softwire-state", yang()).unwrap(),
            format!("discontinuity-time 2024-08-30T12:00:00Z;\n{body}")
        );
        assert_eq!(state("/softwire-state/in-ipv4-packets", yang()).unwrap(), "5\n");
        assert_eq!(state("/softwire-state/drop-all-ipv4-iface-bytes", yang()).unwrap(), "0\n");
        assert_eq!(state("/softwire-state/discontinuity-time", yang()).unwrap(), "2024-08-30T12:00:00Z\n");
        let inst = "/softwire-config/instance[device=test]/softwire-state";
        assert_eq!(state(inst, yang()).unwrap(), body);
        assert_eq!(state(&format!("{inst}/out-ipv4-packets"), yang()).unwrap(), "2\n");
        assert_eq!(
            state(&format!("{inst}/out-ipv4-packets"), xpath()).unwrap(),
            format!("{inst}/out-ipv4-packets 2\n")
        );
        let indented: String = body.lines().map(|l| format!("      {l}\n")).collect();
        let summed: String = body.lines().map(|l| format!("  {l}\n")).collect();
        assert_eq!(
            state("/", yang()).unwrap(),
            format!(
                "softwire-config {{\n  instance {{\n    device test;\n    softwire-state {{\n{indented}    }}\n  }}\n}}\n\
                 softwire-state {{\n  discontinuity-time 2024-08-30T12:00:00Z;\n{summed}}}\n"
            )
        );
        assert_eq!(
            state("/", xpath()).unwrap(),
            format!(
                "{inst}/drop-all-ipv4-iface-bytes 0\n{inst}/in-ipv4-packets 5\n{inst}/out-ipv4-packets 2\n\
                 /softwire-state/discontinuity-time 2024-08-30T12:00:00Z\n/softwire-state/drop-all-ipv4-iface-bytes 0\n\
                 /softwire-state/in-ipv4-packets 5\n/softwire-state/out-ipv4-packets 2\n"
            )
        );
        assert_eq!(
            state("/softwire-config/instance[device=other]/softwire-state", yang()).unwrap_err(),
            "List has no such entry"
        );
        assert_eq!(state("/softwire-state/nope", yang()).unwrap_err(), "Invalid path: 'nope' is not in schema.");
        assert_eq!(
            state("/softwire-state/memuse-ipv4-frag-reassembly-buffer", yang()).unwrap_err(),
            "Container has no member 'memuse-ipv4-frag-reassembly-buffer'"
        );
        assert_eq!(state("/softwire-config/name", yang()).unwrap_err(), "Invalid path: 'name' is not in schema.");
        // Every counter of a replica, zero or not.
        let all = crate::counters::Counters::default();
        let all: Vec<(&str, u64)> = all.snabb.iter().collect();
        let text = get_state("/softwire-state", &all, "test", "x", yang()).unwrap();
        assert_eq!(text.lines().count(), all.len() + 1);
    }

    #[test]
    fn dates() {
        assert_eq!(date_and_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(date_and_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(date_and_time(68_256_000), "1972-03-01T00:00:00Z");
        assert_eq!(date_and_time(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(date_and_time(1_725_019_200), "2024-08-30T12:00:00Z");
        assert_eq!(date_and_time(4_102_444_799), "2099-12-31T23:59:59Z");
        assert!(date_and_time(u64::MAX).ends_with('Z'));
    }

    #[test]
    fn generated_table_edits_stay_on_the_typed_table() {
        let mut c = generate_configuration(
            v4("193.5.1.100"),
            64,
            "fc00::100".parse().unwrap(),
            "fc00:1:2:3:4:5:0:7e".parse().unwrap(),
            6,
            None,
        )
        .unwrap();
        let n = c.binding_table.softwires.len();
        let before = skeletons();
        let list = "/softwire-config/binding-table/softwire";
        c.add(list, "{ ipv4 193.5.1.100; psid 0; b4-ipv6 ::1; br-address fc00::100; port-set { psid-length 6; } }")
            .unwrap();
        let last = "/softwire-config/binding-table/softwire[ipv4=193.5.1.100][psid=0]";
        assert_eq!(c.get(&format!("{last}/b4-ipv6"), yang()).unwrap(), "::1\n");
        c.set(&format!("{last}/b4-ipv6"), "::2").unwrap();
        c.remove(last).unwrap();
        c.remove("/softwire-config/binding-table/softwire[ipv4=193.5.1.101][psid=63]").unwrap();
        assert_eq!(c.binding_table.softwires.len(), n - 1);
        assert_eq!(skeletons(), before);
        // The whole tree reads back as the same configuration.
        assert_eq!(Config::parse(&c.get("/", yang()).unwrap(), "gen"), Ok(c));
    }
}
