; half-without-grad-scaler (MEM003)
; `model.half()` and `model.to(torch.float16)`: the rule checks the receiver is a model.
(call
  function: (attribute
    object: (_) @receiver
    attribute: (identifier) @_method)
  (#any-of? @_method "half" "to")) @conversion

; `torch.autocast(...)`, `torch.amp.autocast(...)`, `torch.cuda.amp.autocast(...)`, `autocast(...)`
(call
  function: [(identifier) (attribute)] @_autocast
  (#match? @_autocast "autocast$")) @autocast
