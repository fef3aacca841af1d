//! The README's snippets of use with other crates are lines of the examples
//! that CI builds and runs, so they cannot drift from code that compiles.

/// Each `rust,ignore` block of the section whose title starts with `title`,
/// with the example it names.
fn snippets(readme: &str, title: &str) -> Vec<(String, Vec<String>)> {
    let section = readme
        .split("\n## ")
        .find(|part| part.starts_with(title))
        .unwrap_or_else(|| panic!("a {title:?} section"));
    let mut found = Vec::new();
    let mut example = None;
    let mut block: Option<Vec<String>> = None;
    for line in section.lines() {
        if let Some(lines) = &mut block {
            if line.starts_with("```") {
                let name = example
                    .clone()
                    .expect("a block follows the example it comes from");
                found.push((name, block.take().unwrap()));
            } else {
                lines.push(line.to_owned());
            }
            continue;
        }
        if line.starts_with("```rust") {
            block = Some(Vec::new());
        } else if let Some(rest) = line.split("(`examples/").nth(1) {
            example = rest.split('`').next().map(str::to_owned);
        }
    }
    found
}

#[test]
fn every_snippet_line_is_a_line_of_its_example() {
    let readme = include_str!("../../README.md");
    let snippets = snippets(readme, "Use with");
    let names: Vec<&str> = snippets.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["axum_gateway.rs", "tonic_client.rs", "reqwest_client.rs"],
        "one snippet per example with a block"
    );
    assert_lines_of_examples(snippets);
}

/// The reqwest-retry side and this crate's side of "Coming from
/// reqwest-retry" are both lines of the example that builds and runs them.
#[test]
fn the_reqwest_retry_comparison_is_lines_of_its_example() {
    let readme = include_str!("../../README.md");
    let snippets = snippets(readme, "Coming from reqwest-retry");
    let names: Vec<&str> = snippets.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["reqwest_retry.rs", "reqwest_retry.rs"]);
    assert_lines_of_examples(snippets);
}

/// Every non-empty line of each snippet, trimmed, is a line of its example.
fn assert_lines_of_examples(snippets: Vec<(String, Vec<String>)>) {
    for (name, lines) in snippets {
        assert!(lines.len() <= 20, "{name}: {} lines", lines.len());
        let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(&path).unwrap();
        let example: Vec<&str> = source.lines().map(str::trim).collect();
        for line in lines
            .iter()
            .map(|line| line.trim())
            .filter(|line| !line.is_empty())
        {
            assert!(
                example.contains(&line),
                "{name} has no line {line:?} that the README shows"
            );
        }
    }
}

/// The doc examples the docs tell a user to copy as they are ("... is the
/// example") hide no line: pasted as shown, they are the whole code.
#[test]
fn an_example_to_copy_whole_hides_no_line() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/http-resilience/src");
    let mut checked = 0;
    for path in rust_files(std::path::Path::new(root)) {
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
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
