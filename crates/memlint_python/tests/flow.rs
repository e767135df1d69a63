//! Where a value goes (`SemanticModel::fate`): a forward pass's output followed through the
//! names and containers it flows into, the expressions computed from it and the local
//! functions it is handed to, to a `backward()`, out of its function, or nowhere. Each test
//! prints the fate of one call as a word.

use memlint_python::{parse, Fate, NodeExt, SemanticModel};

/// The fate of the call spelled `call`, as a word.
fn fate(source: &str, call: &str) -> &'static str {
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let node = model.calls().iter().copied().find(|c| model.text(*c) == call).unwrap_or_else(|| panic!("no call `{call}`"));
    assert_eq!(node.kind_name(), "call");
    match model.fate(node) {
        Fate::Backward(_) => "backward",
        Fate::Returned(_) => "returned",
        Fate::Stored(_) => "stored",
        Fate::Handed(_) => "handed",
        Fate::Consumed => "consumed",
    }
}

const HEADER: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\nnet = nn.Linear(4, 4)\n";

fn with_header(body: &str) -> String {
    format!("{HEADER}{body}")
}

#[test]
fn an_output_assigned_on_to_a_name_twice_is_followed_from_the_first_assignment() {
    // `loss` is assigned from `out` twice; the backward between the two assignments counts.
    let source = with_header(
        "
def step(x, y):
    out = net(x)
    loss = F.mse_loss(out, y)
    loss.backward()
    loss = F.l1_loss(out, y)
    print(loss.item())
",
    );
    assert_eq!(fate(&source, "net(x)"), "backward");
}

#[test]
fn an_output_only_printed_is_consumed() {
    let source = with_header(
        "
def step(x, y):
    out = net(x)
    loss = F.mse_loss(out, y)
    print(loss.item())
    other = net(y)
    other.sum().backward()
",
    );
    assert_eq!(fate(&source, "net(x)"), "consumed");
    assert_eq!(fate(&source, "net(y)"), "backward");
}

#[test]
fn a_rebound_name_no_longer_holds_the_value() {
    // `out` is bound again before its backward: the first output never reaches it.
    let source = with_header(
        "
def step(x, y):
    out = net(x)
    print(out.mean().item())
    out = net(y)
    out.sum().backward()
",
    );
    assert_eq!(fate(&source, "net(x)"), "consumed");
    assert_eq!(fate(&source, "net(y)"), "backward");
}

#[test]
fn in_a_loop_a_use_before_the_binding_sees_the_previous_iteration_unless_bound_again() {
    let carried = with_header(
        "
def train(loader):
    prev = None
    for x in loader:
        if prev is not None:
            prev.sum().backward()
        prev = net(x)
",
    );
    assert_eq!(fate(&carried, "net(x)"), "backward");
    // The preview's `loss` is bound again at the top of each step: its value never reaches
    // the next step's backward.
    let rebound = with_header(
        "
def train(loader, fixed):
    for i, x in enumerate(loader):
        loss = net(x).sum()
        loss.backward()
        if i % 10 == 0:
            loss = net(fixed).sum()
            print(loss.item())
",
    );
    assert_eq!(fate(&rebound, "net(fixed)"), "consumed");
    assert_eq!(fate(&rebound, "net(x)"), "backward");
}

#[test]
fn returned_and_stored_outputs_escape() {
    let source = with_header(
        "
class Holder:
    def run(self, x):
        self.last = net(x)

def predict(x):
    return net(x)

def predict_one(x):
    out = net(x + 1)
    return out, 3
",
    );
    assert_eq!(fate(&source, "net(x)"), "stored");
    assert_eq!(fate(&source, "net(x + 1)"), "returned");
    let source = with_header("\ndef predict(x):\n    return net(x)\n");
    assert_eq!(fate(&source, "net(x)"), "returned");
}

#[test]
fn what_leaves_without_history_is_consumed() {
    // Returned as class indices or a number: nothing with history leaves.
    let source = with_header(
        "
def classify(x):
    return net(x).argmax(1)

def accuracy(x, y):
    out = net(x + 2)
    return (out.argmax(1) == y).float().mean().item()

def as_numpy(x):
    return net(x * 3).detach().cpu().numpy()
",
    );
    assert_eq!(fate(&source, "net(x)"), "consumed");
    assert_eq!(fate(&source, "net(x + 2)"), "consumed");
    assert_eq!(fate(&source, "net(x * 3)"), "consumed");
}

#[test]
fn a_detached_value_that_reaches_a_backward_belongs_to_the_training_step() {
    // A target network's detached output used in the loss: part of the step.
    let source = with_header(
        "
def step(x, y, target_net):
    target = net(y).detach()
    loss = F.mse_loss(net(x), target)
    loss.backward()
",
    );
    assert_eq!(fate(&source, "net(y)"), "backward");
}

#[test]
fn containers_are_followed() {
    let source = with_header(
        "
def rollout(states):
    log_probs = []
    for s in states:
        log_probs.append(net(s))
    loss = -torch.stack(log_probs).sum()
    loss.backward()

def collect(states):
    outs = {}
    for i, s in enumerate(states):
        outs[i] = net(s * 2)
    print(len(outs))
",
    );
    assert_eq!(fate(&source, "net(s)"), "backward");
    assert_eq!(fate(&source, "net(s * 2)"), "consumed");
}

