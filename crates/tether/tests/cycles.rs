//! G5: after many spawn/exit cycles the owner's descriptor and zombie counts
//! are back to baseline — every pipe closed, every keeper reaped.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use tether::{Command, Stdio};
use tether_testkit::{fd_count, zombie_children};

#[test]
fn thousand_cycles_leak_nothing() {
    // Warm up once: lazily created statics (the keeper path) are not leaks.
    Command::new("true").status().unwrap();
    let fds = fd_count();
    let zombies = zombie_children();
    for i in 0..1000 {
        let status = if i % 2 == 0 {
            Command::new("true")
                .stdin(Stdio::Null)
                .stdout(Stdio::Null)
                .status()
                .unwrap()
        } else {
            let out = Command::new("sh")
                .args(["-c", "echo out; echo err >&2; sleep 1000 &"])
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"out\n");
            out.status
        };
        assert!(status.success());
    }
    assert_eq!(fd_count(), fds, "descriptors leaked");
    assert_eq!(zombie_children(), zombies, "zombies left");
}
