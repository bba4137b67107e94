//! The reader of `snabb-softwire-v3` configurations in Snabb's YANG text
//! syntax: [`Config::parse`] streams the tokens of [`super::lexer`] straight
//! into the typed tree of [`super::schema`] (no generic tree, no per-softwire
//! allocation beyond the table's own `Vec`), checks every leaf's type and
//! range, mandatory leaves, duplicates and the binding table's rules, and
//! reports the first error as `file:line:col: /softwire-config/path: message`
//! ([`ConfError`]). The path names list entries by their keys, e.g.
//! `/softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=80]/b4-ipv6`.

use std::borrow::Cow;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::lexer::{line_col, Lexer, Tok};
use super::schema::*;

/// A configuration error, located in the text and in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    /// The file name given to [`Config::parse`].
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub col: usize,
    /// The path in the tree, e.g. `/softwire-config/instance[device=test]/queue[id=0]`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}: {}", self.file, self.line, self.col, self.path, self.message)
    }
}

impl std::error::Error for ConfError {}

type R<T> = Result<T, ConfError>;

/// What follows a statement's keyword.
enum Stmt<'a> {
    /// `keyword value;` (the value and its offset).
    Leaf(Cow<'a, str>, usize),
    /// `keyword;`
    NoValue,
    /// `keyword {` (the body follows).
    Block,
}

/// One open container or list entry, for error paths.
struct Frame {
    name: &'static str,
    /// The list's keys (empty for a container).
    keys: &'static [&'static str],
    /// Byte offset just after the `{`: the keys are looked up there when an
    /// error needs them.
    body: usize,
}

/// Keywords of state data (`config false`) that a configuration may not hold.
const STATE: &[&str] = &["softwire-state", "resolved-mac"];

struct Parser<'a> {
    text: &'a str,
    file: &'a str,
    lex: Lexer<'a>,
    stack: Vec<Frame>,
    /// The depth of the text's top level (0 for a whole configuration).
    base: usize,
}

impl Config {
    /// Reads a configuration in Snabb's text syntax; `file` names it in
    /// errors. Never panics, whatever the text.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfError> {
        let mut p = Parser { text, file, lex: Lexer::new(text), stack: Vec::with_capacity(8), base: 0 };
        let mut cfg = None;
        while let Some((kw, pos, s)) = p.stmt()? {
            match kw {
                "softwire-config" => {
                    p.once(&cfg, kw, pos)?;
                    p.block(kw, pos, &s)?;
                    cfg = Some(p.softwire_config(pos)?);
                }
                _ => return Err(p.unknown(kw, pos, &["softwire-config"])),
            }
        }
        cfg.ok_or_else(|| p.err(text.len(), Some("softwire-config"), "mandatory, missing"))
    }

    /// Reads softwires given on their own, as `softwire { ... }` statements
    /// (what `snabb config add NAME /softwire-config/binding-table/softwire`
    /// reads), with the checks of a binding table among them; errors name
    /// `/softwire-config/binding-table/softwire[...]` paths.
    pub fn parse_softwires(text: &str, file: &str) -> Result<Vec<Softwire>, ConfError> {
        let mut p = Parser { text, file, lex: Lexer::new(text), stack: Vec::with_capacity(8), base: 2 };
        p.enter("softwire-config", &[]);
        p.enter("binding-table", &[]);
        let mut softwires = Vec::new();
        let mut starts = Vec::new();
        while let Some((kw, pos, s)) = p.stmt()? {
            match kw {
                "softwire" => {
                    p.block(kw, pos, &s)?;
                    softwires.push(p.softwire(pos)?);
                    starts.push(pos);
                }
                _ => return Err(p.unknown(kw, pos, &["softwire"])),
            }
        }
        p.check_table(&softwires, &starts)?;
        Ok(softwires)
    }
}

impl<'a> Parser<'a> {
    // ----- errors and paths -----

