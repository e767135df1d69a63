//! The rule registry: every rule's code, kebab-case name, query and documentation.
//!
//! Codes and names are a public contract (users' `noqa` comments and CI configs name
//! them): a rule keeps its code forever, and a retired code is never reused.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A rule's `check` for the phase that runs before suppression: every rule's, except a
/// rule marked `after_suppression`, which checks the suppression comments instead.
macro_rules! check_phase {
    (before, $module:ident, $checker:expr) => { crate::rules::$module::check($checker) };
    (before, $module:ident after_suppression, $checker:expr) => { { let _ = $checker; } };
    (after, $module:ident, $checker:expr, $suppressions:expr) => { { let _ = ($checker, $suppressions); } };
    (after, $module:ident after_suppression, $checker:expr, $suppressions:expr) => {
        crate::rules::$module::check_after_suppression($checker, $suppressions)
    };
    (observes, $module:ident) => { false };
    (observes, $module:ident after_suppression) => { true };
}

macro_rules! rules {
    ($( $variant:ident => $code:literal, $name:literal, $module:ident, $file:literal $(, $phase:ident)?; )*) => {
        /// A memlint rule.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rule {
            $( $variant, )*
        }

        impl Rule {
            /// Every rule, by code.
            pub const ALL: &'static [Rule] = &[$( Rule::$variant, )*];

            /// The stable code, e.g. `MEM001`.
            pub fn code(self) -> &'static str {
                match self { $( Rule::$variant => $code, )* }
            }

            /// The stable kebab-case name, e.g. `eval-without-no-grad`.
            pub fn name(self) -> &'static str {
                match self { $( Rule::$variant => $name, )* }
            }

            /// The tree-sitter query the rule starts from (`queries/python/<name>.scm`).
            pub fn query_source(self) -> &'static str {
                match self {
                    $( Rule::$variant => include_str!(concat!("../../../queries/python/", $name, ".scm")), )*
                }
            }

            /// The rule's source file, whose module doc comment is its documentation.
            fn source_file(self) -> &'static str {
                match self {
                    $( Rule::$variant => include_str!(concat!("rules/", $file)), )*
                }
            }

            /// Runs the rule's check over the module (before suppression comments apply).
            pub(crate) fn check(self, checker: &mut crate::checker::Checker<'_, '_>) {
                match self {
                    $( Rule::$variant => check_phase!(before, $module $($phase)?, checker), )*
                }
            }

            /// Runs the check of a rule that reads the suppression comments (after every
            /// other rule's findings were suppressed); nothing for the other rules.
            pub(crate) fn check_after_suppression(
                self,
                checker: &mut crate::checker::Checker<'_, '_>,
                suppressions: &crate::checker::Suppressions<'_>,
            ) {
                match self {
                    $( Rule::$variant => check_phase!(after, $module $($phase)?, checker, suppressions), )*
                }
            }

            /// Does the rule check suppression comments, after suppression? Its findings
            /// depend on the other enabled rules' findings (`unused-noqa`).
            pub fn observes_suppressions(self) -> bool {
                match self { $( Rule::$variant => check_phase!(observes, $module $($phase)?), )* }
            }

            /// One line saying what the rule finds.
            pub fn summary(self) -> &'static str {
                match self { $( Rule::$variant => crate::rules::$module::SUMMARY, )* }
            }

            /// The captures the rule's code reads from its query.
            pub fn captures(self) -> &'static [&'static str] {
                match self { $( Rule::$variant => crate::rules::$module::CAPTURES, )* }
            }

            /// The rule's trigger: a necessary condition over a file's words for the
            /// rule to report anything there (the pre-filter asks it before parsing).
            pub fn trigger(self, words: &crate::prefilter::Words<'_>) -> bool {
                match self { $( Rule::$variant => crate::rules::$module::trigger(words), )* }
            }

            /// Whether the rule can fix some of its findings.
            pub fn fixable(self) -> bool {
                match self { $( Rule::$variant => crate::rules::$module::FIXABLE, )* }
            }
        }
    };
}

