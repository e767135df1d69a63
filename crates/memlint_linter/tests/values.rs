//! Issue 18, within one file: what each name *holds* decides, not how it is spelled.
//! One `check(input, expect)` per class of misses and false alarms (positives and
//! negatives side by side); the rule fixtures hold more cases of MEM001, MEM006, MEM011.

use expect_test::{expect, Expect};
use memlint_linter::{lint, LineIndex, LinterSettings};

fn check(source: &str, expect: Expect) {
    let source = unindent(source);
    let result = lint(&source, &LinterSettings::default());
    let index = LineIndex::new(&source);
    let mut actual = String::new();
    for d in &result.diagnostics {
        let p = index.position(d.range.start, &source);
        let head: String = d.message.chars().take(60).collect();
        actual.push_str(&format!("{}:{} {} {}\n", p.row, p.column, d.rule.code(), head));
    }
    expect.assert_eq(&actual);
}

fn unindent(text: &str) -> String {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines().map(|l| if l.len() >= indent { &l[indent..] } else { l.trim_start() }).collect::<Vec<_>>().join("\n") + "\n"
}

// ----- MEM001: a forward pass is a call of a module instance ----------------------

#[test]
fn constructors_from_imports_and_star_imports_are_not_forward_passes() {
    check(
        r#"
        import torch
        import networks
        from models import *
        from models import Generator
        from utils import convert_model

        def main(opt):
            enc = networks.ResnetEncoder(18, False)
            gen = Generator(opt)
            net = PSPNet(num_classes=21).cuda()
            net = convert_model(net)
            print(enc, gen, net)
        "#,
        expect![""],
    );
}

#[test]
fn instances_of_imported_and_star_imported_classes_are_modules() {
    check(
        r#"
        import torch
        from models import *
        from models import Generator

        def main(opt, z):
            netG = Generator(opt).cuda()
            seq = PSPNet(num_classes=21).cuda()
            seq.eval()
            print(netG(z).mean().item(), seq(z).argmax().item())
        "#,
        expect![[r#"
            9:11 MEM001 forward pass `netG(z)` in evaluation code (`main()` never ba
            9:34 MEM001 forward pass `seq(z)` in evaluation code (after `seq.eval()`
        "#]],
    );
}

#[test]
fn a_module_known_by_what_is_done_with_it() {
    check(
        r#"
        import torch
        from detectors import build

        def demo(x):
            fasterRCNN = build("vgg16")
            fasterRCNN.load_state_dict(torch.load("w.pth", map_location="cpu"))
            fasterRCNN.eval()
            boxes = fasterRCNN(x)
            return boxes.tolist()
        "#,
        expect![[r#"
            8:13 MEM001 forward pass `fasterRCNN(x)` in evaluation code (after `fast
        "#]],
    );
}

#[test]
fn methods_of_the_class_and_helpers_with_model_words_are_not_networks() {
    check(
        r#"
        import torch
        import commons

        class Solver:
            def restore_model(self, it):
                self.G.load_state_dict(torch.load(it, map_location="cpu"))

            def test(self, it):
                self.restore_model(it)
                commons.clip_grad_value_(self.G.parameters(), None)
        "#,
        expect![""],
    );
}

// ----- MEM001: evaluation by behaviour ----------------------------------------------

#[test]
fn an_inference_script_never_backpropagates() {
    check(
        r#"
        import torch
        from model import SRResNet

        srresnet = SRResNet().cuda()
        srresnet.load_state_dict(torch.load("sr.pth", map_location="cpu"))
        for path in paths:
            sr = srresnet(load(path))
            save_image(sr, path + ".png")
        "#,
        expect![[r#"
            7:10 MEM001 forward pass `srresnet(load(path))` in evaluation code (the 
        "#]],
    );
}

#[test]
fn a_helper_that_returns_the_output_to_training_is_not_evaluation() {
    check(
        r#"
        import torch

        def compute(model, x):
            return model(x)

        def keep(model, x, outputs):
            outputs.append(model(x))

        def hand_on(model, x, trainer):
            out = model(x)
            trainer.consume(out)
        "#,
        expect![""],
    );
}

#[test]
fn rl_rollouts_that_only_sample_actions_are_evaluation_but_reinforce_is_not() {
    check(
        r#"
        import torch
        from torch.distributions import Categorical

        def rollout(policy, env):
            s = env.reset()
            done = False
            while not done:
                prob = policy(s)
                a = Categorical(prob).sample().item()
                s, r, done, _ = env.step(a)

        def reinforce(policy, env, saved):
            s = env.reset()
            prob = policy(s)
            m = Categorical(prob)
            a = m.sample()
            saved.append(m.log_prob(a))
            return a.item()
        "#,
        expect![[r#"
            8:16 MEM001 forward pass `policy(s)` in evaluation code (`rollout()` nev
        "#]],
    );
}

#[test]
fn methods_of_a_module_class_are_its_forward_pass() {
    check(
        r#"
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def features(self, x):
                h = self.fc(x)
                print(h.shape)

            def forward(self, x):
                self.features(x)
                return self.fc(x)
        "#,
        expect![""],
    );
}

// ----- MEM008: where the program runs ----------------------------------------------

#[test]
fn torch_load_in_a_program_that_never_uses_a_gpu() {
    check(
        r#"
        import torch
        a = torch.load("a.pth")
        b = torch.load("b.pth")
        torch.save({k: a[k] * 0.5 + b[k] * 0.5 for k in a}, "c.pth")
        "#,
        expect![""],
    );
}

#[test]
fn torch_through_a_star_import_is_torch() {
    check(
        r#"
        from utils import *
        net = Net().cuda()
        net.load_state_dict(torch.load("snapshot.pth"))
        "#,
        expect![[r#"
            3:21 MEM008 `torch.load("snapshot.pth")` without `map_location` restores
        "#]],
    );
}
