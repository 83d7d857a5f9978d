//! `Metadata` — owns the broker's topic, subscription-group and consumer-offset tables and their
//! files under `config/` (RocketMQ's TopicConfigManager, SubscriptionGroupManager and
//! ConsumerOffsetManager).
//!
//! In (declared in [`super::messages`], with who sends them): [`EnsureTopic`], [`CreateTopic`],
//! [`DeleteTopic`], [`EnsureGroup`], [`UpdateGroup`], [`DeleteGroup`], [`CommitOffset`],
//! [`QueryOffset`], [`GetOffsets`], [`GroupsOfTopic`], [`TouchTopics`], [`PersistAll`],
//! [`FromMaster`] (a slave's copy of its master's tables), a timer persisting offsets every
//! `flushConsumerOffsetInterval`. Out: replies; after any topic change a fresh snapshot is
//! published to [`MetaView`] (read lock-free by every connection) and the registrar is asked to
//! register again.
//!
//! Invariant: files are written atomically (temp file, fsync, rename), each keeping the version
//! it replaces as `<file>.bak`, which a start uses when the file is missing, empty or damaged;
//! the tables in memory are the truth and the published snapshot is never behind a reply.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actormq_core::clock::SharedClock;
use actormq_core::meta::{
    self, ConsumerOffsets, GroupTable, SubscriptionGroupConfig, TopicConfig, TopicTable,
    PERM_INHERIT, PERM_READ, PERM_WRITE,
};
use arc_swap::ArcSwap;

use super::messages::{
    CommitOffset, CreateTopic, DeleteGroup, DeleteTopic, EnsureGroup, EnsureTopic, FromMaster,
    GetOffsets, GroupsOfTopic, PersistAll, QueryOffset, TouchTopics, UpdateGroup,
};
use crate::fsutil::{load_with_backup, write_with_backup};
use crate::metered::{Metered, Reply, Serve, Service};

/// Lock-free, read-only view of topics and groups for request handling.
#[derive(Clone, Default)]
pub struct MetaView {
    topics: Arc<ArcSwap<TopicTable>>,
    groups: Arc<ArcSwap<GroupTable>>,
}

impl MetaView {
    pub fn topic(&self, name: &str) -> Option<TopicConfig> {
        self.topics.load().topic_config_table.get(name).cloned()
    }
    /// `f` of a topic's config, without copying it (the SEND path reads a few numbers).
    pub fn with_topic<R>(&self, name: &str, f: impl FnOnce(&TopicConfig) -> R) -> Option<R> {
        self.topics.load().topic_config_table.get(name).map(f)
    }
    pub fn topics(&self) -> Arc<TopicTable> {
        self.topics.load_full()
    }
    pub fn group(&self, name: &str) -> Option<SubscriptionGroupConfig> {
        self.groups
            .load()
            .subscription_group_table
            .get(name)
            .cloned()
    }
    /// `f` of a group's config, without copying it (the PULL path reads a few fields).
    pub fn with_group<R>(
        &self,
        name: &str,
        f: impl FnOnce(&SubscriptionGroupConfig) -> R,
    ) -> Option<R> {
        self.groups.load().subscription_group_table.get(name).map(f)
    }
    pub fn groups(&self) -> Arc<GroupTable> {
        self.groups.load_full()
    }
}

/// Broker settings the metadata needs to build its default topics and auto-create rules.
#[derive(Clone, Debug)]
pub struct MetaSettings {
    pub cluster: String,
    pub broker_name: String,
    pub auto_create_topic: bool,
    pub auto_create_group: bool,
    pub default_topic_queue_nums: u32,
    pub cluster_topic_enable: bool,
    pub broker_topic_enable: bool,
    pub offset_flush_interval: Duration,
}

pub struct Metadata {
    dir: PathBuf,
    settings: MetaSettings,
    clock: SharedClock,
    topics: TopicTable,
    groups: GroupTable,
    offsets: ConsumerOffsets,
    offsets_dirty: bool,
    view: MetaView,
    on_topic_change: Option<TopicHook>,
}

/// Told of every topic change; returns a receiver answered once the name servers have the new
/// table (the registrar's [`super::messages::RegisterNow`] waiter).
pub type TopicHook = Box<dyn Fn() -> Registered + Send + 'static>;
/// Answered when the name servers have registered a topic change (an error = nobody listens).
pub type Registered = tokio::sync::oneshot::Receiver<()>;

