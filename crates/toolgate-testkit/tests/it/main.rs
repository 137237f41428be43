//! The integration tests of `toolgate-testkit`, as one test binary: each module was its own
//! test file (and binary) before; a binary per crate links once and lets nextest
//! select tests by module path, e.g. `-E 'test(/^<module>::/)'`.

mod http_upstream;
