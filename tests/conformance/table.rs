//! The scenario table (`scenarios.txt`), the masks for values no broker controls, and the
//! comparison of two brokers' observations against the allow-list (`allowed.txt`).
//!
//! `scenarios.txt`: a scenario starts with `== name: what it shows`; each following line is one
//! step, `<driver> <command>`, where the driver is `java` (Apache's 4.9.4 client), `raw` (one
//! remoting request through Apache's remoting client, the response printed whole), `admin`
//! (mqadmin 4.9.4), `cpp` (Apache's C++ client), `rust` (rocketmq-client-rust 1.0, which cannot
//! read a 4.9.4 name server's routes: against Apache its steps run through the Java driver, so
//! its reference is what Apache's Java client sees). `{ns}` and `{broker}` stand for the broker's addresses; `admin` steps get
//! `-n {ns}` unless they name one. A step may end in options after ` ;; `: `mask=<regex>` (the
//! matches are volatile for this step, e.g. a TPS), `drop=<regex>` (the matches are cut: a row
//! that is there or not depending on timing no broker controls), `sorted-json` (a body whose key order is a
//! Java `HashMap`'s iteration order, so its keys are compared sorted), `sorted-lines` (output
//! lines printed from a Java hash set or map, whose order is an artifact of insertion history),
//! `keep=<name>:<regex>` (the regex's first group in this step's raw output becomes `{name}` in
//! later steps on the same broker: a msgId one step printed, which an mqadmin step then asks for).
//!
//! `allowed.txt`: `scenario | regex | reason`: in that scenario (`*`: any), text matching the
//! regex may differ, for the stated reason: a step whose two outputs are equal once every such
//! match is cut from both is "allow-listed", with the reasons of the rules that cut something.
//! Everything else must be identical.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use regex::Regex;

use super::brokers::Endpoints;

/// The report's columns, in the matrix's order.
pub const COLUMNS: &[(&str, &str)] = &[
    ("java", "Java client 4.9.4"),
    ("admin", "mqadmin 4.9.4"),
    ("cpp", "C++ client"),
    ("rust", "Rust client"),
];

/// The matrix column a step's driver belongs to (`raw` requests go through the Java client).
fn column(driver: &str) -> &'static str {
    match driver {
        "java" | "raw" => "java",
        "admin" => "admin",
        "cpp" => "cpp",
        _ => "rust",
    }
}

pub struct Step {
    pub driver: String,
    pub command: String,
    masks: Vec<Regex>,
    drops: Vec<Regex>,
    sorted_json: bool,
    sorted_lines: bool,
    keeps: Vec<(String, Regex)>,
}

pub struct Scenario {
    pub name: String,
    pub about: String,
    pub steps: Vec<Step>,
}

pub fn load_scenarios(text: &str) -> Vec<Scenario> {
    let mut out: Vec<Scenario> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_prefix("==") {
            let (name, about) = head.split_once(':').unwrap_or((head, ""));
            out.push(Scenario {
                name: name.trim().to_string(),
                about: about.trim().to_string(),
                steps: Vec::new(),
            });
            continue;
        }
        let scenario = out
            .last_mut()
            .unwrap_or_else(|| panic!("scenarios.txt:{}: a step before any `==`", n + 1));
        let mut parts = line.split(" ;; ");
        let body = parts.next().unwrap();
        let (driver, command) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        assert!(
            matches!(driver, "java" | "raw" | "admin" | "cpp" | "rust"),
            "scenarios.txt:{}: unknown driver `{driver}`",
            n + 1
        );
        let mut step = Step {
            driver: driver.to_string(),
            command: command.trim().to_string(),
            masks: Vec::new(),
            drops: Vec::new(),
            sorted_json: false,
            sorted_lines: false,
            keeps: Vec::new(),
        };
        for opt in parts {
            if let Some(re) = opt.strip_prefix("mask=") {
                step.masks.push(
                    Regex::new(re)
                        .unwrap_or_else(|e| panic!("scenarios.txt:{}: mask `{re}`: {e}", n + 1)),
                );
            } else if let Some(re) = opt.strip_prefix("drop=") {
                step.drops.push(
                    Regex::new(re)
                        .unwrap_or_else(|e| panic!("scenarios.txt:{}: drop `{re}`: {e}", n + 1)),
                );
            } else if let Some(keep) = opt.strip_prefix("keep=") {
                let (name, re) = keep
                    .split_once(':')
                    .unwrap_or_else(|| panic!("scenarios.txt:{}: keep=<name>:<regex>", n + 1));
                let re = Regex::new(re)
                    .unwrap_or_else(|e| panic!("scenarios.txt:{}: keep `{re}`: {e}", n + 1));
                step.keeps.push((name.to_string(), re));
            } else if opt == "sorted-json" {
                step.sorted_json = true;
            } else if opt == "sorted-lines" {
                step.sorted_lines = true;
            } else {
                panic!("scenarios.txt:{}: unknown option `{opt}`", n + 1);
            }
        }
        scenario.steps.push(step);
    }
    out
}

