//! The environment commands get: the server's own, minus credentials,
//! plus defaults that make commands behave without a terminal.
//!
//! An agent's terminal runs whatever the model writes, and the agent's
//! environment holds its provider key, forge tokens and cloud secrets: a
//! `printenv` or a curious script would hand them to the model and
//! whatever it talks to. So variables matching [`DEFAULT_DENY`] — model
//! providers by name, and any credential by the shape of its name
//! (`*_TOKEN`, `*_SECRET*`, `*_PASSWORD*`, `*_API_KEY`, …) — are removed,
//! unless an `--env-allow` pattern names them; `--env-deny` adds patterns
//! (`--env-deny '*'` with `--env-allow` gives an allow-list). Patterns are
//! globs where `*` matches any run of characters, compared without regard
//! to ASCII case (`github_token` is as secret as `GITHUB_TOKEN`).
//! Variables a `run` call sets explicitly with `env` are always passed.
//!
//! [`defaults`] fill in what is unset: no pager, no prompt for git
//! credentials, no interactive installers, and an editor that fails at
//! once with a message saying to pass `-m` (commands have no terminal; a
//! real editor would sit there until the timeout).

use std::ffi::{OsStr, OsString};

/// Variables removed from commands' environment by default: model-provider
/// and agent credentials by name, then any credential by the shape of its
/// name, then cloud and forge credentials whose names have no such shape.
pub const DEFAULT_DENY: &[&str] = &[
    // Model providers and agent front-ends.
    "OPENAI_*",
    "AZURE_OPENAI_*",
    "ANTHROPIC_*",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "VERTEX_API_KEY",
    "MISTRAL_API_KEY",
    "CODESTRAL_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "HF_TOKEN",
    "HUGGINGFACE_*",
    "HUGGING_FACE_HUB_TOKEN",
    "LITELLM_*",
    // Any credential, by the shape of its name.
    "*_TOKEN",
    "*_TOKEN_*",
    "*_SECRET",
    "*_SECRET_*",
    "*_SECRETS",
    "*_PASSWORD*",
    "*_PASSWD*",
    "*_PASSPHRASE*",
    "*_API_KEY",
    "*_APIKEY",
    "*_API_TOKEN",
    "*_ACCESS_KEY*",
    "*_SECRET_KEY*",
    "*_PRIVATE_KEY*",
    "*_CREDENTIALS*",
    "*_AUTH_TOKEN",
    "*_AUTH",
    "*_CLIENT_SECRET",
    // Cloud and forge credentials whose names have no such shape.
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_PAT",
    "GITLAB_TOKEN",
    "GL_TOKEN",
    "CI_JOB_TOKEN",
    "BITBUCKET_TOKEN",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "PYPI_TOKEN",
    "TWINE_PASSWORD",
    "CARGO_REGISTRY_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "DOCKER_PASSWORD",
    "HEROKU_API_KEY",
    "DIGITALOCEAN_ACCESS_TOKEN",
    "CLOUDFLARE_API_TOKEN",
    "VAULT_TOKEN",
    "PGPASSWORD",
    "MYSQL_PWD",
    "REDISCLI_AUTH",
    "SLACK_BOT_TOKEN",
    "STRIPE_SECRET_KEY",
    "SENTRY_AUTH_TOKEN",
];

/// Variables set for every command unless the environment already has
/// them: commands run without a terminal, their output goes to a pipe.
pub fn defaults() -> Vec<(&'static str, String)> {
    let editor = crate::prompt::no_editor_command();
    vec![
        // Python block-buffers a pipe: without this, `print` in a long run
        // or `python3 -i` shows nothing until exit.
        ("PYTHONUNBUFFERED", "1".into()),
        ("PAGER", "cat".into()),
        ("GIT_PAGER", "cat".into()),
        ("MANPAGER", "cat".into()),
        // git asks for credentials on the terminal: there is none; fail.
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GCM_INTERACTIVE", "never".into()),
        // An editor would wait for a person until the timeout.
        ("GIT_EDITOR", editor.clone()),
        ("EDITOR", editor.clone()),
        ("VISUAL", editor.clone()),
        ("GIT_SEQUENCE_EDITOR", editor),
        ("GIT_MERGE_AUTOEDIT", "no".into()),
        // Installers: no questions.
        ("DEBIAN_FRONTEND", "noninteractive".into()),
        ("PIP_NO_INPUT", "1".into()),
        ("CONDA_ALWAYS_YES", "true".into()),
        // No colour codes and no terminal tricks: output is shown as text.
        ("NO_COLOR", "1".into()),
        ("TERM", "dumb".into()),
    ]
}

