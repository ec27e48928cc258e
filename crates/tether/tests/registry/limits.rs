//! Limits and retention: at the live limit `run` is refused with a clear
//! error and nothing running is touched; finished sessions are evicted by
//! count (oldest first) and by TTL from their exit; ids resolve by unique
//! prefix.

use std::time::{Duration, Instant};

use crate::support::{registry, settled, shell};
use tether::Error;
use tether::registry::{Registry, RegistryConfig, SessionState};
use tether_testkit::{TagGuard, tagged_pids, wait_for_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_limit_refuses_clearly_and_kills_nothing() {
    let guard = TagGuard::new("registry-live-limit");
    let registry = Registry::new(RegistryConfig {
        max_live: 2,
        ..RegistryConfig::default()
    });
    let a = registry
        .run(shell(guard.tag(), "exec sleep 1000"))
        .await
        .unwrap();
    let b = registry
        .run(shell(guard.tag(), "exec sleep 1000"))
        .await
        .unwrap();
    let err = registry
        .run(shell(guard.tag(), "exec sleep 1000"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TooManySessions { limit: 2 }), "{err}");
    assert!(err.to_string().contains("limit"), "{err}");
    for id in [&a, &b] {
        assert_eq!(
            registry.info(id.as_str()).unwrap().state,
            SessionState::Running
        );
    }
    // Both still running (a process caught inside execve can be missing
    // from one scan of /proc, so count until both show, bounded).
    assert_eq!(wait_for_count(guard.tag(), 2, crate::support::BOUND), 2);
    // A slot frees when a session settles.
    registry.kill(a.as_str(), Duration::ZERO).await.unwrap();
    let c = registry.run(shell(guard.tag(), "true")).await.unwrap();
    settled(&registry, c.as_str()).await;
    registry.shutdown().await.unwrap();
    assert!(matches!(
        registry.run(shell(guard.tag(), "true")).await,
        Err(Error::RegistryShutDown)
    ));
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_finished_sessions_are_evicted_first() {
    let guard = TagGuard::new("registry-max-finished");
    let registry = Registry::new(RegistryConfig {
        max_finished: 2,
        ..RegistryConfig::default()
    });
    let running = registry
        .run(shell(guard.tag(), "exec sleep 1000"))
        .await
        .unwrap();
    let mut finished = Vec::new();
    for i in 0..4 {
        let id = registry
            .run(shell(guard.tag(), &format!("echo {i}")))
            .await
            .unwrap();
        settled(&registry, id.as_str()).await;
        finished.push(id);
    }
    let listed: Vec<String> = registry.list().iter().map(|i| i.id.to_string()).collect();
    assert_eq!(
        listed,
        [&running, &finished[2], &finished[3]].map(|id| id.to_string())
    );
    assert!(matches!(
        registry.read(finished[0].as_str(), 0, 10),
        Err(Error::UnknownSession { .. })
    ));
    assert_eq!(
        registry.read(finished[3].as_str(), 0, 10).unwrap().data,
        b"3\n"
    );
    // The running session was never a candidate.
    assert!(registry.info(running.as_str()).unwrap().is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_sessions_expire_after_the_ttl_from_exit() {
    let guard = TagGuard::new("registry-ttl");
    let ttl = Duration::from_millis(300);
    let registry = Registry::new(RegistryConfig {
        finished_ttl: ttl,
        ..RegistryConfig::default()
    });
    let id = registry.run(shell(guard.tag(), "echo bye")).await.unwrap();
    let info = settled(&registry, id.as_str()).await;
    let exited = info.exited_at.unwrap();
    // Eviction raises no event a caller can wait on; look until it happens
    // (bounded), and check it did not happen before the TTL.
    let give_up = Instant::now() + Duration::from_secs(10);
    while registry.info(id.as_str()).is_ok() {
        assert!(Instant::now() < give_up, "never evicted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let age = exited.elapsed().unwrap();
    assert!(
        age >= ttl,
        "evicted {age:?} after exit, before the {ttl:?} TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_resolve_by_unique_prefix() {
    let guard = TagGuard::new("registry-prefix");
    let registry = registry();
    let id = registry.run(shell(guard.tag(), "echo hi")).await.unwrap();
    settled(&registry, id.as_str()).await;
    let full = id.as_str();
    assert_eq!(registry.resolve(&full[..4]).unwrap(), id);
    assert_eq!(registry.read(&full[..6], 0, 10).unwrap().data, b"hi\n");
    assert!(matches!(
        registry.resolve(&full[..3]),
        Err(Error::SessionIdTooShort { min: 4, .. })
    ));
    assert!(matches!(
        registry.resolve("0000000000000"),
        Err(Error::UnknownSession { .. })
    ));
    // Ambiguity needs two ids sharing a prefix; ids are random, so that
    // case is covered by the resolver's unit test.
}
