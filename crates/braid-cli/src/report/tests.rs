use super::*;

/// Real `braid bench all --quick --json --skip-lab` lines of two fast simulator benchmarks
/// and a lab benchmark it skipped.
const SAVED: &str = include_str!("testdata/bench-all-quick.jsonl");

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The `<svg>...</svg>` blocks of a page.
fn svgs(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("<svg") {
        let end = rest[i..].find("</svg>").expect("an <svg> is closed") + i + "</svg>".len();
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn saved_lines_make_a_page_with_a_section_and_valid_svg_per_benchmark() {
    let entries = all::parse_lines(SAVED).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.bench.as_str()).collect();
    assert_eq!(names, ["osctp-fig9", "prism-fig7", "lab-bulk"]);
    let dir = out_dir("saved");
    let page = write_report(&entries, &dir).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<section id=").count(), entries.len());
    for e in &entries {
        assert!(html.contains(&format!("<section id=\"{}\">", e.bench)));
        assert!(html.contains(&format!("href=\"#{}\"", e.bench)));
        assert!(html.contains(&esc(&e.command())));
    }
    assert!(html.contains("Skipped: --skip-lab"));
    // Two plots per benchmark that ran (headline; the paper's form), none for the skipped.
    let svgs = svgs(&html);
    assert_eq!(svgs.len(), 4);
    let mut all_texts = Vec::new();
    for svg in svgs {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_owned())
            .collect();
        assert!(texts.iter().any(|t| t.starts_with("goal ")), "{texts:?}");
        assert!(doc
            .descendants()
            .any(|n| n.has_tag_name("polyline") || n.has_tag_name("rect")));
        all_texts.extend(texts);
    }
    // The per-scheduler plots name every system of the saved report in their legends.
    for system in [
        "braid",
        "adas",
        "weighted-round-robin",
        "lazy",
        "smallest-rtt",
    ] {
        assert!(all_texts.iter().any(|t| t == system), "{system}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn lines_round_trip_and_failures_show() {
    let entries = all::parse_lines(SAVED).unwrap();
    let again: Vec<String> = entries.iter().map(|e| e.to_json().to_string()).collect();
    let reparsed = all::parse_lines(&again.join("\n")).unwrap();
    assert_eq!(reparsed.len(), entries.len());
    assert_eq!(reparsed[1].to_json(), entries[1].to_json());

    let failed = Entry {
        bench: "pluribus-fig8".into(),
        quick: true,
        seed: 3,
        wall_s: 1.5,
        outcome: Outcome::Failed("no <route>".into()),
        text: None,
    };
    let line = failed.to_json().to_string();
    let back = all::parse_lines(&line).unwrap();
    assert!(matches!(&back[0].outcome, Outcome::Failed(e) if e == "no <route>"));
    assert_eq!(
        back[0].command(),
        "braid bench pluribus-fig8 --quick --seed 3 --json"
    );
    let html = render(&back);
    assert!(html.contains("Failed: no &lt;route&gt;"));
    assert!(html.contains(">failed</td>"));
    assert!(svgs(&html).is_empty());

    assert!(all::parse_lines("{\"x\": 1}").is_err());
    assert!(all::parse_lines("not json").is_err());
}

/// A stand-in benchmark that reports, fails or panics as told.
struct Fake(&'static str, u8);

impl braid_bench::Bench for Fake {
    fn name(&self) -> &'static str {
        self.0
    }
    fn summary(&self) -> &'static str {
        "a stand-in"
    }
    fn needs_root(&self) -> bool {
        self.1 == 3
    }
    fn run(
        &self,
        opts: &mut braid_bench::Options<'_>,
    ) -> Result<braid_bench::BenchReport, braid_bench::BenchError> {
        opts.progress("half", 0.5);
        match self.1 {
            0 | 3 => Ok(braid_bench::BenchReport {
                bench: self.0.into(),
                seed: opts.seed,
                quick: opts.quick,
                systems: serde_json::json!({ "braid": 2.0, "other": 1.0 }),
                headline: braid_bench::Headline::new("x", 2.0, Some(1.5), 1.8, true),
                headlines: Vec::new(),
                notes: vec!["a note".into()],
                table: braid_bench::Table::new(["system"]),
            }),
            1 => Err(braid_bench::BenchError::Other("it broke".into())),
            _ => panic!("it panicked"),
        }
    }
}

#[test]
fn a_failed_or_panicking_benchmark_is_recorded_and_the_rest_still_run() {
    let list: [&dyn braid_bench::Bench; 4] = [
        &Fake("fails", 1),
        &Fake("panics", 2),
        &Fake("lab", 3),
        &Fake("works", 0),
    ];
    let plan = Plan {
        quick: true,
        seed: 7,
        skip_lab: true,
    };
    let mut seen = Vec::new();
    let entries = all::run_list(&list, plan, |e, _| seen.push(e.bench.clone()));
    assert_eq!(seen, ["fails", "panics", "lab", "works"]);
    assert!(matches!(&entries[0].outcome, Outcome::Failed(e) if e == "it broke"));
    assert!(matches!(&entries[1].outcome, Outcome::Failed(e) if e.contains("it panicked")));
    assert!(matches!(&entries[2].outcome, Outcome::Skipped(e) if e.starts_with("--skip-lab")));
    let Outcome::Ran(r) = &entries[3].outcome else {
        panic!("{:?}", entries[3].outcome)
    };
    assert_eq!(r["seed"], 7);
    assert!(entries[3].text.as_deref().unwrap().contains("note: a note"));
    // The page: a section each, the flat per-system numbers as bars beside the headline.
    let html = render(&entries);
    assert_eq!(html.matches("<section id=").count(), 4);
    assert_eq!(svgs(&html).len(), 2);
    assert!(html.contains("Failed: it broke"));
}

/// The registry's benchmark names, in its order: what every generated table must list.
fn registry_names() -> Vec<&'static str> {
    braid_bench::list().iter().map(|b| b.name()).collect()
}

