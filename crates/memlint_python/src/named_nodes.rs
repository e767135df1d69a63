//! The named nodes of a subtree in preorder, each with where its own subtree ends: one
//! walk (`named_walk.c`), after which any walk below the root is index arithmetic.
//!
//! Why: a pass that walks by `stack.extend(node.named_children(&mut cursor))` resets the
//! cursor at every node and steps through hidden and anonymous nodes again each time;
//! a class summary walks each method body three or four times that way. Walking
//! [`NamedNodes::children`] instead visits the same nodes in the same order (the named
//! children of a node, as tree-sitter's `named_children` gives them), so a pass moved
//! onto it gives the same answers.

use std::cell::Cell;

use tree_sitter::{Node, Tree};

#[derive(Clone)]
pub struct NamedNodes<'t> {
    /// The root, then every named node below it reached through named nodes, in preorder.
    nodes: Vec<Node<'t>>,
    /// Each node's kind id, read once here: the walks over these nodes ask for kinds
    /// again and again, and each question to a node is a call into tree-sitter.
    kinds: Vec<u16>,
    /// For each node, the index one past its last descendant.
    ends: Vec<u32>,
    /// For each node, its parent's index (the root's is its own).
    parents: Vec<u32>,
    /// For each node, its start byte (what [`NamedNodes::index_of`] searches).
    starts: Vec<usize>,
    /// For each node whose parent is of a kind in [`FIELDED_KINDS`], the id of the field
    /// the parent holds it in (0: none), read in the walk: [`NamedNodes::field_of`] then
    /// asks tree-sitter nothing (whose own lookup steps through the hidden nodes that
    /// hold a field, about 600 instructions a lookup on torchtune).
    fields: Vec<u16>,
    /// Nodes recently found here or given out from here (a parent, a field, a child), by
    /// id: the walks of the model and of the summaries ask about the same nodes again and
    /// again (a call's callee, then the callee's object; the parent of the parent just
    /// given), and finding a node's index otherwise is a binary search.
    recent: [Cell<(usize, u32)>; 64],
}

/// The node kinds whose fields memlint reads most (a call's `function`, an attribute's
/// `object`): their children's fields are read in the walk. Reading every node's cost
/// about as much as it saved.
const FIELDED_KINDS: &[&str] = &[
    "call", "attribute", "assignment", "augmented_assignment", "keyword_argument", "function_definition", "class_definition",
    "decorated_definition", "for_statement", "while_statement", "if_statement", "with_item", "subscript", "binary_operator",
    "default_parameter", "typed_default_parameter", "import_from_statement", "aliased_import", "lambda", "return_statement",
];

extern "C" {
    /// `src/named_walk.c`: the named nodes of `root`'s subtree written into the lists, as
    /// [`NamedNodes::walked_by_cursor`] makes them; returns how many, or `usize::MAX`
    /// when they do not fit in `capacity`.
    fn memlint_named_walk(
        root: tree_sitter::ffi::TSNode,
        fielded: *const bool,
        kind_count: u32,
        capacity: usize,
        nodes: *mut tree_sitter::ffi::TSNode,
        kinds: *mut u16,
        ends: *mut u32,
        parents: *mut u32,
        fields: *mut u16,
        starts: *mut usize,
    ) -> usize;
}

/// For each kind id: is it one of [`FIELDED_KINDS`]?
fn fielded_kinds() -> &'static [bool] {
    static KINDS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let language = crate::language();
        (0..language.node_kind_count() as u16)
            .map(|id| language.node_kind_is_named(id) && language.node_kind_for_id(id).is_some_and(|k| FIELDED_KINDS.contains(&k)))
            .collect()
    })
}

