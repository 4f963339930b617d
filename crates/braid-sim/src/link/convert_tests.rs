use std::path::{Path, PathBuf};

use super::*;
use crate::link::TraceCache;

fn run(text: &str, opts: &Options) -> Conversion {
    convert(Path::new("fixture"), text, opts).unwrap()
}

fn opts(format: Format) -> Options {
    Options {
        format: Some(format),
        ..Options::default()
    }
}

/// Opportunities falling in `[from_ms, to_ms)` (by timestamp).
fn count_in(c: &Conversion, from_ms: u64, to_ms: u64) -> usize {
    c.opportunities_ms
        .iter()
        .filter(|&&t| t >= from_ms && t < to_ms)
        .count()
}

fn err(text: &str, opts: &Options) -> String {
    convert(Path::new("fixture"), text, opts)
        .unwrap_err()
        .to_string()
}

#[test]
fn mahimahi_with_no_options_is_the_identity() {
    let text = "0\n0\n3\n7\n7\n7\n12\n";
    let c = run(text, &Options::default());
    assert_eq!(c.format, Format::Mahimahi);
    assert_eq!(c.to_mahimahi(), text);
    // And on a real bundled trace.
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../traces/ATT-LTE-driving-2016.up"
    ));
    let real = std::fs::read_to_string(path).unwrap();
    let c = convert(path, &real, &Options::default()).unwrap();
    assert_eq!(c.to_mahimahi(), real);
    assert_eq!(c.duration_ms, 120_002);
}

#[test]
fn mahimahi_excerpt_and_scale() {
    // 4 opportunities per 10 ms over 100 ms.
    let text: String = (1..=100)
        .filter(|t| t % 10 == 0)
        .flat_map(|t| std::iter::repeat_n(t, 4))
        .map(|t| format!("{t}\n"))
        .collect();
    let c = run(
        &text,
        &Options {
            start_s: 0.02,
            duration_s: Some(0.05),
            ..Options::default()
        },
    );
    // Kept: 20..=70, shifted to 0..=50.
    assert_eq!(c.duration_ms, 50);
    assert_eq!(c.opportunities_ms.len(), 6 * 4);
    assert_eq!(c.opportunities_ms[0], 0);
    assert_eq!(*c.opportunities_ms.last().unwrap(), 50);
    // Scaling by 0.25 keeps one in four, the carried fraction making it exact.
    let c = run(
        &text,
        &Options {
            scale: 0.25,
            ..Options::default()
        },
    );
    assert_eq!(
        c.opportunities_ms,
        (1..=10).map(|t| t * 10).collect::<Vec<_>>()
    );
    let c = run(
        &text,
        &Options {
            scale: 1.5,
            ..Options::default()
        },
    );
    assert_eq!(c.opportunities_ms.len(), 60);
}

#[test]
fn six_column_uses_column_6_for_time_and_spreads_bytes_evenly() {
    // Column 2 jumps back (as in some Norway logs); it must not matter.
    let text = "1285675666 310761 59.88 10.76 150000 1000\n\
                1285675667 5 59.88 10.76 0 1000\n\
                1285675668 99999 59.88 10.76 300000 500\n";
    let c = run(text, &Options::default());
    assert_eq!(c.format, Format::SixColumn);
    assert_eq!(c.duration_ms, 2500);
    assert_eq!(c.opportunities_ms.len(), 300);
    // 100 packets over the first second, one every 10 ms; none in the silent second; 200 in
    // the last 500 ms, i.e. 4 per 10 ms.
    assert_eq!(&c.opportunities_ms[..3], &[10, 20, 30]);
    assert_eq!(count_in(&c, 0, 1001), 100);
    assert_eq!(count_in(&c, 1001, 2001), 0);
    assert_eq!(count_in(&c, 2001, 2501), 200);
    assert_eq!(c.mean_rate_bps(), 450_000.0 * 8.0 / 2.5);
    assert_eq!(c.input_mean_bps, c.mean_rate_bps());
}

#[test]
fn rounding_is_carried_so_the_mean_rate_is_exact() {
    // 1000 bytes a second: a packet every 1.5 s, though no second holds a whole one.
    let text: String = (1..=9).map(|t| format!("{t},1000\n")).collect();
    let c = run(&text, &Options::default());
    assert_eq!(c.format, Format::MultipathWireless);
    assert_eq!(c.opportunities_ms, vec![1500, 3000, 4500, 6000, 7500, 9000]);
    assert_eq!(c.mean_rate_bps(), 8000.0);
}