    fn err_path(&self, pos: usize, path: String, msg: impl Into<String>) -> ConfError {
        let (line, col) = line_col(self.text, pos);
        ConfError { file: self.file.to_string(), line, col, path, message: msg.into() }
    }

    /// An error at byte `pos`, with the current path (plus `leaf`).
    fn err(&self, pos: usize, leaf: Option<&str>, msg: impl Into<String>) -> ConfError {
        let mut path = self.path();
        if let Some(l) = leaf {
            if !path.ends_with('/') {
                path.push('/');
            }
            path.push_str(l);
        }
        self.err_path(pos, path, msg)
    }

    fn path(&self) -> String {
        if self.stack.is_empty() {
            return "/".into();
        }
        let mut p = String::new();
        for f in &self.stack {
            p.push('/');
            p.push_str(f.name);
            if !f.keys.is_empty() {
                self.push_keys(&mut p, f);
            }
        }
        p
    }

    /// Appends `[key=value]` for each key the entry at `f` states (looked up
    /// in the text of its body, at its own level).
    fn push_keys(&self, p: &mut String, f: &Frame) {
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut lex = Lexer::at(self.text, f.body);
        let mut depth = 0usize;
        let mut expect_kw = true;
        let mut cur: Option<usize> = None;
        while let Ok((t, _)) = lex.next_token() {
            let value = match t {
                Tok::Eof => break,
                Tok::LBrace => {
                    depth += 1;
                    expect_kw = true;
                    cur = None;
                    continue;
                }
                Tok::RBrace => {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                    expect_kw = true;
                    continue;
                }
                Tok::Semi => {
                    expect_kw = true;
                    cur = None;
                    continue;
                }
                Tok::Word(w) => Cow::Borrowed(w),
                Tok::Str(s) => s,
            };
            if depth != 0 {
                continue;
            }
            if expect_kw {
                expect_kw = false;
                cur = f.keys.iter().position(|k| *k == value);
            } else if let Some(i) = cur.take() {
                if !found.iter().any(|(j, _)| *j == i) {
                    found.push((i, value.into_owned()));
                }
            }
        }
        for (i, key) in f.keys.iter().enumerate() {
            if let Some((_, v)) = found.iter().find(|(j, _)| *j == i) {
                p.push('[');
                p.push_str(key);
                p.push('=');
                p.push_str(v);
                p.push(']');
            }
        }
    }

    fn unknown(&self, kw: &str, pos: usize, expected: &[&str]) -> ConfError {
        if STATE.contains(&kw) {
            return self.err(pos, Some(kw), "state data (config false), not accepted in a configuration");
        }
        self.err(pos, None, format!("unknown keyword {kw:?} (expected one of: {})", expected.join(", ")))
    }

    // ----- statements -----

    fn tok(&mut self) -> R<(Tok<'a>, usize)> {
        self.lex.next_token().map_err(|e| self.err(e.pos, None, e.message))
    }

    /// The next statement of the current block; `None` at its closing `}`
    /// (at the end of the text for the top level).
    fn stmt(&mut self) -> R<Option<(&'a str, usize, Stmt<'a>)>> {
        let (t, pos) = self.tok()?;
        let kw = match t {
            Tok::Word(w) => w,
            Tok::RBrace if self.stack.len() > self.base => return Ok(None),
            Tok::Eof if self.stack.len() <= self.base => return Ok(None),
            Tok::Eof => return Err(self.err(pos, None, "unexpected end of text: `}` missing")),
            Tok::RBrace => return Err(self.err(pos, None, "unexpected `}`")),
            Tok::LBrace => return Err(self.err(pos, None, "expected a keyword, found `{`")),
            Tok::Semi => return Err(self.err(pos, None, "expected a keyword, found `;`")),
            Tok::Str(_) => return Err(self.err(pos, None, "expected a keyword, found a quoted string")),
        };
        let (t, vpos) = self.tok()?;
        let s = match t {
            Tok::LBrace => Stmt::Block,
            Tok::Semi => Stmt::NoValue,
            Tok::Word(w) => {
                self.semi(kw)?;
                Stmt::Leaf(Cow::Borrowed(w), vpos)
            }
            Tok::Str(v) => {
                self.semi(kw)?;
                Stmt::Leaf(v, vpos)
            }
            Tok::RBrace | Tok::Eof => {
                return Err(self.err(vpos, Some(kw), "expected a value and `;`, or `{`"));
            }
        };
        Ok(Some((kw, pos, s)))
    }

