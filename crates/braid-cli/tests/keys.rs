//! `braid genkey` and `braid pubkey` as a user runs them.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn braid(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("braid runs");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(stdin.as_bytes())
        .expect("braid reads its input");
    child.wait_with_output().expect("braid finishes")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn genkey_prints_a_new_key_each_time_and_pubkey_derives_its_public_key() {
    let a = braid(&["genkey"], "");
    let b = braid(&["genkey"], "");
    assert!(a.status.success(), "{}", text(&a.stderr));
    let key = text(&a.stdout);
    assert_eq!(key.len(), 45, "{key:?}");
    assert!(key.ends_with("=\n"));
    assert_ne!(a.stdout, b.stdout);
    let p = braid(&["pubkey"], &key);
    assert!(p.status.success(), "{}", text(&p.stderr));
    let public = text(&p.stdout);
    assert_eq!(public.len(), 45);
    assert_ne!(public, key);
}

#[test]
fn pubkey_matches_x25519_on_the_rfc_7748_vector() {
    // RFC 7748 §6.1, Alice: what `wg pubkey` prints for this private key too.
    let p = braid(
        &["pubkey"],
        "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n",
    );
    assert!(p.status.success(), "{}", text(&p.stderr));
    assert_eq!(
        text(&p.stdout),
        "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n"
    );
}

#[test]
fn a_bad_private_key_is_one_clear_line() {
    for (input, says) in [
        ("", "empty"),
        ("not a key at all", "not base64"),
        (
            "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LC=",
            "43 characters",
        ),
    ] {
        let p = braid(&["pubkey"], input);
        assert!(!p.status.success());
        let err = text(&p.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{input:?}: {err}");
        assert!(p.stdout.is_empty());
    }
}