#[test]
fn local_functions_are_followed_into() {
    let source = with_header(
        "
def regularizer(t):
    return t.pow(2).mean()

def backprop(t):
    t.sum().backward()

def keep(t, store):
    store.append(t)

def smoke(x):
    out = net(x)
    print(regularizer(out))
    backprop(net(x + 1))
    keep(net(x + 2), [])
",
    );
    assert_eq!(fate(&source, "net(x)"), "consumed");
    assert_eq!(fate(&source, "net(x + 1)"), "backward");
    // Put into a list the caller made: the function cannot tell it is dropped.
    assert_eq!(fate(&source, "net(x + 2)"), "stored");
}

#[test]
fn library_functions_read_or_compute() {
    let source = with_header(
        "
import torchvision

def preview(z):
    fake = net(z)
    torchvision.utils.save_image(fake, 'out.png')
    arr = np.asarray(F.softmax(net(z + 1), 1).cpu())
    print(arr)
",
    );
    assert_eq!(fate(&source, "net(z)"), "consumed");
    assert_eq!(fate(&source, "net(z + 1)"), "consumed");
}

#[test]
fn unknown_code_may_keep_it() {
    let source = with_header(
        "
import somelib

def run(x, sink):
    out = net(x)
    sink.consume(out)
    somelib.process(net(x + 1))
",
    );
    assert_eq!(fate(&source, "net(x)"), "handed");
    assert_eq!(fate(&source, "net(x + 1)"), "handed");
}

#[test]
fn a_name_saying_log_is_not_a_logging_call_when_the_library_is_known() {
    // `F.log_softmax` computes from its argument (a library memlint models); only an unseen
    // function whose name says it logs is taken to read.
    let source = with_header(
        "
def forward_like(x):
    y = net(x)
    return F.log_softmax(y, dim=1)
",
    );
    assert_eq!(fate(&source, "net(x)"), "returned");
}

#[test]
fn a_container_parameter_is_followed_into_the_callers_container() {
    // `def body(x, preds): preds.append(net(x))`, called with a list the caller builds:
    // the output goes where the caller's list goes.
    let source = with_header(
        "
def body(x, preds):
    preds.append(net(x))

def body2(x, grads):
    grads.append(net(x + 1))

def evaluate(xs):
    preds = []
    for x in xs:
        body(x, preds)
    print(len(preds))

def train(xs):
    grads = []
    for x in xs:
        body2(x, grads)
    torch.stack(grads).sum().backward()
",
    );
    assert_eq!(fate(&source, "net(x)"), "consumed");
    assert_eq!(fate(&source, "net(x + 1)"), "backward");
}

#[test]
fn a_container_parameter_of_a_function_no_one_here_calls_is_out_of_sight() {
    let source = with_header(
        "
def body(x, preds):
    preds.append(net(x))
",
    );
    assert_eq!(fate(&source, "net(x)"), "stored");
}

#[test]
fn a_wrapper_only_unwrapped_runs_no_forward() {
    let source = "\
import torch
from torch import nn

def demo(args):
    model = torch.nn.DataParallel(nn.Linear(2, 2))
    model.load_state_dict(torch.load(args.model))
    model = model.module
    model.to(\"cuda\")
    model(torch.zeros(2))

def train(x):
    net = torch.nn.DataParallel(nn.Linear(2, 2))
    if x:
        net = net.cuda()
    net.eval()
    net(x)

class Loss:
    def __init__(self):
        self.losses = torch.nn.DataParallel(nn.ModuleList())

    def get(self):
        return self.losses.module

def demo_passes_it_on(args, test):
    model = torch.nn.DataParallel(nn.Linear(2, 2)).cuda()
    model.load_state_dict(torch.load(args.model))
    test(model.eval(), args)
";
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let wrappers: Vec<bool> = model
        .calls()
        .iter()
        .filter(|c| c.field("function").is_some_and(|f| model.text(f) == "torch.nn.DataParallel"))
        .map(|c| model.module_may_run_forward(*c))
        .collect();
    // The last goes on, through `model.eval()`, to a function that may call it.
    assert_eq!(wrappers, [false, true, false, true]);
}

#[test]
fn a_test_cases_assertions_only_read() {
    let in_test_case = with_header(
        "import unittest\nclass T(unittest.TestCase):\n    def test_shape(self):\n        y = net(torch.randn(1, 4))\n        self.assertEqual(y.shape, (1, 4))\n",
    );
    assert_eq!(fate(&in_test_case, "net(torch.randn(1, 4))"), "consumed");
    // The same method name on a class that is no TestCase is unknown code.
    let elsewhere = with_header(
        "class Checker:\n    def run(self):\n        y = net(torch.randn(1, 4))\n        self.assertEqual(y, 1)\n",
    );
    assert_ne!(fate(&elsewhere, "net(torch.randn(1, 4))"), "consumed");
}