    fn semi(&mut self, kw: &str) -> R<()> {
        let (t, pos) = self.tok()?;
        if t == Tok::Semi {
            Ok(())
        } else {
            Err(self.err(pos, Some(kw), "expected `;` after the value"))
        }
    }

    /// The value of a leaf statement.
    fn leaf(&self, kw: &str, kwpos: usize, s: Stmt<'a>) -> R<(Cow<'a, str>, usize)> {
        match s {
            Stmt::Leaf(v, p) => Ok((v, p)),
            Stmt::NoValue => Err(self.err(kwpos, Some(kw), format!("value missing: write `{kw} VALUE;`"))),
            Stmt::Block => Err(self.err(kwpos, Some(kw), format!("a leaf, not a container: write `{kw} VALUE;`"))),
        }
    }

    /// Checks that a container statement has a body.
    fn block(&self, kw: &str, kwpos: usize, s: &Stmt<'a>) -> R<()> {
        match s {
            Stmt::Block => Ok(()),
            _ => Err(self.err(kwpos, Some(kw), format!("a container: write `{kw} {{ ... }}`"))),
        }
    }

    /// Checks that a leaf or container is not given twice.
    fn once<T>(&self, slot: &Option<T>, kw: &str, kwpos: usize) -> R<()> {
        if slot.is_some() {
            Err(self.err(kwpos, Some(kw), "given twice"))
        } else {
            Ok(())
        }
    }

    /// Sets a leaf once, from its value through `parse`.
    fn put<T>(
        &self,
        slot: &mut Option<T>,
        kw: &str,
        kwpos: usize,
        s: Stmt<'a>,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> R<()> {
        self.once(slot, kw, kwpos)?;
        let (v, p) = self.leaf(kw, kwpos, s)?;
        *slot = Some(parse(&v).map_err(|m| self.err(p, Some(kw), m))?);
        Ok(())
    }

    fn need<T>(&self, slot: Option<T>, what: &str, at: usize) -> R<T> {
        slot.ok_or_else(|| self.err(at, Some(what), "mandatory, missing"))
    }

