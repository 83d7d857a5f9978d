//! Client versions as RocketMQ numbers them: the ordinal of `MQVersion.Version`
//! (common/src/main/java/org/apache/rocketmq/common/MQVersion.java), sent as `version` in every
//! request header and heartbeat, and named back by `MQVersion.getVersionDesc`.
//!
//! Owns [`version_desc`] and the ordinals the broker compares against. Invariant: the names are
//! the enum's, in its order — an irregular run (V3_0_0 betas, V3_0_7..V3_0_15, V3_1 and V3_2 from
//! patch 0, V3_3..V3_9 from patch 1, V4 and V5 from 0), each version a `_SNAPSHOT` then a release.

/// `V3_0_7_SNAPSHOT`: the first client that answers GET_CONSUMER_STATUS_FROM_CLIENT and
/// RESET_CONSUMER_CLIENT_OFFSET.
pub const V3_0_7_SNAPSHOT: i32 = 28;

/// The 28 versions before [`V3_0_7_SNAPSHOT`], whose names follow no pattern.
const FIRST: [&str; 28] = [
    "V3_0_0_SNAPSHOT",
    "V3_0_0_ALPHA1",
    "V3_0_0_BETA1",
    "V3_0_0_BETA2",
    "V3_0_0_BETA3",
    "V3_0_0_BETA4",
    "V3_0_0_BETA5",
    "V3_0_0_BETA6_SNAPSHOT",
    "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT",
    "V3_0_0_BETA7",
    "V3_0_0_BETA8_SNAPSHOT",
    "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT",
    "V3_0_0_BETA9",
    "V3_0_0_FINAL",
    "V3_0_1_SNAPSHOT",
    "V3_0_1",
    "V3_0_2_SNAPSHOT",
    "V3_0_2",
    "V3_0_3_SNAPSHOT",
    "V3_0_3",
    "V3_0_4_SNAPSHOT",
    "V3_0_4",
    "V3_0_5_SNAPSHOT",
    "V3_0_5",
    "V3_0_6_SNAPSHOT",
    "V3_0_6",
];

/// The regular part of the enum: (major, minor, first patch, last patch), in order.
const RUNS: [(u8, u8, u8, u8); 30] = {
    let mut runs = [(0, 0, 0, 0); 30];
    runs[0] = (3, 0, 7, 15);
    runs[1] = (3, 1, 0, 9);
    runs[2] = (3, 2, 0, 9);
    let mut i = 3;
    while i < 10 {
        runs[i] = (3, i as u8, 1, 9);
        i += 1;
    }
    let mut j = 0;
    while j < 20 {
        runs[10 + j] = (4 + (j / 10) as u8, (j % 10) as u8, 0, 9);
        j += 1;
    }
    runs
};

/// `MQVersion.getVersionDesc(ordinal)`: the enum's name; past the last, `HIGHER_VERSION` (as
/// Java); a negative ordinal, which Java cannot name, `ordinal <n>`.
pub fn version_desc(ordinal: i32) -> String {
    let Ok(mut k) = usize::try_from(ordinal) else {
        return format!("ordinal {ordinal}");
    };
    if let Some(name) = FIRST.get(k) {
        return (*name).to_string();
    }
    k -= FIRST.len();
    for &(major, minor, first, last) in &RUNS {
        let n = 2 * usize::from(last - first + 1);
        if k < n {
            let patch = usize::from(first) + k / 2;
            let snapshot = if k % 2 == 0 { "_SNAPSHOT" } else { "" };
            return format!("V{major}_{minor}_{patch}{snapshot}");
        }
        k -= n;
    }
    "HIGHER_VERSION".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ordinals and names read from 4.9.4's MQVersion.java.
    #[test]
    fn names_are_java_s() {
        for (ordinal, name) in [
            (0, "V3_0_0_SNAPSHOT"),
            (27, "V3_0_6"),
            (28, "V3_0_7_SNAPSHOT"),
            (45, "V3_0_15"),
            (46, "V3_1_0_SNAPSHOT"),
            (62, "V3_1_8_SNAPSHOT"),
            (86, "V3_3_1_SNAPSHOT"),
            (211, "V3_9_9"),
            (212, "V4_0_0_SNAPSHOT"),
            (401, "V4_9_4"),
            (611, "V5_9_9"),
            (612, "HIGHER_VERSION"),
            (9999, "HIGHER_VERSION"),
            (-1, "ordinal -1"),
        ] {
            assert_eq!(version_desc(ordinal), name, "ordinal {ordinal}");
        }
    }
}
