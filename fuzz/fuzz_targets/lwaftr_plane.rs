//! Any frames, on any port, in either mode, must go through the lwAFTR
//! without a panic: what is not understood is dropped and counted. The
//! first byte picks the mode and the port; the rest is split into frames
//! at 0xff bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_dataplane::DataPlane;
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options};

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

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let conf = Config::parse(CONF, "fuzz.conf").expect("the fuzz configuration reads");
    let opts = Options { on_a_stick: sel & 1 != 0, deterministic_ids: true, frozen_clock: Some(0) };
    let mut lw = Lwaftr::new(&conf, opts).expect("the fuzz configuration runs");
    lw.tick(0, &mut |_: u32, f: &[u8]| assert!(f.len() >= 14));
    let frames: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
    let port = u32::from((sel >> 1) & 3);
    for chunk in frames.chunks(sluice_dataplane::BATCH) {
        lw.process_batch(port, chunk, &mut |_, _, f: &[u8]| assert!(f.len() >= 14));
    }
});
