//! Every fuzz target's seed corpus (`fuzz/corpus/<target>/`) and the
//! inputs of crashes found by fuzzing (`fuzz/regressions/<target>/`),
//! replayed through the target's code on the stable toolchain: each must
//! run without a panic. A target without seeds fails.

use std::panic::AssertUnwindSafe;
use std::path::Path;

/// The files of `dir`, sorted (none when it does not exist).
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

fn replay(name: &str, min_seeds: usize) {
    let t = sluice_fuzzing::target(name).unwrap_or_else(|| panic!("no target {name}"));
    let root = sluice_fuzzing::repo().join("fuzz");
    let seeds = files(&root.join("corpus").join(name));
    assert!(
        seeds.len() >= min_seeds,
        "fuzz/corpus/{name} holds {} seeds, expected at least {min_seeds} (fuzz/make-seeds.sh makes them)",
        seeds.len()
    );
    let mut failed = Vec::new();
    let inputs: Vec<_> = seeds.into_iter().chain(files(&root.join("regressions").join(name))).collect();
    for f in &inputs {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        if let Err(e) = std::panic::catch_unwind(AssertUnwindSafe(|| (t.run)(&data))) {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {why}", f.display()));
        }
    }
    assert!(failed.is_empty(), "{} of {} inputs of {name} failed:\n{}", failed.len(), inputs.len(), failed.join("\n"));
}

/// One test per target, each with the least number of seeds its corpus must hold.
macro_rules! replays {
    ($($test:ident: $name:literal, $min:literal;)*) => {
        $(
            #[test]
            fn $test() {
                replay($name, $min);
            }
        )*

        #[test]
        fn every_target_has_a_replay_test() {
            let tested = [$($name),*];
            for t in sluice_fuzzing::TARGETS {
                assert!(tested.contains(&t.name), "target {} has no replay test", t.name);
            }
        }
    };
}

replays! {
    packet_seeds_replay: "packet", 20;
    p4_differential_seeds_replay: "p4_differential", 100;
    load_json_seeds_replay: "load_json", 10;
    cli_command_seeds_replay: "cli_command", 10;
    thrift_call_seeds_replay: "thrift_call", 10;
    p4runtime_write_seeds_replay: "p4runtime_write", 10;
    openflow_decode_seeds_replay: "openflow_decode", 20;
    openflow10_decode_seeds_replay: "openflow10_decode", 10;
    openflow_differential_seeds_replay: "openflow_differential", 10;
    lwaftr_conf_seeds_replay: "lwaftr_conf", 10;
    lwaftr_plane_seeds_replay: "lwaftr_plane", 20;
    pcap_file_seeds_replay: "pcap_file", 10;
    packet_in_seeds_replay: "packet_in", 3;
}

/// The seeds of a target, read.
fn seeds(name: &str) -> Vec<Vec<u8>> {
    files(&sluice_fuzzing::repo().join("fuzz/corpus").join(name)).iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// The seeds reach past the decoders: P4Runtime sessions leave entries
/// installed, the differential targets' packets come out of both paths.
#[test]
fn the_seeds_exercise_the_paths_behind_the_decoders() {
    let installed: Vec<usize> =
        seeds("p4runtime_write").iter().map(|s| sluice_fuzzing::control::p4runtime_session(s)).collect();
    let with_entries = installed.iter().filter(|n| **n > 0).count();
    assert!(with_entries >= 5, "only {with_entries} P4Runtime seeds leave an entry installed: {installed:?}");
    let of: usize =
        seeds("openflow_differential").iter().map(|s| sluice_fuzzing::openflow::differential_frames(s)).sum();
    assert!(of >= 25, "the OpenFlow differential seeds emit only {of} frames");
    let p4: Vec<usize> = seeds("p4_differential").iter().map(|s| sluice_fuzzing::p4::differential_emitted(s)).collect();
    let emitting = p4.iter().filter(|n| **n > 0).count();
    assert!(emitting * 2 >= p4.len(), "only {emitting} of {} P4 differential seeds emit a packet", p4.len());
}