impl<'t> NamedNodes<'t> {
    /// The named nodes of `root`'s subtree (`root` at index 0, whatever its kind). An
    /// anonymous node's subtree is not entered: `named_children` never reaches below one.
    pub fn of(root: Node<'t>) -> NamedNodes<'t> {
        // Room for every node below the root at once (tree-sitter keeps the count, the
        // anonymous nodes included): grown by doubling, the lists were copied again and
        // again, and fresh pages taken each time.
        let room = root.descendant_count();
        let fielded = fielded_kinds();
        let mut nodes: Vec<Node<'t>> = Vec::with_capacity(room);
        let mut kinds: Vec<u16> = Vec::with_capacity(room);
        let mut ends: Vec<u32> = Vec::with_capacity(room);
        let mut parents: Vec<u32> = Vec::with_capacity(room);
        let mut fields: Vec<u16> = Vec::with_capacity(room);
        let mut starts: Vec<usize> = Vec::with_capacity(room);
        // SAFETY: each list has room for `room` elements, and the walk writes at most that
        // many (it says so otherwise); `Node` is `TSNode` (`repr(transparent)`), and the
        // nodes it writes are nodes of `root`'s tree, which outlives `'t`.
        let count = unsafe {
            memlint_named_walk(
                root.into_raw(),
                fielded.as_ptr(),
                fielded.len() as u32,
                room,
                nodes.as_mut_ptr().cast(),
                kinds.as_mut_ptr(),
                ends.as_mut_ptr(),
                parents.as_mut_ptr(),
                fields.as_mut_ptr(),
                starts.as_mut_ptr(),
            )
        };
        if count > room {
            // Out of room or memory in the walk: the cursor's walk gives the same nodes.
            return NamedNodes::walked_by_cursor(root);
        }
        // SAFETY: the walk wrote the first `count` elements of each list.
        unsafe {
            nodes.set_len(count);
            kinds.set_len(count);
            ends.set_len(count);
            parents.set_len(count);
            fields.set_len(count);
            starts.set_len(count);
        }
        NamedNodes::from_lists(nodes, kinds, ends, parents, starts, fields)
    }

    /// The lists a walk made, with nothing remembered yet.
    fn from_lists(nodes: Vec<Node<'t>>, kinds: Vec<u16>, ends: Vec<u32>, parents: Vec<u32>, starts: Vec<usize>, fields: Vec<u16>) -> NamedNodes<'t> {
        NamedNodes { nodes, kinds, ends, parents, starts, fields, recent: std::array::from_fn(|_| Cell::new((usize::MAX, 0))) }
    }

    /// [`NamedNodes::of`] through tree-sitter's public cursor: what the walk in
    /// `named_walk.c` must give (the tests compare them), and its fallback.
    pub fn walked_by_cursor(root: Node<'t>) -> NamedNodes<'t> {
        let room = root.descendant_count();
        let mut nodes = Vec::with_capacity(room);
        let mut kinds = Vec::with_capacity(room);
        let mut ends = Vec::with_capacity(room);
        let mut parents = Vec::with_capacity(room);
        let mut fields = Vec::with_capacity(room);
        let fielded = fielded_kinds();
        nodes.push(root);
        fields.push(0u16);
        kinds.push(root.kind_id());
        ends.push(0u32);
        parents.push(0u32);
        // The nodes entered and not yet left: each is left when the cursor climbs back to it.
        let mut open: Vec<usize> = vec![0];
        let mut cursor = root.walk();
        let mut descend = cursor.goto_first_child();
        if !descend {
            ends[0] = 1;
        }
        while descend {
            let node = cursor.node();
            if node.is_named() {
                nodes.push(node);
                kinds.push(node.kind_id());
                ends.push(0);
                let parent = open.last().copied().unwrap_or(0);
                parents.push(parent as u32);
                let field = if fielded.get(kinds[parent] as usize).copied().unwrap_or(false) { cursor.field_id().map_or(0, |f| f.get()) } else { 0 };
                fields.push(field);
                if cursor.goto_first_child() {
                    open.push(nodes.len() - 1);
                    continue;
                }
                let last = ends.len() - 1;
                ends[last] = nodes.len() as u32;
            }
            // Next: the following sibling, else up until a node has one.
            loop {
                if cursor.goto_next_sibling() {
                    break;
                }
                let left = open.pop().unwrap_or(0);
                ends[left] = nodes.len() as u32;
                if open.is_empty() || !cursor.goto_parent() {
                    descend = false;
                    break;
                }
            }
        }
        while let Some(left) = open.pop() {
            ends[left] = nodes.len() as u32;
        }
        let starts = nodes.iter().map(|n| n.start_byte()).collect();
        NamedNodes::from_lists(nodes, kinds, ends, parents, starts, fields)
    }

    pub(crate) fn node(&self, index: usize) -> Node<'t> {
        self.nodes[index]
    }

    /// The kind of the node at `index`: its [`NodeExt::kind_name`](crate::NodeExt::kind_name).
    pub(crate) fn kind(&self, index: usize) -> &'static str {
        crate::kind_name_of(self.kinds[index]).unwrap_or_else(|| self.nodes[index].kind())
    }

    /// The kind id of the node at `index`.
    pub(crate) fn kind_id(&self, index: usize) -> u16 {
        self.kinds[index]
    }

    /// The named children of the node at `index`, in order (as indices).
    pub(crate) fn children(&self, index: usize) -> Children<'_, 't> {
        Children { nodes: self, next: index + 1, end: self.ends[index] as usize }
    }

    /// The node at `index` and its descendants, in preorder.
    pub(crate) fn subtree(&self, index: usize) -> std::ops::Range<usize> {
        index..self.ends[index] as usize
    }

    /// How many nodes: the root and the named nodes below it.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The root the walk began at.
    pub fn root(&self) -> Node<'t> {
        self.nodes[0]
    }