#[test]
fn the_docs_table_lists_exactly_the_registrys_benchmarks() {
    let mut entries = all::parse_lines(SAVED).unwrap();
    // A result the registry does not know (a renamed benchmark's old JSON) is left out.
    entries.push(Entry {
        bench: "gone-bench".into(),
        quick: true,
        seed: 1,
        wall_s: 0.0,
        outcome: Outcome::Failed("x".into()),
        text: None,
    });
    let t = table::markdown(&entries);
    assert_eq!(table::row_names(&t), registry_names(), "{t}");
    let row = |name: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("| `{name}` ")))
            .unwrap()
            .to_owned()
    };
    // The saved osctp-fig9 ran; its headline's numbers are in its row.
    let saved = &entries[0];
    let Outcome::Ran(r) = &saved.outcome else {
        panic!()
    };
    let hl = &r["headline"];
    let fig9 = row(&saved.bench);
    assert!(fig9.contains(hl["metric"].as_str().unwrap()), "{fig9}");
    assert!(
        fig9.contains(&plot::trim_number(hl["value"].as_f64().unwrap())),
        "{fig9}"
    );
    assert!(row("lab-bulk").contains("skipped: --skip-lab"));
    // Every registered benchmark the saved lines lack is there, marked.
    let not_run = registry_names()
        .into_iter()
        .filter(|n| entries.iter().all(|e| e.bench != *n))
        .count();
    assert!(not_run > 0);
    assert_eq!(t.matches("| not run | - |").count(), not_run, "{t}");
}

#[test]
fn the_table_is_spliced_between_its_markers() {
    let doc = format!(
        "# B\n\nintro\n{}\nold\n{}\n\n## next\n",
        table::BEGIN,
        table::END
    );
    let t = table::markdown(&all::parse_lines(SAVED).unwrap());
    let once = table::splice(&doc, &t).unwrap();
    assert_eq!(table::splice(&once, &t).unwrap(), once, "idempotent");
    assert!(!once.contains("old") && once.ends_with("\n\n## next\n"));
    assert_eq!(table::extract(&once).unwrap().trim(), t.trim());
    assert!(table::splice("# B\n", &t).is_err());
}

