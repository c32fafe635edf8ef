//! `(offset, bytes)` runs on the wire with each run's bytes as one slice (see `serde_bytes`):
//! the same encoding as a plain `Vec<(u64, Vec<u8>)>`, without a visitor call per byte.

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(runs: &[(u64, Vec<u8>)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(runs.iter().map(|(o, d)| (*o, serde_bytes::Bytes::new(d))))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u64, Vec<u8>)>, D::Error> {
    let v = Vec::<(u64, serde_bytes::ByteBuf)>::deserialize(d)?;
    Ok(v.into_iter().map(|(o, b)| (o, b.into_vec())).collect())
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Plain(Vec<(u64, Vec<u8>)>);

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Fast(#[serde(with = "super")] Vec<(u64, Vec<u8>)>);

    #[test]
    fn same_bytes_on_the_wire() {
        let runs = vec![(7u64, vec![1u8, 2, 3]), (1 << 40, vec![0xff; 300])];
        let a = postcard::to_allocvec(&Plain(runs.clone())).unwrap();
        let b = postcard::to_allocvec(&Fast(runs.clone())).unwrap();
        assert_eq!(a, b);
        let back: Fast = postcard::from_bytes(&a).unwrap();
        assert_eq!(back.0, runs);
    }
}
