//! PLACEHOLDER (lead's stub with the agreed API; helper/auth's file replaces it at merge).
#![allow(dead_code)]
use sha2::{Digest, Sha256};

use super::config::GatewayConfig;

#[derive(Debug, Clone)]
pub struct Principal {
    pub user: String,
    pub groups: Vec<String>,
    pub method: &'static str,
}

#[derive(Debug, Clone)]
pub enum Denied {
    Unauthenticated {
        error: &'static str,
        description: String,
    },
    Forbidden {
        description: String,
    },
}

#[derive(Debug)]
pub struct Authenticator {
    config: GatewayConfig,
}

impl Authenticator {
    pub fn new(config: &GatewayConfig, _http: reqwest::Client) -> anyhow::Result<Authenticator> {
        Ok(Authenticator {
            config: config.clone(),
        })
    }
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, Denied> {
        let Some(token) = authorization.and_then(|a| a.strip_prefix("Bearer ")) else {
            return Err(Denied::Unauthenticated {
                error: "invalid_request",
                description: "no bearer token".into(),
            });
        };
        let digest = hex::encode(Sha256::digest(token.as_bytes()));
        for t in &self.config.auth.tokens {
            if t.sha256 == digest {
                return Ok(Principal {
                    user: t.user.clone(),
                    groups: t.groups.clone(),
                    method: "token",
                });
            }
        }
        Err(Denied::Unauthenticated {
            error: "invalid_token",
            description: "unknown token".into(),
        })
    }
    pub fn may_reach(&self, principal: &Principal, server: &str) -> Result<(), Denied> {
        let Some(s) = self.config.servers.get(server) else {
            return Err(Denied::Forbidden {
                description: "no such server".into(),
            });
        };
        match &s.allow {
            None => Ok(()),
            Some(p)
                if p.users.contains(&principal.user)
                    || p.groups.iter().any(|g| principal.groups.contains(g)) =>
            {
                Ok(())
            }
            Some(_) => Err(Denied::Forbidden {
                description: format!("`{}` may not reach `{server}`", principal.user),
            }),
        }
    }
    pub fn may_approve(&self, _principal: &Principal) -> Result<(), Denied> {
        Ok(())
    }
    pub fn challenge(&self, denied: &Denied, resource_metadata_url: &str) -> String {
        match denied {
            Denied::Unauthenticated { error, description } => format!(
                r#"Bearer resource_metadata="{resource_metadata_url}", error="{error}", error_description="{description}""#
            ),
            Denied::Forbidden { description } => {
                format!(r#"Bearer error="insufficient_scope", error_description="{description}""#)
            }
        }
    }
    pub fn metadata(&self, resource: &str) -> serde_json::Value {
        serde_json::json!({ "resource": resource, "bearer_methods_supported": ["header"] })
    }
}
