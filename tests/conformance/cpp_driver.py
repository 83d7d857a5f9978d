#!/usr/bin/env python3
"""The C++-client driver of the conformance suite: Apache's C++ client (librocketmq, the engine
under the Python, Go-cgo and Node 4.x clients), reached through the PyPI wheel `rocketmq==0.4.4`
(a ctypes wrapper that bundles librocketmq.so; `setup-cpp.sh` makes a venv with it).

    python cpp_driver.py <namesrv ip:port> <broker ip:port>

The line protocol is JavaDriver.java's: one step per stdin line, `<verb> key=value ...` (`%20` in
a value is a space); the driver prints what the client observed, one fact per line, then `@@END`.
A failing step prints one line `error <Type>: <first line of the message>` and the driver goes
on. Key names and output lines are the Java driver's wherever the concept is the same.

Verbs:
  send topic= n=1 tags=A,B keys=k body=m size= delay= prop=K:V group=ConfProducer queue=
       mode=sync|orderly|async|oneway|orderly-oneway|batch
    sync, async, oneway, batch: the C++ client chooses the queue itself (the wrapper offers no
    queue choice for these), and its send result holds no queue id, so no `queue=` is printed.
    orderly, orderly-oneway: a selector puts message i on queue i % (queue count), or on `queue=`
    when given; the driver prints the queue the selector chose. This is the deterministic mode,
    the counterpart of the Java driver's default sends.
  push topic= group=ConfPush expr=* n=1 timeout=30000 linger= fail= orderly= broadcast=
  pull topic= group=ConfPull expr=* offset=0 max=32 queue=

What the wrapper cannot show or do, compared with the Java driver:
  - send results: only status, msgId (the client's unique key) and queue offset; no queue id
    (except where the driver's own selector chose it), no offsetMsgId, regionId or traceOn.
  - messages: no flag, sysFlag or bodyCRC getters; the body is read as a NUL-terminated string.
    Properties cannot be listed, only read by name: `props={...}` holds the names in PROBED (the
    broker's and the 4.x clients' system properties) plus every user property name this driver
    set (`prop=`) or is told about (`props=K1,K2` on a push or pull step), where non-empty.
  - push consumer: no consume-from-where setter (the C++ default, CONSUME_FROM_LAST_OFFSET, is
    what runs: a new group starts where the broker's offset query says), no reply messages.
  - pull consumer: no client instance name setter; `pull` calls the library's Pull directly (the
    wrapper's own pull loop hides statuses and offsets).
  - no request/reply, view-by-id, query-by-key, lite-pull or raw remoting requests: those verbs
    answer `unknown step <verb>`, as the Java driver does for a verb it lacks.
"""

import ctypes
import os
import shutil
import sys
import tempfile
import threading
import time

# librocketmq logs to $HOME/logs/rocketmq-cpp and keeps local offsets under $HOME: both go to a
# scratch home (CPP_DRIVER_HOME when given, kept; otherwise a temp dir, removed at exit). HOME must
# be set before the library is loaded.
_KEEP_HOME = "CPP_DRIVER_HOME" in os.environ
HOME = os.environ.get("CPP_DRIVER_HOME") or tempfile.mkdtemp(prefix="cpp-driver-home.")
os.makedirs(HOME, exist_ok=True)
os.environ["HOME"] = HOME
LOG_DIR = os.path.join(HOME, "logs", "rocketmq-cpp")
os.makedirs(LOG_DIR, exist_ok=True)

# Only protocol lines may reach stdout. The library (or anything it loads) writing to fd 1 would
# corrupt the protocol, so fd 1 becomes stderr and the protocol gets a private copy of stdout.
_proto_fd = os.dup(1)
os.dup2(2, 1)
OUT = os.fdopen(_proto_fd, "w", encoding="utf-8", buffering=1)
sys.stdout = sys.stderr

