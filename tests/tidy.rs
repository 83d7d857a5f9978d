//! House rules as code, in the spirit of TigerBeetle's `tidy.zig`: each rule reads the
//! repository's files (from `CARGO_MANIFEST_DIR/..`) and fails naming the file, the line and the
//! rule it breaks.
//!
//! Rules:
//! * no `Mutex`/`RwLock` (std, parking_lot or tokio) and no thread spawn (`thread::spawn`,
//!   `thread::Builder`, `thread::scope`) in `src/` or `actors/src/` outside [`LOCKS`] and
//!   [`THREADS`]; subsystems exchange messages instead (issue #33);
//! * no function longer than [`FN_LINES`] lines in the same trees outside [`LONG_FNS`];
//! * no source file longer than [`FILE_LINES`] lines outside [`BIG_FILES`];
//! * README.md at most [`README_LINES`] lines, ARCHITECTURE.md at most [`ARCHITECTURE_LINES`];
//! * no import circle: within each module, no two children import each other, directly or
//!   through siblings ([`no_import_circles`]);
//! * no comment in `src/`, `actors/src/` or `tests/` citing documents that are not in the
//!   repository (the design notes, the RocketMQ facts and ecosystem notes, a spec folder, any
//!   numbered section) outside [`CITATIONS`]: comments cite files here or Apache RocketMQ's
//!   sources.
//!
//! Every allow-list pins what is there today: an entry must match the code exactly (a count) or
//! still be needed (a size), so a list only shrinks when the code gets better, and an entry that
//! no longer applies fails as stale.
//!
//! Test code does not count for the lock, thread, function and file size rules: `#[cfg(test)]`
//! items, the files of `#[cfg(test)] mod name;` and `*_tests.rs` files are skipped. The scanner ([`scan`]) blanks comments, strings and char
//! literals before it looks at code, and matches braces to find where an item ends.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Longest function allowed outside [`LONG_FNS`].
const FN_LINES: usize = 120;
/// Longest non-test source file allowed outside [`BIG_FILES`].
const FILE_LINES: usize = 2500;
const README_LINES: usize = 300;
const ARCHITECTURE_LINES: usize = 200;

/// Lock types allowed, as (file, occurrences of `Mutex<`/`Mutex::`/`RwLock<`/`RwLock::` in
/// non-test code, why a lock and not a message).
const LOCKS: &[(&str, usize, &str)] = &[
    (
        "actors/src/store/mod.rs",
        1,
        "Store.arbiters: emptied once, at shutdown; a mutex only so that Store is Sync",
    ),
    (
        "actors/src/store/system.rs",
        1,
        "Store.arbiters (see store/mod.rs), built once the store's actors are started",
    ),
    (
        "actors/src/broker/live_config.rs",
        2,
        "LiveConfig.updates: serialises runtime config updates (admin path only)",
    ),
    (
        "actors/src/metered.rs",
        2,
        "the probe registry: taken when an actor starts or a ref is created, never per message",
    ),
    (
        "actors/src/tools/admin/client.rs",
        2,
        "the admin CLI (a tool, not the broker): one cached connection per address across awaits",
    ),
    (
        "actors/src/tools/bench_wire.rs",
        1,
        "a load generator (a tool, not the broker): a connection's requests in flight, shared by \
         its writer and reader tasks",
    ),
];

/// Thread spawns allowed, as (file, occurrences of `thread::spawn|Builder|scope` in non-test
/// code, why the runtime does not run it).
const THREADS: &[(&str, usize, &str)] = &[
    (
        "actors/src/store/parallel_io.rs",
        2,
        "Threaded, the runtime's ParallelIo: scoped helpers overlap the blocking fsyncs of many \
         new ConsumeQueue files (the core hands such batches to its caller)",
    ),
    (
        "actors/src/broker/testing.rs",
        1,
        "TestBroker: the tests' in-process broker runs its own actix System on its own thread",
    ),
];

/// Functions allowed over [`FN_LINES`], as (file, function name, lines it may have). Being
/// shortened (issue #33): lower a number or drop an entry when one lands.
const LONG_FNS: &[(&str, &str, usize)] = &[];

