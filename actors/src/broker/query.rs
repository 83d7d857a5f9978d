//! Reads answered straight from the store's lock-free views on the connection thread:
//! QUERY_MESSAGE (12, by key through the index), VIEW_MESSAGE_BY_ID (33, by CommitLog offset),
//! GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29) and
//! GET_EARLIEST_MSG_STORETIME (32). No state, no messages: nothing here waits for an actor.

use actormq_core::format::record::{self, Check};
use actormq_core::offset::PhyOffset;
use actormq_core::protocol::codes::response_code as rc;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::*;
use actormq_core::store::reader::StoreReader;
use bytes::{BufMut, BytesMut};

use super::context::{header_or_reply, ok, reply, BrokerCore};
use crate::remoting::server::Handled;

/// The most record bytes a QUERY_MESSAGE answer carries: Java's and Go's remoting decoders refuse
/// a frame over 16 MiB and close the connection, so a larger answer would fail the query whole.
const MAX_QUERY_ANSWER_BYTES: usize = 15 << 20;

impl BrokerCore {
    pub(super) fn query_message(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(QueryMessageRequestHeader, req);
        let Some(index) = self.store.index() else {
            return Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                "the message index is disabled (messageIndexEnable=false)",
            ));
        };
        let settings = self.settings.load();
        let max = if h.unique_key_query {
            settings.default_query_max_num
        } else {
            h.max_num.max(1) as usize
        }
        .min(settings.max_msgs_num_batch);
        let q = index.query(&h.topic, &h.key, max, h.begin_timestamp, h.end_timestamp);
        let hdr = QueryMessageResponseHeader {
            index_last_update_timestamp: q.last_update_timestamp,
            index_last_update_phyoffset: q.last_update_phy_offset,
        };
        let mut body = BytesMut::new();
        for phy in q.phy_offsets {
            let Some(rec) = self.reader.record_at(PhyOffset(phy as u64)) else {
                continue;
            };
            // Index keys are hashes of `topic#key`, and Java's String.hashCode collides easily
            // ("Aa" and "BB"): a record of another topic is not this query's answer.
            let same_topic = matches!(
                record::check(rec.as_bytes(), false),
                Ok(Check::Record(r)) if r.topic == h.topic
            );
            if !same_topic {
                continue;
            }
            // Clients refuse frames over 16 MiB: the answer stops before that, with what it has.
            if !body.is_empty() && body.len() + rec.as_bytes().len() > MAX_QUERY_ANSWER_BYTES {
                break;
            }
            body.put_slice(rec.as_bytes());
        }
        if body.is_empty() {
            return Handled::Reply(
                reply(
                    &req,
                    rc::QUERY_NOT_FOUND,
                    "can not find message, maybe time range not correct",
                )
                .with_ext_fields(hdr.to_ext_fields()),
            );
        }
        Handled::Reply(
            ok(&req)
                .with_ext_fields(hdr.to_ext_fields())
                .with_body(body.freeze()),
        )
    }

    pub(super) fn view_message(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(ViewMessageByIdRequestHeader, req);
        let found = u64::try_from(h.offset)
            .ok()
            .and_then(|o| self.reader.record_at(PhyOffset(o)));
        match found {
            Some(rec) => {
                Handled::Reply(ok(&req).with_body(bytes::Bytes::copy_from_slice(rec.as_bytes())))
            }
            None => Handled::Reply(reply(
                &req,
                rc::SYSTEM_ERROR,
                format!("can not find message by the offset, {}", h.offset),
            )),
        }
    }

    pub(super) fn offset_query(
        &self,
        req: RemotingCommand,
        f: impl Fn(&StoreReader, &str, i32) -> i64,
    ) -> Handled {
        let h = header_or_reply!(GetMinOffsetRequestHeader, req);
        let off = f(&self.reader, &h.topic, h.queue_id);
        Handled::Reply(ok(&req).with_ext("offset", off.to_string()))
    }

    pub(super) fn search_offset(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(SearchOffsetRequestHeader, req);
        let off = self
            .reader
            .offset_by_time(&h.topic, h.queue_id, h.timestamp);
        Handled::Reply(
            ok(&req).with_ext_fields(
                SearchOffsetResponseHeader {
                    offset: off.0 as i64,
                }
                .to_ext_fields(),
            ),
        )
    }

    pub(super) fn earliest_store_time(&self, req: RemotingCommand) -> Handled {
        let h = header_or_reply!(GetEarliestMsgStoretimeRequestHeader, req);
        let ts = self
            .reader
            .earliest_store_time(&h.topic, h.queue_id)
            .unwrap_or(-1);
        Handled::Reply(ok(&req).with_ext_fields(
            GetEarliestMsgStoretimeResponseHeader { timestamp: ts }.to_ext_fields(),
        ))
    }
}
