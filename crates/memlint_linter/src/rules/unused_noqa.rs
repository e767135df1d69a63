//! ## What it does
//! Checks for suppression comments that suppress nothing, as ruff's `RUF100` does:
//!
//! - a memlint code in a `# noqa: ...` list, or in `# memlint: ignore[...]`, with no
//!   finding of that rule on the line (`unused`), or naming a rule that is not enabled
//!   (`non-enabled`), or listed twice (`duplicated`);
//! - a code in memlint's namespace that does not exist (`# noqa: MEM1`) or a misspelled
//!   rule name (`# memlint: ignore[eval-without-nograd]`) (`unknown`);
//! - a blanket `# memlint: ignore` on a line with no finding.
//!
//! The message says which codes are unused, and why. Codes of other tools in a `# noqa:`
//! list (`E501`, `F401`, `ERA001`: letters then digits, not `MEM`) are theirs: memlint
//! keeps them and never reports them, as ruff does with the codes its `external` setting
//! names. A bare `# noqa` is not reported either: ruff and flake8 read it too, and memlint
//! cannot know whether it suppresses one of their findings (ruff reports an unused bare
//! `# noqa` because it owns every rule it could suppress; memlint owns only its own).
//! Only memlint's own spellings — `MEM` codes, rule names, `# memlint: ignore` — are
//! checked.
//!
//! A directive that lists `MEM013` (or `unused-noqa`) is never reported, nor is any
//! other directive on its line: that is how to keep a directive on purpose. Code after a
//! `# noqa:` list is not part of it (`# noqa: MEM004 cache probe` lists `MEM004`).
//!
//! ## Why is this bad?
//! A suppression that suppresses nothing hides the next real finding on its line: once
//! the code changes (an evaluation loop moves, a `torch.load` call gets another
//! argument), a stale `# noqa: MEM001` silently swallows a new out-of-memory bug there.
//! A misspelled code (`# noqa: MEM1`) was never suppressing anything, so the finding the
//! author meant to accept is still reported, or the comment is noise. Removing unused
//! directives keeps every suppression a decision someone made about a finding that
//! exists.
//!
//! ## Example
//! ```python
//! for x, y in loader:
//!     loss = criterion(model(x), y)  # noqa: MEM002, E501
//!     loss.backward()
//!     optimizer.step()
//!     torch.cuda.empty_cache()  # memlint: ignore[MEM1]
//! ```
//!
//! Use instead:
//! ```python
//! for x, y in loader:
//!     loss = criterion(model(x), y)  # noqa: E501
//!     loss.backward()
//!     optimizer.step()
//!     torch.cuda.empty_cache()  # memlint: ignore[MEM004]
//! ```
//!
//! ## Fix safety
//! The fix removes the unused codes from the list, or the whole directive when no code
//! is left (the comment's other text stays: `x = f()  # type: ignore  # noqa: MEM004`
//! becomes `x = f()  # type: ignore`; a comment line holding only the directive is
//! removed). It is safe: it edits a comment only, and what the directive still
//! suppresses does not change. Codes of other tools are kept.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use crate::checker::{Checker, Suppressions};
use crate::noqa::{is_name_shaped, Directive, DirectiveKind, ListedCode};
use crate::prefilter::Words;
use crate::{Diagnostic, Edit, Fix, Rule, Severity};

pub const SUMMARY: &str = "Suppression comment (`# noqa: MEM…`, `# memlint: ignore`) that suppresses nothing, or an unknown code";
pub const CAPTURES: &[&str] = &["comment"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// After a `#` on a line: `memlint:` (any case), or `noqa` followed on the line by a `:`
/// and then `mem` (any case: a memlint code) or `-` (a rule name). A bare `# noqa` and a list of other tools'
/// codes are never reported, so a file with only those is not parsed for this rule.
pub fn trigger(words: &Words<'_>) -> bool {
    static WORDS: OnceLock<AhoCorasick> = OnceLock::new();
    let finder = WORDS.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(["noqa", "memlint:"])
            .expect("two plain words build an automaton")
    });
    // Directives are comments: only the rest of a line after a `#` is searched (the
    // automaton's first letters, `n` and `m`, start many words of a program, and the
    // search of the whole text took about 1% of a run).
    let text = words.text();
    let mut from = 0;
    while let Some(at) = memchr::memchr(b'#', &text.as_bytes()[from..]) {
        let start = from + at;
        let end = memchr::memchr(b'\n', &text.as_bytes()[start..]).map_or(text.len(), |e| start + e);
        let comment = &text[start..end];
        let directive = finder.find_iter(comment).any(|found| {
            if found.pattern().as_usize() == 1 {
                return true;
            }
            let line = &comment[found.end()..];
            line.find(':').is_some_and(|colon| {
                let list = line[colon..].as_bytes();
                list.contains(&b'-') || list.windows(3).any(|w| w.eq_ignore_ascii_case(b"mem"))
            })
        });
        if directive {
            return true;
        }
        from = end;
    }
    false
}