#[test]
fn nyu_mets_units_header_and_iperf_remnants() {
    let text = "Value,Unit\r\n\
                12,Mbits/sec\r\n\
                the,connection\r\n\
                ,\r\n\
                6000,Kbits/sec,,,\r\n\
                0,bits/sec\r\n\
                3000000,bits/sec\r\n";
    let c = run(text, &Options::default());
    assert_eq!(c.format, Format::NyuMets);
    assert_eq!(c.duration_ms, 4000);
    // 12 + 6 + 0 + 3 Mbit = 21 Mbit = 1750 packets.
    assert_eq!(c.opportunities_ms.len(), 1750);
    assert_eq!(count_in(&c, 0, 1001), 1000);
    assert_eq!(count_in(&c, 1001, 2001), 500);
    assert_eq!(count_in(&c, 2001, 3001), 0);
    assert_eq!(count_in(&c, 3001, 4001), 250);
    assert!(c.notes[0].contains("skipped 3 line(s)"), "{:?}", c.notes);
    assert!(c.notes[0].contains("1, 3, 4"), "{:?}", c.notes);
    // Multivariate rows: 8 numbers, Mbit/s first.
    let c = run(
        "1.2,4,0,-91,-19,1,0,2100\n2.4,4,0,-91,-19,1,0,2100\n",
        &Options::default(),
    );
    assert_eq!(c.format, Format::NyuMets);
    assert_eq!(c.opportunities_ms.len(), 300);
    assert_eq!(count_in(&c, 0, 1001), 100);
    // A number with an unknown unit is an error, not skipped.
    let e = err("5,Mbits/sec\n5,Mb/s\n", &opts(Format::NyuMets));
    assert!(e.contains("line 2") && e.contains("unit"), "{e}");
}

const UCC_HEADER: &str = "Timestamp,Longitude,Latitude,Speed,Operatorname,CellID,\
NetworkMode,RSRP,RSRQ,SNR,CQI,RSSI,DL_bitrate,UL_bitrate,State";

fn ucc_row(ts: &str, dl: &str, ul: &str) -> String {
    format!("{ts},-8.38,51.93,0,B,12,5G,-98,-10,3.0,12,-88,{dl},{ul},D\n")
}

#[test]
fn ucc_5g_rows_are_seconds_of_dl_bitrate_in_kbps() {
    // A repeated and a skipped timestamp, as the logger writes them.
    let text = format!(
        "{UCC_HEADER}\n{}{}{}{}",
        ucc_row("2019.12.16_07.22.43", "24000", "120"),
        ucc_row("2019.12.16_07.22.43", "0", "0"),
        ucc_row("2019.12.16_07.22.45", "12000", "60"),
        ucc_row("2019.12.16_07.22.46", "1200", "0"),
    );
    let c = run(&text, &Options::default());
    assert_eq!(c.format, Format::Ucc5g);
    assert_eq!(c.column.as_deref(), Some("DL_bitrate"));
    assert_eq!(c.duration_ms, 4000);
    // 24 + 0 + 12 + 1.2 Mbit = 3100 packets.
    assert_eq!(c.opportunities_ms.len(), 3100);
    assert_eq!(count_in(&c, 0, 1001), 2000);
    assert_eq!(count_in(&c, 1001, 2001), 0);
    assert_eq!(count_in(&c, 2001, 3001), 1000);
    assert!(c.notes[0].contains("span 4 s"), "{:?}", c.notes);
    let up = run(
        &text,
        &Options {
            column: Some("UL_bitrate".into()),
            ..Options::default()
        },
    );
    assert_eq!(up.opportunities_ms.len(), 15);
    let e = err(
        &text,
        &Options {
            column: Some("RSRP".into()),
            ..Options::default()
        },
    );
    assert!(e.contains("DL_bitrate, UL_bitrate"), "{e}");
    let bad = format!("{UCC_HEADER}\n{}", ucc_row("2019.12.16_07.22.43", "-", "0"));
    let e = err(&bad, &Options::default());
    assert!(e.contains("line 2") && e.contains("not logged"), "{e}");
}

