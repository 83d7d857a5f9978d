//! The SEND_BATCH_MESSAGE body (Apache's `MessageDecoder.encodeMessages`): the client's encoding of
//! several messages that share one V2 header (topic, queue, sysFlag, born timestamp come from the
//! header).
//!
//! Layout of each element, big-endian, concatenated with nothing in between:
//! `i32 totalSize | i32 magic | i32 bodyCRC | i32 flag | i32 bodyLen + body | i16 propLen + props`
//! where `totalSize = 22 + bodyLen + propLen`. Clients write 0 for magic and CRC; the broker
//! computes the real CRC when it writes the CommitLog record, so both are ignored here.
//!
//! Invariants:
//! * [`decode_batch`] never panics and never reads outside the body; an error names the element
//!   index, the field and its byte offset in the body.
//! * `totalSize` must agree with the lengths inside the element: it is the only redundancy the
//!   format has, and a disagreement means the client and broker would split the body
//!   differently.
//! * Element bodies are zero-copy slices of the request body.
//! * An empty body decodes to no elements; whether that is acceptable is the handler's call.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Bytes of an element that are not body or properties.
pub const ELEMENT_OVERHEAD: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchItem {
    /// The message's user flag.
    pub flag: i32,
    pub body: Bytes,
    /// Properties string (`MessageDecoder.messageProperties2String`), e.g. this message's
    /// `UNIQ_KEY`.
    pub properties: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("batch message {index}: {field} at byte {offset} needs {needed} bytes, only {available} left")]
    Truncated {
        index: usize,
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("batch message {index}: {field} at byte {offset} is invalid: {reason}")]
    Invalid {
        index: usize,
        field: &'static str,
        offset: usize,
        reason: String,
    },
}

/// Bounds-checked reader over the batch body, tracking the element being read for errors.
struct Cursor<'a> {
    body: &'a Bytes,
    pos: usize,
    index: usize,
}