/// A table from its file, or its `.bak` (see [`load_with_backup`]); neither = empty.
fn load_json<T: Default + for<'de> serde::Deserialize<'de>>(path: &Path) -> std::io::Result<T> {
    Ok(load_with_backup(path, meta::from_java_json::<T>)?
        .into_option()
        .unwrap_or_default())
}

impl Metadata {
    /// Loads `topics.json`, `subscriptionGroup.json`, `consumerOffset.json` from `dir` (each
    /// falling back to its `.bak`; neither = empty) and adds the broker's default topics (as RocketMQ's
    /// TopicConfigManager does at start).
    pub fn load(
        dir: PathBuf,
        settings: MetaSettings,
        clock: SharedClock,
    ) -> std::io::Result<Metadata> {
        std::fs::create_dir_all(&dir)?;
        let topics: TopicTable = load_json(&dir.join("topics.json"))?;
        let groups: GroupTable = load_json(&dir.join("subscriptionGroup.json"))?;
        let offsets: ConsumerOffsets = load_json(&dir.join("consumerOffset.json"))?;
        let mut m = Metadata {
            dir,
            settings,
            clock,
            topics,
            groups,
            offsets,
            offsets_dirty: false,
            view: MetaView::default(),
            on_topic_change: None,
        };
        m.add_default_topics();
        m.publish();
        Ok(m)
    }

    pub fn view(&self) -> MetaView {
        self.view.clone()
    }

    /// Called after any topic change (the registrar re-registers with the name servers).
    pub fn on_topic_change(&mut self, f: TopicHook) {
        self.on_topic_change = Some(f);
    }

    fn add_default_topics(&mut self) {
        let s = self.settings.clone();
        let rw = PERM_READ | PERM_WRITE;
        let mut defaults = vec![
            TopicConfig::new("SELF_TEST_TOPIC", 1, 1, rw),
            TopicConfig::new("BenchmarkTest", 1024, 1024, rw),
            TopicConfig::new("OFFSET_MOVED_EVENT", 1, 1, rw),
            TopicConfig::new("SCHEDULE_TOPIC_XXXX", 18, 18, rw),
            TopicConfig::new(&format!("{}_REPLY_TOPIC", s.cluster), 1, 1, rw),
        ];
        if s.auto_create_topic {
            let n = s.default_topic_queue_nums;
            defaults.push(TopicConfig::new(
                meta::AUTO_CREATE_TOPIC,
                n,
                n,
                PERM_INHERIT | rw,
            ));
        }
        if s.cluster_topic_enable {
            defaults.push(TopicConfig::new(&s.cluster, 16, 16, PERM_INHERIT | rw));
        }
        if s.broker_topic_enable {
            defaults.push(TopicConfig::new(&s.broker_name, 1, 1, PERM_INHERIT | rw));
        }
        for t in defaults {
            self.topics
                .topic_config_table
                .entry(t.topic_name.clone())
                .or_insert(t);
        }
    }

    fn publish(&mut self) {
        self.view.topics.store(Arc::new(self.topics.clone()));
        self.view.groups.store(Arc::new(self.groups.clone()));
    }

    fn topics_changed(&mut self) -> std::io::Result<()> {
        self.topics_changed_then().map(drop)
    }

    /// As [`Self::topics_changed`], returning when the name servers will have the change.
    fn topics_changed_then(&mut self) -> std::io::Result<Option<Registered>> {
        self.topics.data_version.next(self.clock.now_ms());
        self.publish();
        write_with_backup(
            &self.dir.join("topics.json"),
            meta::to_json(&self.topics).as_bytes(),
        )?;
        Ok(self.on_topic_change.as_ref().map(|f| f()))
    }

    fn groups_changed(&mut self) -> std::io::Result<()> {
        self.groups.data_version.next(self.clock.now_ms());
        self.publish();
        write_with_backup(
            &self.dir.join("subscriptionGroup.json"),
            meta::to_json(&self.groups).as_bytes(),
        )
    }

    pub fn persist_offsets(&mut self) -> std::io::Result<()> {
        if !self.offsets_dirty {
            return Ok(());
        }
        write_with_backup(
            &self.dir.join("consumerOffset.json"),
            meta::to_json(&self.offsets).as_bytes(),
        )?;
        self.offsets_dirty = false;
        Ok(())
    }
}

impl Service for Metadata {
    const NAME: &'static str = "metadata";

