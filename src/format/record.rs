//! The CommitLog record: one message as RocketMQ lays it out on disk, and the end-of-file BLANK.
//!
//! Owns: the byte layout (Apache's `CommitLog.calMsgLength` and `DefaultAppendMessageCallback`),
//! the BLANK (`CommitLog.BLANK_MAGIC_CODE`), the sysFlag bits (`MessageSysFlag`), the writer
//! ([`encode_into`], straight into a mapped file) and the validating reader ([`check`]).
//!
//! Layout (big-endian; `BH`/`SH` = 8 for an IPv4 host, 20 for IPv6, chosen by sysFlag bits 4/5):
//! `TOTALSIZE i32 | MAGICCODE | BODYCRC | QUEUEID | FLAG | QUEUEOFFSET i64 | PHYSICALOFFSET i64 |
//! SYSFLAG | BORNTIMESTAMP i64 | BORNHOST BH | STORETIMESTAMP i64 | STOREHOSTADDRESS SH |
//! RECONSUMETIMES | PREPARED_TX_OFFSET i64 | BODYLEN i32 + body | TOPICLEN (v1: i8, v2: i16) +
//! topic | PROPLEN i16 + properties`. Fixed overhead for v1 with two IPv4 hosts is 91 bytes.
//!
//! Invariants:
//! * [`encode_into`] writes exactly [`record_len`] bytes and never allocates (hot path). Bits 4/5
//!   of the stored sysFlag always agree with the host address families, whatever the caller
//!   passed, so the record is self-describing.
//! * [`check`] never panics on any input: every read is bounds-checked and every length is
//!   validated; a record is accepted only if TOTALSIZE equals the length recomputed from its
//!   fields (a reader must not trust one without the other).

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, Bytes};
use thiserror::Error;

use super::{java, msg_id, properties};

/// Magic of a v1 record (topic length in one signed byte).
pub const MAGIC_V1: u32 = 0xDAA3_20A7;
/// Magic of a v2 record (topic length in two bytes; 5.x, for topics longer than 127 bytes).
pub const MAGIC_V2: u32 = 0xDAA3_20AB;
/// Magic of the end-of-file BLANK.
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
/// A file always keeps room for this much BLANK, so a message never ends exactly at file end.
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

pub const MAGIC_POS: usize = 4;
pub const BODY_CRC_POS: usize = 8;
pub const QUEUE_ID_POS: usize = 12;
pub const FLAG_POS: usize = 16;
pub const QUEUE_OFFSET_POS: usize = 20;
pub const PHY_OFFSET_POS: usize = 28;
pub const SYS_FLAG_POS: usize = 36;
pub const BORN_TIMESTAMP_POS: usize = 40;
pub const BORN_HOST_POS: usize = 48;

/// Position of STORETIMESTAMP, which moves by 12 when the born host is IPv6.
#[inline]
pub const fn store_timestamp_pos(sys_flag: i32) -> usize {
    BORN_HOST_POS + sys_flag::born_host_len(sys_flag)
}

/// `MessageSysFlag` bits.
pub mod sys_flag {
    pub const COMPRESSED_FLAG: i32 = 0x1;
    pub const MULTI_TAGS_FLAG: i32 = 0x2;
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// `type = sys_flag & TRANSACTION_TYPE_MASK`.
    pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
    pub const BORNHOST_V6_FLAG: i32 = 0x10;
    pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
    pub const NEED_UNWRAP_FLAG: i32 = 0x40;
    pub const INNER_BATCH_FLAG: i32 = 0x80;
    pub const COMPRESSION_LZ4_TYPE: i32 = 0x100;
    pub const COMPRESSION_ZSTD_TYPE: i32 = 0x200;
    pub const COMPRESSION_ZLIB_TYPE: i32 = 0x300;
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;

    #[inline]
    pub const fn transaction_type(sys_flag: i32) -> i32 {
        sys_flag & TRANSACTION_TYPE_MASK
    }
    /// Stored size of BORNHOST: 4-byte IP + 4-byte port, or 16 + 4.
    #[inline]
    pub const fn born_host_len(sys_flag: i32) -> usize {
        if sys_flag & BORNHOST_V6_FLAG != 0 {
            20
        } else {
            8
        }
    }
    /// Stored size of STOREHOSTADDRESS.
    #[inline]
    pub const fn store_host_len(sys_flag: i32) -> usize {
        if sys_flag & STOREHOSTADDRESS_V6_FLAG != 0 {
            20
        } else {
            8
        }
    }
    /// `sys_flag` with bits 4/5 set exactly from the two address families.
    #[inline]
    pub fn with_host_flags(sys_flag: i32, born_v6: bool, store_v6: bool) -> i32 {
        let mut f = sys_flag & !(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG);
        if born_v6 {
            f |= BORNHOST_V6_FLAG;
        }
        if store_v6 {
            f |= STOREHOSTADDRESS_V6_FLAG;
        }
        f
    }
}

/// Record format version, told apart by the magic code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    V1,
    V2,
}

impl MessageVersion {
    /// v2 iff the topic is longer than 127 bytes (5.x `autoMessageVersionOnTopicLen`), so short
    /// topics stay readable by 4.9.x, which knows only v1.
    #[inline]
    pub const fn for_topic(topic_len_bytes: usize) -> MessageVersion {
        if topic_len_bytes > i8::MAX as usize {
            MessageVersion::V2
        } else {
            MessageVersion::V1
        }
    }
    #[inline]
    pub const fn magic(self) -> u32 {
        match self {
            MessageVersion::V1 => MAGIC_V1,
            MessageVersion::V2 => MAGIC_V2,
        }
    }
    #[inline]
    pub const fn from_magic(magic: u32) -> Option<MessageVersion> {
        match magic {
            MAGIC_V1 => Some(MessageVersion::V1),
            MAGIC_V2 => Some(MessageVersion::V2),
            _ => None,
        }
    }
    /// Bytes of the TOPICLEN field.
    #[inline]
    pub const fn topic_len_size(self) -> usize {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }
    /// Longest topic the length field can express (it is read as signed).
    #[inline]
    pub const fn max_topic_len(self) -> usize {
        match self {
            MessageVersion::V1 => i8::MAX as usize,
            MessageVersion::V2 => i16::MAX as usize,
        }
    }
}

