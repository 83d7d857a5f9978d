// The Java-side driver of the conformance suite (tests/conformance.rs): Apache RocketMQ 4.9.4's
// own client and mqadmin, run in one JVM per broker under test.
//
// Protocol (stdin/stdout, one step at a time): the suite writes one line, `<verb> key=value ...`
// (or `admin <mqadmin arguments>`); the driver prints what the client or tool observed, one fact
// per line, then a line `@@END`. Everything that can vary between two runs against the same broker
// for reasons no broker controls (which queue a producer starts at, the order concurrent
// deliveries arrive in) is made deterministic here: sends pick their queue with a selector,
// consumed messages are printed sorted. Volatile values (times, addresses, msgIds) are printed
// as they are and masked by the suite, so the masks stay in one place.
//
// Only the 4.9.4 client and tools jars are on the classpath, so every call here is exactly what
// a user's program or an operator's mqadmin sends.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class JavaDriver {
    static String namesrv;
    static String broker;
    static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    /** msgIds of the last send step, by message index, for `view` steps. */
    static final List<String> lastIds = new ArrayList<>();
    static final Map<String, DefaultMQProducer> producers = new HashMap<>();
    static NettyRemotingClient raw;
    /** Push consumers left running between steps (`start-push`), by name. */
    static final Map<String, DefaultMQPushConsumer> running = new HashMap<>();
    /** What each running consumer started with `collect` or `orderly` received, in order. */
    static final Map<String, ConcurrentLinkedQueue<MessageExt>> collected = new HashMap<>();
    /** Client instance names count up, so client ids are the same in every run. */
    static int instances;

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        broker = args[1];
        System.setProperty("rocketmq.namesrv.addr", namesrv);
        // A topic a consumer learns of after it started (a group's %RETRY% topic, created by its
        // first heartbeat) is routed at the next name-server poll and assigned at the next
        // rebalance: 30 s and 20 s by default, so whether a retry came back within a step's
        // limit was luck on either broker. Both at 1 s make it a matter of seconds.
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        // The client's own log lines go to stderr; stdout carries only the protocol.
        System.setOut(System.err);
        // mqadmin's option parser exits the JVM on an option it does not know; that must end
        // the step, not the driver (Java 17 still allows a security manager, with a warning).
        System.setSecurityManager(new SecurityManager() {
            @Override public void checkExit(int status) { throw new SecurityException("mqadmin exited with status " + status); }
            @Override public void checkPermission(java.security.Permission perm) { }
            @Override public void checkPermission(java.security.Permission perm, Object context) { }
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            try {
                step(line);
            } catch (Throwable e) {
                OUT.println("error " + e.getClass().getSimpleName() + ": " + firstLine(e.getMessage()));
            }
            OUT.println("@@END");
            OUT.flush();
        }
        for (DefaultMQProducer p : producers.values()) p.shutdown();
        if (raw != null) raw.shutdown();
        if (adminExt != null) adminExt.shutdown();
        System.setSecurityManager(null);
        System.exit(0);
    }

    static String firstLine(String s) {
        if (s == null) return "";
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    static Map<String, String> kv(String[] words, int from) {
        Map<String, String> m = new HashMap<>();
        for (int i = from; i < words.length; i++) {
            int eq = words[i].indexOf('=');
            if (eq > 0) m.put(words[i].substring(0, eq), words[i].substring(eq + 1).replace("%20", " "));
        }
        return m;
    }

    static void step(String line) throws Exception {
        String[] w = line.split(" +");
        if (w[0].equals("admin")) {
            admin(line.substring("admin".length()).trim());
            return;
        }
        Map<String, String> a = kv(w, 1);
        switch (w[0]) {
            case "send": send(a); break;
            case "pull": pull(a); break;
            case "push": push(a); break;
            case "start-push": startPush(a); break;
            case "stop-push": stopPush(a); break;
            case "litepull": litePull(a); break;
            case "view": view(a); break;
            case "querykey": queryKey(a); break;
            case "request": request(a); break;
            case "raw": raw(a); break;
            case "wait-ready": waitReady(); break;
            case "admin-route": adminRoute(a); break;
            case "admin-cluster": adminCluster(); break;
            case "wait-balanced": waitBalanced(a); break;
            case "wait-trace": waitTrace(a); break;
            case "wait-max": waitMax(a); break;
            case "wait-offline": waitOffline(a); break;
            default: OUT.println("unknown step " + w[0]);
        }
    }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = producers.get(group);
        if (p == null) {
            // A group named ...Trace sends message traces (to RMQ_SYS_TRACE_TOPIC).
            p = new DefaultMQProducer(group, group.endsWith("Trace"));
            p.setNamesrvAddr(namesrv);
            p.setInstanceName("conf-" + group);
            p.setSendMsgTimeout(10000);
            p.setRetryTimesWhenSendFailed(0);
            p.setRetryTimesWhenSendAsyncFailed(0);
            if (group.endsWith("Zip")) p.setCompressMsgBodyOverHowmuch(16);
            p.start();
            producers.put(group, p);
        }
        return p;
    }

    static String body(Map<String, String> a, int i) {
        int size = Integer.parseInt(a.getOrDefault("size", "0"));
        String base = a.getOrDefault("body", "m") + "-" + i;
        if (size <= base.length()) return base;
        StringBuilder b = new StringBuilder(base);
        while (b.length() < size) b.append((char) ('a' + b.length() % 26));
        return b.toString();
    }

    static Message message(Map<String, String> a, int i) {
        String[] tags = a.getOrDefault("tags", "").split(",");
        Message m = new Message(a.get("topic"), body(a, i).getBytes(StandardCharsets.UTF_8));
        if (!tags[0].isEmpty()) m.setTags(tags[i % tags.length]);
        if (a.containsKey("keys")) m.setKeys(a.get("keys") + i);
        if (a.containsKey("delay")) m.setDelayTimeLevel(Integer.parseInt(a.get("delay")));
        if (a.containsKey("prop")) {
            String[] p = a.get("prop").split(":", 2);
            m.putUserProperty(p[0], p[1]);
        }
        return m;
    }

    /** A deterministic queue choice: message i goes to queue i mod the writable queues. */
    static MessageQueue queueFor(List<MessageQueue> mqs, int i) {
        return mqs.get(i % mqs.size());
    }

    static List<MessageQueue> writeQueues(DefaultMQProducer p, String topic) throws Exception {
        List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
        mqs.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
        return mqs;
    }

    static void send(Map<String, String> a) throws Exception {
        DefaultMQProducer p = producer(a.getOrDefault("group", "ConfProducer"));
        String mode = a.getOrDefault("mode", "sync");
        int n = Integer.parseInt(a.getOrDefault("n", "1"));
        String topic = a.get("topic");
        lastIds.clear();
        if (mode.equals("plain")) {
            // The producer's own queue choice (it starts at a random queue): status only.
            for (int i = 0; i < n; i++) OUT.println("send " + i + " " + p.send(message(a, i)).getSendStatus());
            return;
        }
        List<MessageQueue> mqs = writeQueues(p, topic);
        long before = visible(p, mqs);
        try {
            if (mode.equals("batch")) {
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < n; i++) batch.add(message(a, i));
                SendResult r = p.send(batch, mqs.get(Integer.parseInt(a.getOrDefault("queue", "0"))));
                printSend(0, r);
                for (String id : r.getMsgId().split(",")) lastIds.add(id);
            } else {
                sendTo(p, a, mode, n, mqs);
            }
        } finally {
            // The messages are stored; the step ends once consumers can see them too (both
            // brokers dispatch to their ConsumeQueues asynchronously). Delayed ones are not in
            // their topic yet.
            long deadline = System.currentTimeMillis() + 10000;
            while (!a.containsKey("delay") && visible(p, mqs) < before + n && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
        }
    }

    /** The sum of the queues' max offsets: how many messages consumers can see. */
    static long visible(DefaultMQProducer p, List<MessageQueue> mqs) throws Exception {
        long sum = 0;
        for (MessageQueue mq : mqs) sum += p.maxOffset(mq);
        return sum;
    }

    static void sendTo(DefaultMQProducer p, Map<String, String> a, String mode, int n, List<MessageQueue> mqs) throws Exception {
        if (mode.equals("async")) {
            CountDownLatch done = new CountDownLatch(n);
            SendResult[] results = new SendResult[n];
            String[] errors = new String[n];
            for (int i = 0; i < n; i++) {
                final int idx = i;
                p.send(message(a, i), queueFor(mqs, i), new SendCallback() {
                    public void onSuccess(SendResult r) { results[idx] = r; done.countDown(); }
                    public void onException(Throwable e) { errors[idx] = e.toString(); done.countDown(); }
                });
                // One at a time per queue so queue offsets are deterministic.
                if ((i + 1) % mqs.size() == 0) done.await(20, TimeUnit.SECONDS);
            }
            done.await(20, TimeUnit.SECONDS);
            for (int i = 0; i < n; i++) {
                if (results[i] != null) printSend(i, results[i]); else OUT.println("send " + i + " error " + errors[i]);
                lastIds.add(results[i] == null ? "" : results[i].getMsgId());
            }
            return;
        }
        for (int i = 0; i < n; i++) {
            Message m = message(a, i);
            MessageQueue mq = a.containsKey("queue") ? mqs.get(Integer.parseInt(a.get("queue"))) : queueFor(mqs, i);
            if (mode.equals("oneway")) {
                p.sendOneway(m, mq);
                OUT.println("send " + i + " oneway");
            } else {
                SendResult r = p.send(m, mq);
                printSend(i, r);
                lastIds.add(r.getMsgId());
            }
        }
    }

    static void printSend(int i, SendResult r) {
        OUT.println("send " + i + " " + r.getSendStatus() + " queue=" + r.getMessageQueue().getQueueId()
            + " queueOffset=" + r.getQueueOffset() + " msgId=" + r.getMsgId() + " offsetMsgId=" + r.getOffsetMsgId()
            + " regionId=" + r.getRegionId() + " traceOn=" + r.isTraceOn());
    }

    static String describe(MessageExt m) {
        TreeMap<String, String> props = new TreeMap<>(m.getProperties());
        return "msg topic=" + m.getTopic() + " queue=" + m.getQueueId() + " queueOffset=" + m.getQueueOffset()
            + " tags=" + m.getTags() + " keys=" + m.getKeys() + " flag=" + m.getFlag() + " sysFlag=" + m.getSysFlag()
            + " reconsume=" + m.getReconsumeTimes() + " bodyCRC=" + m.getBodyCRC() + " storeSize=" + m.getStoreSize()
            + " body=" + new String(m.getBody(), StandardCharsets.UTF_8) + " props=" + props;
    }

    static void printSorted(List<MessageExt> msgs) {
        List<MessageExt> sorted = new ArrayList<>(msgs);
        sorted.sort(Comparator.comparing(MessageExt::getTopic).thenComparingInt(MessageExt::getQueueId)
            .thenComparingLong(MessageExt::getQueueOffset));
        for (MessageExt m : sorted) OUT.println(describe(m));
    }

    static void pull(Map<String, String> a) throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(a.getOrDefault("group", "ConfPull"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("conf-pull-" + (++instances));
        c.start();
        try {
            String topic = a.get("topic");
            List<MessageQueue> mqs = new ArrayList<>(c.fetchSubscribeMessageQueues(topic));
            mqs.sort(Comparator.comparingInt(MessageQueue::getQueueId));
            String only = a.get("queue");
            for (MessageQueue mq : mqs) {
                if (only != null && mq.getQueueId() != Integer.parseInt(only)) continue;
                PullResult r = c.pull(mq, a.getOrDefault("expr", "*"), Long.parseLong(a.getOrDefault("offset", "0")),
                    Integer.parseInt(a.getOrDefault("max", "32")));
                OUT.println("pull queue=" + mq.getQueueId() + " " + r.getPullStatus() + " next=" + r.getNextBeginOffset()
                    + " min=" + r.getMinOffset() + " max=" + r.getMaxOffset());
                if (r.getMsgFoundList() != null) printSorted(r.getMsgFoundList());
            }
        } finally {
            c.shutdown();
        }
    }

    static void push(Map<String, String> a) throws Exception {
        int n = Integer.parseInt(a.getOrDefault("n", "1"));
        long timeout = Long.parseLong(a.getOrDefault("timeout", "30000"));
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.getOrDefault("group", "ConfPush"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("conf-push-" + (++instances));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollNameServerInterval(1000);
        if (a.containsKey("broadcast")) c.setMessageModel(MessageModel.BROADCASTING);
        c.subscribe(a.get("topic"), a.getOrDefault("expr", "*"));
        ConcurrentLinkedQueue<MessageExt> got = new ConcurrentLinkedQueue<>();
        CountDownLatch latch = new CountDownLatch(n);
        int fail = Integer.parseInt(a.getOrDefault("fail", "0"));
        // The delay level of a failed message's retry: -1 sends it straight to the DLQ.
        int retryLevel = Integer.parseInt(a.getOrDefault("retryLevel", "0"));
        if (a.containsKey("maxReconsume")) c.setMaxReconsumeTimes(Integer.parseInt(a.get("maxReconsume")));
        AtomicInteger failed = new AtomicInteger();
        boolean reply = a.containsKey("reply");
        if (a.containsKey("orderly")) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) { got.add(m); latch.countDown(); }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                if (failed.get() < fail) {
                    failed.incrementAndGet();
                    ctx.setDelayLevelWhenNextConsume(retryLevel);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                for (MessageExt m : msgs) {
                    got.add(m);
                    latch.countDown();
                    if (reply) {
                        try {
                            Message r = MessageUtil.createReplyMessage(m, ("reply-to-" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                            producer("ConfReplier").send(r);
                        } catch (Exception e) {
                            OUT.println("reply error " + e);
                        }
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        boolean all = latch.await(timeout, TimeUnit.MILLISECONDS);
        if (all) { drained(c, timeout); committed(c, 10000); }
        if (a.containsKey("linger")) Thread.sleep(Long.parseLong(a.get("linger")));
        c.shutdown();
        OUT.println("push received=" + got.size() + " all=" + all);
        printSorted(new ArrayList<>(got));
    }

    /**
     * Waits (bounded) until the consumer's offset of every queue it holds has reached the queue's
     * max offset: what it commits at shutdown is then "everything", not wherever its last pull
     * happened to be when the step's messages had arrived.
     */
    static void drained(DefaultMQPushConsumer c, long timeout) throws Exception {
        org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl impl = c.getDefaultMQPushConsumerImpl();
        long deadline = System.currentTimeMillis() + timeout;
        while (System.currentTimeMillis() < deadline) {
            boolean done = true;
            for (MessageQueue mq : impl.getRebalanceImpl().getProcessQueueTable().keySet()) {
                long max = impl.getmQClientFactory().getMQAdminImpl().maxOffset(mq);
                long have = impl.getOffsetStore().readOffset(mq, org.apache.rocketmq.client.consumer.store.ReadOffsetType.READ_FROM_MEMORY);
                if (have < max) done = false;
            }
            if (done) return;
            Thread.sleep(100);
        }
    }

    /** A push consumer that stays up for the following steps (mqadmin consumerConnection...). */
    static void startPush(Map<String, String> a) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("conf-live-" + (++instances));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollNameServerInterval(1000);
        c.subscribe(a.get("topic"), a.getOrDefault("expr", "*"));
        boolean reply = a.containsKey("reply");
        ConcurrentLinkedQueue<MessageExt> got = new ConcurrentLinkedQueue<>();
        if (a.containsKey("collect") || a.containsKey("orderly")) collected.put(a.get("name"), got);
        if (a.containsKey("orderly")) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                got.addAll(msgs);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.addAll(msgs);
            for (MessageExt m : msgs) {
                if (!reply) continue;
                try {
                    Message r = MessageUtil.createReplyMessage(m, ("reply-to-" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                    producer("ConfReplier").send(r);
                } catch (Exception e) {
                    System.err.println("reply failed: " + e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        running.put(a.get("name"), c);
        // Until the broker has seen its heartbeat and it holds its queues, it is not "online".
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline
            && c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().isEmpty()) {
            Thread.sleep(100);
        }
        // How many queues it holds by now depends on when its rebalances ran: not printed.
        OUT.println("started " + !c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().isEmpty());
    }

    static void stopPush(Map<String, String> a) throws Exception {
        DefaultMQPushConsumer c = running.remove(a.get("name"));
        if (c != null) {
            // Whatever it had to consume is consumed: what it commits does not depend on timing.
            drained(c, 10000);
            committed(c, 10000);
            c.shutdown();
        }
        OUT.println("stopped " + (c != null));
        ConcurrentLinkedQueue<MessageExt> got = collected.remove(a.get("name"));
        if (got != null) {
            List<MessageExt> inOrder = new ArrayList<>(got);
            OUT.println("received=" + inOrder.size() + " inQueueOrder=" + inQueueOrder(inOrder));
            printSorted(inOrder);
        }
    }

    /**
     * Commits the consumer's offsets and waits (bounded) until the broker answers them: its
     * shutdown commits them again, oneway, so what the broker holds afterwards does not depend
     * on whether those last oneway frames beat the connection's close.
     */
    static void committed(DefaultMQPushConsumer c, long timeout) throws Exception {
        if (c.getMessageModel() != MessageModel.CLUSTERING) return; // offsets kept locally
        org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl impl = c.getDefaultMQPushConsumerImpl();
        impl.persistConsumerOffset();
        long deadline = System.currentTimeMillis() + timeout;
        for (MessageQueue mq : impl.getRebalanceImpl().getProcessQueueTable().keySet()) {
            long want = impl.getOffsetStore().readOffset(mq, org.apache.rocketmq.client.consumer.store.ReadOffsetType.READ_FROM_MEMORY);
            if (want < 0) continue;
            long have = -1;
            while (System.currentTimeMillis() < deadline) {
                try {
                    have = impl.getmQClientFactory().getMQClientAPIImpl().queryConsumerOffset(
                        impl.getmQClientFactory().findBrokerAddressInSubscribe(mq.getBrokerName(), 0, true).getBrokerAddr(),
                        queryHeader(c.getConsumerGroup(), mq), 3000);
                } catch (Exception e) {
                    have = -1; // not committed yet (QUERY_NOT_FOUND)
                }
                if (have >= want) break;
                impl.persistConsumerOffset();
                Thread.sleep(100);
            }
            System.err.println("stop-push " + mq + " memory=" + want + " broker=" + have);
        }
    }

    static org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader queryHeader(String group, MessageQueue mq) {
        org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader h =
            new org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(mq.getTopic());
        h.setQueueId(mq.getQueueId());
        return h;
    }

    /** Each queue's messages arrived in queue-offset order, none twice. */
    static boolean inQueueOrder(List<MessageExt> msgs) {
        Map<Integer, Long> last = new HashMap<>();
        for (MessageExt m : msgs) {
            Long before = last.put(m.getQueueId(), m.getQueueOffset());
            if (before != null && before >= m.getQueueOffset()) return false;
        }
        return true;
    }

    /**
     * Waits (at most 10 s) until a queue's max offset is at least `min`; prints whether it got
     * there. A SEND's answer means the message is in the CommitLog; its ConsumeQueue entry comes
     * after, from the broker's dispatch thread (4.9.4's ReputMessageService; ActorMQ's
     * ReputDispatcher), so a read right after may not see it yet on either broker.
     */
    static void waitMax(Map<String, String> a) throws Exception {
        MessageQueue mq = new MessageQueue(a.get("topic"), a.getOrDefault("broker", "broker-a"), Integer.parseInt(a.get("queue")));
        long min = Long.parseLong(a.get("min"));
        long deadline = System.currentTimeMillis() + 10000;
        long max = adminExt().maxOffset(mq);
        while (max < min && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
            max = adminExt().maxOffset(mq);
        }
        OUT.println("max>=" + min + " " + (max >= min));
    }

    /**
     * Waits (at most 10 s) until no consumer of the group is online at the broker; prints whether
     * none is. A consumer's shutdown unregisters it (UNREGISTER_CLIENT), but a heartbeat its timer
     * sends meanwhile can register it again until the broker has handled its connection's
     * close, which may come after the shutdown has returned, on either broker; a new consumer of
     * the group started before that shares the queues with the one gone in its first rebalance.
     */
    static void waitOffline(Map<String, String> a) throws Exception {
        long deadline = System.currentTimeMillis() + 10000;
        int online;
        while (true) {
            try {
                online = adminExt().examineConsumerConnectionInfo(a.get("group"), broker).getConnectionSet().size();
            } catch (org.apache.rocketmq.client.exception.MQBrokerException e) {
                if (e.getResponseCode() != org.apache.rocketmq.common.protocol.ResponseCode.CONSUMER_NOT_ONLINE) throw e;
                online = 0;
            }
            if (online == 0 || System.currentTimeMillis() >= deadline) break;
            Thread.sleep(50);
        }
        OUT.println("offline " + (online == 0));
    }

    /**
     * Waits (bounded) until the named running consumers together hold every read queue of the
     * topic, none twice, each locked on the broker if the consumer is orderly; prints which queues
     * each holds. With RocketMQ's default allocation (averagely, over client ids sorted) that
     * split depends only on the client ids, not on timing.
     */
    static void waitBalanced(Map<String, String> a) throws Exception {
        String topic = a.get("topic");
        String[] names = a.get("names").split(",");
        int queues = Integer.parseInt(a.get("queues"));
        long deadline = System.currentTimeMillis() + 60000;
        String seen = "";
        while (System.currentTimeMillis() < deadline) {
            StringBuilder b = new StringBuilder();
            TreeSet<Integer> all = new TreeSet<>();
            int held = 0;
            boolean locked = true;
            for (String name : names) {
                TreeSet<Integer> mine = new TreeSet<>();
                for (Map.Entry<MessageQueue, org.apache.rocketmq.client.impl.consumer.ProcessQueue> e : running.get(name)
                    .getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet()) {
                    if (!e.getKey().getTopic().equals(topic)) continue;
                    mine.add(e.getKey().getQueueId());
                    locked &= !running.get(name).getDefaultMQPushConsumerImpl().isConsumeOrderly() || e.getValue().isLocked();
                }
                held += mine.size();
                all.addAll(mine);
                b.append(name).append(" holds ").append(mine).append('\n');
            }
            seen = b.toString();
            if (held == queues && all.size() == queues && locked) {
                OUT.print(seen);
                OUT.println("balanced locked=" + locked);
                return;
            }
            Thread.sleep(100);
        }
        OUT.print(seen);
        OUT.println("not balanced within 60 s");
    }

    /** Waits (bounded) until the trace of a message (by its msgId) is stored and indexed. */
    static void waitTrace(Map<String, String> a) throws Exception {
        DefaultMQProducer p = producer("ConfProducer");
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline) {
            try {
                @SuppressWarnings("deprecation")
                org.apache.rocketmq.client.QueryResult r = p.queryMessage("RMQ_SYS_TRACE_TOPIC", a.get("id"), 32, 0, Long.MAX_VALUE);
                if (!r.getMessageList().isEmpty()) {
                    OUT.println("trace found");
                    return;
                }
            } catch (Exception e) {
                // Not there yet (the query answers "not found" as an error).
            }
            Thread.sleep(200);
        }
        OUT.println("trace not found within 30 s");
    }

    static void litePull(Map<String, String> a) throws Exception {
        int n = Integer.parseInt(a.getOrDefault("n", "1"));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(a.getOrDefault("group", "ConfLite"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("conf-lite-" + (++instances));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(a.get("topic"), a.getOrDefault("expr", "*"));
        c.start();
        List<MessageExt> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + Long.parseLong(a.getOrDefault("timeout", "30000"));
        while (got.size() < n && System.currentTimeMillis() < deadline) got.addAll(c.poll(1000));
        c.commitSync();
        c.shutdown();
        OUT.println("litepull received=" + got.size());
        printSorted(got);
    }

    static void view(Map<String, String> a) throws Exception {
        DefaultMQProducer p = producer("ConfProducer");
        String id = lastIds.get(Integer.parseInt(a.getOrDefault("index", "0")));
        @SuppressWarnings("deprecation")
        MessageExt m = p.viewMessage(a.get("topic"), id);
        OUT.println(describe(m));
    }

    static void queryKey(Map<String, String> a) throws Exception {
        DefaultMQProducer p = producer("ConfProducer");
        @SuppressWarnings("deprecation")
        org.apache.rocketmq.client.QueryResult r = p.queryMessage(a.get("topic"), a.get("key"), 32,
            Long.parseLong(a.getOrDefault("begin", "0")), Long.parseLong(a.getOrDefault("end", String.valueOf(Long.MAX_VALUE))));
        OUT.println("query found=" + r.getMessageList().size());
        printSorted(r.getMessageList());
    }

    static void request(Map<String, String> a) throws Exception {
        DefaultMQProducer p = producer(a.getOrDefault("group", "ConfRequester"));
        Message m = message(a, 0);
        // The selector form: in 4.9.4, request(msg, timeout) hands back the request message
        // itself instead of waiting for the reply; this form waits for the pushed reply.
        List<MessageQueue> mqs = writeQueues(p, a.get("topic"));
        Message r = p.request(m, (list, msg, arg) -> list.get(0), null, Long.parseLong(a.getOrDefault("timeout", "10000")));
        OUT.println("reply body=" + new String(r.getBody(), StandardCharsets.UTF_8) + " topic=" + r.getTopic()
            + " queues=" + mqs.size() + " props=" + new TreeMap<>(r.getProperties()));
    }

    static org.apache.rocketmq.tools.admin.DefaultMQAdminExt adminExt;

    /**
     * Waits (up to 60 s) until the broker answers GET_BROKER_RUNTIME_INFO: Apache's broker fails
     * it with NoSuchElementException until its statistics have taken their first samples.
     */
    static void waitReady() throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (true) {
            try {
                adminExt().fetchBrokerRuntimeStats(broker);
                OUT.println("ready");
                return;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) throw e;
                Thread.sleep(500);
            }
        }
    }

    static org.apache.rocketmq.tools.admin.DefaultMQAdminExt adminExt() throws Exception {
        if (adminExt == null) {
            adminExt = new org.apache.rocketmq.tools.admin.DefaultMQAdminExt();
            adminExt.setNamesrvAddr(namesrv);
            adminExt.setInstanceName("conf-admin");
            adminExt.start();
        }
        return adminExt;
    }

    /** A topic's route through the admin API, in the Rust driver's format (sorted lines). */
    static void adminRoute(Map<String, String> a) throws Exception {
        org.apache.rocketmq.common.protocol.route.TopicRouteData route;
        try {
            route = adminExt().examineTopicRouteInfo(a.get("topic"));
        } catch (org.apache.rocketmq.client.exception.MQClientException e) {
            OUT.println("route none");
            return;
        }
        OUT.println("route orderTopicConf=" + route.getOrderTopicConf());
        TreeSet<String> lines = new TreeSet<>();
        for (org.apache.rocketmq.common.protocol.route.QueueData q : route.getQueueDatas()) {
            lines.add("queue broker=" + q.getBrokerName() + " read=" + q.getReadQueueNums() + " write=" + q.getWriteQueueNums()
                + " perm=" + q.getPerm() + " sysFlag=" + q.getTopicSysFlag());
        }
        for (String l : lines) OUT.println(l);
        lines.clear();
        for (org.apache.rocketmq.common.protocol.route.BrokerData b : route.getBrokerDatas()) {
            lines.add("broker cluster=" + b.getCluster() + " name=" + b.getBrokerName() + " addrs=" + new TreeMap<>(b.getBrokerAddrs()));
        }
        for (String l : lines) OUT.println(l);
    }

    /** The cluster table through the admin API, in the Rust driver's format. */
    static void adminCluster() throws Exception {
        org.apache.rocketmq.common.protocol.body.ClusterInfo info = adminExt().examineBrokerClusterInfo();
        for (Map.Entry<String, java.util.Set<String>> e : new TreeMap<>(info.getClusterAddrTable()).entrySet()) {
            OUT.println("cluster " + e.getKey() + " brokers=" + new TreeSet<>(e.getValue()));
        }
        for (Map.Entry<String, org.apache.rocketmq.common.protocol.route.BrokerData> e : new TreeMap<>(info.getBrokerAddrTable()).entrySet()) {
            OUT.println("broker " + e.getKey() + " cluster=" + e.getValue().getCluster() + " addrs=" + new TreeMap<>(e.getValue().getBrokerAddrs()));
        }
    }

    /** One raw request, printed whole: code, remark, ext fields sorted, body as text. */
    static void raw(Map<String, String> a) throws Exception {
        if (raw == null) {
            raw = new NettyRemotingClient(new NettyClientConfig());
            raw.start();
        }
        int code = Integer.parseInt(a.remove("code"));
        String to = a.getOrDefault("to", "broker");
        a.remove("to");
        String body = a.remove("body");
        RemotingCommand req = RemotingCommand.createRequestCommand(code, null);
        for (Map.Entry<String, String> e : new TreeMap<>(a).entrySet()) req.addExtField(e.getKey(), e.getValue());
        if (body != null) req.setBody(body.getBytes(StandardCharsets.UTF_8));
        RemotingCommand resp = raw.invokeSync(to.equals("namesrv") ? namesrv : broker, req, 10000);
        OUT.println("code=" + resp.getCode() + " remark=" + resp.getRemark());
        TreeMap<String, String> ext = resp.getExtFields() == null ? new TreeMap<>() : new TreeMap<>(resp.getExtFields());
        OUT.println("ext=" + ext);
        if (resp.getBody() != null) OUT.println("body=" + new String(resp.getBody(), StandardCharsets.UTF_8));
    }

    /** mqadmin in this JVM: its stdout and stderr are what the operator sees. */
    static void admin(String args) throws Exception {
        List<String> argv = new ArrayList<>();
        for (String s : args.split(" +")) argv.add(s.replace("%20", " "));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
        PrintStream oldOut = System.out, oldErr = System.err;
        System.setOut(capture);
        System.setErr(capture);
        try {
            MQAdminStartup.main0(argv.toArray(new String[0]), null);
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
        for (String l : buf.toString(StandardCharsets.UTF_8).split("\n")) {
            // Stack frames name Java classes, not broker behaviour.
            // Stray log lines of the client libraries (`HH:mm:ss.SSS [thread] LEVEL ...`) neither.
            if (l.matches("^\\d\\d:\\d\\d:\\d\\d\\.\\d+ \\[.*")) continue;
            if (!l.startsWith("\tat ") && !l.trim().isEmpty()) OUT.println(l.replaceAll("\\s+$", ""));
        }
    }
}
