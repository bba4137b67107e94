//! Generates the gNMI message and service types from `proto/gnmi/gnmi.proto`
//! (our own schema file with the published names and field numbers).
//! protoc comes from the vendored crate, so building needs no system package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let include = protoc_bin_vendored::include_path()?;
    let include = include.to_str().ok_or("protoc include path is not UTF-8")?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(&["proto/gnmi/gnmi.proto"], &["proto", include])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