/// Why a listed code is reported.
#[derive(Default)]
struct Unused<'d> {
    unmatched: Vec<&'d str>,
    disabled: Vec<&'d str>,
    unknown: Vec<&'d str>,
    duplicated: Vec<&'d str>,
}

impl Unused<'_> {
    fn is_empty(&self) -> bool {
        self.unmatched.is_empty() && self.disabled.is_empty() && self.unknown.is_empty() && self.duplicated.is_empty()
    }

    /// `unused: `MEM004`; unknown: `MEM1``, as ruff words it.
    fn describe(&self) -> String {
        let groups = [("unused", &self.unmatched), ("non-enabled", &self.disabled), ("unknown", &self.unknown), ("duplicated", &self.duplicated)];
        groups
            .iter()
            .filter(|(_, codes)| !codes.is_empty())
            .map(|(what, codes)| format!("{what}: {}", codes.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Is `code` (not a memlint rule) in memlint's namespace: `MEM` and digits, or, in a
/// `# memlint: ignore[...]` list, anything.
fn is_memlints(kind: DirectiveKind, code: &ListedCode) -> bool {
    if kind == DirectiveKind::MemlintIgnore {
        return true;
    }
    let text = code.text.as_bytes();
    let mem = text.len() > 3 && text[..3].eq_ignore_ascii_case(b"MEM") && text[3..].iter().all(u8::is_ascii_digit);
    mem || is_name_shaped(&code.text)
}

pub fn check_after_suppression(checker: &mut Checker<'_, '_>, suppressions: &Suppressions<'_>) {
    let directives = &suppressions.directives.directives;
    if directives.is_empty() {
        return;
    }
    let this = checker.rule;
    // Lines where a directive lists this rule: every directive there is kept on purpose.
    let exempt_lines: Vec<usize> = directives.iter().filter(|d| d.lists(this)).map(|d| d.line).collect();
    let comments: Vec<Range<usize>> = directives.iter().map(|d| d.comment.clone()).collect();
    let mut reports = Vec::new();
    for m in checker.matches_in(&comments) {
        let Some(comment) = m.get("comment") else { continue };
        for (index, directive) in directives.iter().enumerate().filter(|(_, d)| d.comment.start == comment.start_byte()) {
            if exempt_lines.contains(&directive.line) {
                continue;
            }
            let used = &suppressions.used[index];
            if let Some(diagnostic) = check_directive(checker.model.source(), this, directive, used, suppressions) {
                // The fact it rests on: no finding was suppressed by it on its line.
                let fact = memlint_python::Fact { text: format!("no finding of the rules it names was reported on line {} (after every rule ran)", directive.line), range: Some(directive.comment.clone()) };
                reports.push(diagnostic.with_evidence(vec![fact]));
            }
        }
    }
    for diagnostic in reports {
        checker.report(diagnostic);
    }
}

fn check_directive(source: &str, this: Rule, directive: &Directive, used: &[Rule], suppressions: &Suppressions<'_>) -> Option<Diagnostic> {
    let label = directive.kind.label();
    let Some((codes, list)) = &directive.codes else {
        // A blanket directive: only memlint's own spelling is memlint's to judge.
        if directive.kind != DirectiveKind::MemlintIgnore || !used.is_empty() {
            return None;
        }
        return Some(
            Diagnostic::new(this, directive.range.clone(), format!("Unused blanket `{label}` directive: no memlint finding on this line"))
                .with_help("remove it")
                .with_severity(Severity::Warning)
                .with_fix(Some(Fix::safe(format!("Remove the unused `{label}` directive"), vec![delete_directive(source, directive)]))),
        );
    };
    let mut unused = Unused::default();
    let mut kept: Vec<&str> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut seen_rules: Vec<Rule> = Vec::new();
    for code in codes {
        let text = code.text.as_str();
        match code.rule {
            Some(rule) if seen_rules.contains(&rule) => unused.duplicated.push(text),
            Some(rule) => {
                seen_rules.push(rule);
                if used.contains(&rule) {
                    kept.push(text);
                } else if suppressions.enabled.is_enabled(rule) {
                    unused.unmatched.push(text);
                } else {
                    unused.disabled.push(text);
                }
            }
            None if seen.contains(&text) && is_memlints(directive.kind, code) => unused.duplicated.push(text),
            None if is_memlints(directive.kind, code) => unused.unknown.push(text),
            // Another tool's code: kept as it is.
            None => kept.push(text),
        }
        seen.push(text);
    }
    if unused.is_empty() {
        return None;
    }
    let mut help = if kept.is_empty() { "remove the directive".to_owned() } else { "remove the codes that suppress nothing".to_owned() };
    let suggestions: Vec<String> = unused.unknown.iter().filter_map(|u| closest_rule(u).map(|r| format!("`{u}` → `{}` ({})", r.code(), r.name()))).collect();
    if !suggestions.is_empty() {
        help.push_str(&format!("; did you mean {}?", suggestions.join(", ")));
    }
    let fix = if kept.is_empty() {
        Fix::safe(format!("Remove the unused `{label}` directive"), vec![delete_directive(source, directive)])
    } else {
        Fix::safe(format!("Remove the unused codes from the `{label}` directive"), vec![Edit::replace(list.clone(), kept.join(", "))])
    };
    Some(
        Diagnostic::new(this, directive.range.clone(), format!("Unused `{label}` directive ({})", unused.describe()))
            .with_help(help)
            .with_severity(Severity::Warning)
            .with_fix(Some(fix)),
    )
}

/// The edit that deletes a directive, keeping the rest of its comment (ruff's
/// `delete_comment`): the whole line when the directive is all there is on it; the
/// directive and the blanks before it when it ends the line; the directive when another
/// `#` part follows; else the directive's words, keeping `# ` and the text after them.
fn delete_directive(source: &str, directive: &Directive) -> Edit {
    let range = directive.range.clone();
    let line_start = source[..range.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = source[range.end..].find('\n').map(|i| range.end + i).unwrap_or(source.len());
    let line_end = if source[..line_end].ends_with('\r') { line_end - 1 } else { line_end };
    let before = &source[line_start..range.start];
    let leading = before.len() - before.trim_end().len();
    let after = &source[range.end..line_end];
    let trailing = after.len() - after.trim_start().len();
    if before.trim().is_empty() && after.trim().is_empty() {
        let full_end = source[line_end..].find('\n').map(|i| line_end + i + 1).unwrap_or(source.len());
        return Edit::delete(line_start..full_end);
    }
    if after.trim().is_empty() {
        return Edit::delete(range.start - leading..line_end);
    }
    if after.trim_start().starts_with('#') {
        return Edit::delete(range.start..range.end + trailing);
    }
    let hash_part = &source[range.start + 1..range.end];
    let words_start = range.start + 1 + (hash_part.len() - hash_part.trim_start().len());
    Edit::delete(words_start..range.end + trailing)
}

/// The rule a misspelled code or name most likely meant: the one closest rule at most
/// two edits away.
fn closest_rule(text: &str) -> Option<Rule> {
    let lower = text.to_ascii_lowercase();
    let scored: Vec<(usize, Rule)> = Rule::ALL
        .iter()
        .map(|r| (edit_distance(&lower, r.name()).min(edit_distance(&lower, &r.code().to_ascii_lowercase())), *r))
        .filter(|(d, _)| *d <= 2)
        .collect();
    let best = scored.iter().map(|(d, _)| *d).min()?;
    // Only a single closest rule is a suggestion (`MEM1` is as close to MEM001 as to MEM010).
    let mut closest = scored.iter().filter(|(d, _)| *d == best);
    let (_, rule) = closest.next()?;
    closest.next().is_none().then_some(*rule)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("eval-without-nograd", "eval-without-no-grad"), 1);
        assert_eq!(closest_rule("eval-without-nograd"), Some(Rule::EvalWithoutNoGrad));
        assert_eq!(closest_rule("MEM1"), None, "too far from any code");
        assert_eq!(closest_rule("MEM0004"), Some(Rule::EmptyCacheInLoop));
    }

    #[test]
    fn trigger_needs_a_memlint_code_or_spelling() {
        let holds = |s: &str| trigger(&Words::scan(s));
        assert!(holds("x = 1  # NOQA: mem004\n"));
        assert!(holds("x = 1  # noqa: eval-without-no-grad\n"));
        assert!(holds("x = 1  # Memlint: ignore\n"));
        assert!(!holds("x = 1  # noqa\ny = 2  # noqa: E501\n"));
        assert!(!holds("x = 1  # noqa: E501\nMEM = 2\n"), "`MEM` on another line is not in the list");
        assert!(!holds("noqa = 'x: MEM001'\nmemlint = {'memlint:': 1}\n"), "not in a comment");
        assert!(holds("s = '#'  # noqa: MEM001\n"), "a `#` in a string before the comment");
        assert!(holds("# one\n# two\nx = f()  # noqa: MEM004"), "the last line, without a line break");
    }
}
