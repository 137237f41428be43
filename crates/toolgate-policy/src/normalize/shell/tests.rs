use super::*;

fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn simple_and_not() {
    assert_eq!(
        scan("ls -la 'a b' \"c d\" e\\ f"),
        Scan::Simple(v(&["ls", "-la", "a b", "c d", "e f"]))
    );
    assert_eq!(
        scan("git log HEAD~1"),
        Scan::Simple(v(&["git", "log", "HEAD~1"]))
    );
    assert_eq!(scan("echo ''"), Scan::Simple(v(&["echo", ""])));
    assert!(matches!(scan("ls; rm -rf /"), Scan::Compound { .. }));
    assert!(matches!(scan("ls *.rs"), Scan::Compound { .. }));
    assert!(matches!(scan("echo $HOME"), Scan::Compound { .. }));
    assert!(matches!(scan("cat ~/.ssh/id_rsa"), Scan::Compound { .. }));
    assert!(matches!(scan("echo {a,b}"), Scan::Compound { .. }));
    assert_eq!(scan("echo 'unterminated"), Scan::Invalid);
    assert_eq!(scan("echo \\"), Scan::Invalid);
    assert_eq!(scan("   "), Scan::Invalid);
}

#[test]
fn looks_through_wrappers() {
    let cases: &[(&str, &str)] = &[
        ("sudo rm -rf /", "rm"),
        ("sudo -u root rm -rf /", "rm"),
        ("env FOO=1 /bin/rm x", "/bin/rm"),
        ("FOO=1 rm x", "rm"),
        ("nice -n 5 rm x", "rm"),
        ("nohup rm x", "rm"),
        ("time rm x", "rm"),
        ("command rm x", "rm"),
        ("exec rm x", "rm"),
        ("busybox rm x", "rm"),
        ("doas rm x", "rm"),
        ("timeout 5 rm x", "rm"),
        ("sh -c 'rm -rf /'", "rm"),
        ("bash -lc 'rm -rf /'", "rm"),
        ("xargs rm", "rm"),
        ("find . -exec rm {} \\;", "rm"),
        ("stdbuf -oL rm x", "rm"),
    ];
    for (cmd, want) in cases {
        let Scan::Simple(argv) = scan(cmd) else {
            panic!("{cmd}")
        };
        let execs = expand(&argv);
        assert!(
            execs
                .iter()
                .any(|e| e.argv.first().map(String::as_str) == Some(*want)),
            "{cmd}: {execs:?}"
        );
    }
    let Scan::Simple(argv) = scan("sh -c 'ls; rm -rf /'") else {
        panic!()
    };
    let names: Vec<String> = expand(&argv)
        .into_iter()
        .filter_map(|e| e.argv.first().cloned())
        .collect();
    assert_eq!(names, v(&["sh", "ls", "rm"]));
    assert_eq!(
        look_through(&v(&["sudo", "env", "A=1", "nice", "rm", "-rf", "/"])),
        v(&["rm", "-rf", "/"])
    );
    assert_eq!(
        look_through(&v(&["sh", "-c", "rm -rf /"])),
        v(&["rm", "-rf", "/"])
    );
}