/// docs/benchmarks.md's committed table lists exactly the registry's benchmarks: a
/// benchmark added to (or removed from) the registry needs the table regenerated.
#[test]
fn docs_benchmarks_md_lists_exactly_the_registrys_benchmarks() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/benchmarks.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let t = table::extract(&doc).expect("docs/benchmarks.md has the table's marker lines");
    assert_eq!(
        table::row_names(t),
        registry_names(),
        "docs/benchmarks.md's headline table disagrees with the registry: rerun \
         `braid report --docs docs/benchmarks.md --from FILE` (FILE from \
         `braid bench all --json`; a benchmark without a line in FILE shows as not run)"
    );
}

/// Files combined with `--from A --from B`: a later `skipped` (a run without root) keeps an
/// earlier result, a later failure or run replaces it, and a full run's row shows the quick
/// figure beside its own.
#[test]
fn combined_files_keep_results_over_skips_and_show_full_beside_quick() {
    let saved = all::parse_lines(SAVED).unwrap();
    let fig9 = saved[0].clone();
    let Outcome::Ran(quick_report) = &fig9.outcome else {
        panic!()
    };
    let skipped = |bench: &str| Entry {
        bench: bench.into(),
        quick: true,
        seed: 1,
        wall_s: 0.0,
        outcome: Outcome::Skipped("not root".into()),
        text: None,
    };
    // A lab result from one file, the same benchmark skipped in the next.
    let mut lab = skipped("lab-bulk");
    let mut lab_report = quick_report.clone();
    lab_report["bench"] = "lab-bulk".into();
    lab_report["headline"]["value"] = 1.25.into();
    lab.outcome = Outcome::Ran(lab_report);
    // osctp-fig9 in full, beside the saved quick run.
    let mut full = fig9.clone();
    full.quick = false;
    let mut full_report = quick_report.clone();
    full_report["headline"]["value"] = 0.5.into();
    full_report["headline"]["met"] = false.into();
    full.outcome = Outcome::Ran(full_report);
    let mut failed_later = skipped("prism-fig7");
    failed_later.outcome = Outcome::Failed("broke".into());

    let merged = all::merge(
        [
            saved.clone(),
            vec![lab, full, skipped("lab-bulk"), skipped("osctp-fig9")],
            vec![failed_later],
        ]
        .concat(),
    );
    let names: Vec<(&str, bool)> = merged.iter().map(|e| (e.bench.as_str(), e.quick)).collect();
    assert_eq!(
        names,
        [
            ("osctp-fig9", true),
            ("prism-fig7", true),
            ("lab-bulk", true),
            ("osctp-fig9", false)
        ]
    );
    assert!(
        matches!(merged[0].outcome, Outcome::Ran(_)),
        "a skip kept the run"
    );
    assert!(matches!(&merged[1].outcome, Outcome::Failed(e) if e == "broke"));
    assert!(matches!(&merged[2].outcome, Outcome::Ran(r) if r["headline"]["value"] == 1.25));

    let t = table::markdown(&merged);
    let row = |name: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("| `{name}` ")))
            .unwrap()
            .to_owned()
    };
    let quick_value = plot::trim_number(quick_report["headline"]["value"].as_f64().unwrap());
    let fig9_row = row("osctp-fig9");
    assert!(
        fig9_row.contains(&format!("| 0.5 (full); {quick_value} (quick) | no |")),
        "{fig9_row}"
    );
    assert!(row("lab-bulk").contains("| 1.25 (quick) |"), "{t}");
    assert!(row("prism-fig7").contains("failed: broke"), "{t}");
    assert!(t.starts_with("2 of "), "{t}");
    assert!(t.contains("(2 quick, 1 full; seed 1)"), "{t}");
    // The page keeps both runs of osctp-fig9 apart.
    let html = render(&merged);
    for id in ["osctp-fig9-quick", "osctp-fig9-full", "lab-bulk"] {
        assert_eq!(
            html.matches(&format!("<section id=\"{id}\">")).count(),
            1,
            "{id}"
        );
        assert!(html.contains(&format!("href=\"#{id}\"")), "{id}");
    }
}
