//! Output is bytes, not text: invalid UTF-8 and NUL bytes come back
//! exactly; merged stdout/stderr keep their arrival order; separate
//! streams keep their own offsets.

use crate::support::{read_all, registry, settled, shell};
use tether::Error;
use tether::registry::{OutputMode, Stream};
use tether_testkit::{TagGuard, tagged_pids};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_nul_are_preserved() {
    let guard = TagGuard::new("registry-bytes");
    let registry = registry();
    let id = registry
        .run(shell(
            guard.tag(),
            r"printf 'a\000b\377\376\303\050\000\n\200end'",
        ))
        .await
        .unwrap();
    settled(&registry, id.as_str()).await;
    assert_eq!(
        read_all(&registry, id.as_str()),
        b"a\0b\xff\xfe\xc3\x28\0\n\x80end"
    );
    let partial = registry.read(id.as_str(), 2, 3).unwrap();
    assert_eq!(
        (&partial.data[..], partial.offset, partial.next_offset),
        (&b"b\xff\xfe"[..], 2, 5)
    );
    assert!(!partial.eof, "eof only when the read reaches the end");
    let end = registry.read(id.as_str(), 5, 100).unwrap();
    assert!(end.eof);
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_streams_keep_arrival_order() {
    let guard = TagGuard::new("registry-merged");
    let registry = registry();
    let script = "for i in 1 2 3 4 5 6 7 8; do echo out$i; echo err$i >&2; done";
    let id = registry.run(shell(guard.tag(), script)).await.unwrap();
    settled(&registry, id.as_str()).await;
    let expected: String = (1..=8).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(read_all(&registry, id.as_str()), expected.as_bytes());
    assert!(matches!(
        registry.read_stream(id.as_str(), Stream::Stderr, 0, 10),
        Err(Error::NoSeparateStderr { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_streams_have_their_own_offsets() {
    let guard = TagGuard::new("registry-separate");
    let registry = registry();
    let spec = shell(
        guard.tag(),
        "echo to-out; echo to-err >&2; printf '\\377' >&2",
    )
    .output(OutputMode::Separate);
    let id = registry.run(spec).await.unwrap();
    let info = settled(&registry, id.as_str()).await;
    assert_eq!((info.output_bytes, info.stderr_bytes), (7, Some(8)));
    let out = registry
        .read_stream(id.as_str(), Stream::Output, 0, 100)
        .unwrap();
    let err = registry
        .read_stream(id.as_str(), Stream::Stderr, 0, 100)
        .unwrap();
    assert_eq!(out.data, b"to-out\n");
    assert_eq!(err.data, b"to-err\n\xff");
    assert!(out.eof && err.eof);
}
