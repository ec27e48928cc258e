//! From a [`Command`] to a running [`Child`]: validate, resolve the
//! program, build the environment with the spawn tag, and hand the plan to
//! the platform's containment.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::child::Child;
use crate::command::Command;
use crate::contain::{self, SpawnPlan};
use crate::containment::Leftovers;
use crate::error::{Error, Result};
use crate::install::Install;
use crate::resolve::resolve_program;
use crate::session_id::SessionId;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag, validate_purpose};
use crate::stdio::{ChildStderr, ChildStdin, ChildStdout, Stdio};
use crate::terminal::Pty;

impl Command {
    /// Spawns with these defaults for streams the caller did not set
    /// (stderr follows stdout's default: piped with it, else inherited).
    pub(crate) fn spawn_with(&mut self, stdin_default: Stdio, out_default: Stdio) -> Result<Child> {
        validate_purpose(&self.purpose).map_err(|e| Error::InvalidInput {
            what: "purpose",
            reason: e.to_string(),
        })?;
        self.limits.validate()?;
        let install = self.install.clone().unwrap_or_else(Install::from_env);
        let (owner_pid, owner_start) = contain::owner_identity();
        let session = self.session.clone().unwrap_or_else(SessionId::generate);
        let tag = SpawnTag::new(
            install.id(),
            &self.purpose,
            owner_pid,
            owner_start,
            session.as_str(),
        )?;
        let env = self.environment(&tag);
        // Always explicit: a warm keeper was started earlier, and its own
        // cwd is the owner's cwd of back then.
        let cwd = match self.checked_cwd()? {
            Some(cwd) => Some(cwd),
            None => std::env::current_dir().ok(),
        };
        let program = resolve_program(&self.program, &env, cwd.as_deref())?;

        let err_default = match &out_default {
            Stdio::Piped => Stdio::Piped,
            _ => Stdio::Inherit,
        };
        let stdin = self
            .stdin
            .as_ref()
            .unwrap_or(&stdin_default)
            .to_child_io()?;
        let stdout = self.stdout.as_ref().unwrap_or(&out_default).to_child_io()?;
        let stderr = self.stderr.as_ref().unwrap_or(&err_default).to_child_io()?;

        let mut argv = vec![self.arg0.clone().unwrap_or_else(|| self.program.clone())];
        argv.extend(self.args.iter().cloned());
        let plan = SpawnPlan {
            program,
            argv,
            env,
            cwd,
            containment: self.containment,
            leftovers: if self.keep_descendants {
                Leftovers::Keep
            } else {
                Leftovers::Kill
            },
            grace: self.grace,
            timeout: self.timeout,
            new_session: self.new_session,
            ladder: self.ladder.clone(),
            foreground: self.foreground,
            tag,
            pty: self.pty,
            limits: self.limits,
            setup: crate::contain::ChildSetup {
                // What a hook does to the keeper's environment reaches a
                // command that sets none of its own, as an exec after a
                // `preexec_fn` would have it.
                keeper_env: self.keeper_hook.is_some() && !self.env_clear && self.env.is_empty(),
                ..self.setup.clone()
            },
            keeper_hook: self.keeper_hook.clone(),
        };
        let spawned = contain::spawn(plan, [&stdin, &stdout, &stderr])?;
        // Our duplicates of the child's ends go now, or a pipe would never
        // see EOF.
        drop((stdin, stdout, stderr));
        let mut child = Child::new(
            spawned.tree,
            session,
            self.program.to_string_lossy().into_owned(),
            self.grace,
            self.keep_descendants,
        );
        child.stdin = spawned.stdin.map(ChildStdin);
        child.stdout = spawned.stdout.map(ChildStdout);
        child.stderr = spawned.stderr.map(ChildStderr);
        child.pty = spawned.pty.map(Pty);
        Ok(child)
    }

    /// The owner's environment (unless cleared) with this command's
    /// changes, and the spawn tag — which no caller can remove.
    fn environment(&self, tag: &SpawnTag) -> Vec<(OsString, OsString)> {
        // The owner's variables as they come (as `std::process::Command`
        // passes them on: no map, no sorting), less those this command
        // sets or removes and any tag, then this command's and its tag.
        let inherited = (!self.env_clear).then(std::env::vars_os);
        let mut vars: Vec<(OsString, OsString)> = inherited
            .into_iter()
            .flatten()
            .filter(|(k, _)| k != SPAWN_TAG_VAR && !self.env.contains_key(k))
            .collect();
        vars.extend(
            self.env
                .iter()
                .filter(|(k, _)| *k != SPAWN_TAG_VAR)
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?))),
        );
        vars.push((SPAWN_TAG_VAR.into(), tag.to_string().into()));
        vars
    }

    fn checked_cwd(&self) -> Result<Option<PathBuf>> {
        let Some(cwd) = &self.cwd else {
            return Ok(None);
        };
        let bad = |reason: &str| Error::BadCwd {
            cwd: cwd.clone(),
            reason: reason.to_owned(),
        };
        match std::fs::metadata(cwd) {
            Ok(m) if m.is_dir() => Ok(Some(
                std::path::absolute(cwd).map_err(|e| bad(&e.to_string()))?,
            )),
            Ok(_) => Err(bad("not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("does not exist")),
            Err(e) => Err(bad(&e.to_string())),
        }
    }
}