from rocketmq.client import Message, Producer, PushConsumer, PullConsumer  # noqa: E402
from rocketmq.ffi import dll, _CMessageQueue, MessageModel  # noqa: E402

# Entry points the library exports but the wrapper does not declare.
dll.SetProducerCompressMsgBodyOverHowmuch.argtypes = [ctypes.c_void_p, ctypes.c_int]
dll.SetProducerCompressMsgBodyOverHowmuch.restype = ctypes.c_int

# _CLogLevel: 1 FATAL .. 6 TRACE. WARN keeps the scratch logs small.
LOG_LEVEL = 3
SEND_STATUS = ["SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]
PULL_STATUS = ["FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL", "BROKER_TIMEOUT"]
# Property names read back from every consumed message (they cannot be enumerated).
PROBED = [
    "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY",
    "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "SHARDING_KEY", "__STARTDELIVERTIME",
]
user_props = set()

namesrv = None
broker = None
producers = {}
instances = 0


def first_line(s):
    s = "" if s is None else str(s)
    return s.split("\n", 1)[0]


def kv(words):
    a = {}
    for w in words:
        k, eq, v = w.partition("=")
        if eq and k:
            a[k] = v.replace("%20", " ")
    return a


def text(b):
    if b is None:
        return None
    if isinstance(b, bytes):
        return b.decode("utf-8", errors="replace")
    return str(b)


def producer(group):
    p = producers.get(group)
    if p is None:
        p = Producer(group, timeout=10000)
        p.set_namesrv_addr(namesrv)
        dll.SetProducerInstanceName(p._handle, ("conf-" + group).encode())
        dll.SetProducerLogPath(p._handle, LOG_DIR.encode())
        dll.SetProducerLogLevel(p._handle, LOG_LEVEL)
        if group.endswith("Zip"):
            dll.SetProducerCompressMsgBodyOverHowmuch(p._handle, 16)
        p.start()
        producers[group] = p
    return p


def body(a, i):
    size = int(a.get("size", "0"))
    base = a.get("body", "m") + "-" + str(i)
    if size <= len(base):
        return base
    b = list(base)
    while len(b) < size:
        b.append(chr(ord("a") + len(b) % 26))
    return "".join(b)


def message(a, i):
    tags = a.get("tags", "").split(",")
    m = Message(a["topic"])
    m.set_body(body(a, i).encode("utf-8"))
    if tags[0]:
        m.set_tags(tags[i % len(tags)])
    if "keys" in a:
        m.set_keys(a["keys"] + str(i))
    if "delay" in a:
        m.set_delay_time_level(int(a["delay"]))
    if "prop" in a:
        k, _, v = a["prop"].partition(":")
        user_props.add(k)
        m.set_property(k, v)
    return m


def send_line(i, r, queue=None):
    q = "" if queue is None else " queue=%d" % queue
    return "send %d %s%s queueOffset=%d msgId=%s" % (
        i, SEND_STATUS[int(r.status)], q, r.offset, r.msg_id)


def send(a):
    p = producer(a.get("group", "ConfProducer"))
    mode = a.get("mode", "sync")
    n = int(a.get("n", "1"))
    fixed = int(a["queue"]) if "queue" in a else None

    def selector_for(i, chosen):
        # The library calls this with the number of writable queues it knows for the topic.
        def select(mq_size, _msg, _arg):
            q = (fixed if fixed is not None else i) % mq_size
            chosen.append(q)
            return q
        return select

    if mode == "batch":
        r = p.send_batch([message(a, i) for i in range(n)])
        OUT.write(send_line(0, r) + "\n")
        return
    if mode == "async":
        results = [None] * n
        for i in range(n):
            done = threading.Event()

            def ok(r, i=i, done=done):
                results[i] = send_line(i, r)
                done.set()

            def fail(e, i=i, done=done):
                results[i] = "send %d error %s: %s" % (i, type(e).__name__, first_line(e))
                done.set()

            p.send_async(message(a, i), ok, fail)
            # One in flight at a time, so queue offsets do not depend on completion order.
            if not done.wait(20):
                results[i] = "send %d error timeout" % i
        for line in results:
            OUT.write(line + "\n")
        return
    for i in range(n):
        m = message(a, i)
        if mode == "sync":
            OUT.write(send_line(i, p.send_sync(m)) + "\n")
        elif mode == "oneway":
            p.send_oneway(m)
            OUT.write("send %d oneway\n" % i)
        elif mode == "orderly":
            chosen = []
            r = p.send_orderly(m, i, queue_selector=selector_for(i, chosen))
            OUT.write(send_line(i, r, chosen[-1] if chosen else None) + "\n")
        elif mode == "orderly-oneway":
            chosen = []
            p.send_oneway_orderly(m, i, queue_selector=selector_for(i, chosen))
            OUT.write("send %d oneway queue=%s\n" % (i, chosen[-1] if chosen else "?"))
        else:
            raise ValueError("unknown send mode " + mode)


def read_message(h, extra_props):
    """Everything printed about a consumed message, read while its handle is valid."""
    props = {}
    for k in PROBED + sorted(user_props) + extra_props:
        v = dll.GetMessageProperty(h, k.encode())
        if v:
            props[k] = text(v)
    tags = text(dll.GetMessageTags(h)) or "null"
    keys = text(dll.GetMessageKeys(h)) or "null"
    return {
        "topic": text(dll.GetMessageTopic(h)),
        "queue": dll.GetMessageQueueId(h),
        "queueOffset": dll.GetMessageQueueOffset(h),
        "tags": tags,
        "keys": keys,
        "reconsume": dll.GetMessageReconsumeTimes(h),
        "storeSize": dll.GetMessageStoreSize(h),
        "body": text(dll.GetMessageBody(h)) or "",
        "props": props,
    }


def describe(m):
    props = ", ".join("%s=%s" % (k, v) for k, v in sorted(m["props"].items()))
    return ("msg topic=%s queue=%d queueOffset=%d tags=%s keys=%s reconsume=%d storeSize=%d body=%s props={%s}"
            % (m["topic"], m["queue"], m["queueOffset"], m["tags"], m["keys"], m["reconsume"],
               m["storeSize"], m["body"], props))


def print_sorted(msgs):
    for m in sorted(msgs, key=lambda m: (m["topic"], m["queue"], m["queueOffset"])):
        OUT.write(describe(m) + "\n")


def extra_props(a):
    return [k for k in a.get("props", "").split(",") if k]


def push(a):
    global instances
    n = int(a.get("n", "1"))
    timeout = int(a.get("timeout", "30000")) / 1000.0
    fail = int(a.get("fail", "0"))
    extra = extra_props(a)
    model = MessageModel.BROADCASTING if "broadcast" in a else MessageModel.CLUSTERING
    c = PushConsumer(a.get("group", "ConfPush"), orderly="orderly" in a, message_model=model)
    instances += 1
    c.set_namesrv_addr(namesrv)
    c.set_instance_name("conf-push-%d" % instances)
    dll.SetPushConsumerLogPath(c._handle, LOG_DIR.encode())
    dll.SetPushConsumerLogLevel(c._handle, LOG_LEVEL)
    got = []
    cond = threading.Condition()
    failed = [0]

    # Registered directly rather than through PushConsumer.subscribe: the wrapper's callback
    # re-raises after choosing RECONSUME_LATER, which ctypes turns into 0 (CONSUME_SUCCESS).
    def on_message(_consumer, h):
        try:
            if failed[0] < fail:
                failed[0] += 1
                return 1  # RECONSUME_LATER
            m = read_message(h, extra)
            with cond:
                got.append(m)
                cond.notify_all()
            return 0  # CONSUME_SUCCESS
        except Exception as e:  # never let an exception cross into the library
            print("push callback: %r" % e, file=sys.stderr)
            return 1

    from rocketmq.client import _to_bytes
    from rocketmq.exceptions import ffi_check
    ffi_check(dll.Subscribe(c._handle, _to_bytes(a["topic"]), _to_bytes(a.get("expr", "*"))))
    c._register_callback(on_message)
    try:
        c.start()
        deadline = time.monotonic() + timeout
        with cond:
            while len(got) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                cond.wait(left)
            all_ = len(got) >= n
        if "linger" in a:
            time.sleep(int(a["linger"]) / 1000.0)
    finally:
        close(c, dll.ShutdownPushConsumer, dll.DestroyPushConsumer)
    with cond:
        msgs = list(got)
    OUT.write("push received=%d all=%s\n" % (len(msgs), "true" if all_ else "false"))
    print_sorted(msgs)


def pull(a):
    c = PullConsumer(a.get("group", "ConfPull"))
    c.set_namesrv_addr(namesrv)
    dll.SetPullConsumerLogPath(c._handle, LOG_DIR.encode())
    dll.SetPullConsumerLogLevel(c._handle, LOG_LEVEL)
    extra = extra_props(a)
    try:
        c.start()
        from rocketmq.exceptions import ffi_check
        mqs = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        ffi_check(dll.FetchSubscriptionMessageQueues(
            c._handle, a["topic"].encode(), ctypes.pointer(mqs), ctypes.pointer(size)))
        try:
            queues = sorted((mqs[i] for i in range(size.value)), key=lambda q: q.queueId)
            if not queues:
                # The library answers a topic without a route with no queues, not an error.
                OUT.write("pull queues=0\n")
            only = int(a["queue"]) if "queue" in a else None
            for mq in queues:
                if only is not None and mq.queueId != only:
                    continue
                r = dll.Pull(c._handle, ctypes.pointer(mq), a.get("expr", "*").encode(),
                             int(a.get("offset", "0")), int(a.get("max", "32")))
                try:
                    status = PULL_STATUS[r.pullStatus] if 0 <= r.pullStatus < len(PULL_STATUS) else str(r.pullStatus)
                    OUT.write("pull queue=%d %s next=%d min=%d max=%d\n"
                              % (mq.queueId, status, r.nextBeginOffset, r.minOffset, r.maxOffset))
                    msgs = [read_message(r.msgFoundList[i], extra) for i in range(r.size)]
                finally:
                    dll.ReleasePullResult(r)
                print_sorted(msgs)
        finally:
            dll.ReleaseSubscriptionMessageQueue(mqs)
    finally:
        close(c, dll.ShutdownPullConsumer, dll.DestroyPullConsumer)


def close(obj, shutdown, destroy):
    """Shut down and free a wrapper object once (its __del__ would shut it down again)."""
    h, obj._handle = obj._handle, None
    if h is None:
        return
    shutdown(h)
    destroy(h)


def step(line):
    w = line.split()
    a = kv(w[1:])
    if w[0] == "send":
        send(a)
    elif w[0] == "push":
        push(a)
    elif w[0] == "pull":
        pull(a)
    else:
        OUT.write("unknown step %s\n" % w[0])


def main():
    global namesrv, broker
    namesrv, broker = sys.argv[1], sys.argv[2]
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            step(line)
        except Exception as e:
            OUT.write("error %s: %s\n" % (type(e).__name__, first_line(e)))
        OUT.write("@@END\n")
        OUT.flush()
    for p in producers.values():
        try:
            close(p, dll.ShutdownProducer, dll.DestroyProducer)
        except Exception as e:
            print("shutdown: %r" % e, file=sys.stderr)
    OUT.flush()
    if not _KEEP_HOME:
        shutil.rmtree(HOME, ignore_errors=True)
    # The library's static destructors are not needed (and not trusted) at exit.
    os._exit(0)


if __name__ == "__main__":
    main()