#[test]
fn fivegophers_picks_a_carrier_and_closes_gaps() {
    let text = "protocol,num_tcp_conn,seq_num,Sprint_throughput_mbps,TMobile_throughput_mbps,Verizon_throughput_mbps\n\
                TCP,8,0,100,12,24\n\
                TCP,8,1,100,0,12\n\
                TCP,8,5,100,12,1.2\n";
    let e = err(text, &Options::default());
    assert!(e.contains("line 1") && e.contains("--column"), "{e}");
    let c = run(
        text,
        &Options {
            column: Some("Verizon".into()),
            scale: 0.5,
            ..Options::default()
        },
    );
    assert_eq!(c.format, Format::FiveGophers);
    assert_eq!(c.column.as_deref(), Some("Verizon_throughput_mbps"));
    // Three seconds (the gap 2..4 closed up), 37.2 Mbit halved = 1550 packets.
    assert_eq!(c.duration_ms, 3000);
    assert_eq!(c.opportunities_ms.len(), 1550);
    assert_eq!(count_in(&c, 0, 1001), 1000);
    assert_eq!(count_in(&c, 1001, 2001), 500);
    assert!((c.input_mean_bps - 12.4e6).abs() < 1e-3);
    assert!(c.notes[0].contains("2..4"), "{:?}", c.notes);
    let t = run(
        text,
        &Options {
            column: Some("TMobile_throughput_mbps".into()),
            ..Options::default()
        },
    );
    assert_eq!(count_in(&t, 1001, 2001), 0);
    let runs = "protocol,carrier,seq_num,throughput_mbps\nTCP,A,0,1\nTCP,A,1,1\nTCP,B,0,1\n";
    let e = err(runs, &Options::default());
    assert!(e.contains("line 4") && e.contains("several runs"), "{e}");
}

#[test]
fn multipath_wireless_seconds_with_outages_and_gaps() {
    let text = "1,1500000\n2,0\n3,750000\n5,150000\n";
    let c = run(text, &Options::default());
    assert_eq!(c.format, Format::MultipathWireless);
    assert_eq!(c.duration_ms, 4000);
    assert_eq!(c.opportunities_ms.len(), 1600);
    assert_eq!(count_in(&c, 0, 1001), 1000);
    assert_eq!(count_in(&c, 1001, 2001), 0);
    assert_eq!(count_in(&c, 2001, 3001), 500);
    assert!(c.notes[0].contains("4..4"), "{:?}", c.notes);
    // The excerpt keeps the share of a second that falls inside it.
    let c = run(
        text,
        &Options {
            start_s: 0.5,
            duration_s: Some(2.0),
            ..Options::default()
        },
    );
    assert_eq!(c.duration_ms, 2000);
    assert_eq!(c.opportunities_ms.len(), 500 + 250);
    let e = err("1,10\n1,10\n", &Options::default());
    assert!(e.contains("line 2") && e.contains("does not follow"), "{e}");
}

#[test]
fn a_trailing_outage_keeps_the_period() {
    // mahimahi's period is the last timestamp, so the last opportunity moves to the end.
    let c = run("1,3000\n2,0\n3,0\n", &Options::default());
    assert_eq!(c.opportunities_ms, vec![500, 3000]);
}

#[test]
fn detection_and_its_errors() {
    let cases = [
        ("0\n5\n9\n", Format::Mahimahi),
        ("1 2 3 4 5 6\n", Format::SixColumn),
        ("3.97,Mbits/sec\n", Format::NyuMets),
        ("Value,Unit\n1,Mbits/sec\n", Format::NyuMets),
        (UCC_HEADER, Format::Ucc5g),
        ("protocol,seq_num,throughput_mbps\n", Format::FiveGophers),
        ("1,5471526\n", Format::MultipathWireless),
    ];
    for (text, f) in cases {
        assert_eq!(detect(Path::new("x"), text).unwrap(), f, "{text}");
    }
    let e = detect(Path::new("x"), "hello world\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 1") && e.contains("--format"), "{e}");
    let e = detect(Path::new("x"), "5\n1,200\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2") && e.contains("line 1 looks like mahimahi"),
        "{e}"
    );
    // A malformed line after a recognised one is left to the parser, which names it.
    assert_eq!(
        detect(Path::new("x"), "1,100\n2,lots\n").unwrap(),
        Format::MultipathWireless
    );
    let e = detect(Path::new("x"), "\n\n").unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
}

