//! Packs the `tether` binary's relative relocations (`-z
//! pack-relative-relocs`, DT_RELR) where the toolchain makes a program so
//! linked that runs here: its ~14,000 relative relocations then take 4 KiB
//! instead of ~310 KiB of `.rela.dyn` (8.26 → 7.96 MiB stripped, with the
//! smaller SQLite of `.cargo/config.toml`: issue 39 item 6), and a start
//! reads and applies less (docs/benchmarks.md#release-binary).
//!
//! GNU ld (2.38+) packs only when the C library supports DT_RELR (glibc
//! 2.36+) and ignores the option otherwise; other linkers pack
//! regardless, and a C library that does not apply DT_RELR would then run
//! the program with its pointers unrelocated. So the option is used only
//! when a small program linked with it, here, runs and finds its pointers
//! right — never when cross-compiling (nothing to run it on).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.contains("linux-gnu") {
        return;
    }
    if packed_relocations_work() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

fn packed_relocations_work() -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    // A table of pointers: each one a relative relocation in a PIE.
    let probe = "static const char *words[] = {\"a\", \"b\", \"c\", \"d\"};\n\
                 int main(void) { return !(words[0][0] == 'a' && words[3][0] == 'd'); }\n";
    if std::fs::write(&source, probe).is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let linked = Command::new(cc)
        .args(["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}
