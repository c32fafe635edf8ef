//! Unit tests of the DSM pager's pure parts.

use super::diff;

#[test]
fn diff_finds_and_merges_runs() {
    let a = vec![0u8; 100];
    let mut b = a.clone();
    b[3] = 1;
    b[10] = 1;
    b[50] = 2;
    b[51] = 2;
    assert_eq!(diff(&a, &b), vec![(3, 11), (50, 52)]);
    assert!(diff(&a, &a).is_empty());
}