impl Cursor<'_> {
    fn take(
        &mut self,
        n: usize,
        field: &'static str,
    ) -> Result<std::ops::Range<usize>, BatchError> {
        let available = self.body.len().saturating_sub(self.pos);
        if n > available {
            return Err(BatchError::Truncated {
                index: self.index,
                field,
                offset: self.pos,
                needed: n,
                available,
            });
        }
        let range = self.pos..self.pos + n;
        self.pos += n;
        Ok(range)
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, BatchError> {
        let range = self.take(4, field)?;
        let mut word = [0u8; 4];
        word.copy_from_slice(self.body.get(range).unwrap_or(&[0; 4]));
        Ok(i32::from_be_bytes(word))
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, BatchError> {
        let range = self.take(2, field)?;
        let mut word = [0u8; 2];
        word.copy_from_slice(self.body.get(range).unwrap_or(&[0; 2]));
        Ok(i16::from_be_bytes(word))
    }

    fn invalid(&self, field: &'static str, offset: usize, reason: String) -> BatchError {
        BatchError::Invalid {
            index: self.index,
            field,
            offset,
            reason,
        }
    }

    /// Reads a length field, rejecting negative values.
    fn len(&mut self, field: &'static str, wide: bool) -> Result<usize, BatchError> {
        let at = self.pos;
        let v = if wide {
            self.i32(field)?
        } else {
            i32::from(self.i16(field)?)
        };
        usize::try_from(v).map_err(|_| self.invalid(field, at, format!("negative length {v}")))
    }
}

/// Splits a SEND_BATCH_MESSAGE body into its messages.
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchItem>, BatchError> {
    let mut items = Vec::new();
    let mut c = Cursor {
        body,
        pos: 0,
        index: 0,
    };
    while c.pos < body.len() {
        let start = c.pos;
        let total_size = c.len("totalSize", true)?;
        let _magic = c.i32("magic")?;
        let _body_crc = c.i32("bodyCRC")?;
        let flag = c.i32("flag")?;
        let body_len = c.len("bodyLen", true)?;
        let body_range = c.take(body_len, "body")?;
        let prop_len = c.len("propertiesLength", false)?;
        let prop_at = c.pos;
        let prop_range = c.take(prop_len, "properties")?;
        let expected = ELEMENT_OVERHEAD + body_len + prop_len;
        if total_size != expected {
            return Err(c.invalid(
                "totalSize",
                start,
                format!("{total_size} disagrees with the element's fields ({expected})"),
            ));
        }
        let properties = std::str::from_utf8(body.get(prop_range).unwrap_or_default())
            .map_err(|e| c.invalid("properties", prop_at, format!("not UTF-8: {e}")))?
            .to_owned();
        items.push(BatchItem {
            flag,
            body: body.slice(body_range),
            properties,
        });
        c.index += 1;
    }
    Ok(items)
}

/// Appends one element in the client's encoding (magic and CRC written as 0, as clients do).
///
/// Panics if `properties` exceeds `i16::MAX` bytes or `body` exceeds `i32::MAX` bytes: the format
/// cannot express them, and only tests and the bench tool encode batches.
pub fn encode_batch_item(flag: i32, body: &[u8], properties: &str, out: &mut BytesMut) {
    let prop_len = i16::try_from(properties.len()).expect("properties fit i16");
    let total = i32::try_from(ELEMENT_OVERHEAD + body.len() + properties.len())
        .expect("batch element fits i32");
    out.reserve(ELEMENT_OVERHEAD + body.len() + properties.len());
    out.put_i32(total);
    out.put_i32(0);
    out.put_i32(0);
    out.put_i32(flag);
    out.put_i32(total - ELEMENT_OVERHEAD as i32 - i32::from(prop_len));
    out.put_slice(body);
    out.put_i16(prop_len);
    out.put_slice(properties.as_bytes());
}

/// Encodes a whole batch body.
pub fn encode_batch(items: &[BatchItem]) -> Bytes {
    let mut out = BytesMut::new();
    for item in items {
        encode_batch_item(item.flag, &item.body, &item.properties, &mut out);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(flag: i32, body: &'static [u8], props: &str) -> BatchItem {
        BatchItem {
            flag,
            body: Bytes::from_static(body),
            properties: props.to_owned(),
        }
    }

    #[test]
    fn golden_element_bytes() {
        let mut out = BytesMut::new();
        encode_batch_item(7, b"hi", "K\u{1}V\u{2}", &mut out);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 28,   // totalSize = 22 + 2 + 4
            0, 0, 0, 0,    // magic
            0, 0, 0, 0,    // bodyCRC
            0, 0, 0, 7,    // flag
            0, 0, 0, 2, b'h', b'i',
            0, 4, b'K', 1, b'V', 2,
        ];
        assert_eq!(&out[..], expected);
        let items = decode_batch(&out.freeze()).unwrap();
        assert_eq!(items, vec![item(7, b"hi", "K\u{1}V\u{2}")]);
    }

    #[test]
    fn round_trip_and_zero_copy() {
        let items = vec![
            item(0, b"first", "UNIQ_KEY\u{1}A\u{2}"),
            item(1, b"", ""),
            item(-1, b"third body", "TAGS\u{1}x\u{2}"),
        ];
        let body = encode_batch(&items);
        let decoded = decode_batch(&body).unwrap();
        assert_eq!(decoded, items);
        let base = body.as_ptr() as usize;
        let first = decoded[0].body.as_ptr() as usize;
        assert!(first >= base && first < base + body.len());
        assert!(decode_batch(&Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn truncation_names_index_field_and_offset() {
        let body = encode_batch(&[item(0, b"abc", "p"), item(0, b"defg", "q")]);
        let first_len = ELEMENT_OVERHEAD + 3 + 1;
        // Cut inside the second element's body.
        let cut = body.slice(..first_len + 20 + 2);
        assert_eq!(
            decode_batch(&cut).unwrap_err(),
            BatchError::Truncated {
                index: 1,
                field: "body",
                offset: first_len + 20,
                needed: 4,
                available: 2
            }
        );
        for n in 0..body.len() {
            let r = decode_batch(&body.slice(..n));
            assert_eq!(r.is_ok(), n == 0 || n == first_len, "cut at {n}");
        }
    }

    #[test]
    fn corrupt_fields_are_errors() {
        let good = encode_batch(&[item(0, b"abc", "p")]).to_vec();

        let mut wrong_total = good.clone();
        wrong_total[3] += 1;
        let err = decode_batch(&Bytes::from(wrong_total)).unwrap_err();
        assert!(matches!(
            err,
            BatchError::Invalid {
                index: 0,
                field: "totalSize",
                offset: 0,
                ..
            }
        ));

        let mut negative_body = good.clone();
        negative_body[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        let err = decode_batch(&Bytes::from(negative_body)).unwrap_err();
        assert!(err.to_string().contains("bodyLen at byte 16"), "{err}");

        let mut negative_props = good.clone();
        negative_props[23..25].copy_from_slice(&(-3i16).to_be_bytes());
        assert!(matches!(
            decode_batch(&Bytes::from(negative_props)).unwrap_err(),
            BatchError::Invalid {
                field: "propertiesLength",
                ..
            }
        ));

        let mut bad_utf8 = good;
        bad_utf8[25] = 0xFF;
        assert!(matches!(
            decode_batch(&Bytes::from(bad_utf8)).unwrap_err(),
            BatchError::Invalid {
                field: "properties",
                offset: 25,
                ..
            }
        ));

        let huge = Bytes::from(i32::MAX.to_be_bytes().repeat(8));
        assert!(decode_batch(&huge).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(data in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_batch(&Bytes::from(data));
        }

        #[test]
        fn random_batches_round_trip(
            raw in prop::collection::vec((any::<i32>(), prop::collection::vec(any::<u8>(), 0..40), "\\PC{0,20}"), 0..6)
        ) {
            let items: Vec<BatchItem> = raw
                .into_iter()
                .map(|(flag, body, properties)| BatchItem { flag, body: Bytes::from(body), properties })
                .collect();
            prop_assert_eq!(decode_batch(&encode_batch(&items)).unwrap(), items);
        }
    }
}
