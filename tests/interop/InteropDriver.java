// The Java side of the store interop suite (tests/interop/main.rs): Apache RocketMQ 4.9.4's own
// client, run against whichever broker has the store at the moment (Apache's or ActorMQ's).
//
// Protocol (stdin/stdout, the one of tests/conformance/JavaDriver.java): the suite writes one
// line, `<verb> key=value ...`; the driver prints what it observed, one fact per line, then a
// line `@@END`. A failure prints `error <class>: <message>` before `@@END`.
//
// Verbs:
//   wait-ready                         until the broker answers GET_BROKER_RUNTIME_INFO
//   create-topic topic= queues=        UPDATE_AND_CREATE_TOPIC, then until its route has them
//   write topic= n= prefix= [size=]    n sync sends, message i to queue i mod queues, with a tag,
//                                      keys (every 10th also `<prefix>-shared`), every 5th
//                                      with user properties; prints `sent i queue offset msgId`;
//                                      with `size`, bodies of that many pseudo-random bytes
//   batch topic= queue= n= prefix=     one batch of n messages to one queue
//   delay topic= level= key=           one message with a delay level; prints its msgId
//   commit-half group= topic=          commits half of each queue's max offset (sync
//                                      UPDATE_CONSUMER_OFFSET, read back); prints them
//   offsets group= topic=              the group's committed offset of each queue
//   dump topics=a,b                    every message of every queue, pulled from offset 0, as
//                                      one line each (see `describe`), in queue order
//   query topic= key= expect=          queryMessage by key, polled (10 s) until `expect` found
//   resume group= topic= expect=       a push consumer of the group until `expect` messages came
//                                      and its offsets reached the queues' ends; prints each
//   wait-delivered topic= key=         polls (90 s) the topic until a message with that key is
//                                      there; prints it
//   search topic= ts=                  each queue's offset for a store time (searchOffset:
//                                      SEARCH_OFFSET_BY_TIMESTAMP)
//   start-fail group= topic=           a push consumer of the group that fails the message with
//                                      key `<x>-0` straight into the DLQ (delay level -1) and
//                                      `<x>-1` once, back after delay level 1 (1 s) through
//                                      SCHEDULE_TOPIC_XXXX into the group's %RETRY% topic
//   wait-fail                          until that consumer got `<x>-1` back, then stops it
//
// Only the 4.9.4 client jars are on the classpath, so every call is what a user's program sends.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.zip.CRC32;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class InteropDriver {
    static String namesrv;
    static String broker;
    static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    static DefaultMQProducer producer;
    static DefaultMQPullConsumer puller;
    static DefaultMQAdminExt admin;
    static final String BROKER_NAME = "broker-a";

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        broker = args[1];
        System.setProperty("rocketmq.namesrv.addr", namesrv);
        // A push consumer's first rebalance comes after this wait (20 s by default).
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            try {
                step(line);
            } catch (Throwable e) {
                e.printStackTrace();
                OUT.println("error " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            OUT.println("@@END");
            OUT.flush();
        }
        if (producer != null) producer.shutdown();
        if (puller != null) puller.shutdown();
        if (admin != null) admin.shutdown();
        System.exit(0);
    }

    static Map<String, String> kv(String[] words) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < words.length; i++) {
            int eq = words[i].indexOf('=');
            if (eq > 0) m.put(words[i].substring(0, eq), words[i].substring(eq + 1));
        }
        return m;
    }

    static void step(String line) throws Exception {
        String[] w = line.split(" +");
        Map<String, String> a = kv(w);
        switch (w[0]) {
            case "wait-ready": waitReady(); break;
            case "create-topic": createTopic(a); break;
            case "write": write(a); break;
            case "batch": batch(a); break;
            case "delay": delay(a); break;
            case "commit-half": commitHalf(a); break;
            case "offsets": offsets(a); break;
            case "dump": dump(a); break;
            case "query": query(a); break;
            case "resume": resume(a); break;
            case "wait-delivered": waitDelivered(a); break;
            case "start-fail": startFail(a); break;
            case "search": search(a); break;
            case "wait-fail": waitFail(); break;
            default: throw new IllegalArgumentException("unknown step " + w[0]);
        }
    }

    static DefaultMQAdminExt admin() throws Exception {
        if (admin == null) {
            admin = new DefaultMQAdminExt();
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName("interop-admin");
            admin.start();
        }
        return admin;
    }

    static DefaultMQProducer producer() throws Exception {
        if (producer == null) {
            producer = new DefaultMQProducer("InteropProducer");
            producer.setNamesrvAddr(namesrv);
            producer.setInstanceName("interop-producer");
            producer.setSendMsgTimeout(10000);
            producer.setRetryTimesWhenSendFailed(0);
            producer.start();
        }
        return producer;
    }

    static DefaultMQPullConsumer puller() throws Exception {
        if (puller == null) {
            puller = new DefaultMQPullConsumer("InteropReader");
            puller.setNamesrvAddr(namesrv);
            puller.setInstanceName("interop-reader");
            puller.start();
        }
        return puller;
    }

    /** Until the broker answers GET_BROKER_RUNTIME_INFO (Apache's only after its first stats samples). */
    static void waitReady() throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (true) {
            try {
                admin().fetchBrokerRuntimeStats(broker);
                OUT.println("ready");
                return;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) throw e;
                Thread.sleep(200);
            }
        }
    }

    static void createTopic(Map<String, String> a) throws Exception {
        String topic = a.get("topic");
        int queues = Integer.parseInt(a.get("queues"));
        admin().createAndUpdateTopicConfig(broker, new TopicConfig(topic, queues, queues, 6));
        long deadline = System.currentTimeMillis() + 30000;
        while (true) {
            try {
                if (writeQueues(topic).size() == queues) break;
            } catch (Exception e) {
                // No route yet.
            }
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no route of " + topic + " with " + queues + " queues within 30 s");
            Thread.sleep(100);
        }
        OUT.println("topic " + topic + " queues=" + queues);
    }

    static List<MessageQueue> writeQueues(String topic) throws Exception {
        List<MessageQueue> mqs = new ArrayList<>(producer().fetchPublishMessageQueues(topic));
        mqs.sort(Comparator.comparingInt(MessageQueue::getQueueId));
        return mqs;
    }

    static List<MessageQueue> readQueues(String topic) throws Exception {
        List<MessageQueue> mqs = new ArrayList<>(puller().fetchSubscribeMessageQueues(topic));
        mqs.sort(Comparator.comparingInt(MessageQueue::getQueueId));
        return mqs;
    }

    /** Message i of a run: a tag, its key (every 10th also the shared key), every 5th user properties. */
    static Message message(String topic, String prefix, int i, int size) {
        byte[] body = (prefix + "-body-" + i + "-" + "x".repeat(i % 97)).getBytes(StandardCharsets.UTF_8);
        if (size > 0) {
            // Incompressible (the client compresses a body over 4 KiB), the same in every run.
            body = new byte[size];
            new java.util.Random(i).nextBytes(body);
        }
        Message m = new Message(topic, body);
        m.setTags(i % 3 == 0 ? "TagA" : "TagB");
        m.setKeys(i % 10 == 0 ? prefix + "-" + i + " " + prefix + "-shared" : prefix + "-" + i);
        if (i % 5 == 0) {
            m.putUserProperty("color", i % 2 == 0 ? "red" : "blue");
            m.putUserProperty("seq", Integer.toString(i));
        }
        return m;
    }

    static void write(Map<String, String> a) throws Exception {
        String topic = a.get("topic");
        List<MessageQueue> mqs = writeQueues(topic);
        int n = Integer.parseInt(a.get("n"));
        for (int i = 0; i < n; i++) {
            int size = Integer.parseInt(a.getOrDefault("size", "0"));
            SendResult r = producer().send(message(topic, a.get("prefix"), i, size), mqs.get(i % mqs.size()));
            printSend(i, r);
        }
    }

    static void batch(Map<String, String> a) throws Exception {
        String topic = a.get("topic");
        List<MessageQueue> mqs = writeQueues(topic);
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < Integer.parseInt(a.get("n")); i++) batch.add(message(topic, a.get("prefix"), i, 0));
        SendResult r = producer().send(batch, mqs.get(Integer.parseInt(a.get("queue"))));
        printSend(0, r);
    }

    static void delay(Map<String, String> a) throws Exception {
        Message m = new Message(a.get("topic"), ("delayed-" + a.get("key")).getBytes(StandardCharsets.UTF_8));
        m.setTags("TagD");
        m.setKeys(a.get("key"));
        m.setDelayTimeLevel(Integer.parseInt(a.get("level")));
        SendResult r = producer().send(m);
        printSend(0, r);
    }

    static void printSend(int i, SendResult r) {
        OUT.println("sent " + i + " " + r.getSendStatus() + " queue=" + r.getMessageQueue().getQueueId()
            + " offset=" + r.getQueueOffset() + " msgId=" + r.getMsgId() + " offsetMsgId=" + r.getOffsetMsgId());
    }

    static QueryConsumerOffsetRequestHeader queryHeader(String group, MessageQueue mq) {
        QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(mq.getTopic());
        h.setQueueId(mq.getQueueId());
        return h;
    }

    static long committedOffset(String group, MessageQueue mq) {
        try {
            return puller().getDefaultMQPullConsumerImpl().getRebalanceImpl().getmQClientFactory().getMQClientAPIImpl()
                .queryConsumerOffset(broker, queryHeader(group, mq), 5000);
        } catch (Exception e) {
            return -1; // QUERY_NOT_FOUND: nothing committed
        }
    }

    static void commitHalf(Map<String, String> a) throws Exception {
        String group = a.get("group");
        for (MessageQueue mq : readQueues(a.get("topic"))) {
            long half = puller().maxOffset(mq) / 2;
            UpdateConsumerOffsetRequestHeader h = new UpdateConsumerOffsetRequestHeader();
            h.setConsumerGroup(group);
            h.setTopic(mq.getTopic());
            h.setQueueId(mq.getQueueId());
            h.setCommitOffset(half);
            puller().getDefaultMQPullConsumerImpl().getRebalanceImpl().getmQClientFactory().getMQClientAPIImpl()
                .updateConsumerOffset(broker, h, 5000);
            OUT.println("committed queue=" + mq.getQueueId() + " offset=" + half + " readBack=" + committedOffset(group, mq));
        }
    }

    static void offsets(Map<String, String> a) throws Exception {
        for (MessageQueue mq : readQueues(a.get("topic"))) {
            OUT.println("offset queue=" + mq.getQueueId() + " committed=" + committedOffset(a.get("group"), mq)
                + " min=" + puller().minOffset(mq) + " max=" + puller().maxOffset(mq));
        }
    }

    /**
     * One message as stored: every field of its record the client exposes, its body's CRC32 and
     * length, and its properties sorted, without MIN_OFFSET and MAX_OFFSET (the pull consumer
     * adds them from the pull answer, they are not in the record).
     */
    static String describe(MessageExt m) {
        TreeMap<String, String> props = new TreeMap<>(m.getProperties());
        props.remove(MessageConst.PROPERTY_MIN_OFFSET);
        props.remove(MessageConst.PROPERTY_MAX_OFFSET);
        CRC32 crc = new CRC32();
        crc.update(m.getBody());
        return "msg " + m.getTopic() + " " + m.getQueueId() + " " + m.getQueueOffset() + " offsetMsgId=" + m.getMsgId()
            + " commitLogOffset=" + m.getCommitLogOffset() + " storeSize=" + m.getStoreSize() + " sysFlag=" + m.getSysFlag()
            + " flag=" + m.getFlag() + " reconsume=" + m.getReconsumeTimes() + " born=" + m.getBornTimestamp() + "@" + m.getBornHostString()
            + " stored=" + m.getStoreTimestamp() + "@" + m.getStoreHost() + " bodyCRC=" + m.getBodyCRC()
            + " crc32=" + crc.getValue() + " len=" + m.getBody().length + " tags=" + m.getTags() + " keys=" + m.getKeys()
            + " props=" + props;
    }

    static List<MessageExt> pullAll(MessageQueue mq) throws Exception {
        List<MessageExt> all = new ArrayList<>();
        long offset = puller().minOffset(mq);
        long max = puller().maxOffset(mq);
        while (offset < max) {
            PullResult r = puller().pull(mq, "*", offset, 32);
            if (r.getPullStatus() != PullStatus.FOUND) {
                throw new IllegalStateException("pull " + mq + " at " + offset + " (max " + max + "): " + r.getPullStatus() + " next=" + r.getNextBeginOffset());
            }
            all.addAll(r.getMsgFoundList());
            offset = r.getNextBeginOffset();
        }
        return all;
    }

    static void dump(Map<String, String> a) throws Exception {
        for (String topic : a.get("topics").split(",")) {
            for (MessageQueue mq : readQueues(topic)) {
                List<MessageExt> got = pullAll(mq);
                OUT.println("queue " + topic + " " + mq.getQueueId() + " min=" + puller().minOffset(mq) + " max=" + puller().maxOffset(mq) + " pulled=" + got.size());
                for (MessageExt m : got) OUT.println(describe(m));
            }
        }
    }

    static void query(Map<String, String> a) throws Exception {
        int expect = Integer.parseInt(a.get("expect"));
        long deadline = System.currentTimeMillis() + 10000;
        List<MessageExt> found = new ArrayList<>();
        while (true) {
            try {
                @SuppressWarnings("deprecation")
                org.apache.rocketmq.client.QueryResult r = producer().queryMessage(a.get("topic"), a.get("key"), 64, 0, Long.MAX_VALUE);
                found = r.getMessageList();
            } catch (Exception e) {
                found = new ArrayList<>(); // "not found" comes as an error
            }
            if (found.size() >= expect || System.currentTimeMillis() > deadline) break;
            Thread.sleep(100);
        }
        OUT.println("query " + a.get("key") + " found=" + found.size());
        TreeSet<String> lines = new TreeSet<>();
        for (MessageExt m : found) lines.add("found " + m.getTopic() + " " + m.getQueueId() + " " + m.getQueueOffset() + " " + m.getMsgId() + " keys=" + m.getKeys());
        for (String l : lines) OUT.println(l);
    }

    static void resume(Map<String, String> a) throws Exception {
        int expect = Integer.parseInt(a.get("expect"));
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("interop-push");
        // Only where the group has no committed offset: a lost offset shows as the first half.
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollNameServerInterval(1000);
        c.subscribe(a.get("topic"), "*");
        ConcurrentLinkedQueue<MessageExt> got = new ConcurrentLinkedQueue<>();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long deadline = System.currentTimeMillis() + 60000;
        while (System.currentTimeMillis() < deadline && (got.size() < expect || !drained(c, a.get("topic")))) Thread.sleep(100);
        c.shutdown();
        OUT.println("resume received=" + got.size());
        List<MessageExt> sorted = new ArrayList<>(got);
        sorted.sort(Comparator.comparing(MessageExt::getTopic).thenComparingInt(MessageExt::getQueueId).thenComparingLong(MessageExt::getQueueOffset));
        for (MessageExt m : sorted) OUT.println("got " + m.getTopic() + " " + m.getQueueId() + " " + m.getQueueOffset() + " " + m.getMsgId());
    }

    /** Every queue the consumer holds: its offset has reached the queue's max offset. */
    static boolean drained(DefaultMQPushConsumer c, String topic) throws Exception {
        DefaultMQPushConsumerImpl impl = c.getDefaultMQPushConsumerImpl();
        int held = 0;
        for (MessageQueue mq : impl.getRebalanceImpl().getProcessQueueTable().keySet()) {
            if (!mq.getTopic().equals(topic)) continue;
            held++;
            long max = impl.getmQClientFactory().getMQAdminImpl().maxOffset(mq);
            long have = impl.getOffsetStore().readOffset(mq, org.apache.rocketmq.client.consumer.store.ReadOffsetType.READ_FROM_MEMORY);
            if (have < max) return false;
        }
        return held > 0;
    }

    static void search(Map<String, String> a) throws Exception {
        long ts = Long.parseLong(a.get("ts"));
        for (MessageQueue mq : readQueues(a.get("topic"))) {
            OUT.println("search " + mq.getTopic() + " queue=" + mq.getQueueId() + " ts=" + ts + " offset=" + puller().searchOffset(mq, ts));
        }
    }

    static DefaultMQPushConsumer failing;
    static final ConcurrentLinkedQueue<MessageExt> retried = new ConcurrentLinkedQueue<>();

    static void startFail(Map<String, String> a) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("group"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("interop-fail");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollNameServerInterval(1000);
        c.subscribe(a.get("topic"), "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String key = m.getKeys().split(" ")[0];
                if (m.getReconsumeTimes() > 0) {
                    retried.add(m);
                } else if (key.endsWith("-0")) {
                    ctx.setDelayLevelWhenNextConsume(-1);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                } else if (key.endsWith("-1")) {
                    ctx.setDelayLevelWhenNextConsume(1);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        failing = c;
        OUT.println("started");
    }

    static void waitFail() throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (retried.isEmpty() && System.currentTimeMillis() < deadline) Thread.sleep(100);
        failing.shutdown();
        for (MessageExt m : retried) OUT.println("retried " + m.getKeys() + " reconsume=" + m.getReconsumeTimes());
    }

    static void waitDelivered(Map<String, String> a) throws Exception {
        long deadline = System.currentTimeMillis() + 90000;
        while (System.currentTimeMillis() < deadline) {
            for (MessageQueue mq : readQueues(a.get("topic"))) {
                for (MessageExt m : pullAll(mq)) {
                    if (a.get("key").equals(m.getKeys())) {
                        OUT.println(describe(m));
                        return;
                    }
                }
            }
            Thread.sleep(200);
        }
        OUT.println("not delivered within 90 s");
    }
}