/// Values kept from earlier steps' outputs (`keep=`), by name.
pub type Kept = BTreeMap<String, String>;

/// Records this step's `keep=` values from its raw output (a value not found stays unset, so
/// the later step names `{name}` literally and fails the same way on both brokers).
pub fn keep(step: &Step, raw: &str, kept: &mut Kept) {
    for (name, re) in &step.keeps {
        if let Some(v) = re.captures(raw).and_then(|c| c.get(1)) {
            kept.insert(name.clone(), v.as_str().to_string());
        }
    }
}

/// The line a driver is sent: placeholders filled in, `-n` added to mqadmin steps.
pub fn command_line(step: &Step, ends: &Endpoints, kept: &Kept) -> String {
    let mut cmd = step
        .command
        .replace("{ns}", &ends.namesrv)
        .replace("{broker}", &ends.broker);
    for (name, value) in kept {
        cmd = cmd.replace(&format!("{{{name}}}"), value);
    }
    if step.driver == "admin" && !cmd.contains(" -n ") {
        cmd.push_str(&format!(" -n {}", ends.namesrv));
    }
    match step.driver.as_str() {
        "admin" => format!("admin {cmd}"),
        "raw" => format!("raw {cmd}"),
        _ => cmd,
    }
}

/// Values that differ between any two runs, whichever broker answers: replaced by a name.
pub fn mask(step: &Step, ends: &Endpoints, out: &str) -> String {
    static GLOBAL: std::sync::LazyLock<Vec<(Regex, &'static str)>> =
        std::sync::LazyLock::new(|| {
            [
                // Other addresses on loopback (clients' sockets, the HA port).
                (r"127\.0\.0\.1:\d+", "{addr}"),
                // msgIds: a unique key (UNIQ_KEY) or an offset msgId, 32 upper-case hex digits.
                (r"\b[0-9A-F]{32}(?:[0-9A-F]{24})?\b", "{msgid}"),
                // Request-reply correlation ids (UUIDs).
                (
                    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
                    "{uuid}",
                ),
                // The C++ client's instance name starts with its process id.
                (r"\b\d+-(\d+\.\d+\.\d+\.\d+@)", "{pid}-$1"),
                // Epoch milliseconds (store and born times, boot time).
                (r"\b1[6-9]\d{11}\b", "{ms}"),
                // Local dates and times as mqadmin prints them.
                (
                    r"\d{4}-\d\d-\d\d[ T#]\d\d:\d\d:\d\d(?:[,.:]\d{1,3})?",
                    "{date}",
                ),
            ]
            .into_iter()
            .map(|(re, name)| (Regex::new(re).unwrap(), name))
            .collect()
        });
    // Before any mask, while the body is still JSON.
    let sorted: String;
    let out = if step.sorted_json {
        sorted = out
            .lines()
            .map(|l| match l.strip_prefix("body=") {
                Some(json) => match serde_json::from_str::<serde_json::Value>(json) {
                    // serde_json's map is sorted by key (no preserve_order feature).
                    Ok(v) => format!("body={v}"),
                    Err(_) => l.to_string(),
                },
                None => l.to_string(),
            })
            .map(|l| l + "\n")
            .collect();
        sorted.as_str()
    } else {
        out
    };
    let mut s = out
        .replace(&ends.store_root, "{store}")
        .replace(&ends.broker, "{broker}")
        .replace(&ends.namesrv, "{ns}");
    for (re, name) in GLOBAL.iter() {
        s = re.replace_all(&s, *name).into_owned();
    }
    for re in &step.masks {
        s = re.replace_all(&s, "#").into_owned();
    }
    for re in &step.drops {
        s = re.replace_all(&s, "").into_owned();
    }
    // Column padding follows the width of masked values; alignment is not behaviour.
    static SPACES: std::sync::LazyLock<Regex> =
        std::sync::LazyLock::new(|| Regex::new(r"[ \t]+").unwrap());
    s = s
        .lines()
        .map(|l| SPACES.replace_all(l.trim_end(), " ").into_owned() + "\n")
        .collect();
    if step.sorted_lines {
        let mut lines: Vec<&str> = s.lines().collect();
        lines.sort_unstable();
        s = lines.iter().map(|l| format!("{l}\n")).collect();
    }
    s
}

struct Allow {
    scenario: String,
    line: Regex,
    reason: String,
}

pub struct AllowList(Vec<Allow>);

impl AllowList {
    pub fn load(text: &str) -> AllowList {
        let mut v = Vec::new();
        for (n, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = l.splitn(3, " | ").collect();
            assert!(
                f.len() == 3 && !f[2].trim().is_empty(),
                "allowed.txt:{}: want `scenario | regex | reason`",
                n + 1
            );
            v.push(Allow {
                scenario: f[0].trim().to_string(),
                line: Regex::new(f[1].trim())
                    .unwrap_or_else(|e| panic!("allowed.txt:{}: {e}", n + 1)),
                reason: f[2].trim().to_string(),
            });
        }
        AllowList(v)
    }

    /// Both outputs with every allowed difference of `scenario` cut out, and the reasons of the
    /// rules that cut something.
    fn cut(&self, scenario: &str, a: &str, b: &str) -> (String, String, BTreeSet<String>) {
        let (mut a, mut b) = (a.to_string(), b.to_string());
        let mut reasons = BTreeSet::new();
        for rule in self
            .0
            .iter()
            .filter(|r| r.scenario == "*" || r.scenario == scenario)
        {
            if rule.line.is_match(&a) || rule.line.is_match(&b) {
                a = rule.line.replace_all(&a, "").into_owned();
                b = rule.line.replace_all(&b, "").into_owned();
                reasons.insert(rule.reason.clone());
            }
        }
        (a, b, reasons)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Same,
    Allowed(BTreeSet<String>),
    Fails,
}

/// One step's comparison.
pub struct Compared {
    pub verdict: Verdict,
    pub diff: String,
}

pub fn compare(scenario: &str, apache: &str, actormq: &str, allow: &AllowList) -> Compared {
    if apache == actormq {
        return Compared {
            verdict: Verdict::Same,
            diff: String::new(),
        };
    }
    let (a, b, reasons) = allow.cut(scenario, apache, actormq);
    let verdict = if a == b {
        Verdict::Allowed(reasons)
    } else {
        Verdict::Fails
    };
    Compared {
        verdict,
        diff: similar::TextDiff::from_lines(apache, actormq)
            .unified_diff()
            .header("Apache RocketMQ 4.9.4", "ActorMQ")
            .to_string(),
    }
}

/// The verdicts of every scenario × column, and the text of the README's matrix.
#[derive(Default)]
pub struct Report {
    cells: BTreeMap<(usize, &'static str), Verdict>,
    pub failures: Vec<String>,
    steps: usize,
}

impl Report {
    pub fn add(&mut self, index: usize, scenario: &Scenario, step: &Step, c: Compared) {
        self.steps += 1;
        let cell = self
            .cells
            .entry((index, column(&step.driver)))
            .or_insert(Verdict::Same);
        match (&c.verdict, &mut *cell) {
            (Verdict::Fails, _) => *cell = Verdict::Fails,
            (Verdict::Allowed(r), Verdict::Allowed(have)) => have.extend(r.iter().cloned()),
            (Verdict::Allowed(r), Verdict::Same) => *cell = Verdict::Allowed(r.clone()),
            _ => {}
        }
        if c.verdict == Verdict::Fails {
            self.failures.push(format!(
                "scenario `{}`, step `{} {}`:\n{}",
                scenario.name, step.driver, step.command, c.diff
            ));
        }
    }

    pub fn summary(&self, scenarios: &[Scenario]) -> String {
        let mut same = 0;
        let mut failing = 0;
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for v in self.cells.values() {
            match v {
                Verdict::Same => same += 1,
                Verdict::Fails => failing += 1,
                Verdict::Allowed(r) => {
                    for reason in r {
                        *reasons.entry(reason.clone()).or_default() += 1;
                    }
                }
            }
        }
        let allowed = self.cells.len() - same - failing;
        let mut s = format!(
            "conformance: {} scenarios, {} scenario × driver cells ({} steps) run against Apache \
             RocketMQ 4.9.4 and ActorMQ: {same} identical, {allowed} allow-listed, {failing} failing",
            scenarios.len(),
            self.cells.len(),
            self.steps
        );
        for (r, n) in reasons {
            let _ = write!(s, "\n  allow-listed ×{n}: {r}");
        }
        s
    }

    /// The README's matrix: one row per scenario, one column per driver; an allow-listed cell
    /// points to its numbered reasons below the table.
    pub fn matrix(&self, scenarios: &[Scenario]) -> String {
        let mut notes: Vec<String> = Vec::new();
        let mut s = String::from("| scenario |");
        for (_, title) in COLUMNS {
            let _ = write!(s, " {title} |");
        }
        s.push_str("\n|---|");
        s.push_str(&"---|".repeat(COLUMNS.len()));
        for (i, sc) in scenarios.iter().enumerate() {
            let _ = write!(s, "\n| `{}` |", sc.name);
            for (col, _) in COLUMNS {
                let cell = match self.cells.get(&(i, col)) {
                    None => "·".to_string(),
                    Some(Verdict::Same) => "same".to_string(),
                    Some(Verdict::Allowed(reasons)) => {
                        let refs: Vec<String> = reasons
                            .iter()
                            .map(|r| {
                                let n = notes.iter().position(|x| x == r).unwrap_or_else(|| {
                                    notes.push(r.clone());
                                    notes.len() - 1
                                });
                                format!("[{}]", n + 1)
                            })
                            .collect();
                        format!("differs {}", refs.join(""))
                    }
                    Some(Verdict::Fails) => "**fails**".to_string(),
                };
                let _ = write!(s, " {cell} |");
            }
        }
        s.push('\n');
        for (n, r) in notes.iter().enumerate() {
            let _ = write!(s, "\n{}. {r}", n + 1);
        }
        s.push('\n');
        s
    }
}
