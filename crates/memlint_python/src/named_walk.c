// The walk behind `NamedNodes::of`: the named nodes below a node in preorder, as a
// tree-sitter cursor visits them, read straight from the tree's subtrees.
//
// Why C, against tree-sitter's own headers: through the public API a sibling step
// (`ts_tree_cursor_goto_next_sibling`) pops the cursor's stack and restarts its child
// iterator, climbing through hidden nodes, then `current_node`, `is_named` and
// `current_field_id` each look at the stack again: about 600 instructions a step, 11% of
// a check of diffusers. Here each child is looked at once. The rules this follows are
// the cursor's (`tree_cursor.c`): which children are visible (a hidden node's children
// stand in its place), a child's alias, where a node starts, and which field holds it
// (its own entry in its parent's field map, else the field that holds the hidden nodes
// it sits in). `named_nodes.rs` tests that both walks give the same nodes, kinds, ends,
// parents and fields.
//
// This compiles against the headers of the tree-sitter version in Cargo.lock (its
// `src/` folder); a version whose subtrees differ breaks that test, not a user's run.

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "tree_sitter/api.h"
#include "alloc.h"
#include "language.h"
#include "subtree.h"
#include "tree.h"

// A node whose children are being visited: a visible named node, or a hidden node in its
// place.
typedef struct {
  Subtree parent;
  // Where the next child starts (after its padding).
  Length position;
  uint32_t child_index;
  uint32_t structural_child_index;
  const TSSymbol *alias_sequence;
  const TSFieldMapEntry *field_map;
  const TSFieldMapEntry *field_map_end;
  // The index of the visible named node the children belong to.
  uint32_t owner;
  // Whether the owner's kind is one whose children's fields are read.
  bool fielded;
  // For a hidden node: the field that holds it (its own, else its hidden parent's).
  TSFieldId hidden_field;
  // Whether this frame is a visible named node (its end is written when it is left).
  bool ends_owner;
} Frame;

// Starts visiting the children of `parent` (which has some) in `frame`, in place: built
// elsewhere and copied onto the stack, the frame cost the walk a third of its time.
static inline void frame_init(Frame *frame, const TSLanguage *language, Subtree parent, Length position, uint32_t owner,
                              bool fielded, TSFieldId hidden_field, bool ends_owner) {
  frame->parent = parent;
  frame->position = position;
  frame->child_index = 0;
  frame->structural_child_index = 0;
  frame->alias_sequence = ts_language_alias_sequence(language, parent.ptr->production_id);
  frame->owner = owner;
  frame->fielded = fielded;
  frame->hidden_field = hidden_field;
  frame->ends_owner = ends_owner;
  // Only the children of a fielded kind have their fields read.
  if (fielded) {
    ts_language_field_map(language, parent.ptr->production_id, &frame->field_map, &frame->field_map_end);
  } else {
    frame->field_map = frame->field_map_end = NULL;
  }
}

