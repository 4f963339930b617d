//! Any byte string parses to an envelope or a typed error; whatever parses reads back the
//! same fields through its view, and a data header re-emits to the bytes it came from.
#![no_main]

use braid_secure::envelope::{Envelope, DATA_HEADER_LEN, MAC_LEN};
use braid_secure::session_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = session_id(data);
    let Ok(env) = Envelope::parse(data) else {
        return;
    };
    match env {
        Envelope::Initiation(i) => {
            assert_eq!(Some(i.session()), id);
            assert_eq!(i.mac1().len(), MAC_LEN);
            assert_eq!(i.mac2().len(), MAC_LEN);
            assert_eq!(i.mac2_input().len(), data.len() - MAC_LEN);
            assert_eq!(i.header().len() + i.noise().len() + 2 * MAC_LEN, data.len());
            let _ = i.sender();
        }
        Envelope::Response(r) => {
            assert_eq!(Some(r.session()), id);
            let _ = (r.epoch(), r.receiver(), r.noise());
        }
        Envelope::CookieReply(c) => {
            assert_eq!(Some(c.session()), id);
            let _ = (c.receiver(), c.nonce(), c.sealed_cookie());
        }
        Envelope::Data(h) => {
            assert_eq!(Some(h.session), id);
            let mut head = [0u8; DATA_HEADER_LEN];
            h.write(&mut head);
            assert_eq!(&head[..], &data[..DATA_HEADER_LEN]);
        }
    }
});