    fn started(&mut self, ctx: &mut Context<Metered<Self>>) {
        ctx.run_interval(self.settings.offset_flush_interval, |act, _| {
            if let Err(e) = act.inner.persist_offsets() {
                tracing::error!(error = %e, "cannot persist consumerOffset.json");
            }
        });
    }
}

impl Serve<EnsureTopic> for Metadata {
    type Reply = std::io::Result<TopicConfig>;
    fn serve(&mut self, m: EnsureTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(t) = self.topics.topic_config_table.get(&m.topic) {
            return Ok(t.clone());
        }
        let t = TopicConfig::new(&m.topic, m.queues, m.queues, m.perm);
        self.topics
            .topic_config_table
            .insert(m.topic.clone(), t.clone());
        tracing::info!(topic = %m.topic, queues = m.queues, "topic created");
        self.topics_changed()?;
        Ok(t)
    }
}

impl Serve<CreateTopic> for Metadata {
    type Reply = ResponseFuture<std::io::Result<()>>;
    fn serve(&mut self, m: CreateTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        tracing::info!(topic = %m.0.topic_name, read = m.0.read_queue_nums, write = m.0.write_queue_nums, perm = m.0.perm, "topic created or updated");
        let mut t = m.0;
        if t.attributes.is_empty() {
            // As RocketMQ 5 with no attribute modification in the request: the topic keeps the
            // attributes it has (set by RocketMQ's tools or carried over in topics.json).
            if let Some(old) = self.topics.topic_config_table.get(&t.topic_name) {
                t.attributes = old.attributes.clone();
            }
        }
        self.topics
            .topic_config_table
            .insert(t.topic_name.clone(), t);
        let registered = self.topics_changed_then();
        Box::pin(async move {
            if let Some(rx) = registered? {
                let _ = rx.await;
            }
            Ok(())
        })
    }
}

impl Serve<DeleteTopic> for Metadata {
    type Reply = std::io::Result<bool>;
    fn serve(&mut self, m: DeleteTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let existed = self.topics.topic_config_table.remove(&m.0).is_some();
        let prefix = format!("{}@", m.0);
        self.offsets
            .offset_table
            .retain(|k, _| !k.starts_with(&prefix));
        self.offsets_dirty = true;
        if existed {
            self.topics_changed()?;
        }
        Ok(existed)
    }
}

impl Serve<EnsureGroup> for Metadata {
    type Reply = std::io::Result<Option<SubscriptionGroupConfig>>;
    fn serve(&mut self, m: EnsureGroup, _: &mut Context<Metered<Self>>) -> Self::Reply {
        if let Some(g) = self.groups.subscription_group_table.get(&m.0) {
            return Ok(Some(g.clone()));
        }
        if !self.settings.auto_create_group {
            return Ok(None);
        }
        let g = SubscriptionGroupConfig {
            group_name: m.0.clone(),
            ..Default::default()
        };
        self.groups.subscription_group_table.insert(m.0, g.clone());
        self.groups_changed()?;
        Ok(Some(g))
    }
}

impl Serve<UpdateGroup> for Metadata {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, m: UpdateGroup, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.groups
            .subscription_group_table
            .insert(m.0.group_name.clone(), m.0);
        self.groups_changed()
    }
}

impl Serve<DeleteGroup> for Metadata {
    type Reply = std::io::Result<bool>;
    fn serve(&mut self, m: DeleteGroup, _: &mut Context<Metered<Self>>) -> Self::Reply {
        if m.remove_offset {
            let before = self.offsets.offset_table.len();
            self.offsets.offset_table.retain(|k, _| {
                let mut parts = k.split('@');
                !matches!((parts.next(), parts.next(), parts.next()), (Some(_), Some(g), None) if g == m.group)
            });
            self.offsets_dirty |= self.offsets.offset_table.len() != before;
        }
        let existed = self
            .groups
            .subscription_group_table
            .remove(&m.group)
            .is_some();
        if existed {
            self.groups_changed()?;
        }
        Ok(existed)
    }
}

impl Metadata {
    /// After a table was replaced by the master's: publish it and write its file.
    fn replaced(&mut self, file: &str, json: String) -> std::io::Result<()> {
        self.publish();
        write_with_backup(&self.dir.join(file), json.as_bytes())
    }
}

