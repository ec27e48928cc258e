//! Stamps this build of the library with an id that changes whenever its
//! source does (`TETHER_BUILD_ID`): owner and keeper speak a wire format
//! private to one build, so a keeper program of another build is refused
//! (see `contain/unix/keeper_entry.rs`) instead of misread.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.sort();
    // FNV-1a, 64 bits: an id, not a defence (a keeper program is as
    // trusted as the owner's own executable).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(
        std::env::var("CARGO_PKG_VERSION")
            .unwrap_or_default()
            .as_bytes(),
    );
    for file in &files {
        feed(file.to_string_lossy().as_bytes());
        feed(&std::fs::read(file).unwrap_or_default());
    }
    println!("cargo:rustc-env=TETHER_BUILD_ID={hash:016x}");
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}
