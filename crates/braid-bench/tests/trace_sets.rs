//! The recorded-link sets of `trace-bulk`, `trace-web` and `trace-pairs` name traces the
//! repository ships, and each bonds two or three links.

use std::path::Path;

use braid_bench::trace_sets::{missing, SETS};

#[test]
fn every_set_names_shipped_traces_and_has_two_or_three_links() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces");
    for set in SETS {
        assert!(
            (2..=3).contains(&set.links.len()),
            "set {} has {} links, expected 2 or 3",
            set.name,
            set.links.len()
        );
    }
    let absent = missing(SETS, &dir);
    assert!(
        absent.is_empty(),
        "traces/ lacks {} (named by the sets in crates/braid-bench/src/trace_sets.rs)",
        absent.join(", ")
    );
}
