//! A warm keeper that died while idle (killed, OOM) is not the command's
//! fault: the spawn falls back to a fresh keeper. (Own binary: the pool is
//! process-wide.)

use std::time::{Duration, Instant};

use tether::Command;

/// Our children that are keepers (the pool's idle ones, here).
fn keeper_children() -> Vec<u32> {
    tether::sys::children(std::process::id())
        .into_iter()
        .filter(|&pid| tether::sys::describe(pid).contains("__tether-keeper"))
        .collect()
}

#[test]
fn spawn_survives_a_dead_warm_keeper() {
    tether::set_warm_keepers(1);
    assert!(Command::new("true").status().unwrap().success());
    // The pool refills on a thread of its own; starting a process raises no
    // event we can wait on here, so look (bounded) until it is there.
    let deadline = Instant::now() + Duration::from_secs(10);
    let idle = loop {
        let idle = keeper_children();
        if !idle.is_empty() || Instant::now() > deadline {
            break idle;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(!idle.is_empty(), "the pool never started a warm keeper");
    for pid in idle {
        // SAFETY: kill(2) of our own unreaped child (the pool holds it).
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    }
    let out = Command::new("echo")
        .arg("still-works")
        .output()
        .expect("fell back to a fresh keeper");
    assert_eq!(out.stdout, b"still-works\n");
    tether::set_warm_keepers(0);
}
