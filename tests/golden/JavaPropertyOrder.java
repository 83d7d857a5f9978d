// Golden vectors for src/format/java_order.rs: the properties string Apache RocketMQ 4.9.4 stores
// after parsing a client's string into a java.util.HashMap and editing it, printed by a real JVM.
//
// Regenerate (from the repository root, Java 11 or later; the output must not change between
// JDKs, as HashMap's iteration order has been stable since Java 8):
//
//     java tests/golden/JavaPropertyOrder.java > tests/golden/java_property_order.jsonl
//
// Each output line is one JSON object: "name"; "base", the string parsed as 4.9.4's
// MessageDecoder.string2messageProperties parses it (into a new HashMap, entries inserted in
// string order); "ops", then applied in order to that map (["put", key, value] is Map.put, as
// MessageAccessor.putProperty; ["remove", key] is Map.remove, as MessageAccessor.clearProperty);
// and "java", the map written as MessageDecoder.messageProperties2String writes it (entries in
// iteration order, name char 1 value, joined by char 2, none after the last). The parse and the
// write below restate those two methods' rules; they are not copies of them.
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

public class JavaPropertyOrder {
    static final char NV = 1;
    static final char PS = 2;

    record Case(String name, String base, List<String[]> ops) {}

    static Map<String, String> parse(String s) {
        Map<String, String> map = new HashMap<>();
        int at = 0;
        while (at < s.length()) {
            int end = s.indexOf(PS, at);
            if (end < 0) {
                end = s.length();
            }
            int sep = s.indexOf(NV, at);
            // Kept only with a non-empty name and a non-empty value inside this segment.
            if (end - at >= 3 && sep > at && sep < end - 1) {
                map.put(s.substring(at, sep), s.substring(sep + 1, end));
            }
            at = end + 1;
        }
        return map;
    }

