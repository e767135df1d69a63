//! Every rule's query compiles against the tree-sitter-python grammar, uses only known
//! predicates, and its captures are exactly those the rule reads (plus `@_helpers`).

use memlint_linter::Rule;
use tree_sitter::Query;

#[test]
fn every_query_compiles_with_known_captures_and_predicates() {
    let language = memlint_python::language();
    for rule in Rule::ALL {
        let query = Query::new(&language, rule.query_source())
            .unwrap_or_else(|e| panic!("queries/python/{}.scm: {e}", rule.name()));
        for pattern in 0..query.pattern_count() {
            let unknown = query.general_predicates(pattern);
            assert!(
                unknown.is_empty(),
                "queries/python/{}.scm: unknown predicate(s) {:?}",
                rule.name(),
                unknown.iter().map(|p| p.operator.to_string()).collect::<Vec<_>>()
            );
        }
        for name in query.capture_names() {
            assert!(
                name.starts_with('_') || rule.captures().contains(name),
                "queries/python/{}.scm: capture @{name} is neither read by the rule nor a @_helper",
                rule.name()
            );
        }
        for name in rule.captures() {
            assert!(
                query.capture_names().contains(name),
                "rule {} reads @{name}, which queries/python/{}.scm does not capture",
                rule.code(),
                rule.name()
            );
        }
    }
}

#[test]
fn every_query_file_belongs_to_a_rule() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../queries/python");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            Rule::ALL.iter().any(|r| r.name() == stem),
            "{} matches no rule name",
            path.display()
        );
    }
}
