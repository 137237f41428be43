//! The secret values this session's outputs held ([`crate::secrets`]): fingerprinted when a
//! secret source's output is recorded, looked for in every sink call.

use serde_json::Value;

use super::Session;
use crate::command_sink::collect_strings;
use crate::secret_shapes::{MAX_SCANNED_STRINGS, strings_of};
use crate::secrets::{Lengths, MAX_SCANNED_BYTES, candidates, find_carried_in};

/// The most fingerprints a session keeps (oldest forgotten first).
pub const MAX_SECRETS: usize = 10_000;
/// The most fingerprints waiting to be shared with the session's other proxies.
const MAX_NEW_SECRETS: usize = 1_000;

/// The fingerprint of one secret value: SHA-256 under a domain prefix. Only values high in
/// entropy are fingerprinted (16+ characters, letters and digits), so a digest cannot be
/// reversed by trying words; it is the same in every process, so proxies of one session can
/// share it.
pub fn secret_digest(token: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::new()
        .chain_update(b"toolgate secret\0")
        .chain_update(token.as_bytes())
        .finalize()
        .into()
}
/// The most strings of one output or call that are read.
const MAX_STRINGS: usize = 4096;

/// Where a secret value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSource {
    /// The tool whose output held it.
    pub tool: String,
    /// That output's sequence number.
    pub seq: u64,
    /// What it was: a file (`` `/w/.env` ``) or an output marked secret.
    pub what: String,
}

/// A fingerprint recorded in this session, to be shared with its other proxies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSecret {
    /// [`secret_digest`] of the value.
    pub digest: [u8; 32],
    /// The value's length in bytes: the check hashes only tokens of the lengths it holds.
    pub len: usize,
    /// Where it was read.
    pub source: SecretSource,
}

/// A secret value a call carries: in which argument, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFinding {
    /// The argument (a path such as `body` or `headers.X`).
    pub argument: String,
    /// Where the value was read.
    pub source: SecretSource,
}

impl Session {
    /// Fingerprints the secret values of an output (`what`: the file or label that makes it
    /// secret).
    pub fn record_secret(&mut self, tool: &str, seq: u64, what: &str, result: &Value) {
        let mut strings = Vec::new();
        collect_strings(result, &mut strings, MAX_STRINGS, 0);
        let mut budget = MAX_SCANNED_BYTES;
        for s in strings {
            if budget == 0 {
                break;
            }
            let s = crate::command_sink::cut(s, budget);
            budget = budget.saturating_sub(s.len());
            for token in candidates(s) {
                let source = SecretSource {
                    tool: tool.to_owned(),
                    seq,
                    what: what.to_owned(),
                };
                let digest = secret_digest(token);
                if self.import_secret(digest, Some(token.len()), source.clone())
                    && self.new_secrets.len() < MAX_NEW_SECRETS
                {
                    self.new_secrets.push(NewSecret {
                        digest,
                        len: token.len(),
                        source,
                    });
                }
            }
        }
    }

    /// Takes in a secret fingerprint another proxy (or a hook) of the session recorded, with
    /// the value's length when it is known (without it, every candidate token is hashed).
    /// Returns false when it was known already.
    pub fn import_secret(
        &mut self,
        digest: [u8; 32],
        len: Option<usize>,
        source: SecretSource,
    ) -> bool {
        if self.secrets.contains_key(&digest) {
            return false;
        }
        self.secrets.insert(digest, (source, len));
        self.count_length(len, true);
        self.secrets_order.push_back(digest);
        while self.secrets_order.len() > MAX_SECRETS {
            if let Some(old) = self.secrets_order.pop_front()
                && let Some((_, len)) = self.secrets.remove(&old)
            {
                self.count_length(len, false);
            }
        }
        true
    }

    fn count_length(&mut self, len: Option<usize>, add: bool) {
        let count = match len {
            Some(n) => self.secret_lengths.entry(n).or_insert(0),
            None => &mut self.secrets_of_any_length,
        };
        *count = if add {
            count.saturating_add(1)
        } else {
            count.saturating_sub(1)
        };
        if let Some(n) = len
            && self.secret_lengths.get(&n) == Some(&0)
        {
            self.secret_lengths.remove(&n);
        }
    }

    /// The fingerprints recorded here since the last call, for the session's other proxies.
    pub fn take_new_secrets(&mut self) -> Vec<NewSecret> {
        std::mem::take(&mut self.new_secrets)
    }

    /// Whether `arguments` carry a secret value fingerprinted in this session (as it was
    /// read, or encoded). Arguments past what the check reads ([`MAX_CHECKED_BYTES`] of
    /// text, 65,536 strings, 32 levels) are [`SecretCheck::Unchecked`] while the
    /// session holds a secret: padding a secret past the budget must not carry it out.
    pub fn secret_check(&self, arguments: &Value) -> SecretCheck {
        self.secret_check_in(arguments, &crate::blob::Memo::default())
    }

    /// [`Session::secret_check`], with the base64 blobs of the arguments' strings found
    /// once for every check of the call (`blobs`).
    pub(crate) fn secret_check_in<'v>(
        &self,
        arguments: &'v Value,
        blobs: &crate::blob::Memo<'v>,
    ) -> SecretCheck {
        if self.secrets.is_empty() {
            return SecretCheck::Clean;
        }
        let mut strings = Vec::new();
        let mut overflow = false;
        strings_of(arguments, String::new(), &mut strings, &mut overflow, 0);
        let mut complete = !overflow;
        let lengths = if self.secrets_of_any_length > 0 {
            Lengths::Any
        } else {
            Lengths::Of(&self.secret_lengths)
        };
        let mut budget = MAX_CHECKED_BYTES;
        for (argument, s) in strings {
            if s.len() > budget {
                complete = false;
                break;
            }
            budget -= s.len();
            let mut hit = None;
            find_carried_in(s, &blobs.blobs(s), lengths, |token| {
                hit = self.secrets.get(&secret_digest(token));
                hit.is_some()
            });
            if let Some((source, _)) = hit {
                return SecretCheck::Carried(SecretFinding {
                    argument,
                    source: source.clone(),
                });
            }
        }
        if complete {
            SecretCheck::Clean
        } else {
            SecretCheck::Unchecked
        }
    }
}

/// What [`Session::secret_check`] found in a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretCheck {
    /// No secret value of this session (or none recorded).
    Clean,
    /// This argument carries one.
    Carried(SecretFinding),
    /// The arguments are larger than the check reads: a person must look.
    Unchecked,
}

/// Bytes of argument text [`Session::secret_check`] reads in one call (4 MiB).
pub const MAX_CHECKED_BYTES: usize = 4 << 20;

/// Why a call whose arguments the secret check could not read in full asks.
pub(crate) fn unchecked_reason() -> String {
    format!(
        "the arguments are larger than the {} MiB (or {MAX_SCANNED_STRINGS} strings) the secret check reads, and this session has read secret values: a human must look",
        MAX_CHECKED_BYTES >> 20
    )
}
