//! The name server's read-mostly queries beside routes, answered as 4.9.4's
//! `DefaultRequestProcessor` and `RouteInfoManager` answer them:
//!
//! * QUERY_DATA_VERSION (322): a broker asks whether its `DataVersion` (the body) differs from
//!   the one last registered from its address. Header `changed`; body the name server's
//!   `DataVersion` (`{"counter":…,"timestamp":…}`), none for an address it does not know. An
//!   unchanged answer counts as a heartbeat (the broker's expiry restarts), as in 4.9.4.
//! * GET_TOPICS_BY_CLUSTER (224, header `cluster`): topics with queue data on a broker of the
//!   cluster; an unknown cluster is an empty list, as 4.9.4's (its lookup fails and is logged).
//! * GET_SYSTEM_TOPIC_LIST_FROM_NS (304): every cluster name and broker name (4.9.4 treats them
//!   as topics), and `brokerAddr`, the first address of the first broker name.
//! * GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312),
//!   GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313): topics whose first queue data has the unit flag,
//!   the unit-sub flag, or the unit-sub flag without the unit flag (`TopicSysFlag`).
//!
//! In: [`QueryDataVersion`], [`GetTopicList`] (registry messages, declared in
//! [`super::messages`]), the six request codes (the processor). Out: replies only. Lists are `TopicList` bodies (`{"topicList":[…]}`, with
//! `brokerAddr` first when set); as everywhere in ActorMQ they come out sorted where 4.9.4's
//! `HashSet` iterates by hash bucket (see `protocol/body.rs`). Where 4.9.4 takes the first entry
//! of a `HashMap` (304's `brokerAddr`, a topic's first queue data), [`java_first`] picks the one
//! Java's iteration gives first.
//!
//! Invariant: bad input (a missing header field, a body that is not a `DataVersion`) is a
//! SYSTEM_ERROR whose remark says what was wrong; nothing here panics. As in 4.9.4, a request
//! without any extFields skips the header checks (Java's `decodeCommandCustomHeader` checks
//! `@CFNotNull` fields only when extFields exist) and reads as a null cluster / address: an
//! empty list, "changed" without a body.

use actix::prelude::*;
use actormq_core::format::java::java_string_hash;
use actormq_core::protocol::body::{parse_java_json, DataVersion, TopicList};
use actormq_core::protocol::codes::request_code;
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::protocol::header::{
    GetTopicsByClusterRequestHeader, QueryDataVersionRequestHeader, QueryDataVersionResponseHeader,
};
use std::time::Instant;

use super::messages::{DataVersionAnswer, GetTopicList, QueryDataVersion, TopicListQuery};
use super::{system_error, with_json, NamesrvProcessor, RouteRegistry};
use crate::metered::{Metered, Reply, Serve};
use crate::remoting::server::Handled;

/// `TopicSysFlag.FLAG_UNIT`.
const FLAG_UNIT: i32 = 0x1;
/// `TopicSysFlag.FLAG_UNIT_SUB`.
const FLAG_UNIT_SUB: i32 = 0x2;

/// The initial capacity of 4.9.4's brokerAddrTable.
const BROKER_ADDR_TABLE_CAPACITY: usize = 128;
/// The initial capacity of a topic's broker name → queue data map in 4.9.4 (`new HashMap<>()`).
const QUEUE_DATA_MAP_CAPACITY: usize = 16;

/// The value Java's `HashMap<String, _>` iteration would give first: the key in the lowest
/// hash bucket (`(h ^ h >>> 16) & (capacity - 1)`, `h` = `String.hashCode`), the capacity
/// doubled past the 0.75 load factor for the map's current size. Ties (one bucket) go to the
/// smaller name, where Java keeps insertion order; a map that once held more entries than it
/// does now may have a larger capacity in Java.
fn java_first<'a, V: 'a>(
    entries: impl Iterator<Item = (&'a String, &'a V)> + Clone,
    initial_capacity: usize,
) -> Option<&'a V> {
    let mut capacity = initial_capacity;
    while entries.clone().count() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let h = java_string_hash(key) as u32;
        (h ^ (h >> 16)) as usize & (capacity - 1)
    };
    entries
        .min_by(|(a, _), (b, _)| bucket(a).cmp(&bucket(b)).then_with(|| a.cmp(b)))
        .map(|(_, v)| v)
}

/// 4.9.4's `DataVersion.equals`: timestamp and counter (5.x's stateVersion is not compared).
fn same_version(a: &DataVersion, b: &DataVersion) -> bool {
    a.timestamp == b.timestamp && a.counter == b.counter
}

