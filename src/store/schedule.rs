//! Delayed ("scheduled") messages, the pure part: the put-time rewrite to `SCHEDULE_TOPIC_XXXX`
//! (RocketMQ 4.9.4's `CommitLog.asyncPutMessage`), the delivery time stored as the ConsumeQueue
//! tagsCode (`CommitLog.checkMessageAndReturnSize`), the message rebuilt for the real topic at
//! delivery, and `config/delayOffset.json` (both `ScheduleMessageService`'s,
//! store/src/main/java/org/apache/rocketmq/store/schedule/ScheduleMessageService.java).
//!
//! The `ScheduleDelivery` actor owns the progress per level and the timers; this module owns the
//! rules, so they are tested without a runtime.

use std::collections::BTreeMap;

use crate::format::java::tags_code;
use crate::format::java_order::{java_order, Op};
use crate::format::properties::{self, keys};
use crate::format::record::{body_crc, NewMessage, RecordView};

pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// Delay level of a message (`DELAY` property), if > 0.
pub fn delay_level(props: &str) -> Option<usize> {
    properties::find(props, keys::DELAY)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|l| *l > 0)
        .map(|l| l as usize)
}

/// Put-time rewrite: a non-transactional (or commit) message with `DELAY` > 0 goes to
/// `SCHEDULE_TOPIC_XXXX`, queue `level - 1` (level clamped to the configured count), keeping its
/// real topic and queue in `REAL_TOPIC` / `REAL_QID`. Returns the level used.
pub fn rewrite_for_delay(msg: &mut NewMessage, levels: usize) -> Option<usize> {
    use crate::format::record::sys_flag;
    let t = msg.sys_flag & sys_flag::TRANSACTION_TYPE_MASK;
    if t != sys_flag::TRANSACTION_NOT_TYPE && t != sys_flag::TRANSACTION_COMMIT_TYPE {
        return None;
    }
    let level = delay_level(&msg.properties)?.min(levels);
    if level == 0 {
        return None;
    }
    // CommitLog.asyncPutMessage puts these into the processor's map and writes it in HashMap
    // order; `msg.properties` is that map's order already, and the map only grows, so the
    // re-parse orders alike (see java_order's docs). DELAY keeps its place.
    let (qid, level_s) = (msg.queue_id.to_string(), level.to_string());
    msg.properties = java_order(
        &msg.properties,
        &[
            Op::Put(keys::REAL_TOPIC, &msg.topic),
            Op::Put(keys::REAL_QID, &qid),
            Op::Put(keys::DELAY, &level_s),
        ],
    );
    msg.topic = SCHEDULE_TOPIC.to_string();
    msg.queue_id = (level - 1) as i32;
    Some(level)
}

/// The ConsumeQueue tagsCode of a record: the Java hash of its TAGS, except in the schedule topic,
/// where it is the delivery time (store time + the level's delay).
pub fn cq_tags_code(r: &RecordView<'_>, delay_levels_ms: &[u64]) -> i64 {
    if r.topic == SCHEDULE_TOPIC {
        if let Some(level) = delay_level(&r.properties) {
            let idx = level.min(delay_levels_ms.len()).saturating_sub(1);
            if let Some(d) = delay_levels_ms.get(idx) {
                return r.store_timestamp.saturating_add(*d as i64);
            }
        }
    }
    r.tags().map(tags_code).unwrap_or(0)
}

/// The message delivered to the real topic when its time has come: same body, flag,
/// born data and reconsume count; topic and queue from `REAL_TOPIC` / `REAL_QID`; the stored
/// properties re-parsed and written in Java's HashMap order (the stored string itself when it
/// is in that order already), `DELAY`, `REAL_TOPIC` and `REAL_QID` included. RocketMQ 4.9.4
/// (store/src/main/java/org/apache/rocketmq/store/schedule/ScheduleMessageService.java
/// `messageTimeup`) writes the properties string it took before clearing `DELAY` and setting
/// `WAIT=false`, which change only its in-memory map — consumers see `DELAY` and the producer's
/// `WAIT`, and the delivery does not wait for a flush or a slave (`wait_store_msg_ok` false,
/// whatever the stored `WAIT`). `None` if the record carries no real topic. The body CRC is
/// computed from the body, as RocketMQ's put does, never copied: the writer trusts it, and a
/// copied CRC of a body damaged since would put a record at the live tail that recovery's CRC
/// check cuts the CommitLog at, with every message after it.
pub fn message_for_delivery(r: &RecordView<'_>) -> Option<NewMessage> {
    let topic = properties::find(&r.properties, keys::REAL_TOPIC)?.to_string();
    let queue_id = properties::find(&r.properties, keys::REAL_QID)?
        .parse()
        .ok()?;
    // messageTimeup writes the parsed stored map: its HashMap order, segments it drops gone.
    let props = java_order(&r.properties, &[]);
    Some(NewMessage {
        topic,
        queue_id,
        flag: r.flag,
        sys_flag: r.sys_flag,
        born_timestamp: r.born_timestamp,
        born_host: r.born_host,
        store_host: r.store_host,
        reconsume_times: r.reconsume_times,
        prepared_tx_offset: r.prepared_tx_offset,
        body: bytes::Bytes::copy_from_slice(r.body),
        body_crc: body_crc(r.body),
        properties: props,
        wait_store_msg_ok: false,
    })
}

