//! The README's snippets of use with other crates are lines of the examples
//! that CI builds and runs, so they cannot drift from code that compiles.

/// Each `rust,ignore` block of the section, with the example it names.
fn snippets(readme: &str) -> Vec<(String, Vec<String>)> {
    let section = readme
        .split("\n## ")
        .find(|part| part.starts_with("Use with"))
        .expect("a \"Use with\" section");
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
    let snippets = snippets(readme);
    let names: Vec<&str> = snippets.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["axum_gateway.rs", "tonic_client.rs", "reqwest_client.rs"],
        "one snippet per example with a block"
    );
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
