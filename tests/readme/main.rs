//! What the READMEs show a newcomer holds as shown.
//!
//! # The snippets compile as pasted
//!
//! Every Rust block of the workspace README and of the published crate's
//! (`crates/http-resilience/README.md`) is a whole program, its `use` lines
//! included, and is compiled as it stands: `tests/readme/lib.rs` includes
//! both files as the docs of two hidden items, so that each block is a
//! doctest of the README's own text (`cargo test --doc -p
//! http-resilience-tests`, part of `cargo test --workspace`). A snippet that
//! lacks an import, or names a type that only an example defines, fails the
//! test command. The tests here hold the blocks to what makes that true:
//! every Rust block is compiled (`rust` or `rust,no_run`, never `ignore`),
//! and none hides a line, since GitHub and crates.io show a hidden line as
//! it is written, so the code compiled and the code shown are the same.
//!
//! Why doctests rather than a new project built from the packaged crate with
//! each snippet as a `main.rs`: the doctests compile the very text, with the
//! root package's dev-dependencies (the crates a user adds: tokio, tower,
//! axum, tonic, reqwest, ...), in seconds (`no_run`, on the workspace's own
//! build). A project of its own resolves those dependencies with features
//! of its own, so most of them are built again, even in a shared target
//! directory (minutes on CI's two cores), and it runs cargo inside a test.
//! What the doctests cannot see, a feature of a dependency that the user's
//! `[dependencies]` leaves out, the README lists beside the snippets. The
//! packaged crate itself is built by `.ci/run` (`cargo package`, verified),
//! and its examples are in it (checked below).
//!
//! # The examples ship in the crate, and the commands run them
//!
//! The examples are the published crate's (`crates/http-resilience/examples`,
//! in its `include` list, each naming the features it needs, since the
//! published manifest drops the crate's dev-dependency on itself). Every
//! example a README names exists, the crate README lists every example, and
//! every `cargo run --example` command the READMEs, the examples and the
//! crate docs give names the package (`-p http-resilience`) from the
//! workspace, where `cargo run --example` alone looks in the root package
//! only. The README's two commands are the ones `.ci/run` runs.

use std::path::{Path, PathBuf};

const WORKSPACE_README: &str = include_str!("../../README.md");
const CRATE_README: &str = include_str!("../../crates/http-resilience/README.md");
const CRATE_MANIFEST: &str = include_str!("../../crates/http-resilience/Cargo.toml");
const CI: &str = include_str!("../../.ci/run");

/// A fenced block of a Markdown file: its info string, its first line's
/// number, and its lines.
#[derive(Debug)]
struct Block {
    info: String,
    line: usize,
    lines: Vec<String>,
}

/// Every fenced block of `markdown`.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    line: i + 1,
                    lines: Vec::new(),
                });
            }
            (Some(_), Some(_)) => found.extend(open.take()),
            (Some(block), None) => block.lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a block is never closed");
    found
}

fn readmes() -> [(&'static str, &'static str); 2] {
    [
        ("README.md", WORKSPACE_README),
        ("crates/http-resilience/README.md", CRATE_README),
    ]
}

#[test]
fn every_rust_block_of_the_readmes_is_compiled_as_shown() {
    let mut rust = 0;
    for (name, readme) in readmes() {
        for block in blocks(readme) {
            let at = format!("{name}:{}", block.line);
            assert!(
                ["rust", "rust,no_run", "text", "toml", "sh"].contains(&block.info.as_str()),
                "{at}: a block `{}`: Rust blocks are `rust` or `rust,no_run` (compiled), \
                 others say what they are",
                block.info
            );
            if !block.info.starts_with("rust") {
                continue;
            }
            rust += 1;
            for code in &block.lines {
                let code = code.trim_start();
                assert!(
                    !(code.starts_with("# ") || code == "#"),
                    "{at}: a hidden line {code:?}: GitHub and crates.io show it"
                );
            }
            assert!(
                block.lines.iter().any(|line| line.starts_with("use ")),
                "{at}: a snippet to paste starts with its imports"
            );
        }
    }
    // The workspace README's eight (use; axum, tonic, reqwest; reqwest-retry
    // both ways; fault injection and a fallback; a rate limit) and the crate
    // README's one.
    assert_eq!(rust, 9, "the Rust blocks the doctests compile");
}

/// The examples a line names: `examples/NAME.rs`, and `--example NAME`.
fn named_examples(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (marker, end) in [("examples/", ".rs"), ("--example ", "")] {
        for rest in text.split(marker).skip(1) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "NAME" && rest[name.len()..].starts_with(end) {
                names.push(name);
            }
        }
    }
    names
}