/// CRC stored in BODYCRC: IEEE CRC-32 with the sign bit cleared, as Java stores it in an int.
#[inline]
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// Everything the writer needs except what is only known inside the put lock (queue offset,
/// physical offset, store timestamp). Owned, because it crosses an actor mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_tx_offset: i64,
    pub body: Bytes,
    /// Trusted by the writer: computed outside the lock (see [`NewMessage::fill_derived`]).
    pub body_crc: u32,
    pub properties: String,
    /// Whether the producer's reply waits for the flush (SYNC_FLUSH) and a slave's ack
    /// (SYNC_MASTER): Java's `Message.isWaitStoreMsgOK` of the message in memory, which need
    /// not match the stored properties — 4.9.4 stores a send without its `WAIT` whatever its
    /// value, and a scheduled delivery with the producer's `WAIT` but does not wait. Not stored.
    pub wait_store_msg_ok: bool,
}

impl NewMessage {
    /// A message with flag, sysFlag (apart from host bits), reconsume times and prepared offset
    /// at 0, waiting for the store (`wait_store_msg_ok`), and the derived fields filled.
    pub fn new(
        topic: impl Into<String>,
        queue_id: i32,
        body: Bytes,
        properties: String,
        born_timestamp: i64,
        born_host: SocketAddr,
        store_host: SocketAddr,
    ) -> NewMessage {
        let mut m = NewMessage {
            topic: topic.into(),
            queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp,
            born_host,
            store_host,
            reconsume_times: 0,
            prepared_tx_offset: 0,
            body,
            body_crc: 0,
            properties,
            wait_store_msg_ok: true,
        };
        m.fill_derived();
        m
    }

    /// Recomputes `body_crc` and sets sysFlag bits 4/5 from the host address families.
    pub fn fill_derived(&mut self) {
        self.body_crc = body_crc(&self.body);
        self.sys_flag = self.effective_sys_flag();
    }

    /// The sysFlag as it will be stored: bits 4/5 forced to match the hosts.
    #[inline]
    pub fn effective_sys_flag(&self) -> i32 {
        sys_flag::with_host_flags(
            self.sys_flag,
            self.born_host.is_ipv6(),
            self.store_host.is_ipv6(),
        )
    }

    #[inline]
    pub fn version(&self) -> MessageVersion {
        MessageVersion::for_topic(self.topic.len())
    }
}

/// Record length from its variable parts (the same formula readers use to validate TOTALSIZE).
#[inline]
pub const fn record_len_parts(
    body_len: usize,
    topic_len: usize,
    props_len: usize,
    sys_flag: i32,
    version: MessageVersion,
) -> usize {
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + sys_flag::born_host_len(sys_flag)
        + 8
        + sys_flag::store_host_len(sys_flag)
        + 4
        + 8
        + 4
        + body_len
        + version.topic_len_size()
        + topic_len
        + 2
        + props_len
}

/// Bytes [`encode_into`] will write for `msg`.
#[inline]
pub fn record_len(msg: &NewMessage) -> usize {
    record_len_parts(
        msg.body.len(),
        msg.topic.len(),
        msg.properties.len(),
        msg.effective_sys_flag(),
        msg.version(),
    )
}

/// Why a message cannot be laid out as a record (the store maps these to MESSAGE_ILLEGAL /
/// PROPERTIES_SIZE_EXCEEDED before taking the lock).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("topic is {len} bytes; a record holds at most {max}")]
    TopicTooLong { len: usize, max: usize },
    #[error("properties are {len} bytes; a record holds at most {max}", max = properties::MAX_PROPERTIES_LEN)]
    PropertiesTooLong { len: usize },
    #[error("record would be {len} bytes; TOTALSIZE holds at most {max}", max = i32::MAX)]
    RecordTooLong { len: usize },
}

/// Validates the length fields [`encode_into`] relies on; returns the record length.
pub fn check_encodable(msg: &NewMessage) -> Result<usize, EncodeError> {
    let version = msg.version();
    if msg.topic.len() > version.max_topic_len() {
        return Err(EncodeError::TopicTooLong {
            len: msg.topic.len(),
            max: version.max_topic_len(),
        });
    }
    if msg.properties.len() > properties::MAX_PROPERTIES_LEN {
        return Err(EncodeError::PropertiesTooLong {
            len: msg.properties.len(),
        });
    }
    let len = record_len(msg);
    if len > i32::MAX as usize {
        return Err(EncodeError::RecordTooLong { len });
    }
    Ok(len)
}

#[inline]
fn put_host(w: &mut &mut [u8], host: SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => w.put_slice(&ip.octets()),
        IpAddr::V6(ip) => w.put_slice(&ip.octets()),
    }
    // Java stores the port as an int.
    w.put_i32(i32::from(host.port()));
}

