//! Telemetry: what a running data plane counts, as named metric families
//! with labelled samples, written in Prometheus' text exposition format
//! (version 0.0.4) and read back from it.
//!
//! Every part that counts adds its own families to one [`Metrics`]: the
//! live loop its ports and workers (`WorkerIo::metrics`), the data plane
//! its own counters ([`crate::DataPlane::metrics`]), the node its control
//! changes. The same text is what `--metrics` serves to Prometheus and
//! what `sluice top` reads, so the two never disagree.
//!
//! Contract of [`Metrics::counter`] and [`Metrics::gauge`]: a sample whose
//! family and labels are already there is added to (several workers'
//! counts of one port sum to the port's); names are made valid metric
//! names (any other character becomes `_`); families keep the order in
//! which they were first added, samples theirs.

use std::fmt::Write as _;

/// What a family's samples are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (until the process restarts).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// One metric family: its samples share a name, a help text and a kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// One labelled value of a family.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Metric families, in the order they were added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    families: Vec<Family>,
}

/// The `Content-Type` of [`Metrics::to_text`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `s` as a metric or label name: `[a-zA-Z_:][a-zA-Z0-9_:]*` (`:` only
/// in metric names), every other character replaced with `_`.
pub fn metric_name(s: &str, colon: bool) -> String {
    let mut out: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':') { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

impl Metrics {
    /// No families.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Adds `value` to counter `name`'s sample with `labels`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        self.add(name, help, Kind::Counter, labels, value as f64);
    }

    /// Adds `value` to gauge `name`'s sample with `labels` (a gauge given
    /// once per process is simply its value).
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.add(name, help, Kind::Gauge, labels, value);
    }

    fn add(&mut self, name: &str, help: &str, kind: Kind, labels: &[(&str, &str)], value: f64) {
        let name = metric_name(name, true);
        let at = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family { name, help: help.to_string(), kind, samples: Vec::new() });
                self.families.len() - 1
            }
        };
        let family = &mut self.families[at];
        let labels: Vec<(String, String)> =
            labels.iter().map(|(k, v)| (metric_name(k, false), v.to_string())).collect();
        match family.samples.iter_mut().find(|s| s.labels == labels) {
            Some(s) => s.value += value,
            None => family.samples.push(Sample { labels, value }),
        }
    }

    /// Adds every sample of `other` (see [`Metrics::counter`]).
    pub fn merge(&mut self, other: &Metrics) {
        for f in &other.families {
            for s in &f.samples {
                let labels: Vec<(&str, &str)> = s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                self.add(&f.name, &f.help, f.kind, &labels, s.value);
            }
        }
    }

    /// The families.
    pub fn families(&self) -> &[Family] {
        &self.families
    }

    /// The value of `name`'s sample whose labels include every one of `labels`
    /// (the first such sample).
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let f = self.families.iter().find(|f| f.name == name)?;
        f.samples
            .iter()
            .find(|s| labels.iter().all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v)))
            .map(|s| s.value)
    }

    /// The sum of `name`'s samples (0 without any).
    pub fn sum(&self, name: &str) -> f64 {
        self.families.iter().filter(|f| f.name == name).flat_map(|f| &f.samples).map(|s| s.value).sum()
    }

    /// Prometheus' text exposition format, version 0.0.4: per family a
    /// `# HELP` and a `# TYPE` line, then its samples.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# HELP {} {help}\n# TYPE {} {kind}", f.name, f.name);
            for s in &f.samples {
                out.push_str(&f.name);
                if !s.labels.is_empty() {
                    out.push('{');
                    for (i, (k, v)) in s.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                        let _ = write!(out, "{k}=\"{v}\"");
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", number(s.value));
            }
        }
        out
    }

    /// Reads text in the exposition format back (what [`Metrics::to_text`]
    /// writes; help and type lines are optional, samples without a type
    /// are gauges). An error names the line.
    pub fn parse(text: &str) -> Result<Metrics, String> {
        let mut m = Metrics::new();
        let mut kinds: Vec<(String, Kind, String)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let bad = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix('#') {
                let mut words = rest.trim_start().splitn(3, ' ');
                match (words.next(), words.next(), words.next()) {
                    (Some("TYPE"), Some(name), Some(kind)) => {
                        let kind = if kind.trim() == "counter" { Kind::Counter } else { Kind::Gauge };
                        match kinds.iter_mut().find(|k| k.0 == name) {
                            Some(k) => k.1 = kind,
                            None => kinds.push((name.to_string(), kind, String::new())),
                        }
                    }
                    (Some("HELP"), Some(name), help) => {
                        let help = help.unwrap_or("").replace("\\n", "\n").replace("\\\\", "\\");
                        match kinds.iter_mut().find(|k| k.0 == name) {
                            Some(k) => k.2 = help,
                            None => kinds.push((name.to_string(), Kind::Gauge, help)),
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let (name, labels, rest) = match line.find('{') {
                Some(open) => {
                    let (labels, end) = parse_labels(&line[open + 1..]).map_err(|e| bad(&e))?;
                    (&line[..open], labels, &line[open + 1 + end..])
                }
                None => {
                    let (name, rest) = line.split_once(char::is_whitespace).ok_or_else(|| bad("no value"))?;
                    (name, Vec::new(), rest)
                }
            };
            let value = rest.split_whitespace().next().ok_or_else(|| bad("no value"))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().map_err(|_| bad("not a number"))?,
            };
            let (kind, help) = kinds.iter().find(|k| k.0 == name).map_or((Kind::Gauge, ""), |k| (k.1, k.2.as_str()));
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            m.add(name, help, kind, &labels, value);
        }
        Ok(m)
    }
}

/// `k="v",...}` up to and including the closing brace: the labels and the
/// bytes taken.
fn parse_labels(s: &str) -> Result<(Vec<(String, String)>, usize), String> {
    let mut labels = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && (b[i] == b',' || b[i] == b' ') {
            i += 1;
        }
        if i < b.len() && b[i] == b'}' {
            return Ok((labels, i + 1));
        }
        let eq = s[i..].find('=').ok_or("a label without a value")? + i;
        let key = s[i..eq].trim().to_string();
        if b.get(eq + 1) != Some(&b'"') {
            return Err("a label value without quotes".into());
        }
        let mut value = String::new();
        let mut j = eq + 2;
        loop {
            let c = *b.get(j).ok_or("an unterminated label value")?;
            match c {
                b'"' => break,
                b'\\' => {
                    match b.get(j + 1) {
                        Some(b'n') => value.push('\n'),
                        Some(&c) => value.push(char::from(c)),
                        None => return Err("an unterminated label value".into()),
                    }
                    j += 2;
                    continue;
                }
                _ => {
                    let ch = s[j..].chars().next().ok_or("an unterminated label value")?;
                    value.push(ch);
                    j += ch.len_utf8();
                    continue;
                }
            }
        }
        labels.push((key, value));
        i = j + 1;
    }
}

