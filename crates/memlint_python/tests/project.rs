//! `ModuleSummary` and `ProjectResolver` over an in-memory project (no files): what a
//! summary records, and how names resolve through re-exports, star imports, bases,
//! factories and cycles.

use std::collections::HashMap;
use std::sync::Arc;

use memlint_python::project::{scan_imports, StoreKind};
use memlint_python::{parse, ModuleLoader, ModuleSummary, ProjectIndex, ProjectResolver, Symbol};

/// Modules by path (`pkg/models.py`); `resolve_module` follows Python's rules on them.
struct Memory(HashMap<String, String>);

impl Memory {
    fn new(files: &[(&str, &str)]) -> Memory {
        Memory(files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect())
    }
    fn module_at(&self, dir: &str, parts: &[&str]) -> Option<String> {
        let base = if dir.is_empty() { parts.join("/") } else if parts.is_empty() { dir.to_owned() } else { format!("{dir}/{}", parts.join("/")) };
        let file = format!("{base}.py");
        if !parts.is_empty() && self.0.contains_key(&file) {
            return Some(file);
        }
        let init = if base.is_empty() { "__init__.py".to_owned() } else { format!("{base}/__init__.py") };
        self.0.contains_key(&init).then_some(init)
    }
}

impl ModuleLoader for Memory {
    fn resolve_module(&self, from: &str, dotted: &str) -> Option<String> {
        let dots = dotted.len() - dotted.trim_start_matches('.').len();
        let parts: Vec<&str> = dotted[dots..].split('.').filter(|p| !p.is_empty()).collect();
        let mut dir: Vec<&str> = from.split('/').collect();
        dir.pop();
        if dots == 0 {
            return self.module_at("", &parts);
        }
        for _ in 1..dots {
            dir.pop()?;
        }
        self.module_at(&dir.join("/"), &parts)
    }
    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        let text = self.0.get(key)?;
        let parsed = parse(text);
        Some(Arc::new(ModuleSummary::new(&parsed.tree, text)))
    }
    fn candidate_callers(&self, _key: &str, name: &str) -> Vec<String> {
        self.0.iter().filter(|(_, t)| t.contains(name)).map(|(k, _)| k.clone()).collect()
    }
}

fn is_module(symbol: Option<Symbol>) -> Option<bool> {
    match symbol? {
        Symbol::Class { is_module, .. } => Some(is_module),
        _ => None,
    }
}

#[test]
fn classes_resolve_through_reexports_star_imports_and_base_chains() {
    let project = Memory::new(&[
        ("pkg/__init__.py", "from .models import Generator\nfrom .nets import *\n"),
        ("pkg/base.py", "import torch\nclass Base(torch.nn.Module):\n    pass\n"),
        ("pkg/models.py", "from .base import Base\nfrom torch import nn\nclass Generator(Base):\n    pass\nclass Plain:\n    pass\nclass Loop(Loop2):\n    pass\nclass Loop2(Loop):\n    pass\n"),
        ("pkg/nets.py", "import torch.nn as nn\n__all__ = ['Enc']\nclass Enc(nn.Conv2d):\n    pass\nclass Hidden(nn.Module):\n    pass\n"),
        ("train.py", "from pkg import Generator, Enc\n"),
    ]);
    let train = ProjectResolver::new(&project, "train.py");
    assert_eq!(is_module(train.symbol("pkg.Generator")), Some(true), "re-export, then a base in another module");
    assert_eq!(is_module(train.symbol("pkg.Enc")), Some(true), "a star import with __all__, a torch.nn base");
    assert_eq!(train.symbol("pkg.Hidden"), None, "not in __all__: the star import does not bring it");
    assert_eq!(is_module(train.symbol("pkg.models.Plain")), Some(false));
    assert_eq!(is_module(train.symbol("pkg.models.Loop")), Some(false), "a cycle of bases ends");
    assert_eq!(train.symbol("torch.nn.Linear"), None, "a library's name is not the project's");
    assert_eq!(train.symbol("pkg.models"), Some(Symbol::Module));
    let models = ProjectResolver::new(&project, "pkg/models.py");
    assert_eq!(is_module(models.symbol(".nets.Enc")), Some(true), "relative");
    assert_eq!(is_module(models.symbol("..pkg.models.Generator")), Some(true), "two dots: the folder above the package");
    assert_eq!(models.symbol("...pkg.models.Generator"), None, "above the top: unknown");
    let read = train.modules_read();
    assert!(read.contains(&"pkg/__init__.py".to_owned()) && read.contains(&"pkg/base.py".to_owned()), "{read:?}");
}

