//! `toolgate completions SHELL` prints a script for every supported shell.

#[test]
fn every_shell_gets_a_script_that_knows_wrap() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.trim().is_empty(), "{shell}: empty script");
        assert!(text.contains("wrap"), "{shell}: no `wrap` in the script");
        assert!(text.contains("serve"), "{shell}: no `serve` in the script");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}