/// Non-test files allowed over [`FILE_LINES`], as (file, lines it may have).
const BIG_FILES: &[(&str, usize)] = &[];

/// Files whose comments may cite documents that are not in the repository, as (file, citations).
/// Empty: every comment cites this repository or Apache RocketMQ's sources, so a new citation of
/// anything else fails.
const CITATIONS: &[(&str, usize)] = &[];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dirs` (relative to the repository), as repository-relative paths with
/// `/` separators, sorted.
fn rust_files(dirs: &[&str]) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for e in entries {
            let path = e.expect("dir entry").path();
            if path.is_dir() {
                // Build output of the fuzz crate, if someone built it in place.
                if path.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                walk(root, &path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let rel = path.strip_prefix(root).expect("under the repository");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let root = repo();
    let mut out = Vec::new();
    for d in dirs {
        walk(&root, &root.join(d), &mut out);
    }
    out.sort();
    out
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The non-test source files of the two crates: without `*_tests.rs` files and the files of
/// modules declared `#[cfg(test)] mod name;`.
fn source_files() -> Vec<String> {
    let files = rust_files(&["src", "actors/src"]);
    let tests = test_module_files(&files);
    files
        .into_iter()
        .filter(|f| !f.ends_with("_tests.rs"))
        .filter(|f| {
            !tests
                .iter()
                .any(|t| f == t || f.starts_with(&format!("{t}/")))
        })
        .collect()
}

/// The modules that `files` declare as `#[cfg(test)] mod name;`, as `name.rs` and `name` (the
/// directory of its submodules) in the declaring module's directory (its own directory for
/// `mod.rs`, `lib.rs` and `main.rs`, else the directory named after it).
fn test_module_files(files: &[String]) -> Vec<String> {
    let decl = Regex::new(
        r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;",
    )
    .unwrap();
    let mut out = Vec::new();
    for file in files {
        let (dir, stem) = file.rsplit_once('/').expect("a file in a directory");
        let stem = stem.trim_end_matches(".rs");
        let base = if ["mod", "lib", "main"].contains(&stem) {
            dir.to_string()
        } else {
            format!("{dir}/{stem}")
        };
        for c in decl.captures_iter(&scan(&read(file)).code) {
            out.push(format!("{base}/{}.rs", &c[1]));
            out.push(format!("{base}/{}", &c[1]));
        }
    }
    out
}

/// A file split into code and comments.
struct Scanned {
    /// The source with every comment, string and char literal replaced by spaces (quotes and
    /// newlines kept), so that braces and names in it are code.
    code: String,
    /// (1-based line, text) of every comment line.
    comments: Vec<(usize, String)>,
}

