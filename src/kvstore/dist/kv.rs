//! The data frames of ps-lite's key-value messages and how a worker spreads them over
//! the servers, as its `KVWorker` does: keys (little-endian u64, ascending), values (raw
//! bytes) and lengths (little-endian i32 bytes per key); a request sliced by the servers'
//! key ranges, and a pull's replies joined back in key order.

use super::frame::Frame;
use super::meta::DataType;
use crate::error::{Error, Result};
use std::ops::{Deref, Range};

/// One message's keys, values and per-key value lengths (lengths may be absent, then
/// every key has the same share of the values). The values are bytes of their own, or
/// the frame they arrived in (`V`), uncopied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KvPairs<V = Vec<u8>> {
    pub keys: Vec<u64>,
    pub vals: V,
    pub lens: Vec<i32>,
}

/// The labels ps-lite gives the first `frames` data frames of a message: keys `UINT64`,
/// values `OTHER` (MXNet's workers and servers send `char` arrays), lengths `INT32`.
pub fn data_types(frames: usize) -> Vec<DataType> {
    [DataType::Uint64, DataType::Other, DataType::Int32]
        .into_iter()
        .take(frames)
        .collect()
}

impl<V: Into<Frame>> KvPairs<V> {
    /// The data frames to send: keys, values (not copied), and lengths when there are any.
    pub fn into_frames(self) -> Vec<Frame> {
        let keys: Vec<u8> = self.keys.iter().flat_map(|k| k.to_le_bytes()).collect();
        let mut frames = vec![Frame::from(keys), self.vals.into()];
        if !self.lens.is_empty() {
            let lens: Vec<u8> = self.lens.iter().flat_map(|l| l.to_le_bytes()).collect();
            frames.push(Frame::from(lens));
        }
        frames
    }
}

impl KvPairs {
    /// The data frames' bytes: keys, values, and lengths when there are any.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        self.clone()
            .into_frames()
            .iter()
            .map(|f| f.bytes().to_vec())
            .collect()
    }

    /// The pairs in a message's data frames (none, for a message without data), copied.
    pub fn from_frames(frames: &[&[u8]]) -> Result<KvPairs> {
        let kv = KvPairs::take_frames(frames.to_vec(), || &[][..])?;
        Ok(KvPairs {
            keys: kv.keys,
            vals: kv.vals.to_vec(),
            lens: kv.lens,
        })
    }
}

impl<V: Deref<Target = [u8]>> KvPairs<V> {
    /// The pairs in a message's data frames, the value frame kept as it came; `empty`
    /// gives the values of a message without data.
    pub fn take_frames(frames: Vec<V>, empty: impl FnOnce() -> V) -> Result<KvPairs<V>> {
        let bad = |what: String| Error::Value(format!("malformed key-value message: {what}"));
        if frames.is_empty() {
            return Ok(KvPairs {
                keys: Vec::new(),
                vals: empty(),
                lens: Vec::new(),
            });
        }
        if !(2..=3).contains(&frames.len()) {
            return Err(bad(format!("{} data frames", frames.len())));
        }
        let mut frames = frames.into_iter();
        let keys = frames.next().expect("two frames or more");
        let vals = frames.next().expect("two frames or more");
        let lens = frames.next();
        if !keys.len().is_multiple_of(8) {
            return Err(bad(format!("a key frame of {} bytes", keys.len())));
        }
        let lens: &[u8] = lens.as_deref().unwrap_or(&[]);
        if !lens.len().is_multiple_of(4) {
            return Err(bad(format!("a length frame of {} bytes", lens.len())));
        }
        let pairs = KvPairs {
            keys: keys
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
            vals,
            lens: lens
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        };
        if !pairs.lens.is_empty() && pairs.lens.len() != pairs.keys.len() {
            return Err(bad(format!(
                "{} keys but {} lengths",
                pairs.keys.len(),
                pairs.lens.len()
            )));
        }
        Ok(pairs)
    }
}

/// Splits `send` by the servers' key `ranges` (ascending and adjacent): the part of each
/// server, `None` where it has no keys (that server is not sent anything).
pub fn slice(send: &KvPairs, ranges: &[Range<u64>]) -> Result<Vec<Option<KvPairs>>> {
    let keys = &send.keys;
    if keys.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::Value("keys of a request must be ascending".into()));
    }
    let per_key = if send.lens.is_empty() {
        if !keys.is_empty() && !send.vals.len().is_multiple_of(keys.len()) {
            return Err(Error::Value(format!(
                "{} value bytes do not divide among {} keys",
                send.vals.len(),
                keys.len()
            )));
        }
        Some(send.vals.len().checked_div(keys.len()).unwrap_or(0))
    } else if send.lens.len() != keys.len() {
        return Err(Error::Value(format!(
            "{} keys but {} lengths",
            keys.len(),
            send.lens.len()
        )));
    } else {
        None
    };
    let mut out = Vec::with_capacity(ranges.len());
    let (mut first_key, mut first_val) = (0usize, 0usize);
    for r in ranges {
        let start = first_key + keys[first_key..].partition_point(|k| *k < r.start);
        if start != first_key {
            return Err(Error::Value(format!(
                "key {} is below every server's key range",
                keys[first_key]
            )));
        }
        let end = start + keys[start..].partition_point(|k| *k < r.end);
        if end == start {
            out.push(None);
            continue;
        }
        let bytes = match per_key {
            Some(k) => k * (end - start),
            None => send.lens[start..end]
                .iter()
                .map(|&l| l.max(0) as usize)
                .sum(),
        };
        let vals = send
            .vals
            .get(first_val..first_val + bytes)
            .ok_or_else(|| {
                Error::Value(format!(
                    "the lengths ask for more than the {} value bytes",
                    send.vals.len()
                ))
            })?
            .to_vec();
        out.push(Some(KvPairs {
            keys: keys[start..end].to_vec(),
            vals,
            lens: if per_key.is_some() {
                Vec::new()
            } else {
                send.lens[start..end].to_vec()
            },
        }));
        first_key = end;
        first_val += bytes;
    }
    if first_key != keys.len() {
        return Err(Error::Value(format!(
            "key {} is above every server's key range",
            keys[first_key]
        )));
    }
    Ok(out)
}

/// Joins the servers' replies to a pull of `keys`: each reply's keys must be a run of
/// the request's, together all of them; values (and lengths, if `with_lens`) are
/// concatenated in key order.
pub fn join_pull(keys: &[u64], mut replies: Vec<KvPairs>, with_lens: bool) -> Result<KvPairs> {
    replies.retain(|r| !r.keys.is_empty());
    replies.sort_by_key(|r| r.keys[0]);
    let mut joined: KvPairs = KvPairs {
        keys: Vec::with_capacity(keys.len()),
        ..KvPairs::default()
    };
    for r in &replies {
        let at = joined.keys.len();
        if keys.get(at..at + r.keys.len()) != Some(&r.keys[..]) {
            return Err(Error::Value(format!(
                "a server answered a pull with keys {:?} that the request did not ask for",
                r.keys
            )));
        }
        if with_lens && r.lens.len() != r.keys.len() {
            return Err(Error::Value(
                "a server answered a pull without a length per key".into(),
            ));
        }
        joined.keys.extend_from_slice(&r.keys);
        joined.vals.extend_from_slice(&r.vals);
        if with_lens {
            joined.lens.extend_from_slice(&r.lens);
        }
    }
    if joined.keys.len() != keys.len() {
        return Err(Error::Value(format!(
            "a pull of {} keys got answers for {}",
            keys.len(),
            joined.keys.len()
        )));
    }
    Ok(joined)
}