/// Writes the record for `msg` at the start of `dst` (a slice of a mapped file) and returns its
/// length. No allocation, no intermediate buffer. The version follows the topic length.
///
/// Preconditions: [`check_encodable`] passed (lengths fit their fields) and `dst` holds at least
/// [`record_len`] bytes; violating the latter panics.
pub fn encode_into(
    dst: &mut [u8],
    msg: &NewMessage,
    queue_offset: i64,
    phy_offset: i64,
    store_timestamp: i64,
) -> usize {
    let version = msg.version();
    let flag = msg.effective_sys_flag();
    let len = record_len_parts(
        msg.body.len(),
        msg.topic.len(),
        msg.properties.len(),
        flag,
        version,
    );
    debug_assert_eq!(check_encodable(msg), Ok(len));
    assert!(
        dst.len() >= len,
        "encode_into: record needs {len} bytes, destination has {}",
        dst.len()
    );
    // `&mut [u8]` as BufMut advances through the slice: sequential big-endian writes.
    let mut w: &mut [u8] = &mut dst[..len];
    w.put_i32(len as i32);
    w.put_u32(version.magic());
    w.put_u32(msg.body_crc);
    w.put_i32(msg.queue_id);
    w.put_i32(msg.flag);
    w.put_i64(queue_offset);
    w.put_i64(phy_offset);
    w.put_i32(flag);
    w.put_i64(msg.born_timestamp);
    put_host(&mut w, msg.born_host);
    w.put_i64(store_timestamp);
    put_host(&mut w, msg.store_host);
    w.put_i32(msg.reconsume_times);
    w.put_i64(msg.prepared_tx_offset);
    w.put_i32(msg.body.len() as i32);
    w.put_slice(&msg.body);
    match version {
        MessageVersion::V1 => w.put_u8(msg.topic.len() as u8),
        MessageVersion::V2 => w.put_i16(msg.topic.len() as i16),
    }
    w.put_slice(msg.topic.as_bytes());
    w.put_i16(msg.properties.len() as i16);
    w.put_slice(msg.properties.as_bytes());
    debug_assert!(w.is_empty());
    len
}

/// Writes the 8-byte BLANK header `[remaining i32][BLANK_MAGIC]`; `remaining` is the whole rest
/// of the file, which from then on counts as written.
pub fn encode_blank(dst: &mut [u8], remaining: u32) {
    debug_assert!(remaining as usize >= END_FILE_MIN_BLANK_LENGTH);
    dst[..4].copy_from_slice(&remaining.to_be_bytes());
    dst[4..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
}

/// Field names used in [`DecodeError::field`] (the Java layout's names).
pub mod field {
    pub const TOTALSIZE: &str = "TOTALSIZE";
    pub const MAGICCODE: &str = "MAGICCODE";
    pub const BODYCRC: &str = "BODYCRC";
    pub const QUEUEID: &str = "QUEUEID";
    pub const FLAG: &str = "FLAG";
    pub const QUEUEOFFSET: &str = "QUEUEOFFSET";
    pub const PHYSICALOFFSET: &str = "PHYSICALOFFSET";
    pub const SYSFLAG: &str = "SYSFLAG";
    pub const BORNTIMESTAMP: &str = "BORNTIMESTAMP";
    pub const BORNHOST: &str = "BORNHOST";
    pub const STORETIMESTAMP: &str = "STORETIMESTAMP";
    pub const STOREHOSTADDRESS: &str = "STOREHOSTADDRESS";
    pub const RECONSUMETIMES: &str = "RECONSUMETIMES";
    pub const PREPARED_TX_OFFSET: &str = "PREPARED_TX_OFFSET";
    pub const BODYLEN: &str = "BODYLEN";
    pub const BODY: &str = "BODY";
    pub const TOPICLEN: &str = "TOPICLEN";
    pub const TOPIC: &str = "TOPIC";
    pub const PROPLEN: &str = "PROPLEN";
    pub const PROPERTIES: &str = "PROPERTIES";
}

/// A record that failed validation, naming the field and where it sits in the buffer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("corrupt CommitLog record: field {field} at byte {offset}: {kind}")]
pub struct DecodeError {
    /// One of the [`field`] constants.
    pub field: &'static str,
    /// Byte offset of that field within the buffer given to [`check`].
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeErrorKind {
    #[error("buffer ends at byte {available}, field needs bytes up to {needed}")]
    Truncated { needed: u64, available: usize },
    #[error("field ends at byte {end}, beyond TOTALSIZE {total_size}")]
    Overrun { end: u64, total_size: i32 },
    #[error("unknown magic code 0x{found:08X}")]
    UnknownMagic { found: u32 },
    #[error("BLANK size {size} is below the minimum {min}", min = END_FILE_MIN_BLANK_LENGTH)]
    BlankTooSmall { size: i32 },
    #[error("negative length {value}")]
    NegativeLength { value: i32 },
    #[error("stored {stored} != computed {computed}")]
    SizeMismatch { stored: i32, computed: u64 },
    #[error("stored 0x{stored:08X} != computed 0x{computed:08X}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid UTF-8 after {valid_up_to} valid bytes")]
    InvalidUtf8 { valid_up_to: usize },
    #[error("port {port} is outside 0..=65535")]
    InvalidPort { port: i32 },
}

/// A validated record, borrowing from the buffer it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Exactly the record's bytes (what consumers are sent).
    pub raw: &'a [u8],
    pub total_size: u32,
    pub version: MessageVersion,
    pub body_crc: u32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_tx_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    /// Borrowed when the bytes are UTF-8, as every record written through this broker's own
    /// SEND paths is. Otherwise decoded as Java's `new String(bytes, UTF_8)` does, each malformed
    /// sequence replaced by U+FFFD: RocketMQ 4.9 stores a batch element's properties as the
    /// client sent them, and such a record in a store taken over from it must be kept and served
    /// (its raw bytes unchanged), not read as corrupt.
    pub properties: Cow<'a, str>,
}

impl<'a> RecordView<'a> {
    #[inline]
    pub fn magic(&self) -> u32 {
        self.version.magic()
    }
    #[inline]
    pub fn property(&self, key: &str) -> Option<&str> {
        properties::find(&self.properties, key)
    }
    #[inline]
    pub fn tags(&self) -> Option<&str> {
        self.property(properties::keys::TAGS)
    }
    /// ConsumeQueue tagsCode from TAGS (not the schedule-topic delivery time; that is the
    /// dispatcher's business).
    #[inline]
    pub fn tags_code(&self) -> i64 {
        java::tags_code(self.tags().unwrap_or(""))
    }
    /// The individual user keys of the KEYS property.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        properties::keys_of(self.property(properties::keys::KEYS).unwrap_or(""))
    }
    #[inline]
    pub fn uniq_key(&self) -> Option<&str> {
        self.property(properties::keys::UNIQ_KEY)
    }
    #[inline]
    pub fn transaction_type(&self) -> i32 {
        sys_flag::transaction_type(self.sys_flag)
    }
    /// The broker's offset message id for this record.
    pub fn offset_msg_id(&self) -> String {
        msg_id::offset_msg_id(self.store_host, self.phy_offset)
    }
}