rules! {
    EvalWithoutNoGrad => "MEM001", "eval-without-no-grad", eval_without_no_grad, "eval_without_no_grad.rs";
    AccumulatedLossTensor => "MEM002", "accumulated-loss-tensor", accumulated_loss_tensor, "accumulated_loss_tensor.rs";
    HalfWithoutGradScaler => "MEM003", "half-without-grad-scaler", half_without_grad_scaler, "half_without_grad_scaler.rs";
    EmptyCacheInLoop => "MEM004", "empty-cache-in-loop", empty_cache_in_loop, "empty_cache_in_loop.rs";
    RetainGraphInLoop => "MEM005", "retain-graph-in-loop", retain_graph_in_loop, "retain_graph_in_loop.rs";
    GpuTensorsCollected => "MEM006", "gpu-tensors-collected", gpu_tensors_collected, "gpu_tensors_collected.rs";
    DataParallel => "MEM007", "data-parallel", data_parallel, "data_parallel.rs";
    TorchLoadWithoutMapLocation => "MEM008", "torch-load-without-map-location", torch_load_without_map_location, "torch_load_without_map_location.rs";
    ZeroGradKeepsMemory => "MEM009", "zero-grad-keeps-memory", zero_grad_keeps_memory, "zero_grad_keeps_memory.rs";
    DeprecatedCudaAmp => "MEM010", "deprecated-cuda-amp", deprecated_cuda_amp, "deprecated_cuda_amp.rs";
    AccumulationWithoutLossDivision => "MEM011", "accumulation-without-loss-division", accumulation_without_loss_division, "accumulation_without_loss_division.rs";
    FrozenNetworkTracksGrad => "MEM012", "frozen-network-tracks-grad", frozen_network_tracks_grad, "frozen_network_tracks_grad.rs";
    UnusedNoqa => "MEM013", "unused-noqa", unused_noqa, "unused_noqa.rs", after_suppression;
}

impl Rule {
    /// Looks a rule up by code (`MEM001`, any case) or name (`eval-without-no-grad`).
    pub fn from_code_or_name(text: &str) -> Result<Rule, UnknownRule> {
        let text = text.trim();
        Rule::ALL
            .iter()
            .copied()
            .find(|r| r.code().eq_ignore_ascii_case(text) || r.name() == text)
            .ok_or_else(|| UnknownRule(text.to_owned()))
    }

    /// Where a user reads the rule's documentation: `memlint rule <name>`, the command
    /// that prints it. The documentation is compiled into the binary ([`Rule::doc`]), so
    /// this works wherever memlint is installed; memlint has no public home to link to yet,
    /// and a path inside its repository (`docs/rules/<name>.md`, the same text) points
    /// nowhere in a user's project. The value of the JSON report's `url`, the text report's
    /// header, the hover and SARIF's `properties.docs`.
    pub fn url(self) -> String {
        format!("memlint rule {}", self.name())
    }

    /// The rule's documentation: the module doc comment of its source file, in Markdown.
    pub fn doc(self) -> RuleDoc {
        let markdown = self
            .source_file()
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.strip_prefix("//! ").unwrap_or(l.strip_prefix("//!").unwrap_or(l)))
            .collect::<Vec<_>>()
            .join("\n");
        RuleDoc { rule: self, markdown }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl FromStr for Rule {
    type Err = UnknownRule;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rule::from_code_or_name(s)
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

/// A rule code or name that memlint does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRule(pub String);

impl fmt::Display for UnknownRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let close = Rule::ALL
            .iter()
            .find(|r| r.name().contains(&self.0.to_lowercase()) || self.0.to_lowercase().contains(r.name()))
            .map(|r| format!(" (did you mean `{}` / `{}`?)", r.code(), r.name()))
            .unwrap_or_default();
        write!(f, "unknown rule `{}`{close}; `memlint rule --list` lists the rules", self.0)
    }
}

impl std::error::Error for UnknownRule {}

/// A rule's documentation.
#[derive(Debug, Clone)]
pub struct RuleDoc {
    pub rule: Rule,
    /// Markdown with ruff's sections: `## What it does`, `## Why is this bad?`,
    /// `## Example`, `Use instead:`, and `## Fix safety` for fixable rules.
    pub markdown: String,
}

impl RuleDoc {
    /// The text of one `## Section`, without its heading.
    pub fn section(&self, heading: &str) -> Option<String> {
        let marker = format!("## {heading}");
        let start = self.markdown.lines().position(|l| l.trim() == marker)?;
        let body: Vec<&str> = self
            .markdown
            .lines()
            .skip(start + 1)
            .take_while(|l| !l.starts_with("## "))
            .collect();
        Some(body.join("\n").trim().to_owned())
    }

    /// The whole page: a title line, then the documentation.
    pub fn render(&self) -> String {
        format!(
            "# {} ({})\n\n{}\n\nFix: {}.\n",
            self.rule.name(),
            self.rule.code(),
            self.markdown.trim_end(),
            if self.rule.fixable() { "sometimes available" } else { "not available" }
        )
    }
}
