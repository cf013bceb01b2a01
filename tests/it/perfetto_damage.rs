//! Damaged Perfetto protobuf loads up to the damage with a warning naming the byte offset:
//! a truncated packet, a bad varint in the framing, bad zlib data in `compressed_packets`,
//! a sequence whose state-clearing first packet is lost; and any cut never panics.

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::ops::Range;
use std::path::Path;

use steplens_analysis::export::perfetto::write::write_timeline;
use steplens_ingest::{IngestError, LoadOptions, Timeline, load};

fn sample() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
    let t = load(&path, &LoadOptions::default(), None).expect("sample loads");
    let mut out = Vec::new();
    write_timeline(&t, None, &mut out).expect("export");
    out
}

fn varint(bytes: &[u8], mut pos: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[pos];
        pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return (v, pos);
        }
        shift += 7;
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Byte ranges of the `Trace.packet` records (tag and length included).
fn packets(bytes: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (_, after_tag) = varint(bytes, pos);
        let (len, body) = varint(bytes, after_tag);
        out.push(pos..body + len as usize);
        pos = body + len as usize;
    }
    out
}

fn load_bytes(bytes: &[u8]) -> Result<Timeline, IngestError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.pftrace");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .expect("write");
    load(&path, &LoadOptions::default(), None)
}

fn warning<'t>(t: &'t Timeline, code: &str) -> &'t steplens_ingest::model::Warning {
    t.sources[0]
        .warnings
        .iter()
        .find(|w| w.code == code)
        .unwrap_or_else(|| panic!("no {code} warning in {:?}", t.sources[0].warnings))
}

#[test]
fn truncated_packet_keeps_what_came_before() {
    let full = sample();
    let whole = load_bytes(&full).expect("whole file");
    let ps = packets(&full);
    let cut = &ps[ps.len() / 2];
    let t = load_bytes(&full[..cut.start + 3]).expect("loads up to the damage");
    let w = warning(&t, "damaged");
    assert_eq!(w.offset, Some(cut.start as u64));
    assert!(w.message.contains("runs past the end"), "{}", w.message);
    assert!(!t.slices.is_empty() && t.slices.len() < whole.slices.len());
}

#[test]
fn bad_varint_in_the_framing() {
    let full = sample();
    let ps = packets(&full);
    let at = ps[ps.len() / 3].start;
    let mut bytes = full[..at].to_vec();
    bytes.push(0x0A);
    bytes.extend_from_slice(&[0xFF; 11]);
    let t = load_bytes(&bytes).expect("loads up to the damage");
    let w = warning(&t, "damaged");
    assert_eq!(w.offset, Some(at as u64));
    assert!(w.message.contains("varint"), "{}", w.message);
}

/// The first packet, then every other packet zlib-compressed into one `compressed_packets`.
fn compressed(full: &[u8]) -> (Vec<u8>, usize) {
    let ps = packets(full);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&full[ps[1].start..]).expect("deflate");
    let data = z.finish().expect("deflate");
    let mut packet = vec![0x92, 0x03]; // field 50, length-delimited
    put_varint(&mut packet, data.len() as u64);
    packet.extend_from_slice(&data);
    let mut out = full[ps[0].clone()].to_vec();
    let offset = out.len();
    out.push(0x0A);
    put_varint(&mut out, packet.len() as u64);
    out.extend_from_slice(&packet);
    (out, offset)
}

#[test]
fn compressed_packets_are_inflated() {
    let full = sample();
    let whole = load_bytes(&full).expect("whole file");
    let (bytes, _) = compressed(&full);
    assert!(bytes.len() < full.len());
    let t = load_bytes(&bytes).expect("compressed file");
    assert_eq!(t.slices.len(), whole.slices.len());
    assert_eq!(t.slices.start, whole.slices.start);
    assert_eq!(t.flows.len(), whole.flows.len());
    assert!(t.sources[0].warnings.iter().all(|w| w.code != "damaged"));
}

#[test]
fn bad_zlib_keeps_what_inflated_before_it() {
    let full = sample();
    let whole = load_bytes(&full).expect("whole file");
    let (mut bytes, offset) = compressed(&full);
    let mid = offset + (bytes.len() - offset) / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5A;
    }
    let t = load_bytes(&bytes).expect("loads up to the damage");
    let w = warning(&t, "damaged");
    assert_eq!(w.offset, Some(offset as u64));
    assert!(w.message.contains("compressed"), "{}", w.message);
    assert!(t.slices.len() < whole.slices.len());
}

#[test]
fn packets_needing_lost_state_are_dropped_and_counted() {
    let full = sample();
    let ps = packets(&full);
    let t = load_bytes(&full[ps[0].end..]);
    // Every event needs the interned names the lost first packet's sequence reset set up.
    match t {
        Ok(t) => assert!(
            warning(&t, "data_loss")
                .message
                .contains("incremental state")
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn any_cut_loads_or_fails_cleanly() {
    let full = sample();
    for k in 1..40 {
        let cut = full.len() * k / 40;
        match load_bytes(&full[..cut]) {
            Ok(t) => assert!(
                t.sources[0].warnings.iter().any(|w| w.code == "damaged")
                    || packets(&full).iter().any(|p| p.end == cut)
            ),
            Err(IngestError::Damaged { .. } | IngestError::NotATrace { .. }) => {}
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
    let mut flipped = full;
    for i in (7..flipped.len()).step_by(97) {
        flipped[i] ^= 0xA5;
    }
    let _ = load_bytes(&flipped);
}
