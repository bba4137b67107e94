//! lwAFTR targets: its configuration language and its packet path.

use sluice_dataplane::DataPlane;
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options};

/// Target `lwaftr_conf`: any text reads as an lwAFTR configuration or
/// fails with a located, non-empty error; a configuration that reads
/// writes back to a text that reads as the same configuration.
pub fn conf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, "fuzz.conf") {
        Err(e) => {
            assert!(!e.message.is_empty(), "empty error message");
            assert!(e.line >= 1 && e.col >= 1 && e.path.starts_with('/'), "unlocated error {e}");
        }
        Ok(c) => {
            let out = c.to_text();
            match Config::parse(&out, "written.conf") {
                Ok(back) => assert_eq!(back, c, "written back differently:\n{out}"),
                Err(e) => panic!("the written text does not read: {e}\n{out}"),
            }
        }
    }
}

/// Softwires with every PSID layout, VLAN tags, small MTUs (so that
/// fragmentation and reassembly run) and a hairpinning binding table.
const CONF: &str = r#"softwire-config {
  binding-table {
    softwire { ipv4 178.79.150.233; psid 80; b4-ipv6 127:2:3:4:5:6:7:128; br-address 8:9:a:b:c:d:e:f; port-set { psid-length 16; } }
    softwire { ipv4 178.79.150.15; psid 0; b4-ipv6 127:22:33:44:55:66:77:128; br-address 8:9:a:b:c:d:e:f; port-set { psid-length 4; } }
    softwire { ipv4 178.79.150.1; psid 0; b4-ipv6 127:10:20:30:40:50:60:128; br-address 8:9:a:b:c:d:e:f; port-set { psid-length 0; } }
    softwire { ipv4 178.79.150.3; psid 4; b4-ipv6 127:14:25:36:47:58:69:128; br-address 1e:2:2:2:2:2:2:af; port-set { psid-length 6; reserved-ports-bit-count 2; } }
  }
  external-interface { mtu 576; reassembly { max-fragments-per-packet 4; max-packets 3; } }
  internal-interface { mtu 1280; reassembly { max-fragments-per-packet 4; max-packets 3; } }
  instance {
    device test;
    queue {
      id 0;
      external-interface { ip 10.10.10.10; mac 12:12:12:12:12:12; vlan-tag 1092; next-hop { ip 10.10.10.1; } }
      internal-interface { ip 8:9:a:b:c:d:e:f; mac 22:22:22:22:22:22; next-hop { ip 8:9:a:b:4:3:2:1; } }
    }
  }
}"#;

/// Target `lwaftr_plane`: any frames, on any port, in either mode, go
/// through the lwAFTR without a panic (what it does not understand it
/// drops and counts). The first byte picks the mode (bit 0: on a stick)
/// and the port (bits 1-2); the rest is frames separated by 0xff bytes.
pub fn plane(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    static CONFIG: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
    let conf = CONFIG.get_or_init(|| Config::parse(CONF, "fuzz.conf").expect("the fuzz configuration reads"));
    let opts = Options { on_a_stick: sel & 1 != 0, deterministic_ids: true, frozen_clock: Some(0) };
    let mut lw = Lwaftr::new(conf, opts).expect("the fuzz configuration runs");
    lw.tick(0, &mut |_: u32, f: &[u8]| assert!(f.len() >= 14));
    let frames: Vec<&[u8]> = crate::split(rest, 0xff).collect();
    let port = u32::from((sel >> 1) & 3);
    for chunk in frames.chunks(sluice_dataplane::BATCH) {
        lw.process_batch(port, chunk, &mut |_, _, f: &[u8]| assert!(f.len() >= 14));
    }
}
