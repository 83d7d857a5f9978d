//! Differential conformance against Apache RocketMQ 4.9.4: every scenario of `scenarios.txt` runs
//! once against Apache's broker and name server (the reference release, `brokers::reference_dir`)
//! and once against ActorMQ, through the same drivers (Apache's Java client, its remoting client
//! and mqadmin), and what each observed is compared as text after masking values no broker
//! controls (`table::mask`). A difference fails the test unless `allowed.txt` names it with a
//! reason. The matrix of verdicts is written to `target/conformance/matrix.md` (the README's
//! conformance section is that file) and the summary line to `summary.txt`, each broker's masked
//! observations beside them.
//!
//! Needs Java 17 and the reference release; installs Debian's libnetty-java when missing
//! (`setup-java.sh`, as root) and makes the C++ client's venv (`setup-cpp.sh`). Part of
//! `cargo test`; alone: `cargo test --test conformance -- --nocapture` (about 5 minutes).
//! `CONFORMANCE_ONLY=<regex>` runs only the scenarios whose names match.

mod brokers;
mod drivers;
mod rust_driver;
mod table;

use std::path::Path;

use brokers::{ActorMq, Apache, Endpoints};
use drivers::LineDriver;
use rust_driver::RustDriver;
use table::{AllowList, Report, Scenario};

/// Runs every step of every scenario against one broker; returns each step's masked output.
fn observe(
    scenarios: &[Scenario],
    tools: &Tools,
    ends: &Endpoints,
    work: &Path,
    logs: &Path,
    broker: &str,
) -> Vec<Vec<String>> {
    let mut java = LineDriver::java(
        &tools.reference,
        &tools.classes,
        ends,
        &work.join("java-home"),
        &logs.join(format!("{broker}-java.log")),
    );
    let mut cpp = LineDriver::cpp(
        &tools.python,
        ends,
        &work.join("cpp-home"),
        &logs.join(format!("{broker}-cpp.log")),
    );
    let mut rust = RustDriver::start(ends);
    let ready = java.step("wait-ready");
    assert_eq!(
        ready, "ready\n",
        "{broker} never answered GET_BROKER_RUNTIME_INFO"
    );
    let mut kept = table::Kept::new();
    scenarios
        .iter()
        .map(|sc| {
            sc.steps
                .iter()
                .map(|step| {
                    let line = table::command_line(step, ends, &kept);
                    let raw = match step.driver.as_str() {
                        "java" | "raw" | "admin" => java.step(&line),
                        "cpp" => cpp.step(&line),
                        // rocketmq-client-rust 1.0 cannot read a 4.9.4 name server's routes
                        // (its BrokerData requires 5.x's enableActingMaster), so on Apache the
                        // reference for what it sees is Apache's Java client on the same step.
                        "rust" if broker == "apache" => java.step(&line),
                        "rust" => rust.step(&line),
                        other => panic!("no {other} driver yet"),
                    };
                    table::keep(step, &raw, &mut kept);
                    table::mask(step, ends, &raw)
                })
                .collect()
        })
        .collect()
}

/// What the drivers need: the reference release, the compiled Java driver, the C++ client's venv.
struct Tools {
    reference: std::path::PathBuf,
    classes: std::path::PathBuf,
    python: std::path::PathBuf,
}

fn dump(path: &Path, scenarios: &[Scenario], outs: &[Vec<String>]) {
    let mut s = String::new();
    for (sc, steps) in scenarios.iter().zip(outs) {
        s.push_str(&format!("== {}: {}\n", sc.name, sc.about));
        for (step, out) in sc.steps.iter().zip(steps) {
            s.push_str(&format!("-- {} {}\n{out}", step.driver, step.command));
        }
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn apache_and_actormq_look_the_same_to_every_driver() {
    let mut scenarios = table::load_scenarios(include_str!("scenarios.txt"));
    // While working on a few scenarios: CONFORMANCE_ONLY=<regex over scenario names>.
    if let Ok(only) = std::env::var("CONFORMANCE_ONLY") {
        let only = regex::Regex::new(&only).expect("CONFORMANCE_ONLY is a regex");
        scenarios.retain(|s| only.is_match(&s.name));
    }
    let allow = AllowList::load(include_str!("allowed.txt"));
    let reference = brokers::reference_dir();
    let tmp = tempfile::tempdir().unwrap();
    let tools = Tools {
        classes: drivers::compile_java_driver(&reference, &tmp.path().join("classes")),
        python: drivers::cpp_python(),
        reference,
    };
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/conformance");
    std::fs::create_dir_all(&results).unwrap();

    let apache_dir = tmp.path().join("apache");
    std::fs::create_dir_all(&apache_dir).unwrap();
    let apache_out = {
        let apache = Apache::start(&tools.reference, &apache_dir);
        observe(
            &scenarios,
            &tools,
            &apache.ends,
            &apache_dir,
            &results,
            "apache",
        )
    };
    let actormq_dir = tmp.path().join("actormq");
    let actormq_out = {
        let actormq = ActorMq::start(&actormq_dir);
        observe(
            &scenarios,
            &tools,
            &actormq.ends,
            &actormq_dir,
            &results,
            "actormq",
        )
    };
    dump(&results.join("apache.txt"), &scenarios, &apache_out);
    dump(&results.join("actormq.txt"), &scenarios, &actormq_out);

    let mut report = Report::default();
    for (i, sc) in scenarios.iter().enumerate() {
        for (j, step) in sc.steps.iter().enumerate() {
            let c = table::compare(&sc.name, &apache_out[i][j], &actormq_out[i][j], &allow);
            report.add(i, sc, step, c);
        }
    }
    std::fs::write(results.join("matrix.md"), report.matrix(&scenarios)).unwrap();
    let summary = report.summary(&scenarios);
    std::fs::write(results.join("summary.txt"), format!("{summary}\n")).unwrap();
    println!("{summary}");
    assert!(
        report.failures.is_empty(),
        "{summary}\n\n{}",
        report.failures.join("\n")
    );
}