/// The crate's examples, by name.
fn crate_examples() -> Vec<String> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/http-resilience/examples"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_examples_ship_in_the_crate_with_the_features_they_need() {
    let examples = crate_examples();
    assert!(examples.contains(&"demo".to_owned()), "{examples:?}");
    let include = CRATE_MANIFEST
        .lines()
        .find(|line| line.starts_with("include = "))
        .expect("an include list");
    assert!(include.contains("\"examples/**\""), "{include}");
    for name in &examples {
        let entry = format!("[[example]]\nname = \"{name}\"\nrequired-features = [");
        assert!(
            CRATE_MANIFEST.contains(&entry),
            "crates/http-resilience/Cargo.toml: an [[example]] for {name} with its features"
        );
        let link = format!("crates/http-resilience/examples/{name}.rs");
        assert!(
            CRATE_README.contains(&link),
            "crates/http-resilience/README.md lists no {link}"
        );
    }
    for (name, readme) in readmes() {
        for example in named_examples(readme) {
            assert!(
                examples.contains(&example),
                "{name} names an example {example:?} the crate does not have"
            );
        }
    }
}

#[test]
fn every_command_that_runs_an_example_names_its_package() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts: Vec<(PathBuf, String)> = vec![(root.join("README.md"), WORKSPACE_README.into())];
    let sources = rust_files(&root.join("crates/http-resilience/src"))
        .into_iter()
        .chain(rust_files(&root.join("crates/http-resilience/examples")));
    texts.extend(sources.map(|path| {
        let text = std::fs::read_to_string(&path).unwrap();
        (path, text)
    }));
    let examples = crate_examples();
    let mut checked = 0;
    for (path, text) in &texts {
        // NOTE: only the commands that run an example; the simulator's
        // (`cargo run -p http-resilience-sim -- outage`) runs a binary.
        let runs_example = |line: &&str| line.contains("cargo run") && line.contains("--example");
        for line in text.lines().filter(runs_example) {
            checked += 1;
            assert!(
                line.contains("cargo run -p http-resilience --example "),
                "{}: {line:?} does not name the package of the example",
                path.display()
            );
            for example in named_examples(line) {
                assert!(examples.contains(&example), "{}: {line:?}", path.display());
            }
        }
    }
    // From the crate's own sources there is no workspace: the features name
    // what the dropped dev-dependency turned on.
    for line in CRATE_README
        .lines()
        .filter(|line| line.contains("cargo run"))
    {
        checked += 1;
        assert!(
            line.contains("cargo run -p http-resilience --example NAME")
                || line.contains("cargo run --example NAME --features full"),
            "crates/http-resilience/README.md: {line:?}"
        );
    }
    assert!(checked >= 10, "{checked} commands found");
}

#[test]
fn the_readmes_two_commands_are_what_ci_runs() {
    let section = WORKSPACE_README
        .split("\n## ")
        .find(|part| part.starts_with("Two commands"))
        .expect("a \"Two commands\" section");
    let block = blocks(section)
        .into_iter()
        .find(|block| block.info == "sh")
        .expect("the commands");
    let commands: Vec<&str> = block
        .lines
        .iter()
        .map(|line| line.split('#').next().unwrap().trim())
        .collect();
    assert_eq!(
        commands,
        [
            "cargo run -p http-resilience --example demo",
            "cargo test --workspace"
        ]
    );
    let ci: Vec<&str> = CI.lines().map(str::trim).collect();
    for command in commands {
        assert!(ci.contains(&command), ".ci/run does not run {command:?}");
    }
}

/// The doc examples the docs tell a user to copy as they are ("... is the
/// example") hide no line: pasted as shown, they are the whole code.
#[test]
fn an_example_to_copy_whole_hides_no_line() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/http-resilience/src");
    let mut checked = 0;
    for path in rust_files(Path::new(root)) {
        let source = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<&str> = source
            .lines()
            .filter_map(|line| {
                let line = line.trim_start();
                line.strip_prefix("//!")
                    .or_else(|| line.strip_prefix("///"))
            })
            .collect();
        for (i, line) in docs.iter().enumerate() {
            if !line.contains("is the example") {
                continue;
            }
            checked += 1;
            let block = docs[i..]
                .iter()
                .skip_while(|line| !line.trim().starts_with("```"))
                .skip(1)
                .take_while(|line| !line.trim().starts_with("```"));
            for code in block {
                let code = code.strip_prefix(' ').unwrap_or(code);
                assert!(
                    !(code.starts_with("# ") || code == "#"),
                    "{}: an example to copy whole hides {code:?}",
                    path.display()
                );
            }
        }
    }
    assert!(checked > 0, "no example to copy whole was found");
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}
