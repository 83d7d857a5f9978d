//! RocketMQ 4.9.4's FAQ hint on remarks: `FAQUrl.suggestTodo(url)`
//! (common/src/main/java/org/apache/rocketmq/common/help/FAQUrl.java), appended by the 4.9.4
//! name server and broker to some refusals (a topic without a route, a missing topic or
//! subscription group).
//!
//! Why it matters to clients: the Java client's `FAQUrl.attachDefaultURL` adds its own
//! "For more information, please visit the url, …" line to any error message that does not
//! already carry the `"\nSee "` marker, so a remark without the suffix prints differently in
//! mqadmin and in exceptions. Every URL constant of 4.9.4 names the same page; the names are kept
//! so a remark says which hint 4.9.4 gives there.

/// `FAQUrl.APPLY_TOPIC_URL`.
pub const APPLY_TOPIC_URL: &str = "http://rocketmq.apache.org/docs/faq/";
/// `FAQUrl.SUBSCRIPTION_GROUP_NOT_EXIST`.
pub const SUBSCRIPTION_GROUP_NOT_EXIST: &str = "http://rocketmq.apache.org/docs/faq/";
/// `FAQUrl.SAME_GROUP_DIFFERENT_TOPIC`.
pub const SAME_GROUP_DIFFERENT_TOPIC: &str = "http://rocketmq.apache.org/docs/faq/";

/// `FAQUrl.suggestTodo(url)`: `"\nSee <url> for further details."`.
pub fn suggest_todo(url: &str) -> String {
    format!("\nSee {url} for further details.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suffix_is_4_9_4s() {
        assert_eq!(
            suggest_todo(APPLY_TOPIC_URL),
            "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
        );
    }
}