#[test]
fn bad_inputs_and_options_name_what_is_wrong() {
    let e = err("1 2 3 4 5\n", &opts(Format::SixColumn));
    assert!(e.contains("line 1") && e.contains("expected 6"), "{e}");
    let e = err("1 2 3 4 100 0\n", &opts(Format::SixColumn));
    assert!(e.contains("0 ms"), "{e}");
    let e = err("0\n7\n3\n", &Options::default());
    assert!(
        e.contains("line 3") && e.contains("must not decrease"),
        "{e}"
    );
    let long = Options {
        duration_s: Some(5.0),
        ..Options::default()
    };
    let e = err("1,10000\n2,10000\n", &long);
    assert!(e.contains("past the end") && e.contains("2 s long"), "{e}");
    let e = err(
        "1,10\n",
        &Options {
            scale: 0.0,
            ..Options::default()
        },
    );
    assert!(e.contains("--scale"), "{e}");
    let e = err("1,10\n", &Options::default());
    assert!(e.contains("less than one"), "{e}");
    let e = err(
        "1,100000\n",
        &Options {
            column: Some("x".into()),
            ..Options::default()
        },
    );
    assert!(e.contains("--column applies only"), "{e}");
    let e = convert_file(Path::new("/nonexistent/trace"), &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/trace"), "{e}");
}

/// A fresh folder under the system's temporary one, unique to this process and test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-convert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn gzip_output_is_read_back_transparently() {
    let dir = scratch("gz");
    let c = run("1,1500000\n2,300000\n", &Options::default());
    let gz = dir.join("t.down.gz");
    write_trace_file(&gz, &c.to_mahimahi()).unwrap();
    let bytes = std::fs::read(&gz).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    // Deterministic: the same text gives the same bytes.
    write_trace_file(&dir.join("again.gz"), &c.to_mahimahi()).unwrap();
    assert_eq!(std::fs::read(dir.join("again.gz")).unwrap(), bytes);
    let mut cache = TraceCache::new();
    let by_gz = cache.load(&gz).unwrap();
    // A name without `.gz` falls back to the compressed file.
    let by_plain = cache.load(&dir.join("t.down")).unwrap();
    assert_eq!(by_gz.opportunities_ms(), c.opportunities_ms.as_slice());
    assert_eq!(by_plain.opportunities_ms(), c.opportunities_ms.as_slice());
    // A compressed input converts too.
    let back = convert_file(&gz, &Options::default()).unwrap();
    assert_eq!(back.opportunities_ms, c.opportunities_ms);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every converted trace shipped in traces/ (gzip-compressed) loads through the reader the
/// simulator and the lab use, with the length and period traces/README.md states.
#[test]
fn shipped_traces_load() {
    let shipped: [(&str, usize, u64); 31] = [
        ("5g-driving-sprint.down.gz", 264888, 120000),
        ("5g-driving-tmobile.down.gz", 97055, 120000),
        ("5g-driving-verizon.down.gz", 274892, 120000),
        ("ATT-LTE-driving.down.gz", 116060, 180000),
        ("TMobile-LTE-driving.down.gz", 184617, 180000),
        ("TMobile-LTE-short.down.gz", 194846, 139986),
        ("Verizon-LTE-short.down.gz", 58655, 140000),
        ("ghent-car.down.gz", 589228, 180000),
        ("ghent-foot.down.gz", 618575, 180000),
        ("mpw-13_1-cellular.down.gz", 81271, 100000),
        ("mpw-13_1-wifi.down.gz", 175441, 100000),
        ("mpw-21_1-cellular.down.gz", 380288, 100000),
        ("mpw-21_1-wifi.down.gz", 280667, 100000),
        ("mpw-7_1-cellular.down.gz", 395295, 100000),
        ("mpw-7_1-wifi.down.gz", 253776, 100000),
        ("mpw-8_1-cellular.down.gz", 375344, 100000),
        ("mpw-8_1-wifi.down.gz", 265676, 100000),
        ("norway-bus.down.gz", 24278, 180000),
        ("norway-car.down.gz", 21396, 180000),
        ("norway-ferry.down.gz", 26895, 180000),
        ("norway-metro.down.gz", 21989, 180000),
        ("norway-train.down.gz", 24867, 180000),
        ("norway-tram.down.gz", 17541, 180000),
        ("nyc-3g-subway.down.gz", 65401, 180000),
        ("nyc-4g-subway.down.gz", 107056, 180000),
        ("nyc-taxi.down.gz", 243157, 170818),
        ("nyc-timessquare.down.gz", 174600, 180000),
        ("nyu-bus.down.gz", 108886, 180000),
        ("nyu-subway.down.gz", 137899, 180000),
        ("ucc-5g-driving.down.gz", 156777, 180000),
        ("ucc-5g-static.down.gz", 1377956, 180000),
    ];
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces"));
    let mut cache = TraceCache::new();
    for (name, opportunities, period_ms) in shipped {
        let t = cache.load(&dir.join(name)).unwrap();
        assert_eq!(t.opportunities_ms().len(), opportunities, "{name}");
        assert_eq!(t.period_ms(), period_ms, "{name}");
    }
}