/// What sits at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
// Boxing the record would allocate for every record a scan, a dispatch or a read checks; the
// value is matched where it is made, not stored.
#[allow(clippy::large_enum_variant)]
pub enum Check<'a> {
    Record(RecordView<'a>),
    /// End-of-file filler: the rest of the file (`size` bytes from here) holds no record.
    Blank {
        size: u32,
    },
}

/// Bounds-checked sequential reader; every failure names the field being read.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    total: i32,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        match start
            .checked_add(n)
            .and_then(|end| self.buf.get(start..end))
        {
            Some(s) => {
                self.pos = start + s.len();
                Ok(s)
            }
            None => {
                let end = start as u64 + n as u64;
                // If the declared record fits the buffer, the field lengths contradict TOTALSIZE;
                // otherwise the buffer really is short.
                let kind = if self.total >= 0 && self.total as usize <= self.buf.len() {
                    DecodeErrorKind::Overrun {
                        end,
                        total_size: self.total,
                    }
                } else {
                    DecodeErrorKind::Truncated {
                        needed: end,
                        available: self.buf.len(),
                    }
                };
                Err(err(field, start, kind))
            }
        }
    }
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N, field)?);
        Ok(a)
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        self.array(field).map(i32::from_be_bytes)
    }
    fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        self.array(field).map(i64::from_be_bytes)
    }
}

/// A length field's value as usize, rejecting negatives.
fn non_negative(value: i32, field: &'static str, at: usize) -> Result<usize, DecodeError> {
    usize::try_from(value).map_err(|_| err(field, at, DecodeErrorKind::NegativeLength { value }))
}

#[inline]
fn err(field: &'static str, offset: usize, kind: DecodeErrorKind) -> DecodeError {
    DecodeError {
        field,
        offset,
        kind,
    }
}

fn read_i32_at(buf: &[u8], at: usize, field: &'static str) -> Result<i32, DecodeError> {
    let mut r = Reader {
        buf,
        pos: at,
        total: -1,
    };
    r.i32(field)
}

/// An address as stored: IP then the port as a Java int (range-checked only after the
/// structural checks, so a wrong length is reported in preference to a wrong port).
struct RawHost {
    ip: IpAddr,
    port: i32,
    at: usize,
}

impl RawHost {
    fn read(r: &mut Reader<'_>, v6: bool, field: &'static str) -> Result<RawHost, DecodeError> {
        let at = r.pos;
        // Bounds-check the whole host first so a short buffer is reported at the host's start.
        let mut sub = Reader {
            buf: r.bytes(if v6 { 20 } else { 8 }, field)?,
            pos: 0,
            total: -1,
        };
        let ip = if v6 {
            IpAddr::from(sub.array::<16>(field)?)
        } else {
            IpAddr::from(sub.array::<4>(field)?)
        };
        let port = sub.i32(field)?;
        Ok(RawHost { ip, port, at })
    }

    fn addr(&self, field: &'static str) -> Result<SocketAddr, DecodeError> {
        let port = u16::try_from(self.port).map_err(|_| {
            err(
                field,
                self.at,
                DecodeErrorKind::InvalidPort { port: self.port },
            )
        })?;
        Ok(SocketAddr::new(self.ip, port))
    }
}

fn utf8<'a>(bytes: &'a [u8], field: &'static str, at: usize) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| {
        err(
            field,
            at,
            DecodeErrorKind::InvalidUtf8 {
                valid_up_to: e.valid_up_to(),
            },
        )
    })
}

/// True when `r`, found at byte `file_pos` of a page-aligned file, reads as a record whose
/// properties a power loss tore: from a 4 KiB page boundary at or after the start of its
/// properties to its end every byte is zero, and so is its last byte. BODYCRC covers only the
/// body, and NUL bytes are valid UTF-8, so such a record passes [`check`]; served, it would carry
/// a cut-off TAGS, UNIQ_KEY, KEYS or DELAY. Every RocketMQ client ends its properties with the
/// 0x02 separator, so a whole record does not end in zeros.
pub fn torn_in_properties(r: &RecordView<'_>, file_pos: u64) -> bool {
    const PAGE: u64 = 4096;
    let raw = r.raw;
    let props = r.properties.len();
    if props == 0 || raw.last() != Some(&0) || props > raw.len() {
        return false;
    }
    let props_start = (raw.len() - props) as u64;
    // Zeros run from just past the last non-zero byte to the end.
    let zeros_from = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1) as u64;
    let from = file_pos + zeros_from.max(props_start);
    let boundary = from.div_ceil(PAGE) * PAGE;
    boundary < file_pos + raw.len() as u64
}

