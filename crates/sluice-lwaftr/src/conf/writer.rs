//! The writer of `snabb-softwire-v3` configurations in Snabb's text syntax:
//! [`Config::to_text`] prints the tree as Snabb's printer lays it out (two
//! spaces a level, one statement a line, list keys first and the other
//! children in alphabetical order, values equal to the YANG default left
//! out), so that the corpus files come back byte for byte and
//! `Config::parse(&c.to_text(), ..) == Ok(c)` for every configuration.

use std::fmt::{self, Display, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::schema::*;

/// A MAC address as `xx:xx:xx:xx:xx:xx`.
struct MacText<'a>(&'a Mac);

impl Display for MacText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// A string argument: bare when the lexer reads it back as one word,
/// double-quoted with escapes otherwise.
struct StrText<'a>(&'a str);

impl Display for StrText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let bare = !s.is_empty()
            && !s.contains("//")
            && !s.contains("/*")
            && !s.bytes().any(|c| {
                matches!(
                    c,
                    b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b';' | b'{' | b'}' | b'"' | b'\'' | b'\\'
                )
            });
        if bare {
            return f.write_str(s);
        }
        f.write_char('"')?;
        for c in s.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\t' => f.write_str("\\t")?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// An indenting line writer.
struct W {
    out: String,
    depth: usize,
}

impl W {
    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
    }

    fn leaf(&mut self, kw: &str, v: impl Display) {
        self.indent();
        // Writing into a String cannot fail.
        let _ = writeln!(self.out, "{kw} {v};");
    }

    fn open(&mut self, kw: &str) {
        self.indent();
        self.out.push_str(kw);
        self.out.push_str(" {\n");
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.out.push_str("}\n");
    }
}

impl Config {
    /// The configuration in Snabb's text syntax (see the module docs).
    pub fn to_text(&self) -> String {
        let mut w = W { out: String::with_capacity(1024 + self.binding_table.softwires.len() * 160), depth: 0 };
        w.open("softwire-config");
        binding_table(&mut w, &self.binding_table);
        let ext = &self.external;
        let dext = ExternalInterface::default();
        if *ext != dext {
            w.open("external-interface");
            common(&mut w, &ext.common, &dext.common, None);
            w.close();
        }
        for i in &self.instances {
            instance(&mut w, i);
        }
        let int = &self.internal;
        let dint = InternalInterface::default();
        if *int != dint {
            w.open("internal-interface");
            common(&mut w, &int.common, &dint.common, Some(int));
            w.close();
        }
        if let Some(n) = &self.name {
            w.leaf("name", StrText(n));
        }
        w.close();
        w.out
    }
}

fn binding_table(w: &mut W, bt: &BindingTable) {
    if bt.softwires.is_empty() && bt.version.is_none() {
        return;
    }
    w.open("binding-table");
    for s in &bt.softwires {
        w.open("softwire");
        w.leaf("ipv4", s.ipv4);
        w.leaf("psid", s.psid);
        w.leaf("b4-ipv6", s.b4_ipv6);
        w.leaf("br-address", s.br_address);
        if s.padding != 0 {
            w.leaf("padding", s.padding);
        }
        w.open("port-set");
        w.leaf("psid-length", s.port_set.psid_length);
        if s.port_set.reserved_ports_bit_count != 0 {
            w.leaf("reserved-ports-bit-count", s.port_set.reserved_ports_bit_count);
        }
        w.close();
        w.close();
    }
    if let Some((number, date)) = &bt.version {
        w.open("version");
        if let Some(d) = date {
            w.leaf("date", StrText(d));
        }
        if let Some(n) = number {
            w.leaf("number", n);
        }
        w.close();
    }
    w.close();
}

/// The global interface leaves in alphabetical order; `internal` adds the
/// internal side's own.
fn common(w: &mut W, c: &InterfaceCommon, d: &InterfaceCommon, internal: Option<&InternalInterface>) {
    if c.allow_incoming_icmp != d.allow_incoming_icmp {
        w.leaf("allow-incoming-icmp", c.allow_incoming_icmp);
    }
    if let Some(f) = &c.egress_filter {
        w.leaf("egress-filter", StrText(f));
    }
    if c.error_rate_limiting != d.error_rate_limiting {
        w.open("error-rate-limiting");
        if c.error_rate_limiting.packets != d.error_rate_limiting.packets {
            w.leaf("packets", c.error_rate_limiting.packets);
        }
        if c.error_rate_limiting.period != d.error_rate_limiting.period {
            w.leaf("period", c.error_rate_limiting.period);
        }
        w.close();
    }
    if let Some(i) = internal {
        if i.flow_label != 0 {
            w.leaf("flow-label", i.flow_label);
        }
    }
    if c.generate_icmp_errors != d.generate_icmp_errors {
        w.leaf("generate-icmp-errors", c.generate_icmp_errors);
    }
    if let Some(i) = internal {
        if !i.hairpinning {
            w.leaf("hairpinning", i.hairpinning);
        }
    }
    if let Some(f) = &c.ingress_filter {
        w.leaf("ingress-filter", StrText(f));
    }
    if c.mru != d.mru {
        w.leaf("mru", c.mru);
    }
    if c.mtu != d.mtu {
        w.leaf("mtu", c.mtu);
    }
    if c.reassembly != d.reassembly {
        w.open("reassembly");
        if c.reassembly.max_fragments_per_packet != d.reassembly.max_fragments_per_packet {
            w.leaf("max-fragments-per-packet", c.reassembly.max_fragments_per_packet);
        }
        if c.reassembly.max_packets != d.reassembly.max_packets {
            w.leaf("max-packets", c.reassembly.max_packets);
        }
        w.close();
    }
    if let Some(i) = internal {
        if let Some(t) = i.vlan_tag {
            w.leaf("vlan-tag", t);
        }
    }
}

fn instance(w: &mut W, i: &Instance) {
    w.open("instance");
    w.leaf("device", StrText(&i.device));
    if let Some(e) = &i.external_device {
        w.leaf("external-device", StrText(e));
    }
    for q in &i.queues {
        w.open("queue");
        w.leaf("id", q.id);
        queue_interface::<Ipv4Addr>(w, "external-interface", &q.external);
        queue_interface::<Ipv6Addr>(w, "internal-interface", &q.internal);
        w.close();
    }
    w.close();
}

fn queue_interface<A: Display>(w: &mut W, name: &str, q: &QueueInterface<A>) {
    w.open(name);
    w.leaf("ip", &q.ip);
    w.leaf("mac", MacText(&q.mac));
    w.open("next-hop");
    match &q.next_hop {
        NextHop::Ip(a) => w.leaf("ip", a),
        NextHop::Mac(m) => w.leaf("mac", MacText(m)),
    }
    w.close();
    if let Some(t) = q.vlan_tag {
        w.leaf("vlan-tag", t);
    }
    w.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_quoted_when_needed() {
        assert_eq!(StrText("ip6").to_string(), "ip6");
        assert_eq!(StrText("len < 0").to_string(), "\"len < 0\"");
        assert_eq!(StrText("").to_string(), "\"\"");
        assert_eq!(StrText("a\"b\\c\nd\te").to_string(), "\"a\\\"b\\\\c\\nd\\te\"");
        assert_eq!(StrText("a//b").to_string(), "\"a//b\"");
        assert_eq!(StrText("a;").to_string(), "\"a;\"");
        assert_eq!(MacText(&[1, 0x22, 0xab, 0, 0, 0xff]).to_string(), "01:22:ab:00:00:ff");
    }
}