/// `config/delayOffset.json`: `{"offsetTable":{"1":5,...}}` — level → next ConsumeQueue offset.
/// Written with quoted keys (valid JSON, which fastjson also reads); read with or without quotes,
/// since Java writes integer keys unquoted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayOffsets(pub BTreeMap<usize, u64>);

impl DelayOffsets {
    pub fn to_json(&self) -> String {
        let table: BTreeMap<String, u64> =
            self.0.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        serde_json::json!({ "offsetTable": table }).to_string()
    }

    pub fn from_json(text: &str) -> Result<DelayOffsets, String> {
        let fixed = crate::meta::quote_integer_keys(text);
        let v: serde_json::Value =
            serde_json::from_str(&fixed).map_err(|e| format!("invalid JSON: {e}"))?;
        let table = v
            .get("offsetTable")
            .and_then(|t| t.as_object())
            .ok_or_else(|| "field offsetTable: missing or not an object".to_string())?;
        let mut out = BTreeMap::new();
        for (k, v) in table {
            let level: usize = k
                .parse()
                .map_err(|_| format!("offsetTable key {k:?} is not a level number"))?;
            let off = v
                .as_u64()
                .ok_or_else(|| format!("offsetTable[{k}] is not a non-negative integer"))?;
            out.insert(level, off);
        }
        Ok(DelayOffsets(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::{check, encode_into, record_len, Check};

    #[test]
    fn a_delivery_computes_its_body_crc_from_the_body_it_carries() {
        let host = "127.0.0.1:10911".parse().unwrap();
        // In Java's HashMap order, as a JVM prints these three keys.
        let props = properties::encode(&[
            (keys::REAL_TOPIC, "RealTopic"),
            (keys::DELAY, "1"),
            (keys::REAL_QID, "3"),
        ]);
        let body = bytes::Bytes::from_static(b"delayed body");
        let m = NewMessage::new(SCHEDULE_TOPIC, 0, body, props, 1, host, host);
        let mut buf = vec![0u8; record_len(&m)];
        encode_into(&mut buf, &m, 0, 0, 2);
        // The stored body damaged after its CRC was written (the check without CRC still
        // parses it, as the delivery's read does).
        let at = buf.windows(12).position(|w| w == b"delayed body").unwrap();
        buf[at] ^= 0x20;
        let Ok(Check::Record(r)) = check(&buf, false) else {
            panic!("parses")
        };
        assert_ne!(
            r.body_crc,
            body_crc(r.body),
            "the stored CRC no longer matches"
        );
        let d = message_for_delivery(&r).expect("has a real topic");
        assert_eq!((d.topic.as_str(), d.queue_id), ("RealTopic", 3));
        // RocketMQ 4.9.4 delivers the stored properties re-written in HashMap order, which
        // they are in already here.
        assert_eq!(d.properties, r.properties);
        assert_eq!(properties::find(&d.properties, keys::DELAY), Some("1"));
        assert_eq!(properties::find(&d.properties, keys::WAIT), None);
        assert!(
            !d.wait_store_msg_ok,
            "a delivery waits for no flush, as 4.9.4's"
        );
        assert_eq!(d.body.as_ref(), b"Delayed body");
        assert_eq!(d.body_crc, body_crc(b"Delayed body"));
    }

    #[test]
    fn delay_offsets_json_reads_java_unquoted_keys() {
        let d = DelayOffsets::from_json(r#"{"offsetTable":{1:5,2:0,18:7}}"#).unwrap();
        assert_eq!(d.0.get(&1), Some(&5));
        assert_eq!(d.0.get(&18), Some(&7));
        let again = DelayOffsets::from_json(&d.to_json()).unwrap();
        assert_eq!(again, d);
        assert!(DelayOffsets::from_json("{}")
            .unwrap_err()
            .contains("offsetTable"));
    }
}
