; deprecated-cuda-amp (MEM010)
; Every call of a name or attribute: `from torch.cuda.amp import autocast as ac` can be
; spelled anyhow, so the rule resolves each callee through the imports and keeps
; `torch.cuda.amp.autocast` and `torch.cuda.amp.GradScaler`.
(call
  function: [(identifier) (attribute)] @_callee) @call
