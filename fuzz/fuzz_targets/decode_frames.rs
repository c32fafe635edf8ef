//! Every frame a daemon or client can receive goes through these decoders: none may panic,
//! and whatever decodes must encode back to a frame that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remora_proto::link::{BulkFrame, LinkMsg};
use remora_proto::{decode, encode, RequestFrame, ServerMsg};

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = decode::<RequestFrame>(data) {
        let again = encode(&f).expect("a decoded frame encodes");
        assert_eq!(decode::<RequestFrame>(&again).expect("and decodes again"), f);
    }
    if let Ok(m) = decode::<LinkMsg>(data) {
        assert_eq!(decode::<LinkMsg>(&encode(&m).expect("encodes")).expect("decodes"), m);
    }
    if let Ok(h) = BulkFrame::parse(data) {
        assert_eq!(BulkFrame::parse(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&h))).unwrap(), h);
    }
    if let Ok(m) = decode::<ServerMsg>(data) {
        let again = encode(&m).expect("a decoded message encodes");
        assert_eq!(decode::<ServerMsg>(&again).expect("and decodes again"), m);
    }
});