    static String write(Map<String, String> map) {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, String> e : map.entrySet()) {
            if (e.getValue() == null) {
                continue;
            }
            if (out.length() > 0) {
                out.append(PS);
            }
            out.append(e.getKey()).append(NV).append(e.getValue());
        }
        return out.toString();
    }

    static String props(String... kv) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < kv.length; i += 2) {
            if (i > 0) {
                out.append(PS);
            }
            out.append(kv[i]).append(NV).append(kv[i + 1]);
        }
        return out.toString();
    }

    static List<String[]> ops(String[]... o) {
        return List.of(o);
    }

    static String[] put(String k, String v) {
        return new String[] {"put", k, v};
    }

    static String[] remove(String k) {
        return new String[] {"remove", k};
    }

    static int spread(String k) {
        int h = k.hashCode();
        return h ^ (h >>> 16);
    }

    /** `count` keys "<prefix><n>" whose spread hash has `low` in its low `bits` bits. */
    static List<String> colliding(String prefix, int bits, int low, int count) {
        List<String> out = new ArrayList<>();
        for (int n = 0; out.size() < count; n++) {
            String k = prefix + n;
            if ((spread(k) & ((1 << bits) - 1)) == low) {
                out.add(k);
            }
        }
        return out;
    }

    static String json(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    static final String UNIQ = "7F0000017A2C18B4AAC2586A1D6F0000";
    static final String[] WELL_KNOWN = {
        "KEYS", "TAGS", "UNIQ_KEY", "WAIT", "DELAY", "CLUSTER", "MIN_OFFSET", "MAX_OFFSET",
        "TRAN_MSG", "PGROUP", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "MSG_REGION", "TRACE_ON",
        "__transactionId__", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "PUSH_REPLY_TIME",
        "MSG_TYPE", "__SHARDINGKEY", "INSTANCE_ID", "BUYER_ID", "TRANSACTION_CHECK_TIMES",
    };

    static List<Case> cases() {
        List<Case> c = new ArrayList<>();
        String client = props("KEYS", "order-1 order-2", "TAGS", "TagA", "UNIQ_KEY", UNIQ, "WAIT", "true");
        // SendMessageProcessor.asyncSendMessage: CLUSTER put, WAIT removed before the write.
        c.add(new Case("send", client, ops(put("CLUSTER", "DefaultCluster"), remove("WAIT"))));
        c.add(new Case("send-no-wait", props("TAGS", "TagA", "UNIQ_KEY", UNIQ),
            ops(put("CLUSTER", "DefaultCluster"))));
        c.add(new Case("send-wait-false", props("UNIQ_KEY", UNIQ, "WAIT", "false", "TAGS", "t"),
            ops(put("CLUSTER", "DefaultCluster"))));
        c.add(new Case("send-own-cluster", props("CLUSTER", "theirs", "TAGS", "TagA", "KEYS", "k", "UNIQ_KEY", UNIQ),
            ops(put("CLUSTER", "DefaultCluster"))));
        // Delayed: WAIT removed and put back (moves after CLUSTER), then CommitLog puts
        // REAL_TOPIC and REAL_QID before it writes the map.
        c.add(new Case("send-delayed", props("TAGS", "TagA", "DELAY", "3", "UNIQ_KEY", UNIQ, "WAIT", "true", "KEYS", "k1"),
            ops(put("CLUSTER", "DefaultCluster"), remove("WAIT"), put("WAIT", "true"),
                put("REAL_TOPIC", "TopicTest"), put("REAL_QID", "2"))));
        c.add(new Case("send-transaction", props("TRAN_MSG", "true", "PGROUP", "please_rename_unique_group_name",
            "UNIQ_KEY", UNIQ, "WAIT", "true", "TAGS", "TagA", "KEYS", "KEY1"),
            ops(put("CLUSTER", "DefaultCluster"), remove("WAIT"))));
        c.add(new Case("batch-header", props("WAIT", "true"), ops(put("CLUSTER", "DefaultCluster"))));
        // asyncConsumerSendMsgBack on a stored message: RETRY_TOPIC, WAIT, DELAY, ORIGIN_MESSAGE_ID.
        String stored = props("MIN_OFFSET", "0", "MAX_OFFSET", "12", "TAGS", "TagA", "UNIQ_KEY", UNIQ, "CLUSTER", "DefaultCluster",
            "CONSUME_START_TIME", "1717000000000");
        c.add(new Case("send-back", stored, ops(put("RETRY_TOPIC", "TopicTest"), put("WAIT", "false"),
            put("DELAY", "3"), put("ORIGIN_MESSAGE_ID", "0A00000100002A9F0000000000000000"),
            put("REAL_TOPIC", "%RETRY%group"), put("REAL_QID", "0"))));
        c.add(new Case("send-back-dlq", stored + PS + props("RETRY_TOPIC", "TopicTest", "ORIGIN_MESSAGE_ID", "X"),
            ops(put("WAIT", "false"), put("DELAY", "0"))));
        c.add(new Case("schedule-delivery", props("TAGS", "TagA", "DELAY", "1", "UNIQ_KEY", UNIQ, "CLUSTER", "c",
            "WAIT", "true", "REAL_TOPIC", "T", "REAL_QID", "0"), ops()));
        c.add(new Case("reply-push", props("CORRELATION_ID", "abc", "REPLY_TO_CLIENT", "127.0.0.1@123", "TTL", "3000",
            "MSG_TYPE", "reply", "CLUSTER", "DefaultCluster", "UNIQ_KEY", UNIQ), ops(put("PUSH_REPLY_TIME", "1717000000000"))));
        c.add(new Case("offset-moved-event", "", ops(put("TAGS", "g"), put("KEYS", "g"), put("DELAY", "0"))));
        c.add(new Case("empty", "", ops()));
        c.add(new Case("ignored-segments", "A" + NV + PS + NV + "B" + PS + "C" + NV + "c" + PS + PS + "xy" + PS + "D" + NV + "d" + NV + "e" + PS,
            ops()));
        c.add(new Case("duplicates", props("B", "1", "A", "1", "B", "2", "C", "1", "A", "2"), ops(put("D", "x"))));
        c.add(new Case("remove-then-put", props("A", "1", "Q", "1", "a", "1"), ops(remove("A"), put("A", "2"))));
        c.add(new Case("put-empty-value", props("A", "1"), ops(put("B", ""))));
        c.add(new Case("same-hash", props("Aa", "1", "BB", "2", "AaAa", "3", "BBBB", "4", "AaBB", "5", "BBAa", "6"), ops()));
        c.add(new Case("unicode", props("键", "值", "é", "1", "😀", "2", "k😀", "3", "ключ", "4", "TAGS", "标签"),
            ops(put("CLUSTER", "集群"))));
        // Resizes: 13 entries (16 to 32), 25 (to 64), 49 (to 128), in both directions.
        for (int n : new int[] {12, 13, 24, 25, 48, 49, 60, 70, 100}) {
            List<String> kv = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                kv.add(i < WELL_KNOWN.length ? WELL_KNOWN[i] : "user" + i);
                kv.add("v" + i);
            }
            c.add(new Case("entries-" + n, props(kv.toArray(new String[0])), ops(put("CLUSTER", "DefaultCluster"))));
        }
        // The peak decides the table: 13 entries, one removed, stays at 32 buckets.
        // "q" and "a" share bucket 1 of 16, not of 32 (1 and 17).
        List<String> thirteen = new ArrayList<>(List.of("q", "v", "a", "v"));
        for (int i = 0; i < 10; i++) {
            thirteen.add("k" + i);
            thirteen.add("v");
        }
        c.add(new Case("peak-13-then-12", props(thirteen.toArray(new String[0])), ops(put("WAIT", "true"), remove("WAIT"))));
        c.add(new Case("peak-12", props(thirteen.toArray(new String[0])), ops()));
        // Nine keys in one bucket of a table under 64: treeifyBin resizes instead of treeifying.
        for (int n : new int[] {8, 9, 10, 11}) {
            List<String> kv = new ArrayList<>();
            for (String k : colliding("c", 4, 5, n)) {
                kv.add(k);
                kv.add("v");
            }
            c.add(new Case("bin16-" + n, props(kv.toArray(new String[0])), ops()));
        }
        List<String> eight = new ArrayList<>();
        for (String k : colliding("c", 4, 5, 9)) {
            eight.add(k);
            eight.add("v");
        }
        c.add(new Case("bin16-9-removed", props(eight.toArray(new String[0])), ops(remove("c" + 5), put("x", "1"))));
        // A bin reaching 9 keys in a table of 64 or more becomes a tree (HashMap.TreeNode).
        for (int n : new int[] {8, 9, 12}) {
            List<String> kv = new ArrayList<>();
            for (int i = 0; i < 30; i++) {
                kv.add("u" + i);
                kv.add("v");
            }
            for (String k : colliding("t", 6, 17, n)) {
                kv.add(k);
                kv.add("v");
            }
            c.add(new Case("tree-" + n, props(kv.toArray(new String[0])), ops(put("CLUSTER", "c"))));
        }
        // Random property sets: well-known and user keys, short keys over a small alphabet (so
        // duplicates and equal hashes occur), unicode; random puts and removes after.
        Random rnd = new Random(20240601L);
        String[] alphabet = {"A", "a", "B", "b", "é", "键", "😀", "_", "1"};
        for (int i = 0; i < 300; i++) {
            int n = i < 200 ? rnd.nextInt(20) : rnd.nextInt(90);
            List<String> kv = new ArrayList<>();
            List<String> used = new ArrayList<>();
            for (int j = 0; j < n; j++) {
                String k = key(rnd, alphabet);
                used.add(k);
                kv.add(k);
                kv.add(rnd.nextInt(8) == 0 ? "" : "v" + rnd.nextInt(1000));
            }
            List<String[]> ops = new ArrayList<>();
            int m = rnd.nextInt(6);
            for (int j = 0; j < m; j++) {
                String k = !used.isEmpty() && rnd.nextBoolean() ? used.get(rnd.nextInt(used.size())) : key(rnd, alphabet);
                ops.add(rnd.nextInt(3) == 0 ? remove(k) : put(k, "p" + j));
            }
            c.add(new Case("random-" + i, props(kv.toArray(new String[0])), ops));
        }
        return c;
    }

    static String key(Random rnd, String[] alphabet) {
        int kind = rnd.nextInt(10);
        if (kind < 3) {
            return WELL_KNOWN[rnd.nextInt(WELL_KNOWN.length)];
        }
        if (kind < 5) {
            return "user" + rnd.nextInt(40);
        }
        StringBuilder k = new StringBuilder();
        int len = 1 + rnd.nextInt(3);
        for (int i = 0; i < len; i++) {
            k.append(alphabet[rnd.nextInt(alphabet.length)]);
        }
        return k.toString();
    }

    public static void main(String[] args) {
        for (Case c : cases()) {
            Map<String, String> map = parse(c.base());
            StringBuilder ops = new StringBuilder("[");
            for (String[] op : c.ops()) {
                if (op[0].equals("put")) {
                    map.put(op[1], op[2]);
                } else {
                    map.remove(op[1]);
                }
                if (ops.length() > 1) {
                    ops.append(',');
                }
                ops.append('[');
                for (int i = 0; i < op.length; i++) {
                    ops.append(i > 0 ? "," : "").append(json(op[i]));
                }
                ops.append(']');
            }
            ops.append(']');
            System.out.println("{\"name\":" + json(c.name()) + ",\"base\":" + json(c.base()) + ",\"ops\":" + ops
                + ",\"java\":" + json(write(map)) + "}");
        }
    }
}