    /// Runs `walk` at `node`'s index in these nodes, or, should `node` not be one of them,
    /// in the named nodes of its own subtree (the same walk either way).
    pub(crate) fn within<R>(&self, node: Node<'t>, walk: impl FnOnce(&NamedNodes<'t>, usize) -> R) -> R {
        match self.index_of(node) {
            Some(at) => walk(self, at),
            None => walk(&NamedNodes::of(node), 0),
        }
    }

    /// The parent of the node at `index` (none for the root).
    pub(crate) fn parent(&self, index: usize) -> Option<usize> {
        (index != 0).then(|| self.parents[index] as usize)
    }

    /// The parent of `node`, as tree-sitter's `Node::parent` gives it: read from these
    /// nodes when `node` is one of them below their root (tree-sitter finds a parent by
    /// going down again from the root: about 6,300 instructions a call in the summaries of
    /// the engine tree). These nodes may be a subtree's, whose root has a parent outside.
    pub(crate) fn parent_of(&self, node: Node<'t>) -> Option<Node<'t>> {
        match self.index_of(node).and_then(|at| self.parent(at)) {
            Some(parent) => Some(self.given(parent)),
            None => node.parent(),
        }
    }

    /// The child of the node at `index` that is `child`.
    pub(crate) fn child_with_id(&self, index: usize, child: Node<'t>) -> Option<usize> {
        self.children(index).find(|c| self.nodes[*c].id() == child.id())
    }

    /// The named children of `node`, as [`crate::semantic::named_children`] gives them:
    /// read from these nodes when `node` is one of them (no call into tree-sitter, whose
    /// cursor steps through every anonymous and hidden child), else from tree-sitter.
    pub(crate) fn named_children_of(&self, node: Node<'t>) -> Vec<Node<'t>> {
        match self.index_of(node) {
            Some(at) => self.children(at).map(|c| self.given(c)).collect(),
            None => crate::semantic::named_children(node),
        }
    }

    /// The child of `node` in field `name`, as [`crate::NodeExt::field`] gives it: read
    /// from the walk when `node` is one of these nodes, of a kind whose fields it read,
    /// and the field holds only named nodes (every field of [`FIELDED_KINDS`] but an
    /// operator's), else from tree-sitter.
    pub fn field_of(&self, node: Node<'t>, name: &'static str) -> Option<Node<'t>> {
        use crate::NodeExt;
        match self.index_of(node).and_then(|at| self.field_at(at, name)) {
            Some(child) => child.map(|c| self.given(c)),
            None => node.field(name),
        }
    }

    /// The index of the child in field `name` of the node at `at` (`Some(None)`: none),
    /// when the walk read that node's fields; `None` when only tree-sitter can tell.
    pub(crate) fn field_at(&self, at: usize, name: &'static str) -> Option<Option<usize>> {
        let id = crate::field_id(name)?;
        if name == "operator" || !fielded_kinds().get(self.kinds[at] as usize).copied().unwrap_or(false) {
            return None;
        }
        Some(self.children(at).find(|c| self.fields[*c] == id))
    }

    /// The index of `node`, when it is one of these.
    pub(crate) fn index_of(&self, node: Node<'t>) -> Option<usize> {
        let id = node.id();
        // Node ids are addresses, 8-byte aligned at least.
        let slot = &self.recent[(id >> 3) & 63];
        let (seen, at) = slot.get();
        if seen == id {
            return Some(at as usize);
        }
        let start = node.start_byte();
        let first = self.starts.partition_point(|s| *s < start);
        let same_start = self.starts[first..].iter().take_while(|s| **s == start).count();
        let at = self.nodes[first..first + same_start].iter().position(|n| n.id() == id).map(|i| first + i)?;
        slot.set((id, at as u32));
        Some(at)
    }

    /// The node at `at`, remembered as one given out.
    pub(crate) fn given(&self, at: usize) -> Node<'t> {
        let node = self.nodes[at];
        self.recent[(node.id() >> 3) & 63].set((node.id(), at as u32));
        node
    }
}