    fn enter(&mut self, name: &'static str, keys: &'static [&'static str]) {
        let body = self.lex.pos();
        self.stack.push(Frame { name, keys, body });
    }

    fn leave(&mut self) {
        self.stack.pop();
    }

    // ----- the tree -----

    fn softwire_config(&mut self, _at: usize) -> R<Config> {
        self.enter("softwire-config", &[]);
        const KW: &[&str] = &["name", "instance", "external-interface", "internal-interface", "binding-table"];
        let mut name = None;
        let mut instances: Vec<Instance> = Vec::new();
        let mut external = None;
        let mut internal = None;
        let mut bt = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "name" => self.put(&mut name, kw, pos, s, string)?,
                "instance" => {
                    self.block(kw, pos, &s)?;
                    let i = self.instance(pos, &instances)?;
                    instances.push(i);
                }
                "external-interface" => {
                    self.once(&external, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    let (common, ..) = self.interface(pos, false)?;
                    external = Some(ExternalInterface { common });
                }
                "internal-interface" => {
                    self.once(&internal, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    let (common, flow_label, vlan_tag, hairpinning) = self.interface(pos, true)?;
                    internal = Some(InternalInterface { common, flow_label, vlan_tag, hairpinning });
                }
                "binding-table" => {
                    self.once(&bt, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    bt = Some(self.binding_table(pos)?);
                }
                _ => return Err(self.unknown(kw, pos, KW)),
            }
        }
        self.leave();
        Ok(Config {
            name,
            instances,
            external: external.unwrap_or_default(),
            internal: internal.unwrap_or_default(),
            binding_table: bt.unwrap_or_default(),
        })
    }

    fn instance(&mut self, at: usize, earlier: &[Instance]) -> R<Instance> {
        self.enter("instance", &["device"]);
        const KW: &[&str] = &["device", "external-device", "queue"];
        let mut device = None;
        let mut external_device = None;
        let mut queues: Vec<Queue> = Vec::new();
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "device" => self.put(&mut device, kw, pos, s, string)?,
                "external-device" => self.put(&mut external_device, kw, pos, s, string)?,
                "queue" => {
                    self.block(kw, pos, &s)?;
                    let q = self.queue(pos, &queues)?;
                    queues.push(q);
                }
                _ => return Err(self.unknown(kw, pos, KW)),
            }
        }
        let device = self.need(device, "device", at)?;
        if earlier.iter().any(|i| i.device == device) {
            return Err(self.err(at, None, format!("duplicate key: an earlier instance has device {device:?}")));
        }
        self.leave();
        Ok(Instance { device, external_device, queues })
    }

    fn queue(&mut self, at: usize, earlier: &[Queue]) -> R<Queue> {
        self.enter("queue", &["id"]);
        const KW: &[&str] = &["id", "external-interface", "internal-interface"];
        let mut id = None;
        let mut external = None;
        let mut internal = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "id" => self.put(&mut id, kw, pos, s, |v| uint::<u8>(v, 0, 255))?,
                "external-interface" => {
                    self.once(&external, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    external = Some(self.queue_interface(pos, "external-interface", ipv4)?);
                }
                "internal-interface" => {
                    self.once(&internal, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    internal = Some(self.queue_interface(pos, "internal-interface", ipv6)?);
                }
                _ => return Err(self.unknown(kw, pos, KW)),
            }
        }
        let id = self.need(id, "id", at)?;
        let external = self.need(external, "external-interface", at)?;
        let internal = self.need(internal, "internal-interface", at)?;
        if earlier.iter().any(|q| q.id == id) {
            return Err(self.err(at, None, format!("duplicate key: an earlier queue has id {id}")));
        }
        self.leave();
        Ok(Queue { id, external, internal })
    }

