; accumulation-without-loss-division (MEM011)
; Every `x.backward(...)`; the rule finds the per-step loop around it, an optimizer step
; in that loop guarded by `if ... % k == 0`, and checks how the loss is divided.
(call
  function: (attribute
    object: (_) @receiver
    attribute: (identifier) @_method)
  (#eq? @_method "backward")) @backward
