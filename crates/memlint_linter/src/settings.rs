//! What the linter is asked to do: which rules run, and severity overrides.

use std::collections::HashMap;

use crate::{Rule, Severity};

/// The set of enabled rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSelection {
    enabled: Vec<bool>,
}

impl RuleSelection {
    pub fn all() -> Self {
        RuleSelection { enabled: vec![true; Rule::ALL.len()] }
    }
    pub fn none() -> Self {
        RuleSelection { enabled: vec![false; Rule::ALL.len()] }
    }
    fn index(rule: Rule) -> usize {
        Rule::ALL.iter().position(|r| *r == rule).expect("every rule is in Rule::ALL")
    }
    pub fn enable(&mut self, rule: Rule) {
        self.enabled[Self::index(rule)] = true;
    }
    pub fn disable(&mut self, rule: Rule) {
        self.enabled[Self::index(rule)] = false;
    }
    pub fn is_enabled(&self, rule: Rule) -> bool {
        self.enabled[Self::index(rule)]
    }
    pub fn any_enabled(&self) -> bool {
        self.enabled.iter().any(|e| *e)
    }
    pub fn iter(&self) -> impl Iterator<Item = Rule> + '_ {
        Rule::ALL.iter().copied().filter(|r| self.is_enabled(*r))
    }
    /// `select` then `ignore`, as ruff does: an empty `select` means every rule.
    pub fn from_select_ignore(select: &[Rule], ignore: &[Rule]) -> Self {
        let mut selection = if select.is_empty() { RuleSelection::all() } else { RuleSelection::none() };
        for rule in select {
            selection.enable(*rule);
        }
        for rule in ignore {
            selection.disable(*rule);
        }
        selection
    }
}

impl Default for RuleSelection {
    fn default() -> Self {
        RuleSelection::all()
    }
}

/// Settings for linting one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinterSettings {
    pub rules: RuleSelection,
    /// Per-rule severity overrides.
    pub severity: HashMap<Rule, Severity>,
}
