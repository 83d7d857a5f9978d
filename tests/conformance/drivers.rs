//! Drivers: what runs one scenario step against one broker and returns what the client or tool
//! observed, as text. Each is a child process speaking one line protocol (a step line in; the
//! observed lines and `@@END` out): the Java driver (`JavaDriver.java`: Apache's 4.9.4 client,
//! its remoting client and mqadmin, in one JVM per broker) serves the `java`, `raw` and `admin`
//! steps; the C++ driver (`cpp_driver.py`: Apache's C++ client through the `rocketmq` wheel, in
//! the venv `setup-cpp.sh` makes) serves the `cpp` steps. The interop suite (`tests/interop`)
//! includes this file for its own Java program ([`compile_java`], [`LineDriver::java_main`]) and
//! uses only those parts, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use super::brokers::{Endpoints, Proc};

/// Longest a single step may take (a push consumer waiting for its messages, mqadmin's own
/// timeouts): a guard against a hang, not a timing.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// Compiles `JavaDriver.java` against the reference's jars into `out`, once `setup-java.sh` has
/// made sure the netty jars the reference runs with are installed.
pub fn compile_java_driver(reference: &Path, out: &Path) -> PathBuf {
    compile_java(reference, "tests/conformance/JavaDriver.java", out)
}

/// Compiles one Java program (`src`, relative to the repository) against the reference's jars
/// into `out`, after `setup-java.sh`.
pub fn compile_java(reference: &Path, src: &str, out: &Path) -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/setup-java.sh");
    let status = Command::new(&setup)
        .status()
        .unwrap_or_else(|e| panic!("run {}: {e}", setup.display()));
    assert!(status.success(), "{} failed", setup.display());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(src);
    let jars = reference.join("rocketmq-4.9.4/lib/*");
    let status = Command::new("javac")
        .args(["-nowarn", "-d"])
        .arg(out)
        .arg("-cp")
        .arg(&jars)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("run javac (a JDK is needed for the conformance suite): {e}"));
    assert!(status.success(), "javac {} failed", src.display());
    out.to_path_buf()
}

/// The venv with Apache's C++ client (made by `setup-cpp.sh`, which `.ci/run` runs): its python.
pub fn cpp_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = std::env::var_os("CONFORMANCE_CPP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/conformance/venv"));
    let status = Command::new(root.join("tests/conformance/setup-cpp.sh"))
        .arg(&venv)
        .status()
        .unwrap_or_else(|e| panic!("run tests/conformance/setup-cpp.sh: {e}"));
    assert!(
        status.success(),
        "tests/conformance/setup-cpp.sh {} failed",
        venv.display()
    );
    venv.join("bin/python")
}

/// One driver process against one broker.
pub struct LineDriver {
    stdin: ChildStdin,
    lines: Receiver<String>,
    _proc: Proc,
}

impl LineDriver {
    /// The Java driver: one JVM running `JavaDriver`. `home` is its fresh `user.home` and
    /// working directory: the client keeps broadcast offsets there and mqadmin `consumerStatus`
    /// writes its reports into the working directory.
    pub fn java(
        reference: &Path,
        classes: &Path,
        ends: &Endpoints,
        home: &Path,
        log: &Path,
    ) -> LineDriver {
        Self::java_main(reference, classes, "JavaDriver", ends, home, log)
    }

    /// A Java program of the same line protocol: `main` (a class in `classes`) run with the name
    /// server's and the broker's address as its arguments.
    pub fn java_main(
        reference: &Path,
        classes: &Path,
        main: &str,
        ends: &Endpoints,
        home: &Path,
        log: &Path,
    ) -> LineDriver {
        std::fs::create_dir_all(home).unwrap();
        let mut cmd = Command::new(reference.join("run-java.sh"));
        cmd.args([main, &ends.namesrv, &ends.broker])
            .env("EXTRA_CP", classes)
            .env("JAVA_HEAP", "256m")
            .env("JAVA_HOME_DIR", home)
            .current_dir(home);
        Self::spawn(cmd, log, "Java driver")
    }

    /// The C++ driver: `cpp_driver.py` under the venv's python, `home` its fresh home (the
    /// library's logs and local offsets).
    pub fn cpp(python: &Path, ends: &Endpoints, home: &Path, log: &Path) -> LineDriver {
        std::fs::create_dir_all(home).unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/cpp_driver.py");
        let mut cmd = Command::new(python);
        cmd.arg(script)
            .args([&ends.namesrv, &ends.broker])
            .env("CPP_DRIVER_HOME", home)
            .current_dir(home);
        Self::spawn(cmd, log, "C++ driver")
    }

    fn spawn(mut cmd: Command, log: &Path, what: &'static str) -> LineDriver {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start the {what}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LineDriver {
            stdin,
            lines: rx,
            _proc: Proc(child, what),
        }
    }

    /// Runs one step line; returns the observed lines.
    pub fn step(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}")
            .unwrap_or_else(|e| panic!("write to the {}: {e}", self._proc.1));
        self.stdin.flush().unwrap();
        let mut out = String::new();
        loop {
            match self.lines.recv_timeout(STEP_LIMIT) {
                Ok(l) if l == "@@END" => return out,
                Ok(l) => {
                    out.push_str(&l);
                    out.push('\n');
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "the {} did not finish `{line}` within {STEP_LIMIT:?}",
                        self._proc.1
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the {} exited during `{line}`; so far:\n{out}",
                        self._proc.1
                    )
                }
            }
        }
    }
}
