//! 1 GiB without a single newline: memory stays under the ring cap plus a
//! small constant, the spill file holds the evicted head byte-exact up to
//! its cap, the rest is reported as dropped, and offsets never shift.

use crate::support::{BOUND, reset_peak_rss, settled, shell, status_kib};
use tether::registry::{Registry, RegistryConfig, WaitOptions, WaitOutcome};
use tether_testkit::{TagGuard, tagged_pids};

const GIB: u64 = 1 << 30;
const RING: usize = 1 << 20;
const SPILL_CAP: u64 = 256 << 20;
/// One pass of the generator's pattern; its 4093-byte period (a prime) is
/// not a divisor of any buffer size, so a misplaced byte shows.
const BLOCK: usize = 1 << 20;

fn block() -> Vec<u8> {
    (0..BLOCK)
        .map(|i| match ((i % 4093) * 31 + i / 4093) as u8 {
            b'\n' => b'*',
            b => b,
        })
        .collect()
}

/// Checks `data` against the stream at `offset` (stream = block repeated).
fn assert_stream(block: &[u8], offset: u64, data: &[u8]) {
    let mut at = (offset % BLOCK as u64) as usize;
    let mut rest = data;
    while !rest.is_empty() {
        let n = rest.len().min(BLOCK - at);
        assert!(
            rest[..n] == block[at..at + n],
            "mismatch near offset {offset}"
        );
        rest = &rest[n..];
        at = 0;
    }
}

/// Sizes of the files this process holds open under `dir`, named or not
/// (a nameless spill file links as `dir/#inode (deleted)`).
fn open_file_sizes_under(dir: &std::path::Path) -> Vec<u64> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(&dir)))
        // metadata follows the magic link to the open file itself.
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .map(|meta| meta.len())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_without_newlines_is_bounded_and_byte_exact() {
    // Counts of this process's descriptors, zombies and memory: alone.
    if !tether_testkit::alone(
        module_path!(),
        "one_gib_without_newlines_is_bounded_and_byte_exact",
    ) {
        return;
    }
    let guard = TagGuard::new("registry-1gib");
    let dir = tempfile::tempdir().unwrap();
    let spill_dir = dir.path().join("spill");
    let pattern = block();
    let source = dir.path().join("block");
    std::fs::write(&source, &pattern).unwrap();
    let registry = Registry::new(RegistryConfig {
        spill_dir: Some(spill_dir.clone()),
        ..RegistryConfig::default()
    });
    // Warm the runtime (threads, per-thread read buffers) before measuring.
    let warm = registry.run(shell(guard.tag(), "true")).await.unwrap();
    settled(&registry, warm.as_str()).await;
    reset_peak_rss();
    let baseline = status_kib("VmHWM");

    let script = format!(
        "i=0; while [ $i -lt {} ]; do cat '{}'; i=$((i+1)); done",
        GIB / BLOCK as u64,
        source.display()
    );
    let spec = shell(guard.tag(), &script)
        .max_memory(RING)
        .spill_cap(SPILL_CAP);
    let id = registry.run(spec).await.unwrap();
    // An early read, to compare once the ring has wrapped ~1000 times.
    let first = registry
        .wait(id.as_str(), WaitOptions::new(BOUND).until("(?s-u).{5000}"))
        .await
        .unwrap();
    assert!(matches!(first.outcome, WaitOutcome::Matched { .. }));
    let early = registry.read(id.as_str(), 1234, 3000).unwrap();
    assert_eq!((early.offset, early.data.len()), (1234, 3000));

    let info = settled(&registry, id.as_str()).await;
    let peak = status_kib("VmHWM");
    assert_eq!(info.exit.unwrap().code(), Some(0));
    assert_eq!(info.output_bytes, GIB);
    assert!(info.spill_error.is_none(), "{:?}", info.spill_error);
    let grown = peak.saturating_sub(baseline);
    assert!(
        grown < (RING as u64 / 1024) + 8 * 1024,
        "peak RSS grew {grown} KiB for a {} KiB ring",
        RING / 1024
    );

    // Offsets are stable: the same read gives the same bytes.
    let again = registry.read(id.as_str(), 1234, 3000).unwrap();
    assert_eq!(
        (again.offset, again.next_offset),
        (early.offset, early.next_offset)
    );
    assert!(again.data == early.data, "bytes at offset 1234 changed");
    assert_stream(&pattern, 1234, &again.data);

    // The head, from the spill file, byte-exact up to its cap.
    let mut at = 0;
    while at < SPILL_CAP {
        let chunk = registry.read(id.as_str(), at, 4 << 20).unwrap();
        assert_eq!((chunk.offset, chunk.dropped), (at, 0));
        assert_stream(&pattern, at, &chunk.data);
        at = chunk.next_offset;
    }
    assert_eq!(at, SPILL_CAP);
    // The spill file has no name: the directory is empty, and the one
    // file this process holds open under it has the cap's size.
    assert_eq!(std::fs::read_dir(&spill_dir).unwrap().count(), 0);
    assert_eq!(open_file_sizes_under(&spill_dir), vec![SPILL_CAP]);
    // Past the cap: the gap is reported, then the ring's bytes follow.
    let tail = registry.read(id.as_str(), at, 2 * RING).unwrap();
    assert_eq!(tail.offset, GIB - RING as u64);
    assert_eq!(tail.dropped, GIB - RING as u64 - SPILL_CAP);
    assert_eq!(tail.data.len(), RING);
    assert!(tail.eof);
    assert_stream(&pattern, tail.offset, &tail.data);

    drop(registry);
    assert_eq!(std::fs::read_dir(&spill_dir).unwrap().count(), 0);
    assert_eq!(open_file_sizes_under(&spill_dir), Vec::<u64>::new());
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