self_cell::self_cell!(
    /// A tree and its [`NamedNodes`], walked once. What a parse for a module's summary
    /// hands on to the lint of the same file, so that the lint does not walk the tree
    /// again (the walk costs about a fifth of the parse).
    pub struct WalkedTree {
        owner: Tree,
        #[covariant]
        dependent: NamedNodes,
    }
);

impl WalkedTree {
    /// Walks `tree` once.
    pub fn walk(tree: Tree) -> WalkedTree {
        WalkedTree::new(tree, |tree| NamedNodes::of(tree.root_node()))
    }

    pub fn tree(&self) -> &Tree {
        self.borrow_owner()
    }

    /// The named nodes of the whole tree (its root at index 0).
    pub fn nodes(&self) -> &NamedNodes<'_> {
        self.borrow_dependent()
    }
}

pub(crate) struct Children<'a, 't> {
    nodes: &'a NamedNodes<'t>,
    next: usize,
    end: usize,
}

impl Iterator for Children<'_, '_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next >= self.end {
            return None;
        }
        let current = self.next;
        self.next = self.nodes.ends[current] as usize;
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node's children are its `named_children`, every named node is found, and the
    /// walk of the whole tree is the cursor's.
    fn agrees_with_tree_sitter(source: &str) {
        let tree = crate::parse_with(source, None);
        same_walk_as_the_cursor(tree.root_node());
        let flat = NamedNodes::of(tree.root_node());
        let mut cursor = tree.walk();
        let mut visited = 0;
        let mut stack = vec![(tree.root_node(), 0usize)];
        while let Some((node, index)) = stack.pop() {
            visited += 1;
            assert_eq!(flat.node(index).id(), node.id());
            assert_eq!(flat.kind(index), node.kind());
            assert_eq!(flat.kind_id(index), node.kind_id());
            assert_eq!(flat.index_of(node), Some(index));
            assert_eq!(flat.parent_of(node).map(|p| p.id()), node.parent().map(|p| p.id()), "parent of {} at {}", node.kind(), node.start_byte());
            let expected: Vec<usize> = node.named_children(&mut cursor).map(|c| c.id()).collect();
            let got: Vec<usize> = flat.children(index).map(|i| flat.node(i).id()).collect();
            assert_eq!(got, expected, "children of {} at {}", node.kind(), node.start_byte());
            assert_eq!(flat.named_children_of(node).iter().map(|c| c.id()).collect::<Vec<_>>(), expected);
            for name in crate::FIELDS {
                use crate::NodeExt;
                assert_eq!(flat.field_of(node, name).map(|n| n.id()), node.field(name).map(|n| n.id()), "{name} of {} at {}", node.kind(), node.start_byte());
            }
            for child in flat.children(index) {
                assert_eq!(flat.parent(child), Some(index));
                assert_eq!(flat.child_with_id(index, flat.node(child)), Some(child));
            }
            stack.extend(node.named_children(&mut cursor).zip(flat.children(index)));
        }
        assert_eq!(visited, flat.nodes.len());
        assert_eq!(flat.parent(0), None);
    }

    /// The walk of `named_walk.c` gives what tree-sitter's cursor gives, from `root` and
    /// from every node below it as a root of its own: the same nodes (the same handles:
    /// start, alias, subtree), kinds, ends, parents, fields and starts.
    fn same_walk_as_the_cursor(root: Node<'_>) {
        let walked = NamedNodes::of(root);
        let by_cursor = NamedNodes::walked_by_cursor(root);
        let raw = |nodes: &NamedNodes<'_>| nodes.nodes.iter().map(|n| n.into_raw()).map(|n| (n.context, n.id as usize)).collect::<Vec<_>>();
        assert_eq!(raw(&walked), raw(&by_cursor), "nodes under {} at {}", root.kind(), root.start_byte());
        assert_eq!(walked.kinds, by_cursor.kinds);
        assert_eq!(walked.ends, by_cursor.ends);
        assert_eq!(walked.parents, by_cursor.parents);
        assert_eq!(walked.fields, by_cursor.fields, "fields under {} at {}", root.kind(), root.start_byte());
        assert_eq!(walked.starts, by_cursor.starts);
        assert_eq!(walked.parent_of(root).map(|p| p.id()), root.parent().map(|p| p.id()), "parent of the walk's root {} at {}", root.kind(), root.start_byte());
    }

    fn same_walks_as_the_cursor(source: &str) {
        let tree = crate::parse_with(source, None);
        let whole = NamedNodes::walked_by_cursor(tree.root_node());
        for node in &whole.nodes {
            same_walk_as_the_cursor(*node);
        }
    }

    #[test]
    fn the_walk_is_the_cursors() {
        same_walks_as_the_cursor("");
        same_walks_as_the_cursor("x");
        same_walks_as_the_cursor("def f(a, b=1, *c, d: int = 2, **e) -> g:\n    return [y for y in self.fc(x) if y] + f\"{x!r}\"\n");
        same_walks_as_the_cursor("from a import (b as c, d)\nx += -y if not a < b <= c else {k: v for k, v in p, q}\nmatch x:\n    case {\"k\": 1, **r}: pass\nprint >> f, x\n");
        // Comments (extras) between a call's arguments and inside a field.
        same_walks_as_the_cursor("f(a,  # one\n  b)  # two\nx = (  # three\n  y)\nclass A(  # four\n  B):\n    pass\n");
        // Broken code: errors and missing nodes.
        same_walks_as_the_cursor("def f(:\n    return (1 +\nclass\n");
        same_walks_as_the_cursor("[x for x in]\nfrom import\ny = a +\n");
    }

    #[test]
    fn the_named_children_of_every_node() {
        agrees_with_tree_sitter("");
        agrees_with_tree_sitter("x");
        agrees_with_tree_sitter(
            "import torch\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()  # comment\n        self.fc = nn.Linear(2, 3)\n\n    @torch.no_grad()\n    def forward(self, x, *a, **k):\n        with torch.no_grad(), open(f) as g:\n            return [y for y in self.fc(x) if y] + f\"{x!r}\"\n",
        );
        agrees_with_tree_sitter(
            "from a import (b as c, d)\nimport e.f as g, h\nx += -y if not a < b <= c else {k: v for k, v in p, q}\nmatch x:\n    case {\"k\": 1, **r}: pass\nprint >> f, x\n",
        );
        // Broken code: errors and missing nodes.
        agrees_with_tree_sitter("def f(:\n    return (1 +\nclass\n");
        agrees_with_tree_sitter("[x for x in]\nfrom import\ny = a +\n");
    }

    /// Every Python file of the repository's tests and crates, broken ones included.
    #[test]
    fn the_named_children_and_fields_of_every_node_of_every_python_file_here() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let mut files = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(format!("{root}/tests")), std::path::PathBuf::from(format!("{root}/crates"))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a folder").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "py") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 50, "python files found: {}", files.len());
        for path in files {
            let source = String::from_utf8_lossy(&std::fs::read(&path).expect("readable")).into_owned();
            agrees_with_tree_sitter(&source);
        }
    }

    #[test]
    fn a_subtree_of_its_own() {
        let source = "class A:\n    def f(self):\n        self.x = g(1)\n";
        let tree = crate::parse_with(source, None);
        let class = tree.root_node().named_child(0).unwrap();
        let flat = NamedNodes::of(class);
        assert_eq!(flat.node(0).id(), class.id());
        assert!(flat.index_of(tree.root_node()).is_none());
        let kinds: Vec<&str> = flat.nodes.iter().map(|n| n.kind()).collect();
        assert_eq!(kinds[..4], ["class_definition", "identifier", "block", "function_definition"]);
        assert_eq!(flat.children(0).count(), 2);
    }
}
