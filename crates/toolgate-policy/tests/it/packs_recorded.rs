//! The slack, github and gdrive packs against the tools/list of the npm reference servers,
//! recorded as fixtures (run with dummy credentials, which tools/list does not use). These run
//! without node; the servers are also pinned in `tests/package.json`, and `packs_live.rs` runs
//! them and asserts that their live tools/list still equals these fixtures. Command used to
//! record them:
//!
//! ```text
//! npm install @modelcontextprotocol/server-slack@2025.4.25 \
//!     @modelcontextprotocol/server-github@2025.4.8 @modelcontextprotocol/server-gdrive@2025.1.14
//! SLACK_BOT_TOKEN=xoxb-dummy SLACK_TEAM_ID=T000 python3 capture_tools.py \
//!     node node_modules/@modelcontextprotocol/server-slack/dist/index.js
//! GITHUB_PERSONAL_ACCESS_TOKEN=dummy python3 capture_tools.py \
//!     node node_modules/@modelcontextprotocol/server-github/dist/index.js
//! echo '{}' > creds.json; GDRIVE_CREDENTIALS_PATH=creds.json python3 capture_tools.py \
//!     node node_modules/@modelcontextprotocol/server-gdrive/dist/index.js
//! ```

use crate::support::packs_check as check;

use check::{check_pack_against, fixture};

#[test]
fn slack_pack_matches_server_slack() {
    let f = fixture("server-slack-2025.4.25.tools.json");
    check_pack_against(
        "slack",
        "2025.4.25",
        f["tools"].as_array().unwrap(),
        check::SLACK_GENERIC,
    );
}

#[test]
fn github_pack_matches_server_github() {
    let f = fixture("server-github-2025.4.8.tools.json");
    check_pack_against(
        "github",
        "2025.4.8",
        f["tools"].as_array().unwrap(),
        check::GITHUB_GENERIC,
    );
}

#[test]
fn gdrive_pack_matches_server_gdrive() {
    let f = fixture("server-gdrive-2025.1.14.tools.json");
    check_pack_against(
        "gdrive",
        "2025.1.14",
        f["tools"].as_array().unwrap(),
        check::GDRIVE_GENERIC,
    );
}