/// Validates what starts at `buf[0]` (the buffer may extend past it): a record, a BLANK, or an
/// error naming the bad field. The body CRC is verified only if `check_crc`. Never panics.
pub fn check(buf: &[u8], check_crc: bool) -> Result<Check<'_>, DecodeError> {
    use field::*;
    let total = read_i32_at(buf, 0, TOTALSIZE)?;
    let magic = read_i32_at(buf, MAGIC_POS, MAGICCODE)? as u32;
    if magic == BLANK_MAGIC {
        return match u32::try_from(total) {
            Ok(size) if size as usize >= END_FILE_MIN_BLANK_LENGTH => Ok(Check::Blank { size }),
            _ => Err(err(
                TOTALSIZE,
                0,
                DecodeErrorKind::BlankTooSmall { size: total },
            )),
        };
    }
    let version = MessageVersion::from_magic(magic).ok_or_else(|| {
        err(
            MAGICCODE,
            MAGIC_POS,
            DecodeErrorKind::UnknownMagic { found: magic },
        )
    })?;
    if total < 0 {
        return Err(err(
            TOTALSIZE,
            0,
            DecodeErrorKind::NegativeLength { value: total },
        ));
    }

    let mut r = Reader {
        buf,
        pos: BODY_CRC_POS,
        total,
    };
    let stored_crc = r.i32(BODYCRC)? as u32;
    let queue_id = r.i32(QUEUEID)?;
    let flag = r.i32(FLAG)?;
    let queue_offset = r.i64(QUEUEOFFSET)?;
    let phy_offset = r.i64(PHYSICALOFFSET)?;
    let flags = r.i32(SYSFLAG)?;
    let born_timestamp = r.i64(BORNTIMESTAMP)?;
    let born_host = RawHost::read(&mut r, flags & sys_flag::BORNHOST_V6_FLAG != 0, BORNHOST)?;
    let store_timestamp = r.i64(STORETIMESTAMP)?;
    let store_v6 = flags & sys_flag::STOREHOSTADDRESS_V6_FLAG != 0;
    let store_host = RawHost::read(&mut r, store_v6, STOREHOSTADDRESS)?;
    let reconsume_times = r.i32(RECONSUMETIMES)?;
    let prepared_tx_offset = r.i64(PREPARED_TX_OFFSET)?;

    let at = r.pos;
    let body_len = r.i32(BODYLEN)?;
    let body_len = non_negative(body_len, BODYLEN, at)?;
    let body = r.bytes(body_len, BODY)?;

    let at = r.pos;
    let topic_len = match version {
        // v1 reads the length byte as signed: 0x80..=0xFF is a negative length.
        MessageVersion::V1 => i32::from(r.array::<1>(TOPICLEN)?[0] as i8),
        MessageVersion::V2 => i32::from(i16::from_be_bytes(r.array(TOPICLEN)?)),
    };
    let topic_len = non_negative(topic_len, TOPICLEN, at)?;
    let topic_at = r.pos;
    let topic = r.bytes(topic_len, TOPIC)?;

    let at = r.pos;
    let props_len = i32::from(i16::from_be_bytes(r.array(PROPLEN)?));
    let props_len = non_negative(props_len, PROPLEN, at)?;
    let props = r.bytes(props_len, PROPERTIES)?;

    if r.pos != total as usize {
        let kind = DecodeErrorKind::SizeMismatch {
            stored: total,
            computed: r.pos as u64,
        };
        return Err(err(TOTALSIZE, 0, kind));
    }
    if check_crc {
        let computed = body_crc(body);
        if computed != stored_crc {
            let kind = DecodeErrorKind::CrcMismatch {
                stored: stored_crc,
                computed,
            };
            return Err(err(BODYCRC, BODY_CRC_POS, kind));
        }
    }
    Ok(Check::Record(RecordView {
        // r.pos only ever advances past bytes that `get` returned, so it is <= buf.len().
        raw: &buf[..r.pos],
        total_size: total as u32,
        version,
        body_crc: stored_crc,
        queue_id,
        flag,
        queue_offset,
        phy_offset,
        sys_flag: flags,
        born_timestamp,
        born_host: born_host.addr(BORNHOST)?,
        store_timestamp,
        store_host: store_host.addr(STOREHOSTADDRESS)?,
        reconsume_times,
        prepared_tx_offset,
        body,
        topic: utf8(topic, TOPIC, topic_at)?,
        properties: lossy(props),
    }))
}