// Writes the named nodes of `root`'s subtree, `root` first, into the arrays (room for
// `capacity` nodes each: the root's descendant count is enough) and returns how many.
// `fielded` holds, for each public kind id below `kind_count`, whether the fields of that
// kind's children are read (else their field is 0). Returns SIZE_MAX when the arrays
// would overflow or memory runs out (the caller then walks with a cursor).
size_t memlint_named_walk(
  TSNode root,
  const bool *fielded,
  uint32_t kind_count,
  size_t capacity,
  TSNode *nodes,
  uint16_t *kinds,
  uint32_t *ends,
  uint32_t *parents,
  uint16_t *fields,
  size_t *starts
) {
  if (capacity == 0) return SIZE_MAX;
  const TSTree *tree = root.tree;
  const TSLanguage *language = tree->language;
  TSSymbol root_kind = ts_node_symbol(root);
  nodes[0] = root;
  kinds[0] = root_kind;
  parents[0] = 0;
  fields[0] = 0;
  starts[0] = root.context[0];
  ends[0] = 1;
  size_t count = 1;

  Subtree root_subtree = *(const Subtree *)root.id;
  if (ts_subtree_child_count(root_subtree) == 0) return count;

  uint32_t stack_capacity = 64;
  uint32_t depth = 0;
  Frame *stack = ts_malloc(stack_capacity * sizeof(Frame));
  if (!stack) return SIZE_MAX;
  Length root_position = {root.context[0], {root.context[1], root.context[2]}};
  frame_init(&stack[depth++], language, root_subtree, root_position, 0, root_kind < kind_count && fielded[root_kind], 0, true);

  while (depth > 0) {
    Frame *frame = &stack[depth - 1];
    uint32_t child_count = frame->parent.ptr->child_count;
    if (frame->child_index == child_count) {
      if (frame->ends_owner) ends[frame->owner] = (uint32_t)count;
      depth--;
      continue;
    }
    const Subtree *children = ts_subtree_children(frame->parent);
    const Subtree *child = &children[frame->child_index];
    Length position = frame->position;
    bool extra = ts_subtree_extra(*child);
    bool visible = ts_subtree_visible(*child);
    TSSymbol alias = 0;
    uint32_t structural_child_index = frame->structural_child_index;
    if (!extra) {
      if (frame->alias_sequence) alias = frame->alias_sequence[structural_child_index];
      visible |= alias != 0;
      frame->structural_child_index++;
    }
    // The next child's start.
    frame->child_index++;
    frame->position = length_add(frame->position, ts_subtree_size(*child));
    if (frame->child_index < child_count) {
      frame->position = length_add(frame->position, ts_subtree_padding(children[frame->child_index]));
    }

    // The field that holds the child: its own entry in the map, else the hidden
    // parent's (`ts_tree_cursor_current_field_id`); none for an extra.
    TSFieldId field = 0;
    if (frame->fielded && !extra) {
      for (const TSFieldMapEntry *entry = frame->field_map; entry < frame->field_map_end; entry++) {
        if (!entry->inherited && entry->child_index == structural_child_index) {
          field = entry->field_id;
          break;
        }
      }
      if (!field) field = frame->hidden_field;
    }

    // The frame to visit the child's children in: a visible named node's own, or, for a
    // hidden node, one that puts its children in its place, under the same owner.
    Subtree entered = *child;
    uint32_t owner = frame->owner;
    bool entered_fielded = frame->fielded;
    TSFieldId entered_field = extra ? 0 : field;
    bool named_node = false;
    if (visible) {
      bool named = alias ? ts_language_symbol_metadata(language, alias).named : ts_subtree_named(*child);
      // A visible anonymous node is not entered: `named_children` never reaches below one.
      if (!named) continue;
      if (count == capacity) {
        ts_free(stack);
        return SIZE_MAX;
      }
      TSSymbol kind = ts_language_public_symbol(language, alias ? alias : ts_subtree_symbol(*child));
      size_t index = count++;
      nodes[index] = (TSNode){{position.bytes, position.extent.row, position.extent.column, alias}, child, tree};
      kinds[index] = kind;
      parents[index] = frame->owner;
      fields[index] = field;
      starts[index] = position.bytes;
      ends[index] = (uint32_t)count;
      if (ts_subtree_child_count(*child) == 0) continue;
      owner = (uint32_t)index;
      entered_fielded = kind < kind_count && fielded[kind];
      entered_field = 0;
      named_node = true;
    } else if (ts_subtree_visible_child_count(*child) == 0) {
      continue;
    }
    if (depth == stack_capacity) {
      stack_capacity *= 2;
      Frame *grown = ts_realloc(stack, stack_capacity * sizeof(Frame));
      if (!grown) {
        ts_free(stack);
        return SIZE_MAX;
      }
      stack = grown;
    }
    frame_init(&stack[depth++], language, entered, position, owner, entered_fielded, entered_field, named_node);
  }
  ts_free(stack);
  return count;
}