impl RouteRegistry {
    fn query_data_version(&mut self, q: &QueryDataVersion, now: Instant) -> DataVersionAnswer {
        let live = q
            .broker_addr
            .as_ref()
            .and_then(|a| self.broker_live_table.get_mut(a));
        let Some(live) = live else {
            return DataVersionAnswer {
                changed: true,
                current: None,
            };
        };
        let changed = !q
            .data_version
            .as_ref()
            .is_some_and(|v| same_version(&live.data_version, v));
        if !changed {
            live.last_update = now;
        }
        // As 4.9.4 writes it: a 4.9.4 DataVersion has no stateVersion.
        let current = DataVersion {
            state_version: None,
            ..live.data_version.clone()
        };
        DataVersionAnswer {
            changed,
            current: Some(current),
        }
    }

    fn topic_list(&self, q: &TopicListQuery) -> TopicList {
        match q {
            TopicListQuery::ByCluster(cluster) => self.topics_by_cluster(cluster.as_deref()),
            TopicListQuery::System => self.system_topic_list(),
            TopicListQuery::Unit => self.topics_by_first_flag(|f| f & FLAG_UNIT != 0),
            TopicListQuery::HasUnitSub => self.topics_by_first_flag(|f| f & FLAG_UNIT_SUB != 0),
            TopicListQuery::HasUnitSubUnUnit => {
                self.topics_by_first_flag(|f| f & FLAG_UNIT == 0 && f & FLAG_UNIT_SUB != 0)
            }
        }
    }

    fn topics_by_cluster(&self, cluster: Option<&str>) -> TopicList {
        let names = cluster.and_then(|c| self.cluster_addr_table.get(c));
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, per_broker)| {
                names.is_some_and(|names| per_broker.keys().any(|b| names.contains(b)))
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList {
            topic_list,
            broker_addr: None,
        }
    }

    fn system_topic_list(&self) -> TopicList {
        let mut names = std::collections::BTreeSet::new();
        for (cluster, brokers) in &self.cluster_addr_table {
            names.insert(cluster.clone());
            names.extend(brokers.iter().cloned());
        }
        // 4.9.4 takes the first broker name of its brokerAddrTable (`new HashMap<>(128)`), and
        // that broker's first address (lowest id: small Long keys iterate in order).
        let broker_addr = java_first(
            self.broker_addr_table
                .iter()
                .filter(|(_, b)| !b.broker_addrs.is_empty()),
            BROKER_ADDR_TABLE_CAPACITY,
        )
        .and_then(|b| b.broker_addrs.values().next().cloned());
        TopicList {
            topic_list: names.into_iter().collect(),
            broker_addr,
        }
    }

    /// Topics whose first queue data's `topicSysFlag` satisfies `pick` (4.9.4 looks at one
    /// queue data per topic only).
    fn topics_by_first_flag(&self, pick: impl Fn(i32) -> bool) -> TopicList {
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, per_broker)| {
                java_first(per_broker.iter(), QUEUE_DATA_MAP_CAPACITY)
                    .is_some_and(|q| pick(q.topic_sys_flag))
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList {
            topic_list,
            broker_addr: None,
        }
    }
}

impl Serve<QueryDataVersion> for RouteRegistry {
    type Reply = Reply<QueryDataVersion>;
    fn serve(&mut self, m: QueryDataVersion, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.query_data_version(&m, Instant::now()))
    }
}

impl Serve<GetTopicList> for RouteRegistry {
    type Reply = Reply<GetTopicList>;
    fn serve(&mut self, m: GetTopicList, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.topic_list(&m.0))
    }
}

/// A QUERY_DATA_VERSION body: a JSON object, or `null` (none). As fastjson, an array is no
/// `DataVersion` (serde alone would read it field by field).
fn data_version_body(body: &[u8]) -> Result<Option<DataVersion>, String> {
    let value: serde_json::Value = parse_java_json(body).map_err(|e| e.to_string())?;
    match value {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Object(_) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| e.to_string()),
        other => Err(format!("expected a JSON object, got {other}")),
    }
}

impl NamesrvProcessor {
    /// QUERY_DATA_VERSION: header checked, body read as a `DataVersion` (JSON `null` reads as
    /// none, so the answer is "changed", as in 4.9.4; no body at all is refused).
    pub(super) fn query_data_version(&self, req: &RemotingCommand) -> Handled {
        let broker_addr = if req.ext_fields.is_empty() {
            None
        } else {
            Some(
                or_system_error!(QueryDataVersionRequestHeader::from_command(req), req).broker_addr,
            )
        };
        if req.body.is_empty() {
            return system_error(
                req,
                "QUERY_DATA_VERSION needs the broker's DataVersion as its body".to_owned(),
            );
        }
        let data_version = match data_version_body(&req.body) {
            Ok(v) => v,
            Err(e) => {
                return system_error(
                    req,
                    format!("QUERY_DATA_VERSION body is not a DataVersion: {e}"),
                )
            }
        };
        let msg = QueryDataVersion {
            broker_addr,
            data_version,
        };
        self.ask(req, msg, |answer, resp| {
            let resp = resp.with_ext_fields(
                QueryDataVersionResponseHeader {
                    changed: answer.changed,
                }
                .to_ext_fields(),
            );
            match answer.current {
                Some(v) => with_json(resp, &v),
                None => resp,
            }
        })
    }

