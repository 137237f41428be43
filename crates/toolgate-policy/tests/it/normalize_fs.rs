//! Filesystem adapter: table-driven, with `MapFs` fixtures (symlink escape, `~`, `..`,
//! relative paths, alternate argument names, several files).

use serde_json::{Value, json};
use toolgate_policy::{
    Action, FsFacts, LexicalFs, MapFs, NormalizeContext, Operation, ToolCall, ToolMapping,
    normalize,
};

fn fixture() -> MapFs {
    MapFs::new()
        .symlink("/w/link", "/home/u/.ssh")
        .symlink("/w/docs", "docs-real")
        .symlink("/w/up", "..")
        .unresolvable("/w/locked")
}

fn run(
    fs: &dyn FsFacts,
    tool: &str,
    args: Value,
    def: Option<Value>,
    mapping: Option<ToolMapping>,
) -> Action {
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs,
    };
    let call = ToolCall {
        server: Some("fs"),
        tool,
        arguments: &args,
        definition: def.as_ref(),
    };
    normalize(&call, mapping.as_ref(), &ctx)
}

/// `(operation, resources, opaque)` of one part.
type Shape = (String, Vec<String>, bool);

/// The shape of every part.
fn shape(a: &Action) -> Vec<Shape> {
    a.parts
        .iter()
        .map(|p| (p.operation.to_string(), p.resources.clone(), p.opaque))
        .collect()
}

fn part(op: &str, res: &[&str]) -> Shape {
    (
        op.to_owned(),
        res.iter().map(|r| (*r).to_owned()).collect(),
        false,
    )
}

fn unknown() -> Shape {
    ("unknown".to_owned(), Vec::new(), true)
}

/// A path argument that cannot be resolved: an opaque read of no known place (it hides
/// what it touches), never "no resources".
fn hidden_read() -> Shape {
    ("fs.read".to_owned(), Vec::new(), true)
}

#[test]
fn reference_server_paths() {
    let fs = fixture();
    let cases: Vec<(&str, Value, Vec<Shape>)> = vec![
        (
            "read_file",
            json!({"path": "src/main.rs"}),
            vec![part("fs.read", &["/w/src/main.rs"])],
        ),
        (
            "read_text_file",
            json!({"path": "./src/../Cargo.toml"}),
            vec![part("fs.read", &["/w/Cargo.toml"])],
        ),
        (
            "read_file",
            json!({"path": "~/.ssh/id_rsa"}),
            vec![part("fs.read", &["/home/u/.ssh/id_rsa"])],
        ),
        (
            "read_file",
            json!({"path": "~"}),
            vec![part("fs.read", &["/home/u"])],
        ),
        // `~user` is not expanded by the reference server: a relative path.
        (
            "read_file",
            json!({"path": "~root/x"}),
            vec![part("fs.read", &["/w/~root/x"])],
        ),
        (
            "read_file",
            json!({"path": "../etc/passwd"}),
            vec![part("fs.read", &["/etc/passwd"])],
        ),
        (
            "read_file",
            json!({"path": "/w/../../etc/shadow"}),
            vec![part("fs.read", &["/etc/shadow"])],
        ),
        (
            "read_file",
            json!({"path": "//w//./src"}),
            vec![part("fs.read", &["/w/src"])],
        ),
        // Symlink escape: a link inside the workspace pointing at ~/.ssh.
        (
            "read_file",
            json!({"path": "link/id_rsa"}),
            vec![part("fs.read", &["/home/u/.ssh/id_rsa"])],
        ),
        (
            "read_file",
            json!({"path": "/w/./link//config"}),
            vec![part("fs.read", &["/home/u/.ssh/config"])],
        ),
        (
            "read_file",
            json!({"path": "docs/a.md"}),
            vec![part("fs.read", &["/w/docs-real/a.md"])],
        ),
        (
            "read_file",
            json!({"path": "up/etc/hosts"}),
            vec![part("fs.read", &["/etc/hosts"])],
        ),
        (
            "read_file",
            json!({"path": "file:///etc/passwd"}),
            vec![part("fs.read", &["/etc/passwd"])],
        ),
        (
            "read_file",
            json!({"path": "file:///etc/pass%77d"}),
            vec![part("fs.read", &["/etc/passwd"])],
        ),
        // `..` behind a symlink: the reference server collapses it lexically (/w/secret), the
        // kernel climbs from the link's target (/home/u/secret). Both are resources.
        (
            "read_file",
            json!({"path": "link/../secret"}),
            vec![part("fs.read", &["/w/secret", "/home/u/secret"])],
        ),
        (
            "read_file",
            json!({"path": "/w/link/../../u/.aws/x"}),
            vec![part("fs.read", &["/u/.aws/x", "/home/u/.aws/x"])],
        ),
        (
            "read_file",
            json!({"path": "src/../Cargo.toml"}),
            vec![part("fs.read", &["/w/Cargo.toml"])],
        ),
        (
            "read_file",
            json!({"path": "file:///w/link/%2e%2e/x"}),
            vec![hidden_read()],
        ),
        // Cannot be made canonical: hidden, never "no resources".
        (
            "read_file",
            json!({"path": "a\u{0000}b"}),
            vec![hidden_read()],
        ),
        (
            "read_file",
            json!({"path": "locked/secret"}),
            vec![hidden_read()],
        ),
        ("read_file", json!({"path": ""}), vec![hidden_read()]),
        ("read_file", json!({"path": 42}), vec![hidden_read()]),
        (
            "read_file",
            json!({"path": {"nested": "/etc"}}),
            vec![hidden_read()],
        ),
        ("read_file", json!({}), vec![unknown()]),
        ("read_file", json!("not an object"), vec![unknown()]),
        (
            "read_file",
            json!({"path": "file://remote-host/etc/passwd"}),
            vec![hidden_read()],
        ),
        (
            "read_multiple_files",
            json!({"paths": ["a", "link/id_rsa", "a"]}),
            vec![part("fs.read", &["/w/a", "/home/u/.ssh/id_rsa"])],
        ),
        (
            "read_multiple_files",
            json!({"paths": ["a", 3]}),
            vec![part("fs.read", &["/w/a"]), hidden_read()],
        ),
        ("read_multiple_files", json!({"paths": []}), vec![unknown()]),
        (
            "write_file",
            json!({"path": "out.txt", "content": "../../etc/passwd"}),
            vec![part("fs.write", &["/w/out.txt"])],
        ),
        (
            "edit_file",
            json!({"path": "link/authorized_keys", "edits": []}),
            vec![part("fs.write", &["/home/u/.ssh/authorized_keys"])],
        ),
        (
            "create_directory",
            json!({"path": "new"}),
            vec![part("fs.write", &["/w/new"])],
        ),
        (
            "list_directory",
            json!({"path": "/"}),
            vec![part("fs.read", &["/"])],
        ),
        (
            "move_file",
            json!({"source": "a", "destination": "/tmp/b"}),
            vec![part("fs.delete", &["/w/a"]), part("fs.write", &["/tmp/b"])],
        ),
        // Alternate argument names the server might also accept are read too.
        (
            "write_file",
            json!({"path": "x", "filename": "~/.bashrc"}),
            vec![part("fs.write", &["/w/x", "/home/u/.bashrc"])],
        ),
        (
            "read_file",
            json!({"file_path": "~/.aws/credentials"}),
            vec![part("fs.read", &["/home/u/.aws/credentials"])],
        ),
        (
            "read_file",
            json!({"filePath": "/etc/passwd"}),
            vec![part("fs.read", &["/etc/passwd"])],
        ),
        (
            "search_files",
            json!({"path": ".", "pattern": "../../*"}),
            vec![part("fs.read", &["/w"])],
        ),
    ];
    for (tool, args, want) in cases {
        let got = run(&fs, tool, args.clone(), None, None);
        assert_eq!(shape(&got), want, "{tool} {args}");
        assert_eq!(got.tool, tool);
        assert_eq!(got.server.as_deref(), Some("fs"));
    }
}