    fn queue_interface<A>(
        &mut self,
        at: usize,
        name: &'static str,
        addr: fn(&str) -> Result<A, String>,
    ) -> R<QueueInterface<A>> {
        self.enter(name, &[]);
        const KW: &[&str] = &["ip", "mac", "vlan-tag", "next-hop"];
        let mut ip = None;
        let mut mac_ = None;
        let mut vlan_tag = None;
        let mut next_hop = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "ip" => self.put(&mut ip, kw, pos, s, addr)?,
                "mac" => self.put(&mut mac_, kw, pos, s, mac)?,
                "vlan-tag" => self.put(&mut vlan_tag, kw, pos, s, |v| uint::<u16>(v, 0, 4095))?,
                "next-hop" => {
                    self.once(&next_hop, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    next_hop = Some(self.next_hop(pos, addr)?);
                }
                _ => return Err(self.unknown(kw, pos, KW)),
            }
        }
        let ip = self.need(ip, "ip", at)?;
        let mac_ = self.need(mac_, "mac", at)?;
        let next_hop = self.need(next_hop, "next-hop", at)?;
        self.leave();
        Ok(QueueInterface { ip, mac: mac_, vlan_tag, next_hop })
    }

    fn next_hop<A>(&mut self, at: usize, addr: fn(&str) -> Result<A, String>) -> R<NextHop<A>> {
        self.enter("next-hop", &[]);
        const KW: &[&str] = &["ip", "mac"];
        let mut ip = None;
        let mut mac_ = None;
        let mut second = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "ip" => self.put(&mut ip, kw, pos, s, addr)?,
                "mac" => self.put(&mut mac_, kw, pos, s, mac)?,
                _ => return Err(self.unknown(kw, pos, KW)),
            }
            if ip.is_some() && mac_.is_some() && second.is_none() {
                second = Some((kw, pos));
            }
        }
        if let Some((kw, pos)) = second {
            return Err(self.err(pos, Some(kw), "next-hop takes one of ip and mac, not both"));
        }
        let r = match (ip, mac_) {
            (Some(a), _) => NextHop::Ip(a),
            (None, Some(m)) => NextHop::Mac(m),
            (None, None) => return Err(self.err(at, None, "mandatory choice missing: ip or mac")),
        };
        self.leave();
        Ok(r)
    }

    /// A global `external-interface` or `internal-interface` (with the
    /// internal side's `flow-label`, `vlan-tag` and `hairpinning`).
    fn interface(&mut self, _at: usize, internal: bool) -> R<(InterfaceCommon, u32, Option<u16>, bool)> {
        let (name, min_mtu, kws): (&'static str, u64, &[&str]) = if internal {
            (
                "internal-interface",
                1280,
                &[
                    "mtu",
                    "mru",
                    "flow-label",
                    "ingress-filter",
                    "egress-filter",
                    "allow-incoming-icmp",
                    "generate-icmp-errors",
                    "error-rate-limiting",
                    "reassembly",
                    "vlan-tag",
                    "hairpinning",
                ],
            )
        } else {
            (
                "external-interface",
                68,
                &[
                    "mtu",
                    "mru",
                    "ingress-filter",
                    "egress-filter",
                    "allow-incoming-icmp",
                    "generate-icmp-errors",
                    "error-rate-limiting",
                    "reassembly",
                ],
            )
        };
        self.enter(name, &[]);
        let mut mtu = None;
        let mut mru = None;
        let mut ingress = None;
        let mut egress = None;
        let mut allow = None;
        let mut generate = None;
        let mut rate = None;
        let mut reasm = None;
        let mut flow_label = None;
        let mut vlan_tag = None;
        let mut hairpinning = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "mtu" => self.put(&mut mtu, kw, pos, s, |v| uint::<u16>(v, min_mtu, 65535))?,
                "mru" => self.put(&mut mru, kw, pos, s, |v| uint::<u16>(v, 0, 65535))?,
                "ingress-filter" => self.put(&mut ingress, kw, pos, s, string)?,
                "egress-filter" => self.put(&mut egress, kw, pos, s, string)?,
                "allow-incoming-icmp" => self.put(&mut allow, kw, pos, s, boolean)?,
                "generate-icmp-errors" => self.put(&mut generate, kw, pos, s, boolean)?,
                "error-rate-limiting" => {
                    self.once(&rate, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    rate = Some(self.rate_limit()?);
                }
                "reassembly" => {
                    self.once(&reasm, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    reasm = Some(self.reassembly()?);
                }
                "flow-label" if internal => {
                    self.put(&mut flow_label, kw, pos, s, |v| uint::<u32>(v, 0, u32::MAX.into()))?
                }
                "vlan-tag" if internal => self.put(&mut vlan_tag, kw, pos, s, |v| uint::<u16>(v, 0, 4095))?,
                "hairpinning" if internal => self.put(&mut hairpinning, kw, pos, s, boolean)?,
                _ => return Err(self.unknown(kw, pos, kws)),
            }
        }
        self.leave();
        let d = InterfaceCommon::with_mtu(if internal { 1500 } else { 1460 });
        let common = InterfaceCommon {
            mtu: mtu.unwrap_or(d.mtu),
            mru: mru.unwrap_or(d.mru),
            ingress_filter: ingress,
            egress_filter: egress,
            allow_incoming_icmp: allow.unwrap_or(d.allow_incoming_icmp),
            generate_icmp_errors: generate.unwrap_or(d.generate_icmp_errors),
            error_rate_limiting: rate.unwrap_or(d.error_rate_limiting),
            reassembly: reasm.unwrap_or(d.reassembly),
        };
        Ok((common, flow_label.unwrap_or(0), vlan_tag, hairpinning.unwrap_or(true)))
    }

    fn rate_limit(&mut self) -> R<RateLimit> {
        self.enter("error-rate-limiting", &[]);
        let mut packets = None;
        let mut period = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "packets" => self.put(&mut packets, kw, pos, s, |v| uint::<u32>(v, 0, u32::MAX.into()))?,
                "period" => self.put(&mut period, kw, pos, s, |v| uint::<u32>(v, 1, u32::MAX.into()))?,
                _ => return Err(self.unknown(kw, pos, &["packets", "period"])),
            }
        }
        self.leave();
        let d = RateLimit::default();
        Ok(RateLimit { packets: packets.unwrap_or(d.packets), period: period.unwrap_or(d.period) })
    }

    fn reassembly(&mut self) -> R<Reassembly> {
        self.enter("reassembly", &[]);
        let mut frags = None;
        let mut packets = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "max-fragments-per-packet" => {
                    self.put(&mut frags, kw, pos, s, |v| uint::<u32>(v, 1, u32::MAX.into()))?
                }
                "max-packets" => self.put(&mut packets, kw, pos, s, |v| uint::<u32>(v, 0, u32::MAX.into()))?,
                _ => return Err(self.unknown(kw, pos, &["max-fragments-per-packet", "max-packets"])),
            }
        }
        self.leave();
        let d = Reassembly::default();
        Ok(Reassembly {
            max_fragments_per_packet: frags.unwrap_or(d.max_fragments_per_packet),
            max_packets: packets.unwrap_or(d.max_packets),
        })
    }

    fn binding_table(&mut self, _at: usize) -> R<BindingTable> {
        self.enter("binding-table", &[]);
        // A generated table spends about 130 bytes of text per softwire.
        let mut softwires = Vec::with_capacity((self.text.len() / 160).min(1 << 24));
        let mut starts: Vec<usize> = Vec::with_capacity(softwires.capacity());
        let mut version = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "softwire" => {
                    self.block(kw, pos, &s)?;
                    softwires.push(self.softwire(pos)?);
                    starts.push(pos);
                }
                "version" => {
                    self.once(&version, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    version = Some(self.version()?);
                }
                _ => return Err(self.unknown(kw, pos, &["softwire", "version"])),
            }
        }
        self.check_table(&softwires, &starts)?;
        self.leave();
        Ok(BindingTable { softwires, version })
    }

    /// Duplicate (ipv4, psid) keys and port sets that differ within one IPv4
    /// address: the error names the softwire that comes later in the text.
    fn check_table(&self, sws: &[Softwire], starts: &[usize]) -> R<()> {
        let key = |s: &Softwire| (u64::from(u32::from(s.ipv4)) << 16) | u64::from(s.psid);
        let mut order: Vec<(u64, u32)> = sws.iter().enumerate().map(|(i, s)| (key(s), i as u32)).collect();
        order.sort_unstable();
        // (offending index, other index, duplicate?)
        let mut worst: Option<(usize, usize, bool)> = None;
        let mut g = 0;
        while g < order.len() {
            let ip = order[g].0 >> 16;
            let mut end = g + 1;
            while end < order.len() && order[end].0 >> 16 == ip {
                end += 1;
            }
            if end - g > 1 {
                let first = order[g..end].iter().map(|e| e.1 as usize).min().unwrap_or(0);
                for j in g..end {
                    let i = order[j].1 as usize;
                    let found = if j > g && order[j - 1].0 == order[j].0 {
                        Some((i, order[j - 1].1 as usize, true))
                    } else if sws[i].port_set != sws[first].port_set {
                        Some((i.max(first), i.min(first), false))
                    } else {
                        None
                    };
                    if let Some(f) = found {
                        if worst.is_none_or(|w| f.0 < w.0) {
                            worst = Some(f);
                        }
                    }
                }
            }
            g = end;
        }
        let Some((i, other, dup)) = worst else { return Ok(()) };
        let s = &sws[i];
        let path = format!("/softwire-config/binding-table/softwire[ipv4={}][psid={}]", s.ipv4, s.psid);
        let (other_line, _) = line_col(self.text, starts[other]);
        let msg = if dup {
            format!("duplicate key: the softwire at line {other_line} has the same ipv4 and psid")
        } else {
            let o = &sws[other].port_set;
            format!(
                "port-set (psid-length {}, reserved-ports-bit-count {}) differs from that of the softwire at line \
                 {other_line} with the same ipv4 (psid-length {}, reserved-ports-bit-count {})",
                s.port_set.psid_length, s.port_set.reserved_ports_bit_count, o.psid_length, o.reserved_ports_bit_count
            )
        };
        Err(self.err_path(starts[i], path, msg))
    }

    fn softwire(&mut self, at: usize) -> R<Softwire> {
        self.enter("softwire", &["ipv4", "psid"]);
        const KW: &[&str] = &["ipv4", "psid", "b4-ipv6", "br-address", "padding", "port-set"];
        let mut v4 = None;
        let mut psid = None;
        let mut b4 = None;
        let mut br = None;
        let mut padding = None;
        let mut port_set = None;
        let mut psid_pos = at;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "ipv4" => self.put(&mut v4, kw, pos, s, ipv4)?,
                "psid" => {
                    if let Stmt::Leaf(_, p) = &s {
                        psid_pos = *p;
                    }
                    self.put(&mut psid, kw, pos, s, |v| uint::<u16>(v, 0, 65535))?
                }
                "b4-ipv6" => self.put(&mut b4, kw, pos, s, ipv6)?,
                "br-address" => self.put(&mut br, kw, pos, s, ipv6)?,
                "padding" => self.put(&mut padding, kw, pos, s, |v| uint::<u16>(v, 0, 65535))?,
                "port-set" => {
                    self.once(&port_set, kw, pos)?;
                    self.block(kw, pos, &s)?;
                    port_set = Some(self.port_set(pos)?);
                }
                _ => return Err(self.unknown(kw, pos, KW)),
            }
        }
        let ipv4 = self.need(v4, "ipv4", at)?;
        let psid = self.need(psid, "psid", at)?;
        let b4_ipv6 = self.need(b4, "b4-ipv6", at)?;
        let br_address = self.need(br, "br-address", at)?;
        let port_set = self.need(port_set, "port-set", at)?;
        if u32::from(psid) >> port_set.psid_length != 0 {
            return Err(self.err(
                psid_pos,
                Some("psid"),
                format!(
                    "psid {psid} does not fit psid-length {} (must be below {})",
                    port_set.psid_length,
                    1u32 << port_set.psid_length
                ),
            ));
        }
        self.leave();
        Ok(Softwire { ipv4, psid, b4_ipv6, br_address, padding: padding.unwrap_or(0), port_set })
    }

    fn port_set(&mut self, at: usize) -> R<PortSet> {
        self.enter("port-set", &[]);
        let mut k = None;
        let mut a = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "psid-length" => self.put(&mut k, kw, pos, s, |v| uint::<u8>(v, 0, 16))?,
                "reserved-ports-bit-count" => self.put(&mut a, kw, pos, s, |v| uint::<u8>(v, 0, 16))?,
                _ => return Err(self.unknown(kw, pos, &["psid-length", "reserved-ports-bit-count"])),
            }
        }
        let psid_length = self.need(k, "psid-length", at)?;
        let reserved_ports_bit_count = a.unwrap_or(0);
        if psid_length + reserved_ports_bit_count > 16 {
            return Err(self.err(
                at,
                None,
                format!("psid-length {psid_length} + reserved-ports-bit-count {reserved_ports_bit_count} exceeds 16"),
            ));
        }
        self.leave();
        Ok(PortSet { psid_length, reserved_ports_bit_count })
    }

    fn version(&mut self) -> R<(Option<u64>, Option<String>)> {
        self.enter("version", &[]);
        let mut number = None;
        let mut date = None;
        while let Some((kw, pos, s)) = self.stmt()? {
            match kw {
                "number" => self.put(&mut number, kw, pos, s, |v| uint::<u64>(v, 0, u64::MAX))?,
                "date" => self.put(&mut date, kw, pos, s, string)?,
                _ => return Err(self.unknown(kw, pos, &["number", "date"])),
            }
        }
        self.leave();
        Ok((number, date))
    }
}

