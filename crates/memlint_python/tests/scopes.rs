//! Scopes: which binding each use of a name sees (`SemanticModel::binding_at`). Module,
//! function, class, lambda and comprehension scopes, as in Python: a comprehension's
//! targets and a lambda's parameters are seen only inside them, a class body's names
//! neither in its methods nor outside the class.

use expect_test::{expect, Expect};
use memlint_python::{parse, BindingKind, LineIndex, NodeExt, SemanticModel};

/// One line per identifier spelled `name`: where it is, and the binding it sees (the
/// row and column of that binding's statement and its kind), or `unbound`.
fn check(name: &str, source: &str, expect: Expect) {
    let source = unindent(source);
    let parsed = parse(&source);
    let model = SemanticModel::new(&parsed.tree, &source);
    let index = LineIndex::new(&source);
    let at = |byte: usize| row_column(&index, &source, byte);
    let mut actual = String::new();
    for ident in model.identifiers_named_in(name, 0..source.len()) {
        let seen = match model.binding_at(name, *ident) {
            Some(binding) => format!("{} {}", at(binding.statement.start_byte()), kind(binding.kind)),
            None => "unbound".to_owned(),
        };
        actual.push_str(&format!("{} -> {seen}\n", at(ident.start_byte())));
    }
    assert!(model.identifiers_named_in(name, 0..source.len()).iter().all(|i| i.kind_name() == "identifier"));
    expect.assert_eq(&actual);
}

/// `row:column` of `byte`, as the expectations write places.
fn row_column(index: &LineIndex, source: &str, byte: usize) -> String {
    let p = index.position(byte, source);
    format!("{}:{}", p.row, p.column)
}

fn kind(kind: BindingKind) -> &'static str {
    match kind {
        BindingKind::Assign => "assign",
        BindingKind::AugAssign => "augassign",
        BindingKind::LoopTarget => "loop-target",
        BindingKind::Parameter => "parameter",
        BindingKind::WithTarget => "with-target",
        BindingKind::Definition => "definition",
    }
}

fn unindent(text: &str) -> String {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let indent = text.lines().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    text.lines().map(|l| if l.len() >= indent { &l[indent..] } else { l.trim_start() }).collect::<Vec<_>>().join("\n") + "\n"
}

#[test]
fn a_comprehension_target_is_seen_only_inside_the_comprehension() {
    check(
        "loss",
        r#"
        def step(loss, parts):
            items = [loss.item() for loss in parts]
            total = sum(loss for loss in parts)
            return loss
        "#,
        expect![[r#"
            2:14 -> 2:26 loop-target
            2:30 -> 2:26 loop-target
            3:17 -> 3:22 loop-target
            3:26 -> 3:22 loop-target
            4:12 -> 1:10 parameter
        "#]],
    );
}

#[test]
fn dict_and_set_comprehensions_and_nested_clauses_have_their_own_scope() {
    check(
        "x",
        r#"
        x = load()
        squares = {x: x * x for x in range(3)}
        pairs = {(x, y) for y in range(3) for x in range(y)}
        print(x)
        "#,
        expect![[r#"
            1:1 -> unbound
            2:12 -> 2:21 loop-target
            2:15 -> 2:21 loop-target
            2:19 -> 2:21 loop-target
            2:25 -> 2:21 loop-target
            3:11 -> 3:35 loop-target
            3:39 -> 3:35 loop-target
            4:7 -> 1:1 assign
        "#]],
    );
}

#[test]
fn a_lambda_parameter_shadows_the_name_only_inside_the_lambda() {
    check(
        "model",
        r#"
        def main(model, x):
            score = lambda model, *args: model(*args)
            keyed = lambda y, model=model: model
            return model(x)
        "#,
        expect![[r#"
            2:20 -> 1:10 parameter
            2:34 -> 2:20 parameter
            3:23 -> 1:10 parameter
            3:29 -> 1:10 parameter
            3:36 -> 3:23 parameter
            4:12 -> 1:10 parameter
        "#]],
    );
}

#[test]
fn a_class_body_binds_in_its_own_scope() {
    check(
        "enc",
        r#"
        enc = Encoder()

        class Report:
            enc = "utf-8"
            label = enc.upper()

            def show(self, x):
                return enc(x)

        print(enc)
        "#,
        expect![[r#"
            1:1 -> unbound
            4:5 -> 1:1 assign
            5:13 -> 4:5 assign
            8:16 -> 1:1 assign
            10:7 -> 1:1 assign
        "#]],
    );
}

#[test]
fn a_class_in_a_function_sees_the_function_and_methods_are_not_globals() {
    check(
        "train",
        r#"
        def build(train):
            class Wrapper:
                mode = train

                def train(self):
                    return train

            return Wrapper

        train(build)
        "#,
        expect![[r#"
            3:16 -> 1:11 parameter
            6:20 -> 1:11 parameter
            10:1 -> unbound
        "#]],
    );
}

/// A method defined twice (one per library version, under `if`) is looked up as its last
/// definition, in every run: a node's id is its address, so an order taken from a map
/// keyed by ids changed from run to run (a finding in PyTorch-Encoding came and went).
#[test]
fn a_method_defined_twice_is_its_last_definition_every_time() {
    let source = "import torch\n\nclass P(torch.nn.Module):\n    if torch.__version__ < '0.4':\n        def forward(self, x):\n            return x\n    else:\n        def forward(self, x):\n            return -x\n";
    for _ in 0..32 {
        let parsed = parse(source);
        let model = SemanticModel::new(&parsed.tree, source);
        let forward = model.method_of("P", "forward").expect("P.forward");
        assert_eq!(forward.start_position().row, 7, "the definition under `else`");
        let order: Vec<usize> = model.functions().map(|f| f.node.start_byte()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "functions come in source order: {order:?}");
    }
}

/// One line per function: where it is defined, and where each call the model resolves to
/// it is (`SemanticModel::calls_of_function`).
fn check_callers(source: &str, expect: Expect) {
    let source = unindent(source);
    let parsed = parse(&source);
    let model = SemanticModel::new(&parsed.tree, &source);
    let index = LineIndex::new(&source);
    let at = |byte: usize| row_column(&index, &source, byte);
    let mut actual = String::new();
    for function in model.functions() {
        let calls: Vec<String> = model.calls_of_function(function).iter().map(|c| at(c.start_byte())).collect();
        actual.push_str(&format!("{} {} <- [{}]\n", at(function.node.start_byte()), function.name, calls.join(", ")));
    }
    expect.assert_eq(&actual);
}

#[test]
fn a_name_defined_twice_has_its_calls_split_by_the_binding_each_sees() {
    // Copies of a script in one file: a module-level call sees the definition before it,
    // a call in a function body the last one; `self.step` and `net.step` the method of
    // the receiver's class (an instance of a module class), `Net.step` a method of the
    // class named so.
    check_callers(
        r#"
        import torch.nn as nn
        def run():
            pass
        run()
        def run():
            pass
        run()
        def main():
            run()
        class Net(nn.Module):
            def __init__(self):
                self.step()
            def step(self):
                pass
        class Other:
            def step(self):
                self.step()
        net = Net()
        net.step()
        Net.step(net)
        Other().step()
        "#,
        expect![[r#"
            2:1 run <- [4:1]
            5:1 run <- [7:1, 9:5]
            8:1 main <- []
            11:5 __init__ <- [18:7]
            13:5 step <- [12:9, 19:1, 20:1]
            16:5 step <- [17:9]
        "#]],
    );
}
