//! The environment commands get: the server's own, minus the credentials
//! of model providers, plus a few defaults that make non-terminal output
//! behave.
//!
//! An agent's terminal runs whatever the model writes, and the model's
//! provider key is in the agent's environment: a `printenv` or a curious
//! script would hand it to the model and whatever it talks to. So
//! variables matching [`DEFAULT_DENY`] are removed, unless an
//! `--env-allow` pattern names them; `--env-deny` adds patterns
//! (`--env-deny '*'` with `--env-allow` gives an allow-list). Patterns are
//! case-sensitive globs where `*` matches any run of characters.
//! Variables a `run` call sets explicitly with `env` are always passed.

use std::ffi::{OsStr, OsString};

/// Credential variables of model providers and agent front-ends, removed
/// from commands' environment by default.
pub const DEFAULT_DENY: &[&str] = &[
    "OPENAI_*",
    "AZURE_OPENAI_*",
    "ANTHROPIC_*",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "VERTEX_API_KEY",
    "MISTRAL_API_KEY",
    "CODESTRAL_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "GROK_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "TOGETHERAI_API_KEY",
    "FIREWORKS_API_KEY",
    "PERPLEXITY_API_KEY",
    "PPLX_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "AI21_API_KEY",
    "CEREBRAS_API_KEY",
    "SAMBANOVA_API_KEY",
    "MOONSHOT_API_KEY",
    "KIMI_API_KEY",
    "DASHSCOPE_API_KEY",
    "ZHIPUAI_API_KEY",
    "NOUS_API_KEY",
    "NOVITA_API_KEY",
    "DEEPINFRA_API_KEY",
    "DEEPINFRA_TOKEN",
    "REPLICATE_API_TOKEN",
    "HF_TOKEN",
    "HUGGINGFACE_API_KEY",
    "HUGGING_FACE_HUB_TOKEN",
    "VOYAGE_API_KEY",
    "ELEVENLABS_API_KEY",
    "LITELLM_API_KEY",
    "LITELLM_MASTER_KEY",
    "OLLAMA_API_KEY",
];

/// Variables set for every command unless the environment already has
/// them: output reaches a pipe, not a terminal, and these keep it flowing.
pub const DEFAULTS: &[(&str, &str)] = &[
    // Python block-buffers a pipe: without this, `print` in a long run or
    // `python3 -i` shows nothing until exit.
    ("PYTHONUNBUFFERED", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// Which variables pass to commands.
#[derive(Clone, Debug, Default)]
pub struct EnvPolicy {
    allow: Vec<String>,
    deny: Vec<String>,
}

impl EnvPolicy {
    /// [`DEFAULT_DENY`] plus `deny`, with `allow` taking precedence.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> EnvPolicy {
        let mut all_deny: Vec<String> = DEFAULT_DENY.iter().map(|p| (*p).to_owned()).collect();
        all_deny.extend(deny);
        EnvPolicy {
            allow,
            deny: all_deny,
        }
    }

    /// Whether variable `name` passes.
    pub fn passes(&self, name: &OsStr) -> bool {
        let Some(name) = name.to_str() else {
            // Not UTF-8: no pattern names it; keep it unless all is denied.
            return !self.deny.iter().any(|p| p == "*");
        };
        self.allow.iter().any(|p| glob_match(p, name))
            || !self.deny.iter().any(|p| glob_match(p, name))
    }

    /// The environment for commands, from `vars` (the server's own).
    pub fn apply(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> =
            vars.into_iter().filter(|(k, _)| self.passes(k)).collect();
        for (key, value) in DEFAULTS {
            if !env.iter().any(|(k, _)| k == key) {
                env.push(((*key).into(), (*value).into()));
            }
        }
        env
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters (including none) and everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
        names
            .iter()
            .map(|n| (OsString::from(n), OsString::from("v")))
            .collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .filter(|k| !DEFAULTS.iter().any(|(d, _)| d == k))
            .collect()
    }

    #[test]
    fn globs() {
        assert!(glob_match("OPENAI_*", "OPENAI_API_KEY"));
        assert!(glob_match("OPENAI_*", "OPENAI_"));
        assert!(!glob_match("OPENAI_*", "MY_OPENAI_KEY"));
        assert!(glob_match("*_API_KEY", "FOO_API_KEY"));
        assert!(glob_match("*", ""));
        assert!(glob_match("A*B*C", "AxxBxxC"));
        assert!(!glob_match("A*B*C", "AxxBxx"));
        assert!(glob_match("HF_TOKEN", "HF_TOKEN"));
        assert!(!glob_match("HF_TOKEN", "hf_token"));
    }

    #[test]
    fn provider_credentials_are_removed_by_default() {
        let policy = EnvPolicy::new(vec![], vec![]);
        let env = policy.apply(vars(&[
            "PATH",
            "HOME",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "HF_TOKEN",
            "STRIPE_API_KEY",
        ]));
        assert_eq!(names(&env), ["PATH", "HOME", "STRIPE_API_KEY"]);
    }

    #[test]
    fn allow_beats_deny_and_deny_adds() {
        let policy = EnvPolicy::new(vec!["OPENAI_API_KEY".into()], vec!["AWS_*".into()]);
        let env = policy.apply(vars(&[
            "OPENAI_API_KEY",
            "OPENAI_ORG",
            "AWS_SECRET_ACCESS_KEY",
            "PATH",
        ]));
        assert_eq!(names(&env), ["OPENAI_API_KEY", "PATH"]);
        // An allow-list: deny everything, allow a few.
        let policy = EnvPolicy::new(vec!["PATH".into(), "LC_*".into()], vec!["*".into()]);
        let env = policy.apply(vars(&["PATH", "LC_ALL", "HOME", "SECRET"]));
        assert_eq!(names(&env), ["PATH", "LC_ALL"]);
    }

    #[test]
    fn defaults_fill_in_but_never_override() {
        let policy = EnvPolicy::new(vec![], vec![]);
        let mut given = vars(&["PATH"]);
        given.push(("PYTHONUNBUFFERED".into(), "0".into()));
        let env = policy.apply(given);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("PYTHONUNBUFFERED"), Some("0".into()));
        assert_eq!(get("GIT_PAGER"), Some("cat".into()));
    }
}
