//! `BrokerProcessor` — what the broker answers on its remoting port: each request code routed
//! to its handler (RocketMQ's SendMessageProcessor → [`super::send`], PullMessageProcessor →
//! [`super::pull`], QueryMessageProcessor → [`super::query`], ClientManageProcessor and
//! ConsumerManageProcessor → [`super::consumer`], ReplyMessageProcessor → [`super::reply`],
//! AdminBrokerProcessor → [`super::admin`] and [`super::runtime_info`]); and after each answer,
//! the RPC's `/metrics`.
//!
//! One `BrokerProcessor` per connection thread, built on that thread by
//! [`BrokerProcessorFactory`] (`Send + Sync`): what every thread shares is cloned into the
//! thread's [`BrokerCore`]; the [`SendBatcher`], the thread's rates and the metric caches are
//! made there. Called by each connection actor with one request at a time. This module is the
//! top of the request path: it uses every handler module and none uses it.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use actormq_core::meta;
use actormq_core::protocol::codes::{request_code as rq, response_code as rc};
use actormq_core::protocol::command::RemotingCommand;
use actormq_core::store::reader::StoreReader;
use arc_swap::ArcSwap;

use super::admin::ADMIN_CODES;
use super::clients::{ClientRegistry, SubscriptionView};
use super::context::{ok, reply, BrokerCore};
use super::live_config::LiveConfig;
use super::messages;
use super::metadata::{MetaView, Metadata};
use super::pull_hold::PullHold;
use super::rates::SharedRates;
use super::send_batch::SendBatcher;
use super::settings::ProcessorSettings;
use super::store_stats::Stats;
use crate::metered::ActorRef;
use crate::metrics::{BrokerMetrics, RequestMeters};
use crate::remoting::server::{ConnInfo, Handled, Processor, ProcessorFactory, Replied};
use crate::store::Store;

/// What every connection thread's [`BrokerCore`] is built from (`Send + Sync`).
pub struct BrokerProcessorFactory {
    pub store: Arc<Store>,
    pub reader: StoreReader,
    pub meta: ActorRef<Metadata>,
    pub meta_view: MetaView,
    pub clients: ActorRef<ClientRegistry>,
    pub subs: SubscriptionView,
    pub pull_hold: ActorRef<PullHold>,
    pub settings: Arc<ArcSwap<ProcessorSettings>>,
    pub live: Arc<LiveConfig>,
    pub rates: Arc<SharedRates>,
    pub store_host: SocketAddr,
    pub boot_ms: i64,
    pub stats: Arc<Stats>,
    pub metrics: Arc<BrokerMetrics>,
}

impl ProcessorFactory for BrokerProcessorFactory {
    fn build(&self) -> Rc<dyn Processor> {
        let rates = self.rates.for_thread();
        let metrics = RequestMeters::new(self.metrics.clone());
        let batcher = SendBatcher::new(
            self.store.clone(),
            self.stats.clone(),
            rates.clone(),
            metrics.clone(),
        );
        Rc::new(BrokerProcessor(Rc::new(BrokerCore {
            batcher: Rc::new(batcher),
            store: self.store.clone(),
            reader: self.reader.clone(),
            meta: self.meta.clone(),
            meta_view: self.meta_view.clone(),
            clients: self.clients.clone(),
            subs: self.subs.clone(),
            pull_hold: self.pull_hold.clone(),
            settings: self.settings.clone(),
            live: self.live.clone(),
            rates,
            all_rates: self.rates.clone(),
            store_host: self.store_host,
            boot_ms: self.boot_ms,
            stats: self.stats.clone(),
            metrics,
        })))
    }
}

/// What a connection thread's connections call with each request.
#[derive(Clone)]
pub struct BrokerProcessor(pub Rc<BrokerCore>);

impl Processor for BrokerProcessor {
    fn process(&self, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled {
        self.dispatch(req, conn, resumed)
    }

    fn replied(&self, request: &Replied, resp: &RemotingCommand) {
        let m = &self.0.metrics;
        m.rpc(
            request.code,
            resp.code,
            request.resumed,
            request.oneway,
            request.started,
        );
        m.note_refusal(request.code, resp);
    }

    fn connection_closed(&self, conn: &ConnInfo) {
        let clients = self.0.clients.clone();
        let id = conn.id;
        actix_rt::spawn(async move {
            let _ = clients.send(messages::ConnectionClosed(id)).await;
        });
    }
}

impl BrokerProcessor {
    fn dispatch(&self, req: RemotingCommand, conn: &ConnInfo, resumed: bool) -> Handled {
        let core = &self.0;
        match req.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => {
                core.clone().send(req, conn)
            }
            rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => core.clone().pull(req, conn, resumed),
            rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => {
                core.clone().send_reply(req, conn)
            }
            rq::QUERY_MESSAGE => core.query_message(req),
            rq::VIEW_MESSAGE_BY_ID => core.view_message(req),
            rq::HEART_BEAT => core.clone().heartbeat(req, conn),
            rq::UNREGISTER_CLIENT => core.unregister_client(req),
            rq::GET_CONSUMER_LIST_BY_GROUP => core.consumer_list(req),
            rq::QUERY_CONSUMER_OFFSET => core.query_consumer_offset(req),
            rq::UPDATE_CONSUMER_OFFSET => core.update_consumer_offset(req),
            rq::GET_MAX_OFFSET => core.offset_query(req, |r, t, q| r.max_offset(t, q).0 as i64),
            rq::GET_MIN_OFFSET => core.offset_query(req, |r, t, q| r.min_offset(t, q).0 as i64),
            rq::SEARCH_OFFSET_BY_TIMESTAMP => core.search_offset(req),
            rq::GET_EARLIEST_MSG_STORETIME => core.earliest_store_time(req),
            rq::CONSUMER_SEND_MSG_BACK => core.clone().send_back(req),
            rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => core.queue_locks(req),
            rq::UPDATE_AND_CREATE_TOPIC => core.create_topic(req),
            rq::GET_BROKER_RUNTIME_INFO => core.runtime_info(req),
            // The tables as the config files hold them (TopicConfigSerializeWrapper,
            // SubscriptionGroupWrapper): what a slave and `mqadmin` read.
            rq::GET_ALL_TOPIC_CONFIG => Handled::Reply(
                ok(&req).with_body(meta::to_json(&*core.meta_view.topics()).into_bytes()),
            ),
            rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => Handled::Reply(
                ok(&req).with_body(meta::to_json(&*core.meta_view.groups()).into_bytes()),
            ),
            c if ADMIN_CODES.contains(&c) => core.admin(req, &conn.peer.to_string()),
            code => Handled::Reply(reply(
                &req,
                rc::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            )),
        }
    }
}
