//! The misuse matrix of the C APIs (issue 18 item 3): one table-driven C program per API
//! (`tests/c/misuse/`) calls every function with NULL, freed and wrong-kind handles, NULL
//! pointers, flags that do not belong, out-of-range offsets and sizes, and in states that
//! forbid the call; each row must answer the code the library documents, no program may
//! crash or hang, and nothing may be left on the node: neither while the program's session
//! is still open after it released what it made (the program holds on `HOLD` while this
//! test reads `remora status --json`), nor after it exited.
//!
//! The rows become the table of `docs/src/misuse.md`; the test fails when the committed
//! page differs from what it measured (run it with `REMORA_BLESS=1` to write the page).

mod c_support;
use c_support::*;
use remora_proto::NodeStatus;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const NODE: u32 = 4;

/// One row a program printed: `ROW|api|call|misuse|expected|got|ok`.
struct Row {
    api: String,
    call: String,
    misuse: String,
    expected: String,
    got: String,
    verdict: String,
}

impl Row {
    fn parse(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.strip_prefix("ROW|")?.split('|').collect();
        let [api, call, misuse, expected, got, verdict] = f[..] else { return None };
        Some(Row {
            api: api.into(),
            call: call.into(),
            misuse: misuse.into(),
            expected: expected.into(),
            got: got.into(),
            verdict: verdict.into(),
        })
    }
}

/// What `remora status --json` shows left on `NODE`, or nothing when its daemon is gone
/// (unless `open`: then the program's session must be listed).
fn leftovers(env: &Env, open: bool) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["status", "--json"])
        .env("REMORA_RUNTIME_DIR", env.runtime.path())
        .env("REMORA_NODE", NODE.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "remora status: {}", String::from_utf8_lossy(&out.stderr));
    let all: Vec<NodeStatus> = serde_json::from_slice(&out.stdout).expect("status --json parses");
    let mut left = Vec::new();
    if open && !all.iter().any(|s| s.node == NODE && !s.sessions.is_empty()) {
        left.push("no session of the program (status sees nothing)".to_string());
    }
    for st in all.iter().filter(|s| s.node == NODE) {
        let mut note = |what: &str, n: usize| {
            if n > 0 {
                left.push(format!("{n} {what}"));
            }
        };
        note("segments", st.segments.len());
        note("connections", st.connections.len());
        note("maps", st.maps.len());
        note("interrupts", st.interrupts.len());
        note("DMA queues", st.dma_queues.len());
        note("SCIF ports", st.scif.0 as usize);
        note("SCIF listeners", st.scif.1 as usize);
        note("SCIF connections", st.scif.2 as usize);
    }
    left
}

