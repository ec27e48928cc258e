//! `tether ps`: owners, sessions and processes from the ledger and the tag
//! scan; orphans marked; a quarantined ledger reported.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod orphans;
mod support;

use orphans::{Home, TREE_WITH_UNTAGGED_CHILD};
use serde_json::Value;
use tether_testkit::Tree;

fn owner(ps: &Value, pid: u32) -> &Value {
    ps["owners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["pid"] == pid)
        .unwrap_or_else(|| panic!("owner {pid} not listed: {ps}"))
}

#[test]
fn a_live_run_is_listed_with_its_keeper_main_process_and_descendants() {
    let home = Home::new("ps-live");
    let run = home.run(&[], Tree::SetsidDoubleFork.script(), 4);
    let journal = home.path().join(format!("runs/{}.run", run.session));
    assert!(journal.exists(), "the run recorded itself in a journal");
    let (code, ps) = home.json(&["ps"]);
    assert_eq!(code, 0);
    // Folded into the ledger, and kept: the run is live.
    assert!(journal.exists(), "a live run's journal was removed");
    let o = owner(&ps, run.owner);
    assert_eq!(o["status"]["status"], "alive");
    assert_eq!(o["tracked"], true);
    assert_eq!(o["purpose"], "run");
    assert!(o["command"].as_str().unwrap().contains("run"));
    let s = &o["sessions"][0];
    assert_eq!(s["id"], run.session.as_str());
    assert_eq!(s["state"]["state"], "running");
    assert_eq!(s["containment"], "subreaper");
    assert_eq!(s["tracked"], true);
    let procs = s["processes"].as_array().unwrap();
    let role = |r: &str| procs.iter().filter(|p| p["role"] == r).count();
    assert_eq!(role("keeper"), 1);
    assert_eq!(role("main"), 1);
    assert!(role("descendant") >= 3, "{s}");
    assert!(procs.iter().all(|p| p["orphaned"] == false));

    let (_, text) = home.text(&["ps"]);
    assert!(
        text.contains(&format!("OWNER {}  alive", run.owner)),
        "{text}"
    );
    let (_, tree) = home.text(&["ps", "--tree"]);
    assert!(tree.contains("└─ "), "{tree}");
}

#[test]
fn an_orphaned_tree_is_marked_orphaned_and_its_owner_dead() {
    let home = Home::new("ps-orphan");
    let run = home.orphan(&[], TREE_WITH_UNTAGGED_CHILD, 4);
    let (code, ps) = home.json(&["ps"]);
    assert_eq!(code, 0);
    let o = owner(&ps, run.owner);
    assert_eq!(o["status"]["status"], "dead", "{o}");
    // Its owner died by SIGKILL without an end line: recorded from its
    // journal as started, and the journal folded away.
    assert_eq!(o["tracked"], true);
    let runs: Vec<_> = std::fs::read_dir(home.path().join("runs"))
        .unwrap()
        .collect();
    assert!(runs.is_empty(), "{runs:?}");
    let s = &o["sessions"][0];
    assert_eq!(s["state"]["state"], "orphaned");
    let procs = s["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4, "spawn-tagged processes only: {s}");
    assert!(procs.iter().all(|p| p["orphaned"] == true));
    assert!(
        procs.iter().all(|p| p["role"] != "keeper"),
        "the keeper is dead"
    );
    let (_, text) = home.text(&["ps"]);
    assert!(text.contains("ORPHANED"), "{text}");
    assert!(text.contains("4 orphaned"), "{text}");
    // Issue 39: the longer roles of orphans (`main,orphan`) overran the
    // ROLE column and pushed their commands out of line.
    assert!(text.contains("main,orphan"), "{text}");
    assert_columns_line_up(&text);
}

/// Where each whitespace-separated word of `line` starts.
fn word_starts(line: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        if c != ' ' && previous == ' ' {
            starts.push(i);
        }
        previous = c;
    }
    starts
}

/// In every process table of a `tether ps` listing, each row's STATE,
/// ROLE and COMMAND start where their titles do.
fn assert_columns_line_up(text: &str) {
    let mut lines = text.lines().peekable();
    let mut tables = 0;
    while let Some(line) = lines.next() {
        if !(line.contains(" ROLE ") && line.trim_end().ends_with("COMMAND")) {
            continue;
        }
        tables += 1;
        let titles = word_starts(line);
        // PID PPID AGE (right-aligned), then STATE ROLE COMMAND.
        let wanted = &titles[3..6];
        while let Some(row) =
            lines.next_if(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        {
            let starts = word_starts(row);
            assert_eq!(
                &starts[3..6],
                wanted,
                "out of line:\n{line}\n{row}\n\n{text}"
            );
        }
    }
    assert!(tables > 0, "no process table in\n{text}");
}

#[test]
fn a_corrupt_ledger_is_reported_and_live_entries_rebuilt() {
    let home = Home::new("ps-corrupt");
    let live = home.run(&[], Tree::Nohup.script(), 4);
    let orphan = home.orphan(&[], Tree::SetsidDoubleFork.script(), 4);
    let ledger = home.path().join("ledger.db");
    std::fs::write(&ledger, b"this is no SQLite database\n").unwrap();

    let (code, ps) = home.json(&["ps"]);
    assert_eq!(code, 0);
    let q = &ps["ledger"]["quarantines"];
    assert_eq!(q.as_array().unwrap().len(), 1, "{ps}");
    let moved = q[0]["moved_to"].as_str().unwrap();
    assert!(moved.contains("ledger.db.corrupt-"));
    assert_eq!(
        std::fs::read(moved).unwrap(),
        b"this is no SQLite database\n"
    );
    assert_eq!(q[0]["rebuilt_owners"], 2);
    assert_eq!(q[0]["rebuilt_sessions"], 2);
    let l = owner(&ps, live.owner);
    assert_eq!(l["status"]["status"], "alive");
    assert_eq!(l["tracked"], true, "rebuilt into the fresh ledger");
    assert_eq!(l["sessions"][0]["id"], live.session.as_str());
    let o = owner(&ps, orphan.owner);
    assert_eq!(o["status"]["status"], "dead");
    assert_eq!(o["sessions"][0]["state"]["state"], "orphaned");

    // Said in text too, on every later listing.
    let (_, text) = home.text(&["ps"]);
    assert!(text.contains("the ledger was corrupt"), "{text}");
    assert!(
        text.contains("2 owners and 2 sessions were rebuilt"),
        "{text}"
    );
}

#[test]
fn an_unusable_ledger_still_lists_from_spawn_tags() {
    let home = Home::new("ps-no-ledger");
    let run = home.run(&[], Tree::Nohup.script(), 4);
    // Make the store unopenable: a directory where the file should be.
    let ledger = home.path().join("ledger.db");
    std::fs::remove_file(&ledger).unwrap();
    for side in ["ledger.db-wal", "ledger.db-shm"] {
        let _ = std::fs::remove_file(home.path().join(side));
    }
    std::fs::create_dir(&ledger).unwrap();
    let (code, ps) = home.json(&["ps"]);
    assert_eq!(code, 0);
    assert!(ps["ledger"]["error"].is_string(), "{ps}");
    let o = owner(&ps, run.owner);
    assert_eq!(o["status"]["status"], "alive");
    assert_eq!(o["tracked"], false);
    assert_eq!(o["sessions"][0]["tracked"], false);
    let (_, text) = home.text(&["ps"]);
    assert!(text.contains("ledger unavailable"), "{text}");
}

#[test]
fn all_lists_runs_that_ended() {
    let home = Home::new("ps-all");
    let out = home
        .tether(&["run", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let (_, ps) = home.json(&["ps"]);
    assert!(ps["owners"].as_array().unwrap().is_empty(), "{ps}");
    let (_, all) = home.json(&["ps", "--all"]);
    let owners = all["owners"].as_array().unwrap();
    let mine: Vec<_> = owners
        .iter()
        .filter(|o| o["install"] == home.install().id())
        .collect();
    assert_eq!(mine.len(), 1, "{all}");
    assert_eq!(mine[0]["status"]["status"], "dead");
    let s = &mine[0]["sessions"][0];
    assert_eq!(s["state"]["state"], "ended");
    assert_eq!(s["state"]["outcome"]["kind"], "exited");
    assert_eq!(s["state"]["outcome"]["code"], 7);
    assert_eq!(s["command"], "sh -c exit 7");
}
