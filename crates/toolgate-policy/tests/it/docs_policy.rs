//! Every YAML example in docs/policy.md is checked: policies load without errors or
//! warnings and compile; cases blocks parse, and those with an absolute workspace run
//! against the policy example before them.

use toolgate_policy::cases::{parse_cases, run_case};
use toolgate_policy::{Engine, LexicalFs, NormalizeContext, Vars, load};

fn yaml_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        match &mut current {
            None if line.trim_start() == "```yaml" => current = Some((i + 2, String::new())),
            Some(_) if line.trim_start() == "```" => blocks.push(current.take().unwrap()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "unterminated code block");
    blocks
}

fn top_level_key(block: &str, key: &str) -> bool {
    block.lines().any(|l| l.starts_with(&format!("{key}:")))
}

#[test]
fn docs_examples_load_and_their_cases_pass() {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policy.md"))
        .unwrap();
    let blocks = yaml_blocks(&md);
    let mut policies = 0;
    let mut cases_run = 0;
    let mut engine: Option<Engine> = None;
    for (line, block) in blocks {
        let name = format!("docs/policy.md:{line}");
        if top_level_key(&block, "version") {
            let loaded = load(&block, &name).unwrap_or_else(|d| panic!("{d}"));
            assert!(loaded.warnings.items.is_empty(), "{}", loaded.warnings);
            engine = Some(
                Engine::new(
                    loaded.policy,
                    Vars {
                        workspace: "/w".into(),
                        home: "/home/u".into(),
                    },
                )
                .unwrap_or_else(|d| panic!("{name}: {d}")),
            );
            policies += 1;
        } else if top_level_key(&block, "cases") {
            let file = parse_cases(&block, &name).unwrap_or_else(|d| panic!("{d}"));
            let Some(workspace) = file.workspace.as_deref().filter(|w| w.starts_with('/')) else {
                continue;
            };
            let home = file.home.clone().unwrap_or_else(|| "/home/u".into());
            let engine = engine
                .as_ref()
                .expect("a cases block follows a policy block");
            assert_eq!(engine.vars().workspace, workspace, "{name}");
            assert_eq!(engine.vars().home, home, "{name}");
            let fs = LexicalFs;
            let ctx = NormalizeContext {
                workspace,
                home: &home,
                fs: &fs,
            };
            for case in &file.cases {
                if let Err(msg) = run_case(engine, &ctx, file.server.as_deref(), case) {
                    panic!("{name}: case `{}` failed: {msg}", case.name);
                }
                cases_run += 1;
            }
        }
    }
    assert!(policies >= 4, "{policies}");
    assert!(cases_run >= 10, "{cases_run}");
}