/// Wait up to 5 s for the node to hold nothing (a session's release is asynchronous).
fn settled(env: &Env, open: bool) -> Vec<String> {
    let t = Instant::now();
    loop {
        let left = leftovers(env, open);
        if left.is_empty() || t.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run one matrix program on `NODE`; returns its rows and every problem found.
fn run_matrix(env: &Env, exe: &Path, vars: &[(&str, &str)], problems: &mut Vec<String>) -> Vec<Row> {
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let mut cmd = env.run(exe, NODE);
    cmd.env("MISUSE_HOLD", "1").envs(vars.iter().copied());
    let mut child =
        Reap(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take();
    let mut rows = Vec::new();
    let mut text = String::new();
    let mut held = false;
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
                if line == "HOLD" {
                    held = true;
                    for what in settled(env, true) {
                        problems.push(format!("{name}: {what} left on the node while the session was open"));
                    }
                    if let Some(mut s) = stdin.take() {
                        let _ = s.flush();
                    }
                } else if let Some(row) = Row::parse(&line) {
                    rows.push(row);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                problems.push(format!("{name}: no end within 150 s (a call hung?)\n{text}"));
                return rows;
            }
        }
    }
    let status = wait_with_timeout(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    if !status.success() {
        problems.push(format!("{name}: exited with {status} (crash or failed rows)\n{text}{err}"));
    }
    if !held {
        problems.push(format!("{name}: never reached HOLD\n{text}{err}"));
    }
    for what in settled(env, false) {
        problems.push(format!("{name}: {what} left on the node after the program exited"));
    }
    for r in rows.iter().filter(|r| r.verdict != "ok") {
        problems.push(format!(
            "{name}: {} [{}] expected {}, got {} ({})",
            r.call, r.misuse, r.expected, r.got, r.verdict
        ));
    }
    rows
}

/// The page `docs/src/misuse.md`, from the rows.
fn page(rows: &[Row]) -> String {
    let mut s = String::from(
        "# The misuse matrix\n\n\
         <!-- Generated by crates/remora-cli/tests/c_misuse.rs from what the programs answered; \
         do not edit: run `REMORA_BLESS=1 cargo test -p remora-cli --test c_misuse`. -->\n\n\
         Every call of the four C libraries, made wrongly on purpose from a C program built \
         against the installed headers (`tests/c/misuse/`): NULL handles, freed (stale) handles, \
         handles of another kind, NULL pointers, flags that do not belong, offsets and sizes out \
         of range, and states that forbid the call. Each row is one call; *expected* is the code \
         the library documents for it (the capi crates' documentation, the headers, the vendor \
         references under `shared/reference/`), *got* is what it answered when the test last \
         ran. The test (`crates/remora-cli/tests/c_misuse.rs`) fails when a row differs, when a \
         program crashes or hangs, or when anything is left on the node: after each program \
         released what it made, while its session is still open, and again after it exited, \
         `remora status --json` must show no segment, connection, map, interrupt, DMA queue, \
         SCIF port, listener or connection. It also fails when this page differs from the rows \
         it measured.\n\n\
         Handles are keys of a table in every library, never pointers it follows, so a freed \
         handle is safe to pass and answers the API's bad-handle code. *hardware-only* rows are \
         calls that need Dolphin's adapter (`SCI_ERR_NOT_SUPPORTED` whatever the arguments). \
         *returns* means a call without any answer (no error argument) returned.\n",
    );
    let mut apis: Vec<&str> = Vec::new();
    for r in rows {
        if !apis.contains(&r.api.as_str()) {
            apis.push(&r.api);
        }
    }
    s.push_str("\n| API | rows | calls |\n| --- | ---: | ---: |\n");
    for api in &apis {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.api == *api).collect();
        let mut calls: Vec<&str> = mine.iter().map(|r| r.call.split(' ').next().unwrap()).collect();
        calls.sort_unstable();
        calls.dedup();
        s.push_str(&format!("| {api} | {} | {} |\n", mine.len(), calls.len()));
    }
    for api in &apis {
        s.push_str(&format!("\n## {api}\n\n| call | misuse | expected | got |\n| --- | --- | --- | --- |\n"));
        for r in rows.iter().filter(|r| r.api == *api) {
            let code = |c: &str| if c.contains(' ') { c.to_string() } else { format!("`{c}`") };
            s.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                r.call,
                r.misuse,
                code(&r.expected),
                code(&r.got)
            ));
        }
    }
    s
}

#[test]
fn every_c_call_answers_its_documented_code_to_misuse_and_leaves_nothing() {
    let env = Env::new();
    let dir = root().join("tests/c/misuse");
    let mut problems = Vec::new();
    let mut rows = Vec::new();
    for (src, build) in [
        ("sisci_misuse_seg.c", Env::build_sisci as fn(&Env, &Path) -> std::path::PathBuf),
        ("sisci_misuse_dma.c", Env::build_sisci),
        ("scif_misuse.c", Env::build_scif),
        ("rsm_misuse.c", Env::build_rsm),
        ("vipl_misuse.c", Env::build_vipl),
    ] {
        let path = dir.join(src);
        if !path.exists() {
            continue;
        }
        let exe = build(&env, &path);
        rows.extend(run_matrix(&env, &exe, &[], &mut problems));
    }
    assert!(problems.is_empty(), "misuse matrix:\n{}", problems.join("\n"));
    let doc = root().join("docs/src/misuse.md");
    let want = page(&rows);
    if std::env::var_os("REMORA_BLESS").is_some() {
        std::fs::write(&doc, &want).unwrap();
    }
    let have = std::fs::read_to_string(&doc).unwrap_or_default();
    assert!(
        have == want,
        "docs/src/misuse.md differs from the rows the matrix measured: run \
         `REMORA_BLESS=1 cargo test -p remora-cli --test c_misuse` to regenerate it"
    );
}
