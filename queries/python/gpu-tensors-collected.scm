; gpu-tensors-collected (MEM006)
; Per-batch results stored somewhere that may outlive the loop; the rule checks the value
; (autograd history, or a tensor on the GPU), the container (a list/dict, or a
; preallocated tensor buffer) and that it survives the per-step loop.

; outputs.append(pred)   /   history["preds"].append(pred)   /   preds.extend(pred)
(call
  function: (attribute
    object: (_) @container
    attribute: (identifier) @_method)
  arguments: (argument_list . (_) @term .)
  (#any-of? @_method "append" "extend")) @collection

; bank += [feats]
(augmented_assignment
  left: (identifier) @container
  operator: "+="
  right: (list . (_) @term .)) @collection

; store[key] = pred   /   buf[idx] = out
(assignment
  left: (subscript
    value: (_) @container)
  right: (_) @term) @collection
