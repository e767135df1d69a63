; data-parallel (MEM007)
; Every call of a name or attribute: an alias (`from torch.nn import DataParallel as DP`)
; can be spelled anyhow, so the rule resolves each callee through the imports and keeps
; `torch.nn.DataParallel` and `torch.nn.parallel.data_parallel`.
(call
  function: [(identifier) (attribute)] @_callee) @call
