//! `tests/c/queries.c` built against the installed headers: every `SCIQuery` command and
//! sub-command the reference lists answers a value or `SCI_ERR_NOT_SUPPORTED`, never
//! `SCI_ERR_ILLEGAL_QUERY`.

mod c_support;
use c_support::*;

#[test]
fn every_listed_query_answers() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/queries.c"), &[]);
    let out = env.run(&exe, 4).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("passed"),
        "queries: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