#[test]
fn factories_and_storing_methods() {
    let project = Memory::new(&[
        ("zoo.py", "import torch.nn as nn\nimport torchvision\nclass Net(nn.Module):\n    pass\ndef build():\n    m = Net()\n    return m.cuda()\ndef wrap():\n    return build()\ndef tv():\n    return torchvision.models.resnet18()\ndef config():\n    return dict()\n"),
        ("meters.py", "HISTORY = []\nclass Meter:\n    def update(self, val, n=1):\n        self.sum += val * n\n    def safe(self, val):\n        self.sum += val.item()\n    def rebinds(self, val):\n        val = float(val)\n        self.sum += val\ndef log(x):\n    HISTORY.append(x)\ndef local(x):\n    items = []\n    items.append(x)\n"),
        ("train.py", "from zoo import build\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    let returns = |q: &str| match r.symbol(q) {
        Some(Symbol::Function { returns_module, .. }) => returns_module,
        other => panic!("{q}: {other:?}"),
    };
    assert!(returns("zoo.build") && returns("zoo.wrap") && returns("zoo.tv"));
    assert!(!returns("zoo.config"));
    let Some(Symbol::Class { methods, .. }) = r.symbol("meters.Meter") else { panic!() };
    let update = methods.iter().find(|m| m.name == "update").unwrap();
    // Both arguments are added in (`n` too: the rule asks whether the argument passed has history).
    assert_eq!(update.stores.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["val", "n"]);
    assert_eq!((update.stores[0].position, update.stores[0].kind, update.stores[0].into.as_str()), (0, StoreKind::Accumulates, "self.sum"));
    assert!(methods.iter().find(|m| m.name == "safe").unwrap().stores.is_empty(), "a number is stored");
    assert!(methods.iter().find(|m| m.name == "rebinds").unwrap().stores.is_empty(), "the argument was replaced");
    let stores = |q: &str| match r.symbol(q) {
        Some(Symbol::Function { summary, .. }) => summary.stores.len(),
        other => panic!("{q}: {other:?}"),
    };
    assert_eq!(stores("meters.log"), 1, "a module-level list outlives the call");
    assert_eq!(stores("meters.local"), 0, "a local list does not");
}

/// `Net.from_name(cfg)`: a method called on a project class itself. A classmethod that
/// returns `cls(...)`, or another classmethod's result through `cls.other(...)`, builds an
/// instance of the class.
#[test]
fn classmethods_called_on_a_project_class_are_factories() {
    let project = Memory::new(&[
        (
            "zoo.py",
            "import torch.nn as nn\nclass Net(nn.Module):\n    @classmethod\n    def from_name(klass, name):\n        model = klass(4)\n        return model\n\n    @classmethod\n    def from_pretrained(cls, name):\n        model = cls.from_name(name)\n        model.load()\n        return model\n\n    @staticmethod\n    def names():\n        return ['a']\n\nclass Config:\n    @classmethod\n    def load(cls):\n        return cls()\n",
        ),
        ("train.py", "from zoo import Net, Config\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    let returns = |q: &str| match r.symbol(q) {
        Some(Symbol::Function { returns_module, .. }) => returns_module,
        other => panic!("{q}: {other:?}"),
    };
    assert!(returns("zoo.Net.from_name"), "`klass(4)`: the first parameter of a classmethod is its class");
    assert!(returns("zoo.Net.from_pretrained"), "through `cls.from_name(...)`");
    assert!(!returns("zoo.Net.names"));
    assert!(!returns("zoo.Config.load"), "an instance of a class that is no module");
    assert_eq!(r.symbol("zoo.Net.missing"), None, "no such method");
}

#[test]
fn classes_whose_init_loads_a_pretrained_network_they_never_freeze() {
    let project = Memory::new(&[
        (
            "losses.py",
            concat!(
                "import torch\n",
                "import torch.nn as nn\n",
                "from torchvision import models as tvm\n",
                "from transformers import AutoModel, AutoTokenizer\n",
                "class VGGLoss(nn.Module):\n",
                "    def __init__(self):\n",
                "        super().__init__()\n",
                "        self.vgg = tvm.vgg19(pretrained=True).features[:16]\n",
                "class Frozen(nn.Module):\n",
                "    def __init__(self):\n",
                "        super().__init__()\n",
                "        self.vgg = tvm.vgg19(weights='DEFAULT')\n",
                "        self.vgg.requires_grad_(False)\n",
                "class NoGrad(nn.Module):\n",
                "    def __init__(self):\n",
                "        self.enc = AutoModel.from_pretrained('bert-base-uncased')\n",
                "    def forward(self, x):\n",
                "        with torch.no_grad():\n",
                "            return self.enc(x)\n",
                "class Scratch(nn.Module):\n",
                "    def __init__(self):\n",
                "        self.vgg = tvm.vgg19()\n",
                "class Text(nn.Module):\n",
                "    def __init__(self):\n",
                "        self.tok = AutoTokenizer.from_pretrained('bert-base-uncased')\n",
                "class Hub(nn.Module):\n",
                "    def __init__(self):\n",
                "        self.net = torch.hub.load('pytorch/vision', 'resnet18')\n",
            ),
        ),
        ("train.py", "from losses import VGGLoss\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    let pretrained = |q: &str| match r.symbol(q) {
        Some(Symbol::Class { pretrained, .. }) => pretrained,
        other => panic!("{q}: {other:?}"),
    };
    assert_eq!(pretrained("losses.VGGLoss").as_deref(), Some("tvm.vgg19"));
    assert_eq!(pretrained("losses.Frozen"), None, "frozen with requires_grad_");
    assert_eq!(pretrained("losses.NoGrad"), None, "run under no_grad");
    assert_eq!(pretrained("losses.Scratch"), None, "no weights loaded");
    assert_eq!(pretrained("losses.Text"), None, "a tokenizer is no network");
    assert_eq!(pretrained("losses.Hub").as_deref(), Some("torch.hub.load"));
}

#[test]
fn callers_elsewhere_with_their_gradient_context() {
    let project = Memory::new(&[
        ("evaluation.py", "def score(m, loader):\n    return [m(x) for x in loader]\n"),
        ("a.py", "import torch\nfrom evaluation import score\nwith torch.no_grad():\n    score(m, l)\n@torch.inference_mode()\ndef f():\n    score(m, l)\n"),
        ("b.py", "import evaluation as ev\ndef g():\n    ev.score(m, l)\n"),
        ("c.py", "def score():\n    pass\nscore()\n"),
    ]);
    let r = ProjectResolver::new(&project, "evaluation.py");
    let mut calls = r.external_calls("score");
    calls.sort();
    assert_eq!(calls, [false, true, true], "two in a.py without gradients, one in b.py with; c.py's own score is another function");
}

#[test]
fn method_calls_elsewhere_on_instances_of_the_class() {
    let project = Memory::new(&[
        ("ddpm.py", "class DDPM:\n    def sample(self, n):\n        return self.net(n)\nclass Other:\n    def sample(self, n):\n        pass\n"),
        // `ddpm` holds a DDPM (through `.to(dev)`); sampled without gradients, then with.
        ("a.py", "import torch\nfrom ddpm import DDPM\nddpm = DDPM().to(dev)\nwith torch.no_grad():\n    ddpm.sample(8)\ndef f():\n    ddpm.sample(1)\n"),
        // Through a module import; `model` holds an instance of one of two classes: a
        // call of the method of either.
        ("b.py", "import torch\nimport ddpm as d\n@torch.no_grad()\ndef g():\n    m = d.DDPM()\n    m.sample(2)\n    model = d.DDPM()\n    model = d.Other()\n    model.sample(3)\n"),
        // Another class's method of the same name.
        ("c.py", "from ddpm import Other\no = Other()\no.sample(4)\n"),
    ]);
    let r = ProjectResolver::new(&project, "ddpm.py");
    let mut calls = r.external_calls("DDPM.sample");
    calls.sort();
    assert_eq!(calls, [false, true, true, true], "a.py: one without gradients, one with; b.py: two without");
    let mut other = r.external_calls("Other.sample");
    other.sort();
    assert_eq!(other, [false, true], "c.py's call, and b.py's `model`, which may hold an `Other`");
}

#[test]
fn summaries_record_imports_star_imports_all_and_conditional_definitions() {
    let text = "from . import a\nfrom .. import b\nfrom .c import d as e\nimport f.g\nimport h as i\nfrom j import *\n__all__ = ['X']\n__all__ += ['Y']\ntry:\n    from k import X\nexcept ImportError:\n    X = None\nif True:\n    class Y:\n        pass\n";
    let parsed = parse(text);
    let s = ModuleSummary::new(&parsed.tree, text);
    assert_eq!(s.import("a"), Some(".a"));
    assert_eq!(s.import("b"), Some("..b"));
    assert_eq!(s.import("e"), Some(".c.d"));
    assert_eq!(s.import("f"), Some("f"));
    assert_eq!(s.import("i"), Some("h"));
    assert_eq!(s.import("X"), Some("k.X"));
    assert_eq!(s.star_imports, ["j"]);
    assert_eq!(s.all.as_deref(), Some(&["X".to_owned(), "Y".to_owned()][..]));
    assert!(s.class("Y").is_some());
}

#[test]
fn import_scan_finds_names_and_modules_without_parsing() {
    let text = "import torch, numpy as np\nfrom .models import (\n    Generator as G,  # comment\n    Critic,\n)\nfrom nets import *\nx = 1\n";
    let imports = scan_imports(text);
    let modules: Vec<&str> = imports.iter().map(|i| i.module).collect();
    assert_eq!(modules, ["torch", "numpy", ".models", "nets"]);
    assert_eq!(imports[1].locals, [("numpy".to_owned(), "np")]);
    assert_eq!(imports[2].locals, [(".models.Generator".to_owned(), "G"), (".models.Critic".to_owned(), "Critic")]);
    assert!(imports[3].star);
}

#[test]
fn a_factory_says_what_it_returns() {
    let project = Memory::new(&[
        ("factory.py", "import torch\nimport torch.nn as nn\ndef criterion():\n    return nn.CrossEntropyLoss()\ndef opt(m):\n    return torch.optim.Adam(m.parameters())\ndef net():\n    return nn.Linear(2, 2)\ndef either(flag):\n    if flag:\n        return nn.Linear(2, 2)\n    return nn.MSELoss()\n"),
        ("train.py", "from factory import criterion\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    let returns = |q: &str| match r.symbol(q) {
        Some(Symbol::Function { returns, .. }) => returns,
        other => panic!("{q}: {other:?}"),
    };
    use memlint_python::Returned;
    assert_eq!(returns("factory.criterion"), Some(Returned::Loss));
    assert_eq!(returns("factory.opt"), Some(Returned::Optimizer));
    assert_eq!(returns("factory.net"), Some(Returned::Network));
    assert_eq!(returns("factory.either"), None, "two kinds: unknown");
}

#[test]
fn calls_of_a_method_on_instances_in_other_modules() {
    let project = Memory::new(&[
        ("models/__init__.py", "from .vae import *\n"),
        ("models/vae.py", "import torch\nfrom torch import nn\nclass VAE(nn.Module):\n    def sample(self, n):\n        return self.fc(torch.randn(n, 4))\n"),
        ("run.py", "from models.vae import VAE\nm = VAE()\ny = m.sample(8)\nprint(y)\n"),
        ("tests/test_vae.py", "import unittest\nfrom models import VAE\nclass T(unittest.TestCase):\n    def setUp(self):\n        self.model = VAE()\n    def test_sample(self):\n        y = self.model.sample(8)\n        print(y.shape)\n"),
    ]);
    let r = ProjectResolver::new(&project, "models/vae.py");
    let mut sites = r.external_call_sites("VAE.sample");
    sites.sort();
    // (gradients disabled, result kept) for each call elsewhere.
    assert_eq!(sites, [(false, false), (false, false)]);
}

#[test]
fn a_package_attribute_is_the_class_its_init_binds_and_subclasses_are_followed() {
    let project = Memory::new(&[
        // `parallel.DataParallelModel` is bound by the package's __init__, though a submodule
        // of the same name exists.
        ("lib/parallel/__init__.py", "from .DataParallelModel import DataParallelModel\n"),
        ("lib/parallel/DataParallelModel.py", "import torch\nclass DataParallelModel(torch.nn.DataParallel):\n    pass\nclass Plain:\n    pass\n"),
        ("train.py", "from lib import parallel\nnet = parallel.DataParallelModel(model)\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    assert!(matches!(r.symbol("lib.parallel.DataParallelModel"), Some(Symbol::Class { .. })));
    assert!(r.class_derives_from("lib.parallel.DataParallelModel", &["torch.nn.DataParallel"]));
    assert!(!r.class_derives_from("lib.parallel.DataParallelModel", &["torch.nn.parallel.DistributedDataParallel"]));
    assert!(!r.class_derives_from("lib.parallel.DataParallelModel.Plain", &["torch.nn.DataParallel"]), "no such subclass");
}

#[test]
fn what_a_function_returns_by_its_last_method_and_stores_through_getattr() {
    let project = Memory::new(&[
        ("utils.py", "def to_np(t):\n    return t.cpu().detach().numpy()\ndef mixed(t, f):\n    if f:\n        return t.item()\n    return t.numpy()\nclass Storage:\n    def feed(self, data):\n        for k, v in data.items():\n            getattr(self, k).append(v)\n"),
        ("train.py", "from utils import to_np\n"),
    ]);
    let r = ProjectResolver::new(&project, "train.py");
    let summary = |q: &str| match r.symbol(q) {
        Some(Symbol::Function { summary, .. }) => summary,
        other => panic!("{q}: {other:?}"),
    };
    assert_eq!(summary("utils.to_np").returns_method.as_deref(), Some("numpy"));
    assert_eq!(summary("utils.mixed").returns_method, None, "two methods: unknown");
    let Some(Symbol::Class { methods, .. }) = r.symbol("utils.Storage") else { panic!() };
    let feed = methods.iter().find(|m| m.name == "feed").unwrap();
    assert_eq!(feed.stores.iter().map(|s| (s.name.as_str(), s.kind)).collect::<Vec<_>>(), [("data", StoreKind::Appends)]);
}

#[test]
fn a_library_name_brought_by_a_star_import_of_a_project_module() {
    let project = Memory::new(&[
        ("model_3d.py", "import torch.nn as nn\nfrom torch.nn import DataParallel as DP\n_hidden = nn\nclass Net(nn.Module):\n    pass\n"),
        ("main.py", "from model_3d import *\nmodel = nn.DataParallel(Net())\n"),
    ]);
    let r = ProjectResolver::new(&project, "main.py");
    assert_eq!(r.star_imported_external("nn").as_deref(), Some("torch.nn"));
    assert_eq!(r.star_imported_external("DP").as_deref(), Some("torch.nn.DataParallel"));
    assert_eq!(r.star_imported_external("Net"), None, "a project class, not a library name");
    assert_eq!(r.star_imported_external("_hidden"), None, "a star import skips private names");
    assert_eq!(r.star_imported_external("absent"), None);
}

#[test]
fn a_class_whose_forward_runs_its_submodules_only_under_no_grad() {
    let project = Memory::new(&[
        (
            "mtcnn.py",
            "import torch\nfrom torch import nn\nclass PNet(nn.Module):\n    pass\n\
             def detect_face(img, pnet):\n    return pnet(img)\n\
             class MTCNN(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pnet = PNet()\n        self.size = 160\n\
             \n    def forward(self, img):\n        boxes = self.detect(img)\n        return self.extract(img, boxes, self.size)\n\
             \n    def detect(self, img):\n        with torch.no_grad():\n            return detect_face(img, self.pnet)\n\
             \n    def extract(self, img, boxes, size):\n        return img[:, :size]\n\
             class Leaky(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pnet = PNet()\n\
             \n    def forward(self, img):\n        with torch.no_grad():\n            a = self.pnet(img)\n        return self.pnet(a)\n",
        ),
        ("run.py", "from mtcnn import MTCNN\n"),
    ]);
    let r = ProjectResolver::new(&project, "run.py");
    let runs_without_grad = |q: &str| match r.symbol(q) {
        Some(Symbol::Class { methods, submodules, .. }) => memlint_python::project::forward_runs_submodules_without_grad(&methods, &submodules),
        other => panic!("{q}: {other:?}"),
    };
    assert!(runs_without_grad("mtcnn.MTCNN"), "self.pnet is handed on only inside the block, through self.detect");
    assert!(!runs_without_grad("mtcnn.Leaky"), "the second call of self.pnet records a graph");
    assert!(!runs_without_grad("mtcnn.PNet"), "no forward of its own: nothing seen");
}

fn holds_no_parameters(symbol: Option<Symbol>) -> Option<bool> {
    match symbol? {
        Symbol::Class { holds_no_parameters, .. } => Some(holds_no_parameters),
        _ => None,
    }
}

/// A module class holds no parameter when it stores only constants, buffers, arguments
/// with constant defaults and layers without parameters, and its bases hold none: across
/// modules, through a base of the project.
#[test]
fn module_classes_that_hold_no_parameters() {
    let project = Memory::new(&[
        (
            "nets.py",
            "import torch\nimport torch.nn as nn\n\
             class Normalize(nn.Module):\n    def __init__(self, mean=None, size=224):\n        super().__init__()\n        self.size = size\n        self.register_buffer('mean', torch.tensor(mean).view(1, 3, 1, 1))\n        self.up = nn.Upsample((size, size)) if size else None\n\
             class Permute(Normalize):\n    def forward(self, x):\n        return x[:, self.mean]\n\
             class Affine(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(3))\n\
             class Conv(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pad = nn.ReflectionPad2d(1)\n        self.conv = nn.Conv2d(3, 3, 3)\n\
             class Handed(nn.Module):\n    def __init__(self, body):\n        super().__init__()\n        self.body = body\n\
             class OverAffine(Affine):\n    pass\n",
        ),
        ("train.py", "from nets import Normalize, Permute, Affine, Conv, Handed, OverAffine\n"),
    ]);
    let train = ProjectResolver::new(&project, "train.py");
    assert_eq!(holds_no_parameters(train.symbol("nets.Normalize")), Some(true), "a buffer, a constant, a padding layer");
    assert_eq!(holds_no_parameters(train.symbol("nets.Permute")), Some(true), "through its base");
    assert_eq!(holds_no_parameters(train.symbol("nets.Affine")), Some(false), "an nn.Parameter");
    assert_eq!(holds_no_parameters(train.symbol("nets.Conv")), Some(false), "a convolution");
    assert_eq!(holds_no_parameters(train.symbol("nets.Handed")), Some(false), "an argument handed in may be a network");
    assert_eq!(holds_no_parameters(train.symbol("nets.OverAffine")), Some(false), "a base that holds one");
}
