//! Configuration parsing, validation and trace-file error tests. Every error test checks the
//! message text, since that is what a user sees.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{LossParams, QueueLimit};
use super::*;

const ATT_UP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../traces/ATT-LTE-driving-2016.up"
);

fn parse(text: &str) -> Result<LinkConfig, String> {
    toml::from_str::<LinkConfig>(text).map_err(|e| e.to_string())
}

fn validate_err(text: &str) -> String {
    let cfg = parse(text).expect("parses");
    match cfg.validate() {
        Ok(()) => panic!("expected {text:?} to be rejected"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn full_example_parses_and_validates() {
    let cfg = parse(
        r#"
        rate_mbps = 10
        delay_ms = 20
        jitter_ms = 2
        reorder = true
        queue_ms = 100
        loss = { model = "gilbert-elliott", mean = 0.02, burst = 3.0 }
        blackouts = [{ start_s = 5, duration_s = 0.5 }]
        random_blackouts = { mean_interval_s = 30, mean_duration_s = 2 }
        corruption = { bit_error_rate = 1e-6 }
        "#,
    )
    .expect("parses");
    cfg.validate().expect("valid");
    assert_eq!(cfg.rate_mbps, Some(10.0));
    assert!(cfg.reorder);
    assert_eq!(cfg.blackouts.len(), 1);
    // Serialising and parsing again gives the same configuration.
    let again = parse(&toml::to_string(&cfg).expect("serialises")).expect("parses");
    assert_eq!(again, cfg);
}

#[test]
fn unknown_key_is_named() {
    let e = parse("rate_mbps = 10\nrat_kbps = 5").expect_err("unknown key");
    assert!(e.contains("unknown field `rat_kbps`"), "{e}");
    let e = parse(
        r#"rate_mbps = 1
        loss = { model = "bernoulli", p = 0.1, q = 0.2 }"#,
    )
    .expect_err("unknown loss key");
    assert!(e.contains("unknown field `q`"), "{e}");
    let e = parse(
        r#"rate_mbps = 1
        loss = { model = "pareto", p = 0.1 }"#,
    )
    .expect_err("unknown model");
    assert!(e.contains("unknown variant `pareto`"), "{e}");
    let e = parse("rate_mbps = 1\nblackouts = [{ start_s = 1, length_s = 2 }]")
        .expect_err("unknown blackout key");
    assert!(e.contains("unknown field `length_s`"), "{e}");
}

#[test]
fn bad_rates_are_named() {
    let e = validate_err("rate_mbps = -1");
    assert_eq!(
        e,
        "`rate_mbps` is -1, expected a finite number greater than 0"
    );
    let e = validate_err("rate_kbps = nan");
    assert!(e.starts_with("`rate_kbps` is NaN"), "{e}");
    let e = validate_err("rate_mbps = 0");
    assert!(e.contains("`rate_mbps` is 0"), "{e}");
}

#[test]
fn capacity_must_be_given_exactly_once() {
    let e = validate_err(
        r#"rate_mbps = 1
        trace = "x.up""#,
    );
    assert!(e.contains("`rate_mbps` and `trace`"), "{e}");
    let e = validate_err("rate_mbps = 1\nrate_kbps = 1");
    assert!(e.contains("`rate_mbps` and `rate_kbps`"), "{e}");
    let e = validate_err("delay_ms = 1");
    assert!(
        e.contains("set exactly one of `rate_mbps`, `rate_kbps` or `trace`"),
        "{e}"
    );
    let e = validate_err("rate_mbps = 1\ntrace_offset_s = 3");
    assert!(e.contains("`trace_offset_s`"), "{e}");
}

#[test]
fn other_values_are_checked() {
    let cases = [
        ("rate_mbps = 1\ndelay_ms = -3", "`delay_ms` is -3"),
        ("rate_mbps = 1\njitter_ms = inf", "`jitter_ms` is inf"),
        ("rate_mbps = 1\nqueue_packets = 0", "`queue_packets` is 0"),
        ("rate_mbps = 1\nqueue_ms = -1", "`queue_ms` is -1"),
        (
            "rate_mbps = 1\nqueue_ms = 10\nqueue_bytes = 3000",
            "`queue_bytes` and `queue_ms`",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"bernoulli\", p = 1.5 }",
            "`loss.p` is 1.5, expected a probability in [0, 1]",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\", p_good_bad = 0.1, p_bad_good = -0.2 }",
            "`loss.p_bad_good` is -0.2",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\", p_good_bad = 0.1 }",
            "both `p_good_bad` and `p_bad_good` are required",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\", mean = 0.1, p_bad_good = 0.2 }",
            "not both",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\", mean = 0.1, burst = 0.5 }",
            "`loss.burst` is 0.5",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\", mean = 0.9, burst = 1 }",
            "`mean` is too high",
        ),
        (
            "rate_mbps = 1\nloss = { model = \"gilbert-elliott\" }",
            "set `p_good_bad` and `p_bad_good`",
        ),
        (
            "rate_mbps = 1\nblackouts = [{ start_s = 1, duration_s = 1 }, { start_s = 1, duration_s = -1 }]",
            "`blackouts[1].duration_s` is -1",
        ),
        (
            "rate_mbps = 1\nrandom_blackouts = { mean_interval_s = 0, mean_duration_s = 1 }",
            "`random_blackouts.mean_interval_s` is 0, expected a finite number of seconds of at least 0.000001 (1 µs)",
        ),
        (
            "rate_mbps = 1\ncorruption = { bit_error_rate = 2 }",
            "`corruption.bit_error_rate` is 2",
        ),
    ];
    for (text, expected) in cases {
        let e = validate_err(text);
        assert!(e.contains(expected), "{text:?}: {e:?} lacks {expected:?}");
    }
}

#[test]
fn gilbert_elliott_forms_resolve() {
    let explicit = LossConfig::GilbertElliott {
        p_good_bad: Some(0.01),
        p_bad_good: Some(0.25),
        loss_good: None,
        loss_bad: Some(0.8),
        mean: None,
        burst: None,
    };
    let Ok(LossParams::GilbertElliott(ge)) = explicit.resolve() else {
        panic!("resolves");
    };
    assert_eq!(ge.loss_good, 0.0);
    assert_eq!(ge.loss_bad, 0.8);
    assert!((ge.mean_loss() - 0.8 * 0.01 / 0.26).abs() < 1e-12);

    let ge = LossConfig::gilbert_elliott_from_mean_burst(0.05, 4.0);
    assert!((ge.mean_loss() - 0.05).abs() < 1e-12);
    assert_eq!(ge.p_bad_good, 0.25);
}

#[test]
fn missing_trace_file_is_named() {
    let path = "/nonexistent/dir/Verizon.up";
    let cfg = LinkConfig::with_trace(path);
    let e = Link::new(&cfg, &mut TraceCache::new(), Rng::new(1)).expect_err("missing file");
    let msg = e.to_string();
    assert!(
        msg.starts_with("cannot read trace file `/nonexistent/dir/Verizon.up`: "),
        "{msg}"
    );
    let e = cfg
        .mean_rate_bps(&mut TraceCache::new())
        .expect_err("missing file");
    assert!(e.to_string().contains(path), "{e}");
}

#[test]
fn malformed_trace_names_file_and_line() {
    let p = Path::new("synthetic.up");
    let err = |text: &str| Trace::parse(p, text).expect_err("malformed").to_string();
    assert_eq!(
        err("1\n2\nabc\n4\n"),
        "trace file `synthetic.up`, line 3: `abc` is not a millisecond timestamp (a non-negative integer)"
    );
    assert!(err("1\n5\n4\n").contains("line 3: timestamp 4 is smaller"));
    assert!(err("1\n\n4\n").contains("line 2: empty line"));
    assert!(err("-3\n4\n").contains("line 1: `-3`"));
    assert!(err("").contains("line 1: no timestamps"));
    assert!(err("0\n0\n").contains("line 2: the last timestamp is 0"));

    // Through a real file and the cache, too.
    let dir = std::env::temp_dir().join(format!("braid-link-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("bad.up");
    std::fs::write(&file, "0\n1\n2.5\n").expect("write");
    let e = TraceCache::new().load(&file).expect_err("malformed");
    let expected = format!("trace file `{}`, line 3: `2.5`", file.display());
    assert!(e.to_string().starts_with(&expected), "{e}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn trace_parses_like_mahimahi() {
    let t = Trace::parse(Path::new("t"), "0\n3\n3\r\n 7 \n10").expect("parses");
    assert_eq!(t.opportunities_ms(), &[0, 3, 3, 7, 10]);
    assert_eq!(t.period_ms(), 10);
    // 5 × 1500 bytes every 10 ms.
    assert_eq!(t.mean_rate_bps(), 6e6);
}

#[test]
fn trace_cache_loads_once() {
    let mut cache = TraceCache::new();
    let a = cache.load(Path::new(ATT_UP)).expect("bundled trace");
    let b = cache.load(Path::new(ATT_UP)).expect("bundled trace");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.opportunities_ms().len(), 19101);
    assert_eq!(a.period_ms(), 120_002);
}

#[test]
fn mean_rate_and_queue_limits() {
    let mut cache = TraceCache::new();
    let cfg = parse("rate_kbps = 1500").expect("parses");
    assert_eq!(cfg.mean_rate_bps(&mut cache).expect("rate"), 1.5e6);
    let trace = LinkConfig::with_trace(PathBuf::from(ATT_UP));
    let r = trace.mean_rate_bps(&mut cache).expect("trace rate");
    assert!((r - 19101.0 * 12_000.0 / 120.002).abs() < 1e-6, "{r}");

    // Default: 250 ms of the rate, at least ten full packets.
    let ten = LinkConfig::with_rate_mbps(10.0);
    assert_eq!(ten.queue_limit(10e6), QueueLimit::Bytes(312_500));
    assert_eq!(ten.queue_limit(100e3), QueueLimit::Bytes(15_000));
    let ms = parse("rate_mbps = 8\nqueue_ms = 50").expect("parses");
    assert_eq!(ms.queue_limit(8e6), QueueLimit::Bytes(50_000));
    let pk = parse("rate_mbps = 8\nqueue_packets = 7").expect("parses");
    assert_eq!(pk.queue_limit(8e6), QueueLimit::Packets(7));
}
