//! What the tools are called: each tool's own name after the server's
//! `--tool-prefix`, in the tool list and in every text that names a tool.
//! Static texts (descriptions, argument docs, instructions) mark a tool as
//! `§name`, rendered once at start; hints built at run time name tools
//! through [`Names::of`].

/// Every tool's name, without a prefix.
pub const TOOL_NAMES: [&str; 7] = ["run", "read", "write", "wait", "kill", "list", "screen"];

/// The tools' names as clients see them: each tool's own name after the
/// server's `--tool-prefix` (none by default). Why a prefix: with a second
/// MCP server in the same agent, generic names such as `run` collide
/// (pydantic-ai refused to start), and a prefix the client adds leaves
/// tether's hints naming the bare tools (issue 16).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    prefix: String,
}

impl Names {
    /// Names with `prefix` before each tool's own (checked by
    /// [`parse_prefix`](crate::options::parse_prefix) when it comes from
    /// the command line).
    pub fn new(prefix: impl Into<String>) -> Names {
        Names {
            prefix: prefix.into(),
        }
    }

    /// The name a client calls `tool` by.
    pub fn of(&self, tool: &str) -> String {
        format!("{}{tool}", self.prefix)
    }

    /// The tool a client's `called` name stands for, if it is one of ours.
    pub fn tool<'a>(&self, called: &'a str) -> Option<&'a str> {
        called
            .strip_prefix(self.prefix.as_str())
            .filter(|name| TOOL_NAMES.contains(name))
    }

    /// `text` with every `§name` of a tool replaced by the name a client
    /// calls it by (texts written here mark tool names so; a `§` before
    /// anything else stays as it is).
    pub fn render(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 8 * self.prefix.len());
        let mut rest = text;
        while let Some(at) = rest.find('§') {
            out.push_str(&rest[..at]);
            let after = &rest[at + '§'.len_utf8()..];
            let word = after
                .find(|c: char| !c.is_ascii_lowercase())
                .map_or(after, |end| &after[..end]);
            if TOOL_NAMES.contains(&word) {
                out.push_str(&self.prefix);
                out.push_str(word);
                rest = &after[word.len()..];
            } else {
                out.push('§');
                rest = after;
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{INSTRUCTIONS, all};

    /// Regression (issue 16): `--tool-prefix` must rename every mention of
    /// a tool, or the model calls `wait` where only `tether_wait` exists.
    #[test]
    fn every_tool_mention_is_marked_and_renamed() {
        let names = Names::new("tether_");
        let mut texts = vec![INSTRUCTIONS.to_owned()];
        for tool in all() {
            texts.push(tool.description.to_owned());
            texts.extend(tool.params.iter().map(|p| p.doc.to_owned()));
            texts.push(tool.output_schema.to_string());
        }
        for text in &texts {
            let rendered = names.render(text);
            assert!(!rendered.contains('§'), "unrendered marker in {rendered}");
            // A tool named in code style or as a call is a marked one.
            for tool in TOOL_NAMES {
                for bare in [format!("`{tool}`"), format!("`{tool} {{")] {
                    assert!(
                        !rendered.contains(&bare),
                        "{bare} is not renamed in: {rendered}"
                    );
                }
            }
        }
        assert_eq!(
            names.render("§wait {\"id\": 1}, §x, §"),
            "tether_wait {\"id\": 1}, §x, §"
        );
        assert_eq!(Names::default().render("`§read`"), "`read`");
        assert_eq!(names.tool("tether_list"), Some("list"));
        assert_eq!(
            (names.tool("list"), names.tool("tether_nope")),
            (None, None)
        );
    }
}