/// Splits `src` into code and comments: line and (nested) block comments, strings with escapes,
/// raw strings (`r#"…"#`, `br"…"`), char literals (`'{'`, `'\''`, `'\u{7f}'`) — and lifetimes,
/// which stay code.
fn scan(src: &str) -> Scanned {
    let s: Vec<char> = src.chars().collect();
    let mut code = String::with_capacity(src.len());
    let mut comments: Vec<(usize, String)> = Vec::new();
    let mut line = 1;
    let at = |i: usize| s.get(i).copied();
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    // Blanks one char of a literal or comment, keeping newlines.
    let blank = |c: char, code: &mut String, line: &mut usize| {
        if c == '\n' {
            *line += 1;
            code.push('\n');
        } else {
            code.push(' ');
        }
    };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match (c, at(i + 1)) {
            ('/', Some('/')) => {
                let start = i;
                while i < s.len() && s[i] != '\n' {
                    code.push(' ');
                    i += 1;
                }
                comments.push((line, s[start..i].iter().collect()));
            }
            ('/', Some('*')) => {
                let mut depth = 0;
                let mut text = String::new();
                while i < s.len() {
                    if s[i] == '/' && at(i + 1) == Some('*') {
                        depth += 1;
                        code.push_str("  ");
                        text.push_str("/*");
                        i += 2;
                    } else if s[i] == '*' && at(i + 1) == Some('/') {
                        depth -= 1;
                        code.push_str("  ");
                        text.push_str("*/");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if s[i] == '\n' {
                            comments.push((line, std::mem::take(&mut text)));
                        } else {
                            text.push(s[i]);
                        }
                        blank(s[i], &mut code, &mut line);
                        i += 1;
                    }
                }
                comments.push((line, text));
            }
            ('"', _) => {
                code.push('"');
                i += 1;
                while i < s.len() && s[i] != '"' {
                    if s[i] == '\\' {
                        code.push(' ');
                        i += 1;
                    }
                    if i < s.len() {
                        blank(s[i], &mut code, &mut line);
                        i += 1;
                    }
                }
                code.push('"');
                i += 1;
            }
            ('r' | 'b' | 'c', _) if !ident(i.checked_sub(1).and_then(at)) && raw_open(&s, i) => {
                let (hashes, quote) = raw_open_at(&s, i);
                for _ in i..=quote {
                    code.push(' ');
                }
                i = quote + 1;
                let closes = |j: usize| s[j] == '"' && (1..=hashes).all(|h| at(j + h) == Some('#'));
                while i < s.len() && !closes(i) {
                    blank(s[i], &mut code, &mut line);
                    i += 1;
                }
                for _ in 0..=hashes {
                    code.push(' ');
                }
                i += 1 + hashes;
            }
            ('\'', Some('\\')) => {
                // An escaped char literal: skip the escape's first char, then to the quote.
                code.push_str("'  ");
                i += 3;
                while i < s.len() && s[i] != '\'' {
                    code.push(' ');
                    i += 1;
                }
                code.push('\'');
                i += 1;
            }
            ('\'', Some(ch)) if at(i + 2) == Some('\'') && ch != '\n' => {
                code.push_str("' '");
                i += 3;
            }
            _ => {
                if c == '\n' {
                    line += 1;
                }
                code.push(c);
                i += 1;
            }
        }
    }
    Scanned { code, comments }
}

/// Whether a raw string (`r"`, `r#"`, `br"`, `cr#"`) starts at `i`.
fn raw_open(s: &[char], i: usize) -> bool {
    let r = if s[i] == 'r' { i } else { i + 1 };
    if s.get(r) != Some(&'r') {
        return false;
    }
    let mut j = r + 1;
    while s.get(j) == Some(&'#') {
        j += 1;
    }
    s.get(j) == Some(&'"')
}