    /// GET_TOPICS_BY_CLUSTER (its `cluster` header required), GET_SYSTEM_TOPIC_LIST_FROM_NS,
    /// GET_UNIT_TOPIC_LIST, GET_HAS_UNIT_SUB_TOPIC_LIST, GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST.
    pub(super) fn topic_list_query(&self, req: &RemotingCommand) -> Handled {
        let query = match req.code {
            request_code::GET_TOPICS_BY_CLUSTER => {
                if req.ext_fields.is_empty() {
                    TopicListQuery::ByCluster(None)
                } else {
                    let h =
                        or_system_error!(GetTopicsByClusterRequestHeader::from_command(req), req);
                    TopicListQuery::ByCluster(Some(h.cluster))
                }
            }
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS => TopicListQuery::System,
            request_code::GET_UNIT_TOPIC_LIST => TopicListQuery::Unit,
            request_code::GET_HAS_UNIT_SUB_TOPIC_LIST => TopicListQuery::HasUnitSub,
            _ => TopicListQuery::HasUnitSubUnUnit,
        };
        self.ask(req, GetTopicList(query), |list, resp| {
            with_json(resp, &list)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namesrv::messages::RegisterBroker;
    use crate::namesrv::{DEFAULT_BROKER_EXPIRY, DEFAULT_SCAN_INTERVAL};
    use actormq_core::protocol::body::{
        RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
    };
    use actormq_core::protocol::header::RegisterBrokerRequestHeader;

    fn registry_with(topics: &[(&str, i32)]) -> RouteRegistry {
        let mut r = RouteRegistry::new(DEFAULT_SCAN_INTERVAL, DEFAULT_BROKER_EXPIRY);
        let table = topics
            .iter()
            .map(|(t, flag)| {
                let config = TopicConfig {
                    topic_name: (*t).to_owned(),
                    topic_sys_flag: *flag,
                    ..TopicConfig::default()
                };
                ((*t).to_owned(), config)
            })
            .collect();
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                data_version: DataVersion {
                    timestamp: 5,
                    counter: 2,
                    state_version: None,
                },
            },
            filter_server_list: vec![],
        };
        let header = RegisterBrokerRequestHeader {
            broker_name: "b".into(),
            broker_addr: "a:1".into(),
            cluster_name: "C".into(),
            ..Default::default()
        };
        r.register_broker(
            RegisterBroker {
                header,
                body,
                conn_id: None,
            },
            Instant::now(),
        );
        r
    }

    fn names(list: TopicList) -> Vec<String> {
        list.topic_list
    }

    #[test]
    fn java_first_is_the_lowest_hash_bucket() {
        let map: std::collections::BTreeMap<String, i32> =
            [("broker-a".to_owned(), 1), ("broker-l".to_owned(), 2)].into();
        // Buckets of 128: broker-a 91, broker-l 78 (Apache's 304 answer names broker-l).
        assert_eq!(java_first(map.iter(), BROKER_ADDR_TABLE_CAPACITY), Some(&2));
        assert_eq!(java_first(map.iter().take(1), 16), Some(&1));
    }

    #[test]
    fn unit_lists_follow_the_topic_sys_flag() {
        let r = registry_with(&[("N", 0), ("U", 1), ("S", 2), ("US", 3)]);
        assert_eq!(names(r.topic_list(&TopicListQuery::Unit)), ["U", "US"]);
        assert_eq!(
            names(r.topic_list(&TopicListQuery::HasUnitSub)),
            ["S", "US"]
        );
        assert_eq!(
            names(r.topic_list(&TopicListQuery::HasUnitSubUnUnit)),
            ["S"]
        );
    }

    #[test]
    fn an_unknown_cluster_has_no_topics() {
        let r = registry_with(&[("T", 0)]);
        let by = |c: &str| names(r.topic_list(&TopicListQuery::ByCluster(Some(c.into()))));
        assert_eq!(by("C"), ["T"]);
        assert!(by("nope").is_empty());
    }

    #[test]
    fn an_unchanged_data_version_says_so_and_an_unknown_broker_is_changed() {
        let mut r = registry_with(&[]);
        let q = |addr: &str, counter| QueryDataVersion {
            broker_addr: Some(addr.into()),
            data_version: Some(DataVersion {
                timestamp: 5,
                counter,
                state_version: Some(9),
            }),
        };
        let same = r.query_data_version(&q("a:1", 2), Instant::now());
        assert!(!same.changed);
        assert_eq!(same.current.unwrap().state_version, None);
        assert!(r.query_data_version(&q("a:1", 3), Instant::now()).changed);
        let unknown = r.query_data_version(&q("x:1", 2), Instant::now());
        assert_eq!(
            unknown,
            DataVersionAnswer {
                changed: true,
                current: None
            }
        );
    }
}