#[test]
fn lexical_fs_does_not_resolve_links() {
    let got = run(
        &LexicalFs,
        "read_file",
        json!({"path": "link/id_rsa"}),
        None,
        None,
    );
    assert_eq!(shape(&got), vec![part("fs.read", &["/w/link/id_rsa"])]);
}

#[test]
fn mapping_from_a_contract() {
    let fs = fixture();
    let mapping = ToolMapping {
        operation: Some(Operation::FsRead),
        path_params: vec!["file".to_owned()],
        ..ToolMapping::default()
    };
    // `source` is read too: its name says it is a path.
    let got = run(
        &fs,
        "open_doc",
        json!({"file": "a", "source": "/etc/passwd", "mode": "r"}),
        None,
        Some(mapping.clone()),
    );
    assert_eq!(shape(&got), vec![part("fs.read", &["/w/a", "/etc/passwd"])]);

    // Declared path argument missing: unknown.
    let got = run(&fs, "open_doc", json!({"mode": "r"}), None, Some(mapping));
    assert_eq!(shape(&got), vec![unknown()]);

    // Per-argument operations.
    let mut m = ToolMapping {
        operation: Some(Operation::FsRead),
        path_params: vec!["from".to_owned(), "to".to_owned()],
        ..ToolMapping::default()
    };
    m.param_operations
        .insert("to".to_owned(), Operation::FsWrite);
    let got = run(
        &fs,
        "copy",
        json!({"from": "a", "to": "link/x"}),
        None,
        Some(m),
    );
    assert_eq!(
        shape(&got),
        vec![
            part("fs.read", &["/w/a"]),
            part("fs.write", &["/home/u/.ssh/x"])
        ]
    );
}

#[test]
fn schema_marks_paths() {
    let fs = fixture();
    let def = json!({
        "name": "open_doc",
        "inputSchema": {"type": "object", "properties": {
            "loc": {"type": "string", "format": "path"},
            "where": {"type": "string", "description": "Absolute path of the document"},
            "many": {"type": "array", "items": {"type": "string"}, "description": "Directories to scan"},
            "content": {"type": "string", "description": "Content to write at the path"},
            "count": {"type": "integer", "description": "path count"}
        }}
    });
    let mapping = ToolMapping {
        operation: Some(Operation::FsWrite),
        ..ToolMapping::default()
    };
    let got = run(
        &fs,
        "open_doc",
        json!({"loc": "/etc/a", "where": "/etc/b", "many": ["/etc/c"], "content": "/etc/d", "count": 3}),
        Some(def),
        Some(mapping),
    );
    assert_eq!(
        shape(&got),
        vec![part("fs.write", &["/etc/a", "/etc/b", "/etc/c"])]
    );
}

#[test]
fn unknown_tools_are_one_opaque_part_with_visible_paths() {
    let fs = fixture();
    let got = run(
        &fs,
        "frobnicate",
        json!({"filePath": "link/id_rsa", "n": 1}),
        None,
        None,
    );
    assert_eq!(got.parts.len(), 1);
    assert_eq!(got.parts[0].operation, Operation::Unknown);
    assert!(got.parts[0].opaque);
    assert_eq!(
        got.parts[0].resources,
        vec!["/home/u/.ssh/id_rsa".to_owned()]
    );

    let got = run(&fs, "confirm_order", json!({"id": 1}), None, None);
    assert_eq!(shape(&got), vec![unknown()]);
}
