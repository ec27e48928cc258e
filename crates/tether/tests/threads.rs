//! No PDEATHSIG-on-thread-exit bug: a child spawned from a thread that then
//! exits — a plain thread, tokio `spawn_blocking`, a dropped runtime — keeps
//! running, because nothing in the owner is tied to the spawning thread.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};

use tether::{Child, Command, Stdio};

fn spawn_cat() -> Child {
    Command::new("cat")
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn cat")
}

/// A round trip through `cat` proves it is alive now.
fn assert_alive(child: &mut Child) {
    child.stdin.as_mut().unwrap().write_all(b"ping\n").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ping\n");
    assert!(child.try_wait().unwrap().is_none());
}

#[test]
fn spawned_from_a_thread_that_exited() {
    let mut child = std::thread::spawn(spawn_cat).join().unwrap();
    assert_alive(&mut child);
    child.kill().unwrap();
}

#[test]
fn spawned_from_spawn_blocking_after_the_runtime_is_gone() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(std::time::Duration::from_millis(1))
        .build()
        .unwrap();
    let mut child =
        runtime.block_on(async { tokio::task::spawn_blocking(spawn_cat).await.unwrap() });
    // Every worker and blocking thread of the runtime exits here.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    assert_alive(&mut child);
    child.kill().unwrap();
}
