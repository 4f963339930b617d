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
