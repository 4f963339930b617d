//! Any byte string parses to a datagram or a typed error, and whatever parses re-emits to
//! bytes that parse to the same datagram.
#![no_main]

use braid_wire::Datagram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = Datagram::parse(data) {
        let mut buf = vec![0u8; d.buffer_len()];
        let n = d.emit(&mut buf).expect("a parsed datagram re-emits");
        assert_eq!(Datagram::parse(&buf[..n]).expect("re-emitted bytes parse"), d);
    }
});