// ----- value types -----

fn string(v: &str) -> Result<String, String> {
    Ok(v.to_string())
}

fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{v:?} is not a boolean (true or false)")),
    }
}

/// An unsigned decimal in `min..=max`.
fn uint<T: TryFrom<u64>>(v: &str, min: u64, max: u64) -> Result<T, String> {
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("{v:?} is not an unsigned decimal number"));
    }
    let mut n: u64 = 0;
    for c in v.bytes() {
        n = match n.checked_mul(10).and_then(|n| n.checked_add(u64::from(c - b'0'))) {
            Some(n) => n,
            None => return Err(format!("{v} is out of range {min}..{max}")),
        };
    }
    if n < min || n > max {
        return Err(format!("{v} is out of range {min}..{max}"));
    }
    T::try_from(n).map_err(|_| format!("{v} is out of range {min}..{max}"))
}

fn ipv4(v: &str) -> Result<Ipv4Addr, String> {
    v.parse().map_err(|_| format!("{v:?} is not an IPv4 address"))
}

fn ipv6(v: &str) -> Result<Ipv6Addr, String> {
    v.parse().map_err(|_| format!("{v:?} is not an IPv6 address"))
}

/// `xx:xx:xx:xx:xx:xx` (one or two hex digits a byte).
fn mac(v: &str) -> Result<Mac, String> {
    let bad = || format!("{v:?} is not a MAC address (xx:xx:xx:xx:xx:xx)");
    let mut m = [0u8; 6];
    let mut parts = v.split(':');
    for b in m.iter_mut() {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(uint::<u8>("16", 0, 16), Ok(16));
        assert!(uint::<u8>("17", 0, 16).is_err());
        assert!(uint::<u64>("18446744073709551616", 0, u64::MAX).is_err());
        assert_eq!(uint::<u64>("18446744073709551615", 0, u64::MAX), Ok(u64::MAX));
        assert!(uint::<u8>("", 0, 16).is_err());
        assert!(uint::<u8>("-1", 0, 16).is_err());
        assert!(uint::<u8>("+1", 0, 16).is_err());
        assert_eq!(mac("12:ab:CD:0:1:ff"), Ok([0x12, 0xab, 0xcd, 0, 1, 0xff]));
        assert!(mac("12:ab:CD:0:1").is_err());
        assert!(mac("12:ab:CD:0:1:2:3").is_err());
        assert!(mac("12:ab:CD:0:1:+f").is_err());
        assert!(mac("123:ab:CD:0:1:f").is_err());
        assert_eq!(boolean("false"), Ok(false));
        assert!(boolean("False").is_err());
        assert!(ipv6("::ffff:1.2.3.4").is_ok());
        assert!(ipv6("127:2:3").is_err());
    }
}