/// (number of `#`, index of the opening quote) of the raw string starting at `i`.
fn raw_open_at(s: &[char], i: usize) -> (usize, usize) {
    let mut j = if s[i] == 'r' { i + 1 } else { i + 2 };
    let mut hashes = 0;
    while s[j] == '#' {
        hashes += 1;
        j += 1;
    }
    (hashes, j)
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Byte offset of the end of the item whose body or `;` comes first after `from` in `code`
/// (blanked by [`scan`]): the `;` at depth 0 of `()`/`[]`, or the `}` that matches the first
/// `{`. `None`: unbalanced.
fn item_end(code: &str, from: usize) -> Option<usize> {
    let b = code.as_bytes();
    let mut depth = 0i32;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return Some(i),
            b'{' if depth == 0 => return matching_brace(code, i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Byte offset of the `}` matching the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, b) in code.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Lines (1-based, inclusive ranges) of `#[cfg(test)]` items.
fn test_ranges(code: &str) -> Vec<(usize, usize)> {
    let cfg_test = Regex::new(r"#\[cfg\(test\)\]").unwrap();
    cfg_test
        .find_iter(code)
        .map(|m| {
            let end = item_end(code, m.end()).expect("a #[cfg(test)] item ends");
            (line_of(code, m.start()), line_of(code, end))
        })
        .collect()
}

fn in_ranges(ranges: &[(usize, usize)], line: usize) -> bool {
    ranges.iter().any(|&(a, b)| (a..=b).contains(&line))
}

/// A function found by [`functions`]: its name, first line and number of lines.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `src` outside `#[cfg(test)]` items, nested ones too (their
/// lines count in the outer function as well).
fn functions(src: &str) -> Vec<Function> {
    let scanned = scan(src);
    let code = &scanned.code;
    let tests = test_ranges(code);
    let fn_name = Regex::new(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut out = Vec::new();
    for c in fn_name.captures_iter(code) {
        let whole = c.get(0).unwrap();
        let line = line_of(code, whole.start());
        if in_ranges(&tests, line) {
            continue;
        }
        let end = item_end(code, whole.end()).expect("a function ends");
        if code.as_bytes()[end] == b';' {
            continue; // a declaration without a body (a trait's, an extern's)
        }
        out.push(Function {
            name: c[1].to_string(),
            line,
            lines: line_of(code, end) - line + 1,
        });
    }
    out
}

/// (line, matched text) of every match of `pattern` in the non-test code of `src`.
fn code_matches(src: &str, pattern: &Regex) -> Vec<(usize, String)> {
    let scanned = scan(src);
    let tests = test_ranges(&scanned.code);
    pattern
        .find_iter(&scanned.code)
        .map(|m| (line_of(&scanned.code, m.start()), m.as_str().to_string()))
        .filter(|(line, _)| !in_ranges(&tests, *line))
        .collect()
}

/// Checks per-file occurrence counts against a pinned allow-list; returns the violations.
fn check_counts(
    rule: &str,
    found: &BTreeMap<String, Vec<(usize, String)>>,
    allowed: &[(&str, usize)],
) -> Vec<String> {
    let mut bad = Vec::new();
    for (file, hits) in found {
        let allow = allowed.iter().find(|(f, _)| f == file).map_or(0, |a| a.1);
        if hits.len() > allow {
            for (line, text) in hits {
                bad.push(format!(
                    "{file}:{line}: {rule}: `{text}` ({} in this file, {allow} allowed)",
                    hits.len()
                ));
            }
        }
    }
    for (file, allow) in allowed {
        let n = found.get(*file).map_or(0, Vec::len);
        if n < *allow {
            bad.push(format!(
                "{file}: {rule}: the allow-list says {allow}, the file has {n}: lower the entry \
                 in tests/tidy.rs (stale)"
            ));
        }
    }
    bad
}

/// Runs `pattern` over the non-test code of every source file.
fn find_in_sources(pattern: &Regex) -> BTreeMap<String, Vec<(usize, String)>> {
    source_files()
        .into_iter()
        .filter_map(|f| {
            let hits = code_matches(&read(&f), pattern);
            (!hits.is_empty()).then_some((f, hits))
        })
        .collect()
}

fn fail_on(rule: &str, bad: Vec<String>) {
    assert!(
        bad.is_empty(),
        "tidy: {rule}:\n{}\n(rules and allow-lists: tests/tidy.rs)",
        bad.join("\n")
    );
}

#[test]
fn no_new_locks() {
    let pattern = Regex::new(r"\b(Mutex|RwLock)\s*(<|::)").unwrap();
    let allowed: Vec<(&str, usize)> = LOCKS.iter().map(|&(f, n, _)| (f, n)).collect();
    let rule = "a lock (Mutex/RwLock) outside the allow-list: send a message to the state's \
                owner instead, or add it to LOCKS with the reason";
    fail_on(
        "locks",
        check_counts(rule, &find_in_sources(&pattern), &allowed),
    );
}

#[test]
fn no_new_threads() {
    let pattern = Regex::new(r"\bthread::(spawn|Builder|scope)\b").unwrap();
    let allowed: Vec<(&str, usize)> = THREADS.iter().map(|&(f, n, _)| (f, n)).collect();
    let rule = "a thread spawned outside the allow-list: threads belong to the runtime (an actor \
                on an Arbiter), or add it to THREADS with the reason";
    fail_on(
        "threads",
        check_counts(rule, &find_in_sources(&pattern), &allowed),
    );
}

#[test]
fn functions_are_short() {
    let mut bad = Vec::new();
    let mut longest: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in source_files() {
        for f in functions(&read(&file)) {
            if f.lines <= FN_LINES {
                continue;
            }
            let key = (file.clone(), f.name.clone());
            let e = longest.entry(key).or_default();
            *e = (*e).max(f.lines);
            let allow = LONG_FNS
                .iter()
                .find(|(p, n, _)| *p == file && *n == f.name)
                .map(|e| e.2);
            match allow {
                Some(max) if f.lines <= max => {}
                Some(max) => bad.push(format!(
                    "{file}:{}: fn {} has {} lines, over its allowance of {max}",
                    f.line, f.name, f.lines
                )),
                None => bad.push(format!(
                    "{file}:{}: fn {} has {} lines, over {FN_LINES}: split it into functions \
                     with one job each",
                    f.line, f.name, f.lines
                )),
            }
        }
    }
    for (file, name, _) in LONG_FNS {
        if !longest.contains_key(&(file.to_string(), name.to_string())) {
            bad.push(format!(
                "{file}: fn {name} is now at most {FN_LINES} lines (or gone): drop its \
                 LONG_FNS entry (stale)"
            ));
        }
    }
    fail_on("function length", bad);
}

#[test]
fn files_are_within_budget() {
    let mut bad = Vec::new();
    let files = source_files();
    for file in &files {
        let lines = read(file).lines().count();
        match BIG_FILES.iter().find(|(f, _)| f == file) {
            Some(&(_, max)) if lines > max => bad.push(format!(
                "{file}:{lines}: file has {lines} lines, over its allowance of {max}"
            )),
            Some(_) if lines <= FILE_LINES => bad.push(format!(
                "{file}: {lines} lines, within {FILE_LINES}: drop its BIG_FILES entry (stale)"
            )),
            Some(_) => {}
            None if lines > FILE_LINES => bad.push(format!(
                "{file}:{lines}: file has {lines} lines, over {FILE_LINES}: split it"
            )),
            None => {}
        }
    }
    for (file, _) in BIG_FILES {
        if !files.iter().any(|f| f == file) {
            bad.push(format!("{file}: gone: drop its BIG_FILES entry (stale)"));
        }
    }
    fail_on("file size", bad);
}

#[test]
fn docs_are_within_budget() {
    let mut bad = Vec::new();
    for (doc, max) in [
        ("README.md", README_LINES),
        ("ARCHITECTURE.md", ARCHITECTURE_LINES),
    ] {
        let lines = read(doc).lines().count();
        if lines > max {
            bad.push(format!(
                "{doc}:{}: {lines} lines, over its budget of {max}: a newcomer reads it in ten \
                 minutes (history belongs in commit messages)",
                max + 1
            ));
        }
    }
    fail_on("doc size", bad);
}

#[test]
fn comments_cite_only_what_is_in_the_repository() {
    // Documents by name, a spec folder, and any section sign (U+00A7): a numbered section, with
    // or without its document's name, is one of a document that is not here (ARCHITECTURE.md has
    // no numbered sections; Apache's sources are cited by class or path).
    let pattern =
        Regex::new(r"§|\bDESIGN\b|\bFACTS\b|ROCKETMQ_FACTS|\bECOSYSTEM\b|\bspec/").unwrap();
    let mut found: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for file in rust_files(&["src", "actors/src", "tests"]) {
        let hits: Vec<_> = scan(&read(&file))
            .comments
            .into_iter()
            .filter(|(_, text)| pattern.is_match(text))
            .map(|(line, text)| (line, text.trim().to_string()))
            .collect();
        if !hits.is_empty() {
            found.insert(file, hits);
        }
    }
    let rule = "a comment cites a document that is not in the repository (cite a file here or \
                Apache RocketMQ's sources)";
    fail_on("citations", check_counts(rule, &found, CITATIONS));
}

/// A source file's module path inside its crate (`actors/src/store/ha/master.rs` →
/// `store::ha::master`; `mod.rs`, `lib.rs` and `main.rs` name their directory's module).
fn module_path(file: &str) -> Vec<String> {
    let rel = file
        .strip_prefix("actors/src/")
        .or_else(|| file.strip_prefix("src/"))
        .expect("a file of one of the two crates");
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts
        .last()
        .is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str()))
    {
        parts.pop();
    }
    parts
}

/// The modules a file's non-test code names, as absolute module paths: every `crate::a::b`,
/// `super::a` and `self::a` path, and each first name of a `super::{a, b::c}` group.
fn named_modules(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let path = Regex::new(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)(::\{[^}]*\})?").unwrap();
    let first = Regex::new(r"(?:^|[{,])\s*([a-z_][a-z0-9_]*)").unwrap();
    // Module paths, not file paths: `super` is the parent module and `self` this one, whether
    // the module is a file or a directory's `mod.rs`.
    let mut out = Vec::new();
    for c in path.captures_iter(code) {
        let base = match &c[1] {
            "crate" => Vec::new(),
            "self" => here.to_vec(),
            _ => here[..here.len().saturating_sub(1)].to_vec(),
        };
        let mut abs = base;
        abs.extend(
            c[2].split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        match c.get(3) {
            Some(group) => {
                let inner = group
                    .as_str()
                    .trim_start_matches("::{")
                    .trim_end_matches('}');
                for g in first.captures_iter(inner) {
                    let mut p = abs.clone();
                    p.push(g[1].to_string());
                    out.push(p);
                }
            }
            None => out.push(abs),
        }
    }
    // `super::super::…` and the like: rare, and not worth resolving here.
    out.retain(|p| {
        !p.iter()
            .any(|s| ["super", "self", "crate"].contains(&s.as_str()))
    });
    out
}

/// No module imports one that imports it back: for every module, the graph of its children
/// (one edge when anything inside one child names anything inside another) has no cycle.
#[test]
fn no_import_circles() {
    // (crate, parent module) → child → children it names.
    let mut graph: BTreeMap<(String, Vec<String>), BTreeMap<String, BTreeSet<String>>> =
        BTreeMap::new();
    for file in source_files() {
        let krate = if file.starts_with("actors/") {
            "actors"
        } else {
            "core"
        };
        let here = module_path(&file);
        let src = read(&file);
        let scanned = scan(&src);
        let tests = test_ranges(&scanned.code);
        let code: String = scanned
            .code
            .lines()
            .enumerate()
            .filter(|(i, _)| !in_ranges(&tests, i + 1))
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        for there in named_modules(&code, &here) {
            let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
            if let (Some(from), Some(to)) = (here.get(common), there.get(common)) {
                graph
                    .entry((krate.to_string(), here[..common].to_vec()))
                    .or_default()
                    .entry(from.clone())
                    .or_default()
                    .insert(to.clone());
            }
        }
    }
    let mut bad = Vec::new();
    for ((krate, parent), edges) in &graph {
        for (from, tos) in edges {
            for to in tos {
                if reaches(edges, to, from) {
                    bad.push(format!(
                        "{krate} crate, module `{}`: {from} and {to} import each other (directly or \
                         through siblings)",
                        if parent.is_empty() { "crate".to_string() } else { parent.join("::") }
                    ));
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    fail_on("import circles", bad);
}

/// Whether `to` can be reached from `from` along `edges`.
fn reaches(edges: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(n) = todo.pop() {
        if n == to {
            return true;
        }
        if seen.insert(n.clone()) {
            todo.extend(edges.get(&n).into_iter().flatten().cloned());
        }
    }
    false
}

/// The allow-lists name files that exist, once each.
#[test]
fn allow_lists_are_well_formed() {
    let root = repo();
    let mut bad = Vec::new();
    let mut files: Vec<(&str, &str)> = Vec::new();
    files.extend(LOCKS.iter().map(|e| ("LOCKS", e.0)));
    files.extend(THREADS.iter().map(|e| ("THREADS", e.0)));
    files.extend(BIG_FILES.iter().map(|e| ("BIG_FILES", e.0)));
    files.extend(CITATIONS.iter().map(|e| ("CITATIONS", e.0)));
    for (list, f) in &files {
        if !root.join(f).is_file() {
            bad.push(format!("{list}: {f} does not exist (stale)"));
        }
        if files.iter().filter(|(l, g)| l == list && g == f).count() > 1 {
            bad.push(format!("{list}: {f} is listed twice"));
        }
    }
    for (i, (f, name, _)) in LONG_FNS.iter().enumerate() {
        if LONG_FNS[..i].iter().any(|(g, n, _)| g == f && n == name) {
            bad.push(format!("LONG_FNS: {f} fn {name} is listed twice"));
        }
    }
    fail_on("allow-lists", bad);
}

/// The scanner itself, on small inline examples.
mod scanner {
    use super::*;

    fn names(code: &str, file: &str) -> Vec<String> {
        named_modules(code, &module_path(file))
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    }

    #[test]
    fn resolves_crate_super_and_groups_from_files_and_dir_modules() {
        let code = "use crate::store::writer;\nuse super::{messages::X, reput};\nself::y();\n";
        assert_eq!(
            names(code, "actors/src/store/cleaner.rs"),
            [
                "store::writer",
                "store::messages",
                "store::reput",
                "store::cleaner::y"
            ]
        );
        // `super` of `store/ha/mod.rs` is `store`; its `self` is `store::ha`.
        assert_eq!(
            names(code, "actors/src/store/ha/mod.rs"),
            [
                "store::writer",
                "store::messages",
                "store::reput",
                "store::ha::y"
            ]
        );
        assert_eq!(
            names("super::super::x();", "src/a/b.rs"),
            Vec::<String>::new()
        );
    }

    fn names_and_lines(src: &str) -> Vec<(String, usize, usize)> {
        functions(src)
            .into_iter()
            .map(|f| (f.name, f.line, f.lines))
            .collect()
    }

    #[test]
    fn counts_lines_from_fn_to_its_closing_brace() {
        let src = "fn a() {\n    1;\n}\n\nfn b(x: [u8; 4]) -> u8 { x[0] }\n";
        assert_eq!(
            names_and_lines(src),
            vec![("a".into(), 1, 3), ("b".into(), 5, 1)]
        );
    }

    #[test]
    fn braces_in_strings_chars_and_comments_do_not_count() {
        let src = r####"fn a() {
    let s = "}}} { \" }";
    let r = r#"}"# ;
    let b = br##"}"# }"##;
    let c = '}';
    let e = '\'';
    let u = '\u{7d}';
    // }
    /* } /* nested } */ } */
    let l: &'static str = "x";
    let q = '"';
}
fn b() {}
"####;
        assert_eq!(
            names_and_lines(src),
            vec![("a".into(), 1, 12), ("b".into(), 13, 1)]
        );
    }

    #[test]
    fn skips_test_items_and_declarations() {
        let src = "trait T {\n    fn decl(&self);\n    fn with_body(&self) {}\n}\n\
                   #[cfg(test)]\nmod tests {\n    fn helper() {\n    }\n}\n\
                   fn after() {\n}\n";
        assert_eq!(
            names_and_lines(src),
            vec![("with_body".into(), 3, 1), ("after".into(), 10, 2)]
        );
    }

    #[test]
    fn nested_functions_count_on_their_own_and_in_the_outer_one() {
        let src = "fn outer() {\n    fn inner() {\n    }\n}\n";
        assert_eq!(
            names_and_lines(src),
            vec![("outer".into(), 1, 4), ("inner".into(), 2, 2)]
        );
    }

    #[test]
    fn comments_are_collected_with_their_lines() {
        let src = "//! top\nlet a = \"// not a comment\";\n/* one\ntwo */ x // end\n";
        let s = scan(src);
        assert_eq!(
            s.comments,
            vec![
                (1, "//! top".to_string()),
                (3, "/* one".to_string()),
                (4, "two */".to_string()),
                (4, "// end".to_string()),
            ]
        );
        assert_eq!(s.code.lines().count(), src.lines().count());
    }

    #[test]
    fn lock_and_thread_patterns_skip_test_code_and_literals() {
        let locks = Regex::new(r"\b(Mutex|RwLock)\s*(<|::)").unwrap();
        let src = "use std::sync::Mutex;\nstatic M: Mutex<u8> = Mutex::new(0);\n\
                   // Mutex::new in a comment\nconst S: &str = \"RwLock<u8>\";\n\
                   #[cfg(test)]\nmod tests {\n    static T: std::sync::RwLock<u8> = todo!();\n}\n";
        let hits: Vec<usize> = code_matches(src, &locks).into_iter().map(|h| h.0).collect();
        assert_eq!(hits, vec![2, 2]);
    }
}