/// `String::from_utf8_lossy`, with the valid case first: `str::from_utf8` checks ASCII a word at
/// a time, where the lossy decoder walks chunk by chunk — 12 % of the dispatch thread's time in a
/// profile of 1 KiB sends, for properties that are nearly always valid.
fn lossy(props: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(props) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(props),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv6Addr;

    const PROPS: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}k1  k2\u{2}UNIQ_KEY\u{1}U1\u{2}";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn sample(topic: &str, born: &str) -> NewMessage {
        let mut m = NewMessage::new(
            topic,
            3,
            Bytes::from_static(b"Hello RocketMQ"),
            PROPS.to_owned(),
            1_700_000_000_000,
            addr(born),
            addr("10.0.0.1:10911"),
        );
        m.flag = 7;
        m.reconsume_times = 2;
        m
    }

    /// Encodes into a larger, pre-filled buffer and checks nothing past the record was touched.
    fn encode(m: &NewMessage, qoff: i64, phy: i64, ts: i64) -> Vec<u8> {
        let len = record_len(m);
        let mut buf = vec![0xEE; len + 16];
        assert_eq!(encode_into(&mut buf, m, qoff, phy, ts), len);
        assert!(buf[len..].iter().all(|&b| b == 0xEE));
        buf.truncate(len);
        buf
    }

    fn record(buf: &[u8]) -> RecordView<'_> {
        match check(buf, true) {
            Ok(Check::Record(v)) => v,
            other => panic!("expected a record, got {other:?}"),
        }
    }

    fn fails(buf: &[u8], check_crc: bool) -> DecodeError {
        check(buf, check_crc).expect_err("expected a decode error")
    }

    #[test]
    fn golden_v1_ipv4() {
        let m = sample("TopicTest", "192.168.0.10:54321");
        let got = encode(&m, 42, 1_073_741_924, 1_700_000_000_005);
        let total = 91 + 14 + 9 + PROPS.len();
        // Built field by field from the layout in this module's doc.
        let mut e: Vec<u8> = Vec::new();
        e.extend((total as i32).to_be_bytes()); // TOTALSIZE @0
        e.extend([0xDA, 0xA3, 0x20, 0xA7]); // MAGICCODE @4 (v1)
        e.extend([0x69, 0xC8, 0x65, 0xED]); // BODYCRC @8 = crc32("Hello RocketMQ") & 0x7FFFFFFF
        e.extend([0, 0, 0, 3]); // QUEUEID @12
        e.extend([0, 0, 0, 7]); // FLAG @16
        e.extend(42i64.to_be_bytes()); // QUEUEOFFSET @20
        e.extend(1_073_741_924i64.to_be_bytes()); // PHYSICALOFFSET @28
        e.extend([0, 0, 0, 0]); // SYSFLAG @36
        e.extend(1_700_000_000_000i64.to_be_bytes()); // BORNTIMESTAMP @40
        e.extend([192, 168, 0, 10, 0, 0, 0xD4, 0x31]); // BORNHOST @48, port 54321
        e.extend(1_700_000_000_005i64.to_be_bytes()); // STORETIMESTAMP @56
        e.extend([10, 0, 0, 1, 0, 0, 0x2A, 0x9F]); // STOREHOSTADDRESS @64, port 10911
        e.extend([0, 0, 0, 2]); // RECONSUMETIMES @72
        e.extend([0; 8]); // PREPARED_TX_OFFSET @76
        e.extend([0, 0, 0, 14]); // BODYLEN @84
        e.extend(b"Hello RocketMQ"); // BODY @88
        e.push(9); // TOPICLEN @102 (one byte in v1)
        e.extend(b"TopicTest");
        e.extend((PROPS.len() as i16).to_be_bytes()); // PROPLEN
        e.extend(PROPS.as_bytes());
        assert_eq!(e.len(), total);
        assert_eq!(got, e);
        assert_eq!(
            &got[QUEUE_OFFSET_POS..QUEUE_OFFSET_POS + 8],
            &42i64.to_be_bytes()
        );
        assert_eq!(store_timestamp_pos(0), 56);

        let v = record(&got);
        assert_eq!(v.raw, &got[..]);
        assert_eq!(v.total_size as usize, total);
        assert_eq!((v.version, v.magic()), (MessageVersion::V1, MAGIC_V1));
        assert_eq!((v.body_crc, v.queue_id, v.flag), (0x69C8_65ED, 3, 7));
        assert_eq!(
            (v.queue_offset, v.phy_offset, v.sys_flag),
            (42, 1_073_741_924, 0)
        );
        assert_eq!(v.born_timestamp, 1_700_000_000_000);
        assert_eq!(v.born_host, addr("192.168.0.10:54321"));
        assert_eq!(v.store_timestamp, 1_700_000_000_005);
        assert_eq!(v.store_host, addr("10.0.0.1:10911"));
        assert_eq!((v.reconsume_times, v.prepared_tx_offset), (2, 0));
        assert_eq!(
            (v.body, v.topic, &*v.properties),
            (&b"Hello RocketMQ"[..], "TopicTest", PROPS)
        );
        assert_eq!(v.tags(), Some("TagA"));
        assert_eq!(v.tags_code(), 2_598_919);
        assert_eq!(v.keys().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(v.uniq_key(), Some("U1"));
        assert_eq!(v.property("NOPE"), None);
        assert_eq!(v.offset_msg_id(), "0A00000100002A9F0000000040000064");
    }

    #[test]
    fn golden_v2_long_topic() {
        assert_eq!(MessageVersion::for_topic(127), MessageVersion::V1);
        assert_eq!(MessageVersion::for_topic(128), MessageVersion::V2);
        let topic = "T".repeat(200);
        let mut m = sample(&topic, "192.168.0.10:54321");
        m.body = Bytes::from_static(b"x");
        m.properties.clear();
        m.fill_derived();
        let got = encode(&m, 0, 0, 0);
        assert_eq!(got.len(), 92 + 1 + 200);
        assert_eq!(&got[0..4], &(293i32).to_be_bytes());
        assert_eq!(&got[4..8], &[0xDA, 0xA3, 0x20, 0xAB]);
        assert_eq!(&got[8..12], &0x0CDC_1683u32.to_be_bytes()); // crc32("x") & 0x7FFFFFFF
        assert_eq!(&got[84..89], &[0, 0, 0, 1, b'x']);
        assert_eq!(&got[89..91], &[0x00, 0xC8]); // TOPICLEN: two bytes in v2
        assert_eq!(&got[91..291], topic.as_bytes());
        assert_eq!(&got[291..293], &[0, 0]);
        let v = record(&got);
        assert_eq!(
            (v.version, v.topic, &*v.properties),
            (MessageVersion::V2, &topic[..], "")
        );

        // 127 bytes is still v1 with the length byte 0x7F.
        let m = sample(&"t".repeat(127), "192.168.0.10:54321");
        let got = encode(&m, 0, 0, 0);
        assert_eq!(&got[4..8], &MAGIC_V1.to_be_bytes());
        assert_eq!(got[102], 0x7F);
        assert_eq!(record(&got).topic.len(), 127);
    }

    #[test]
    fn golden_ipv6_born_host() {
        let mut m = sample("TopicTest", "[2001:db8::1]:1234");
        assert_eq!(m.sys_flag, sys_flag::BORNHOST_V6_FLAG);
        m.sys_flag = sys_flag::TRANSACTION_COMMIT_TYPE; // host bit forgotten: still stored
        let got = encode(&m, 5, 6, 7);
        assert_eq!(got.len(), 91 + 12 + 14 + 9 + PROPS.len());
        assert_eq!(&got[SYS_FLAG_POS..SYS_FLAG_POS + 4], &[0, 0, 0, 0x18]);
        let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(&got[48..64], &ip.octets());
        assert_eq!(&got[64..68], &[0, 0, 0x04, 0xD2]);
        assert_eq!(store_timestamp_pos(0x18), 68);
        assert_eq!(&got[68..76], &7i64.to_be_bytes());
        assert_eq!(&got[76..84], &[10, 0, 0, 1, 0, 0, 0x2A, 0x9F]);
        let v = record(&got);
        assert_eq!(v.born_host, addr("[2001:db8::1]:1234"));
        assert_eq!(
            (v.sys_flag, v.transaction_type()),
            (0x18, sys_flag::TRANSACTION_COMMIT_TYPE)
        );
        assert_eq!(v.store_timestamp, 7);

        // Both hosts IPv6: +24; a stale v6 bit on an IPv4 host is cleared.
        m.store_host = addr("[::1]:10911");
        assert_eq!(record_len(&m), 91 + 24 + 14 + 9 + PROPS.len());
        m.born_host = addr("1.2.3.4:5");
        m.sys_flag = sys_flag::BORNHOST_V6_FLAG;
        assert_eq!(m.effective_sys_flag(), sys_flag::STOREHOSTADDRESS_V6_FLAG);
        assert_eq!(record(&encode(&m, 0, 0, 0)).store_host, addr("[::1]:10911"));
    }

    #[test]
    fn golden_blank() {
        let mut buf = [0xEEu8; 12];
        encode_blank(&mut buf, 1000);
        assert_eq!(&buf[..8], &[0, 0, 0x03, 0xE8, 0xCB, 0xD4, 0x31, 0x94]);
        assert_eq!(check(&buf, true), Ok(Check::Blank { size: 1000 }));
        assert_eq!(check(&buf[..8], true), Ok(Check::Blank { size: 1000 }));
        for size in [7i32, 0, -1] {
            buf[..4].copy_from_slice(&size.to_be_bytes());
            let e = fails(&buf, false);
            assert_eq!((e.field, e.offset), (field::TOTALSIZE, 0));
            assert_eq!(e.kind, DecodeErrorKind::BlankTooSmall { size });
        }
    }

    #[test]
    fn corrupt_records_name_the_field() {
        let good = encode(&sample("TopicTest", "192.168.0.10:54321"), 1, 2, 3);
        let total = good.len();
        let at = |field: &str, offset: usize, buf: &[u8], crc: bool| {
            let e = fails(buf, crc);
            assert_eq!((e.field, e.offset), (field, offset), "{e}");
            e.kind
        };

        let mut b = good.clone();
        b[88] ^= 0x01; // body byte
        assert!(check(&b, false).is_ok());
        let e = fails(&b, true);
        let computed = body_crc(&b[88..102]);
        assert_eq!(
            e.to_string(),
            format!("corrupt CommitLog record: field BODYCRC at byte 8: stored 0x69C865ED != computed 0x{computed:08X}")
        );

        let mut b = good.clone();
        b[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        assert_eq!(
            at("MAGICCODE", 4, &b, false),
            DecodeErrorKind::UnknownMagic { found: 0x1234_5678 }
        );

        let mut b = good.clone();
        b[..4].copy_from_slice(&(total as i32 + 1).to_be_bytes());
        let k = DecodeErrorKind::SizeMismatch {
            stored: total as i32 + 1,
            computed: total as u64,
        };
        assert_eq!(at("TOTALSIZE", 0, &b, false), k);
        b[..4].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            at("TOTALSIZE", 0, &b, false),
            DecodeErrorKind::NegativeLength { value: -5 }
        );

        assert!(matches!(
            at("TOTALSIZE", 0, &good[..3], true),
            DecodeErrorKind::Truncated { .. }
        ));
        assert!(matches!(
            at("MAGICCODE", 4, &good[..6], true),
            DecodeErrorKind::Truncated { .. }
        ));
        let k = at("PROPERTIES", 114, &good[..total - 1], true);
        assert_eq!(
            k,
            DecodeErrorKind::Truncated {
                needed: total as u64,
                available: total - 1
            }
        );

        let mut b = good.clone();
        b[84..88].copy_from_slice(&i32::MAX.to_be_bytes());
        let k = at("BODY", 88, &b, true);
        assert_eq!(
            k,
            DecodeErrorKind::Overrun {
                end: 88 + i32::MAX as u64,
                total_size: total as i32
            }
        );
        b[84..88].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(
            at("BODYLEN", 84, &b, true),
            DecodeErrorKind::NegativeLength { value: -1 }
        );

        let mut b = good.clone();
        b[102] = 0x80; // v1 TOPICLEN is signed
        assert_eq!(
            at("TOPICLEN", 102, &b, true),
            DecodeErrorKind::NegativeLength { value: -128 }
        );

        let mut b = good.clone();
        b[103] = 0xFF;
        assert_eq!(
            at("TOPIC", 103, &b, true),
            DecodeErrorKind::InvalidUtf8 { valid_up_to: 0 }
        );
        // Properties that are not UTF-8 (a RocketMQ 4.9 store keeps a batch element's as the
        // client sent them) are a record all the same: decoded as Java decodes them, the raw
        // bytes untouched.
        let mut b = good.clone();
        b[total - 1] = 0xC3;
        let Ok(Check::Record(v)) = check(&b, true) else {
            panic!("refused: {:?}", check(&b, true));
        };
        assert_eq!(v.raw, &b[..]);
        assert_eq!(
            &*v.properties,
            format!("{}\u{FFFD}", &PROPS[..PROPS.len() - 1])
        );
        assert_eq!(v.tags(), Some("TagA"));
        // A malformed byte inside a value: the tag hash is Java's, of the decoded string.
        let mut b = good.clone();
        let tag = b.windows(4).position(|w| w == b"TagA").unwrap();
        b[tag + 3] = 0xFF;
        let Ok(Check::Record(v)) = check(&b, true) else {
            panic!("refused");
        };
        assert_eq!(v.tags(), Some("Tag\u{FFFD}"));
        assert_eq!(v.tags_code(), java::tags_code("Tag\u{FFFD}"));

        let mut b = good.clone();
        b[52..56].copy_from_slice(&0x1_0000i32.to_be_bytes());
        assert_eq!(
            at("BORNHOST", 48, &b, true),
            DecodeErrorKind::InvalidPort { port: 0x1_0000 }
        );

        // A v6 flag on IPv4 bytes changes the layout: caught by the length check.
        let mut b = good.clone();
        b[39] |= 0x20;
        assert!(check(&b, false).is_err());
    }

    #[test]
    fn encodable_limits() {
        let mut m = sample("TopicTest", "1.2.3.4:5");
        assert_eq!(check_encodable(&m), Ok(record_len(&m)));
        m.properties = "x".repeat(properties::MAX_PROPERTIES_LEN + 1);
        assert_eq!(
            check_encodable(&m),
            Err(EncodeError::PropertiesTooLong { len: 32768 })
        );
        m.properties.clear();
        m.topic = "t".repeat(40_000);
        assert_eq!(
            check_encodable(&m),
            Err(EncodeError::TopicTooLong {
                len: 40_000,
                max: 32767
            })
        );
    }

    fn arb_host() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::new(ip.into(), p)),
            (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::new(ip.into(), p)),
        ]
    }

    fn arb_message() -> impl Strategy<Value = NewMessage> {
        let props = proptest::collection::btree_map("[A-Za-z_]{1,8}", "[ -~é]{1,12}", 0..6)
            .prop_map(|m| properties::encode(&m.into_iter().collect::<Vec<_>>()));
        (
            (
                "[A-Za-z0-9_%|-]{1,300}",
                any::<i32>(),
                any::<i32>(),
                any::<i32>(),
            ),
            (
                any::<i64>(),
                arb_host(),
                arb_host(),
                any::<i32>(),
                any::<i64>(),
            ),
            (proptest::collection::vec(any::<u8>(), 0..1024), props),
        )
            .prop_map(
                |((topic, queue_id, flag, sys), (born_ts, bh, sh, rt, ptx), (body, props))| {
                    let mut m =
                        NewMessage::new(topic, queue_id, body.into(), props, born_ts, bh, sh);
                    m.flag = flag;
                    m.sys_flag = sys;
                    m.reconsume_times = rt;
                    m.prepared_tx_offset = ptx;
                    m.fill_derived();
                    m
                },
            )
    }

    proptest! {
        #[test]
        fn encode_check_round_trip(m in arb_message(), qoff: i64, phy: i64, ts: i64) {
            let buf = encode(&m, qoff, phy, ts);
            let v = record(&buf);
            prop_assert_eq!(v.total_size as usize, buf.len());
            prop_assert_eq!(v.version, m.version());
            prop_assert_eq!(v.body_crc, m.body_crc);
            prop_assert_eq!((v.queue_id, v.flag, v.sys_flag), (m.queue_id, m.flag, m.sys_flag));
            prop_assert_eq!((v.queue_offset, v.phy_offset), (qoff, phy));
            prop_assert_eq!((v.born_timestamp, v.born_host), (m.born_timestamp, m.born_host));
            prop_assert_eq!((v.store_timestamp, v.store_host), (ts, m.store_host));
            prop_assert_eq!(v.reconsume_times, m.reconsume_times);
            prop_assert_eq!(v.prepared_tx_offset, m.prepared_tx_offset);
            prop_assert_eq!(v.body, &m.body[..]);
            prop_assert_eq!(v.topic, m.topic.as_str());
            prop_assert_eq!(v.properties, m.properties.as_str());
            let st = store_timestamp_pos(v.sys_flag);
            prop_assert_eq!(&buf[st..st + 8], &ts.to_be_bytes());
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = check(&b, true);
            let _ = check(&b, false);
        }

        #[test]
        fn random_bytes_with_valid_magic_never_panic(
            total in -10i32..400,
            v2: bool,
            rest in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut b = total.to_be_bytes().to_vec();
            b.extend(if v2 { MAGIC_V2 } else { MAGIC_V1 }.to_be_bytes());
            b.extend(rest);
            let _ = check(&b, true);
        }

        #[test]
        fn bit_flips_and_truncations_never_panic(
            m in arb_message(),
            pos: prop::sample::Index,
            bit in 0u8..8,
            cut: prop::sample::Index,
        ) {
            let good = encode(&m, 1, 2, 3);
            let mut b = good.clone();
            let i = pos.index(b.len());
            b[i] ^= 1 << bit;
            let body_start = BORN_HOST_POS + 8 + sys_flag::born_host_len(m.sys_flag)
                + sys_flag::store_host_len(m.sys_flag) + 4 + 8 + 4;
            let res = check(&b, true);
            if (body_start..body_start + m.body.len()).contains(&i) {
                let e = res.expect_err("flipped body bit must fail the CRC");
                prop_assert_eq!(e.field, field::BODYCRC);
                prop_assert!(check(&b, false).is_ok());
            }
            let _ = check(&b, false);
            let n = cut.index(good.len());
            prop_assert!(check(&good[..n], true).is_err());
            prop_assert!(check(&b[..n], false).is_err());
        }
    }
}
