; accumulated-loss-tensor (MEM002)
; Accumulations whose term may be a tensor with autograd history; the rule checks the
; term's value and that the accumulator outlives the loop iteration.

; total += loss   /   stats["loss"] += loss   /   self.total += loss
(augmented_assignment
  left: (_) @accumulator
  operator: "+="
  right: (_) @term) @accumulation

; total = total + loss
(assignment
  left: (identifier) @accumulator
  right: (binary_operator
    left: (identifier) @_same
    operator: "+"
    right: (_) @term)
  (#eq? @accumulator @_same)) @accumulation

; total = loss + total
(assignment
  left: (identifier) @accumulator
  right: (binary_operator
    left: (_) @term
    operator: "+"
    right: (identifier) @_same)
  (#eq? @accumulator @_same)) @accumulation

; losses.append(loss)   /   history["loss"].append(loss)
(call
  function: (attribute
    object: (_) @accumulator
    attribute: (identifier) @_method)
  arguments: (argument_list . (_) @term .)
  (#eq? @_method "append")) @accumulation
