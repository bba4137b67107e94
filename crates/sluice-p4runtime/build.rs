//! Generates the P4Runtime message and service types from `proto/` (our own
//! schema files, checked against the published schema by
//! `scripts/check-p4runtime-schema.py`). protoc comes from the vendored
//! crate, so building needs no system package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let include = protoc_bin_vendored::include_path()?;
    let include = include.to_str().ok_or("protoc include path is not UTF-8")?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        // A request that does not decode is INVALID_ARGUMENT (src/codec.rs).
        .codec_path("crate::codec::P4rtCodec")
        .compile_protos(
            &[
                "proto/p4/v1/p4runtime.proto",
                "proto/p4/config/v1/p4info.proto",
                "proto/p4/bm/dataplane_interface.proto",
            ],
            &["proto", include],
        )?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
