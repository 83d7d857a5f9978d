//! How `actormq admin` prints: aligned tables for people (mqadmin's `#Column` headers), JSON for
//! scripts (`--json`: one document on stdout, the same rows with the header names as keys), and
//! the message detail block of `queryMsgById` / `printMsg`.

use std::io::Read as _;

use actormq_core::format::properties;
use actormq_core::format::record::{sys_flag, RecordView};
use serde_json::{json, Map, Value};

/// Rows under named columns.
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Columns padded to their widest cell, two spaces apart; headers prefixed with `#`.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len() + 1).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(c.chars().count());
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<String>, out: &mut String| {
            let n = cells.len();
            for (i, c) in cells.into_iter().enumerate() {
                if i + 1 == n {
                    out.push_str(&c);
                } else {
                    let pad = widths[i].saturating_sub(c.chars().count());
                    out.push_str(&c);
                    out.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push('\n');
        };
        line(
            self.headers.iter().map(|h| format!("#{h}")).collect(),
            &mut out,
        );
        for r in &self.rows {
            line(r.clone(), &mut out);
        }
        out
    }

    pub fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    let mut m = Map::new();
                    for (h, c) in self.headers.iter().zip(r) {
                        m.insert((*h).to_string(), Value::String(c.clone()));
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }
}

/// Prints a table (or its JSON).
pub fn print_table(t: &Table, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(&t.to_json()).unwrap());
    } else {
        print!("{}", t.render());
    }
}

/// Prints `key : value` lines (mqadmin's brokerStatus layout) or a JSON object.
pub fn print_kv(title: Option<&str>, kv: &[(String, String)], json: bool) -> Value {
    let obj: Map<String, Value> = kv
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if !json {
        if let Some(t) = title {
            println!("{t}");
        }
        let w = kv.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in kv {
            println!("{k:<w$} : {v}");
        }
    }
    Value::Object(obj)
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in local time, as mqadmin prints timestamps; `-` for 0.
pub fn time_str(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S,%3f")
            .to_string(),
        None => ms.to_string(),
    }
}

/// Parses mqadmin's time arguments: `now`, milliseconds since the epoch, or
/// `yyyy-MM-dd#HH:mm:ss:SSS` (local time).
pub fn parse_time(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("now") {
        return Ok(chrono::Utc::now().timestamp_millis());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d#%H:%M:%S:%3f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d#%H:%M:%S"))
        .map_err(|_| {
            format!("time {s:?} is not `now`, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS")
        })?;
    naive
        .and_local_timezone(chrono::Local)
        .earliest()
        .map(|t| t.timestamp_millis())
        .ok_or_else(|| format!("time {s:?} does not exist in the local time zone"))
}

/// The body as text (decompressed when the record says so; lossy UTF-8).
pub fn body_text(r: &RecordView<'_>) -> String {
    if r.sys_flag & sys_flag::COMPRESSED_FLAG != 0 {
        let mut out = Vec::new();
        if flate2::read::ZlibDecoder::new(r.body)
            .read_to_end(&mut out)
            .is_ok()
        {
            return String::from_utf8_lossy(&out).into_owned();
        }
    }
    String::from_utf8_lossy(r.body).into_owned()
}

/// A stored message as mqadmin's `queryMsgById` shows it, and as JSON.
pub fn message_detail(r: &RecordView<'_>, print_body: bool) -> (String, Value) {
    let props: Map<String, Value> = properties::parse(&r.properties)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let rows: Vec<(&str, String)> = vec![
        ("OffsetID", r.offset_msg_id()),
        ("Topic", r.topic.to_string()),
        ("Tags", format!("[{}]", r.tags().unwrap_or(""))),
        (
            "Keys",
            format!("[{}]", r.keys().collect::<Vec<_>>().join(" ")),
        ),
        ("Unique Key", r.uniq_key().unwrap_or("").to_string()),
        ("Queue ID", r.queue_id.to_string()),
        ("Queue Offset", r.queue_offset.to_string()),
        ("CommitLog Offset", r.phy_offset.to_string()),
        ("Reconsume Times", r.reconsume_times.to_string()),
        ("Born Timestamp", time_str(r.born_timestamp)),
        ("Store Timestamp", time_str(r.store_timestamp)),
        ("Born Host", r.born_host.to_string()),
        ("Store Host", r.store_host.to_string()),
        ("System Flag", r.sys_flag.to_string()),
        (
            "Properties",
            serde_json::to_string(&Value::Object(props.clone())).unwrap_or_default(),
        ),
    ];
    let mut text = String::new();
    for (k, v) in &rows {
        text.push_str(&format!("{:<20} {v}\n", format!("{k}:")));
    }
    let body = body_text(r);
    if print_body {
        text.push_str(&format!("{:<20} {body}\n", "Message Body:"));
    }
    let value = json!({
        "msgId": r.offset_msg_id(),
        "topic": r.topic,
        "tags": r.tags(),
        "keys": r.keys().collect::<Vec<_>>(),
        "uniqKey": r.uniq_key(),
        "queueId": r.queue_id,
        "queueOffset": r.queue_offset,
        "commitLogOffset": r.phy_offset,
        "reconsumeTimes": r.reconsume_times,
        "bornTimestamp": r.born_timestamp,
        "storeTimestamp": r.store_timestamp,
        "bornHost": r.born_host.to_string(),
        "storeHost": r.store_host.to_string(),
        "sysFlag": r.sys_flag,
        "properties": props,
        "body": if print_body { Value::String(body) } else { Value::Null },
    });
    (text, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_convert_to_json() {
        let mut t = Table::new(&["Topic", "Diff"]);
        t.push(vec!["orders".into(), "3".into()]);
        t.push(vec!["x".into(), "12345".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "#Topic  #Diff");
        assert_eq!(lines[1], "orders  3");
        assert_eq!(lines[2], "x       12345");
        assert_eq!(t.to_json()[1]["Diff"], "12345");
    }

    #[test]
    fn mqadmin_time_arguments_parse() {
        assert_eq!(parse_time("1700000000000").unwrap(), 1700000000000);
        assert!(parse_time("now").unwrap() > 1700000000000);
        let t = parse_time("2024-01-02#03:04:05:006").unwrap();
        assert_eq!(t % 1000, 6);
        assert!(parse_time("yesterday").unwrap_err().contains("yesterday"));
    }
}