/// A value as the format writes it: integers without a fraction.
fn number(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_one_series_add_up_and_the_text_reads_back() {
        let mut a = Metrics::new();
        a.counter(
            "sluice_port_received_packets_total",
            "Frames received.",
            &[("port", "1"), ("interface", "veth1")],
            5,
        );
        a.gauge("sluice_port_up", "Whether the link is up.", &[("port", "1"), ("interface", "veth1")], 1.0);
        let mut b = Metrics::new();
        b.counter(
            "sluice_port_received_packets_total",
            "Frames received.",
            &[("port", "1"), ("interface", "veth1")],
            7,
        );
        b.counter(
            "sluice_port_received_packets_total",
            "Frames received.",
            &[("port", "2"), ("interface", "a\"b\\c")],
            1,
        );
        a.merge(&b);
        assert_eq!(a.get("sluice_port_received_packets_total", &[("port", "1")]), Some(12.0));
        let text = a.to_text();
        assert!(text.starts_with(
            "# HELP sluice_port_received_packets_total Frames received.\n\
             # TYPE sluice_port_received_packets_total counter\n\
             sluice_port_received_packets_total{port=\"1\",interface=\"veth1\"} 12\n\
             sluice_port_received_packets_total{port=\"2\",interface=\"a\\\"b\\\\c\"} 1\n"
        ));
        let back = Metrics::parse(&text).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.sum("sluice_port_received_packets_total"), 13.0);
    }

    #[test]
    fn names_are_made_valid_and_bad_lines_are_named() {
        let mut m = Metrics::new();
        m.counter("sluice_lwaftr_in-ipv4-packets_total", "x", &[("table-name", "MyIngress.ipv4")], 1);
        let text = m.to_text();
        assert!(text.contains("sluice_lwaftr_in_ipv4_packets_total{table_name=\"MyIngress.ipv4\"} 1"), "{text}");
        let e = Metrics::parse("a 1\nb{x=\"1} 2\n").unwrap_err();
        assert!(e.starts_with("line 2: an unterminated label value"), "{e}");
        assert!(Metrics::parse("c{x=1} 2").unwrap_err().contains("without quotes"));
    }
}