/// Which variables pass to commands: [`DEFAULT_DENY`] and the `deny`
/// globs remove, `allow` globs let through (they win), compared without
/// regard to ASCII case. The `Default` policy denies nothing at all — use
/// [`EnvPolicy::new`] for the server's.
///
/// ```
/// use std::ffi::OsStr;
/// use tether_mcp::EnvPolicy;
///
/// let policy = EnvPolicy::new(vec!["GITHUB_TOKEN".into()], vec!["CORP_*".into()]);
/// assert!(!policy.passes(OsStr::new("OPENAI_API_KEY")));   // by provider name
/// assert!(!policy.passes(OsStr::new("my_service_token"))); // by its shape, any case
/// assert!(!policy.passes(OsStr::new("CORP_LICENSE")));     // denied here
/// assert!(policy.passes(OsStr::new("GITHUB_TOKEN")));      // allowed here
/// assert!(policy.passes(OsStr::new("PATH")));
///
/// let env = policy.apply([("ANTHROPIC_API_KEY".into(), "sk-…".into()), ("HOME".into(), "/home/me".into())]);
/// assert!(env.iter().any(|(k, _)| k == "HOME"));
/// assert!(!env.iter().any(|(k, _)| k == "ANTHROPIC_API_KEY"));
/// assert!(env.iter().any(|(k, v)| k == "GIT_TERMINAL_PROMPT" && v == "0")); // a default
/// ```
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

    /// The environment for commands, from `vars` (the server's own): what
    /// passes, plus [`defaults`] for every default variable `vars` does not
    /// set.
    pub fn apply(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> =
            vars.into_iter().filter(|(k, _)| self.passes(k)).collect();
        for (key, value) in defaults() {
            if !env.iter().any(|(k, _)| k == key) {
                env.push((key.into(), value.into()));
            }
        }
        env
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters (including none) and everything else matches itself,
/// ignoring ASCII case.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi].eq_ignore_ascii_case(&n[ni]) {
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
            .filter(|k| !defaults().iter().any(|(d, _)| d == k))
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
        assert!(glob_match("HF_TOKEN", "hf_token"));
        assert!(!glob_match("HF_TOKEN", "HF_TOKENS"));
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
            "TOKENIZERS_PARALLELISM",
            "SSH_AUTH_SOCK",
        ]));
        assert_eq!(
            names(&env),
            ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "SSH_AUTH_SOCK"]
        );
    }

    /// Issue 12: GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY and MY_DB_PASSWORD
    /// reached commands; only provider names were removed.
    #[test]
    fn credentials_are_removed_by_the_shape_of_their_names() {
        let policy = EnvPolicy::new(vec!["NPM_TOKEN".into()], vec![]);
        let env = policy.apply(vars(&[
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "GITLAB_TOKEN",
            "NPM_TOKEN",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "MY_DB_PASSWORD",
            "DB_PASSWORD_FILE",
            "STRIPE_SECRET_KEY",
            "MY_SERVICE_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SOME_API_KEY",
            "github_token",
            "LANG",
        ]));
        assert_eq!(names(&env), ["NPM_TOKEN", "AWS_REGION", "LANG"]);
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
        assert_eq!(get("GIT_TERMINAL_PROMPT"), Some("0".into()));
        assert_eq!(get("DEBIAN_FRONTEND"), Some("noninteractive".into()));
        let editor = get("EDITOR").unwrap();
        assert!(editor.to_string_lossy().contains("git commit -m"));
    }
}