impl Serve<FromMaster> for Metadata {
    type Reply = std::io::Result<bool>;
    fn serve(&mut self, m: FromMaster, _: &mut Context<Metered<Self>>) -> Self::Reply {
        match m {
            FromMaster::Topics(t) => {
                if t.data_version == self.topics.data_version {
                    return Ok(false);
                }
                self.topics = t;
                self.replaced("topics.json", meta::to_json(&self.topics))?;
                if let Some(f) = &self.on_topic_change {
                    f();
                }
                Ok(true)
            }
            FromMaster::Groups(g) => {
                if g.data_version == self.groups.data_version {
                    return Ok(false);
                }
                self.groups = g;
                self.replaced("subscriptionGroup.json", meta::to_json(&self.groups))?;
                Ok(true)
            }
            FromMaster::Offsets(o) => {
                let mut changed = false;
                for (key, queues) in o.offset_table {
                    let mine = self.offsets.offset_table.entry(key).or_default();
                    if *mine != queues {
                        *mine = queues;
                        changed = true;
                    }
                }
                if changed {
                    self.offsets_dirty = true;
                    self.persist_offsets()?;
                }
                Ok(changed)
            }
        }
    }
}

impl Serve<CommitOffset> for Metadata {
    type Reply = ();
    fn serve(&mut self, m: CommitOffset, _: &mut Context<Metered<Self>>) {
        self.offsets.set(&m.topic, &m.group, m.queue_id, m.offset);
        self.offsets_dirty = true;
    }
}

impl Serve<QueryOffset> for Metadata {
    type Reply = Reply<QueryOffset>;
    fn serve(&mut self, m: QueryOffset, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.offsets.get(&m.topic, &m.group, m.queue_id))
    }
}

impl Serve<GetOffsets> for Metadata {
    type Reply = Reply<GetOffsets>;
    fn serve(&mut self, _: GetOffsets, _: &mut Context<Metered<Self>>) -> Self::Reply {
        MessageResult(self.offsets.clone())
    }
}

impl Serve<GroupsOfTopic> for Metadata {
    type Reply = Reply<GroupsOfTopic>;
    fn serve(&mut self, m: GroupsOfTopic, _: &mut Context<Metered<Self>>) -> Self::Reply {
        let groups = self
            .offsets
            .offset_table
            .keys()
            .filter_map(|k| k.rsplit_once('@'))
            .filter(|(t, _)| *t == m.0)
            .map(|(_, g)| g.to_string())
            .collect();
        MessageResult(groups)
    }
}

impl Serve<TouchTopics> for Metadata {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: TouchTopics, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.topics_changed()
    }
}

impl Serve<PersistAll> for Metadata {
    type Reply = std::io::Result<()>;
    fn serve(&mut self, _: PersistAll, _: &mut Context<Metered<Self>>) -> Self::Reply {
        self.offsets_dirty = true;
        self.persist_offsets()?;
        write_with_backup(
            &self.dir.join("topics.json"),
            meta::to_json(&self.topics).as_bytes(),
        )?;
        write_with_backup(
            &self.dir.join("subscriptionGroup.json"),
            meta::to_json(&self.groups).as_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actormq_core::clock::ManualClock;

    fn settings() -> MetaSettings {
        MetaSettings {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            auto_create_topic: true,
            auto_create_group: true,
            default_topic_queue_nums: 4,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            offset_flush_interval: Duration::from_secs(5),
        }
    }

    /// UPDATE_AND_CREATE_TOPIC carries no attribute modification here: as in RocketMQ 5, the
    /// topic keeps the attributes it had (from a topics.json RocketMQ wrote), on disk too.
    #[actix_rt::test]
    async fn an_update_keeps_the_rocketmq_5_attributes_of_the_topic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("topics.json"),
            r#"{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"F":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"F","topicSysFlag":0,"writeQueueNums":8,"attributes":{"message.type":"FIFO"}}}}"#,
        )
        .unwrap();
        let clock: SharedClock = Arc::new(ManualClock::new(1));
        let meta = Metadata::load(dir.path().to_path_buf(), settings(), clock).unwrap();
        let view = meta.view();
        let meta = crate::metered::start_on(None, meta);
        meta.send(CreateTopic(TopicConfig::new("F", 16, 16, 6)))
            .await
            .unwrap()
            .unwrap();
        let t = view.topic("F").expect("topic F");
        assert_eq!((t.read_queue_nums, t.write_queue_nums), (16, 16));
        assert_eq!(
            t.attributes.get("message.type").map(String::as_str),
            Some("FIFO")
        );
        let on_disk = std::fs::read_to_string(dir.path().join("topics.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&on_disk).unwrap();
        assert_eq!(
            v["topicConfigTable"]["F"]["attributes"]["message.type"], "FIFO",
            "{on_disk}"
        );
    }
}
